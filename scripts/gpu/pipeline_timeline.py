#!/usr/bin/env python3
"""Where a batch-1 pipeline decode step goes, from one kernel trace per rank.

Input: trace.R.csv files written by bench/cuda/kernel_trace.cpp (CUPTI; one per rank R of an
`mpirun -n G ree-launch --n-partitions G` run of a single prompt). Every rank's GPU works in one
burst per step (its layers) and idles while the other stages work, so a rank's compute kernels
(everything but NCCL's) fall into one burst per step, separated by long gaps; a step is followed
down the pipeline by causality (see main). Printed, as means over the decode steps (the first
two steps, prefill and first decode step, and the last are skipped):
  step       rank 0's first kernel of a step to the next step's (the decode step's wall time)
  stage R    first to last compute kernel of rank R in the step, and the GPU busy time inside
  hop R->R+1 last compute kernel of rank R to the first of rank R+1 (activations over NCCL,
             the step header over MPI, host work on both sides), with the NCCL kernel time
  return     last compute kernel of the last rank to rank 0's next step (logits, copy to the
             host, sampling, the token back to rank 0 over MPI, rank 0's next embedding)
CUPTI timestamps of processes on one host share a clock, so cross-rank gaps are meaningful.

  pipeline_timeline.py DIR   (reads DIR/trace.0.csv .. trace.G-1.csv)
"""
import csv
import glob
import os
import re
import sys

GAP_NS = 300_000  # a gap this long separates two steps' bursts on one rank


def load(path):
    compute, nccl = [], []
    for r in csv.DictReader(open(path)):
        if r["kind"] != "kernel":
            continue
        item = (int(r["start_ns"]), int(r["end_ns"]))
        (nccl if "nccl" in r["name"].lower() else compute).append(item)
    compute.sort()
    nccl.sort()
    return compute, nccl


def clusters(kernels):
    out = []
    for start, end in kernels:
        if out and start - out[-1]["end"] <= GAP_NS:
            c = out[-1]
            c["end"] = max(c["end"], end)
            c["kernels"].append((start, end))
        else:
            out.append({"start": start, "end": end, "kernels": [(start, end)]})
    return out


def busy(kernels):
    covered, last = 0, None
    for start, end in kernels:
        if last is not None:
            start = max(start, last)
        if end > start:
            covered += end - start
            last = end if last is None else max(last, end)
    return covered


def main():
    directory = sys.argv[1]
    paths = sorted(glob.glob(os.path.join(directory, "trace.*.csv")),
                   key=lambda p: int(re.search(r"trace\.(\d+)\.csv$", p).group(1)))
    if not paths:
        sys.exit(f"pipeline_timeline: no trace.R.csv in {directory}")
    ranks = [load(p) for p in paths]
    per_rank = [clusters(compute) for compute, _ in ranks]
    g = len(ranks)
    print(f"pipeline timeline: {g} ranks, kernel bursts per rank {[len(c) for c in per_rank]}")
    # Follow each step down the pipeline: stage r+1's burst of a step is its first burst that
    # starts after stage r's ended (it needs r's activations); the next step on rank 0 starts
    # after the last stage's burst (it needs the sampled token). Bursts outside such chains
    # (start-up work) are skipped.
    chains = []
    i0 = 0
    while i0 < len(per_rank[0]):
        chain = [per_rank[0][i0]]
        for r in range(1, g):
            nxt = next((c for c in per_rank[r] if c["start"] >= chain[-1]["end"]), None)
            if nxt is None:
                break
            chain.append(nxt)
        if len(chain) < g:
            break
        chains.append(chain)
        i0 = next((i for i, c in enumerate(per_rank[0]) if c["start"] >= chain[-1]["end"]),
                  len(per_rank[0]))
    if len(chains) < 6:
        print(f"  {len(chains)} complete steps found: too few for a breakdown")
        return
    decode = range(2, len(chains) - 1)  # skip prefill, the first decode step and the last
    mean = lambda values: sum(values) / len(values) / 1e3  # ns -> us
    wall = mean([chains[s + 1][0]["start"] - chains[s][0]["start"] for s in decode])
    print(f"  decode step: {wall:8.1f} us (mean of {len(decode)} steps)")
    accounted = 0.0
    for r in range(g):
        span = mean([chains[s][r]["end"] - chains[s][r]["start"] for s in decode])
        work = mean([busy(chains[s][r]["kernels"]) for s in decode])
        accounted += span
        print(f"  stage {r}:    {span:8.1f} us first to last kernel, GPU busy {work:8.1f} us")
        if r + 1 < g:
            gaps, nccl = [], []
            for s in decode:
                lo, hi = chains[s][r]["end"], chains[s][r + 1]["start"]
                gaps.append(hi - lo)
                nccl.append(sum(min(e, hi) - max(b, lo) for b, e in ranks[r + 1][1]
                                if e > lo and b < hi))
            hop = mean(gaps)
            accounted += hop
            print(f"  hop {r}->{r + 1}:   {hop:8.1f} us (NCCL kernels on rank {r + 1} running in "
                  f"it: {mean(nccl):.1f} us)")
    ret = mean([chains[s + 1][0]["start"] - chains[s][g - 1]["end"] for s in decode])
    accounted += ret
    print(f"  return:     {ret:8.1f} us (logits copy, sampling, token to rank 0, next embedding)")
    print(f"  sum of the above: {accounted:8.1f} us")


if __name__ == "__main__":
    main()
