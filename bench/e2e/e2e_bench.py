#!/usr/bin/env python3
"""End-to-end generation benchmark on one GPU, every system side by side in one run: REE
(reproducible under repops-1, repops-2 and repops-3, reproducible with --decode-lookahead,
deterministic, default) and Hugging Face
transformers (eager; static cache + torch.compile), same GPU, same weights, at each batch size
of --batches, for prefill and decode, with tokens/s and peak GPU memory.

Models are Llama-shaped with RANDOM bf16 weights generated on the GPU (nothing downloaded):
  llama3-8b  (hidden 4096, 32 layers, 32/8 heads, MLP 14336, vocab 128256)
  llama3-1b  (Llama-3.2-1B shape: hidden 2048, 16 layers, 32/8 heads, MLP 8192, tied)

Per batch size b: b prompts of --prompt-len tokens decode --tokens tokens together; decode
tok/s = b x (tokens - 1) / the longest first-to-last-token time, prefill tok/s = b x prompt-len /
the longest start-to-first-token time (one run gives both). Unless --skip-prefill, one prompt of
each --prefill-lens length is also prefilled alone, warm (REE: after another prompt of that length
in the same process; transformers: after a warm-up call). REE memory: the ree-launch process's peak
(nvidia-smi, polled); transformers: the caching allocator's peak reserved bytes (weights
included, CUDA context not). --json FILE keeps every row (written after each one);
bench/e2e/plot_throughput.py draws tokens/s vs batch from it.
"""
import argparse
import datetime
import os
import shlex
import subprocess
import sys
import time

import torch

import e2e_ree
from e2e_model import make_model, prompt
from e2e_report import Report, row

REE_LABELS = "reproducible, lookahead, repops-2, repops-3, deterministic, default"


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ree", default="", help="ree-launch to measure (needed unless --sets none)")
    p.add_argument("--work", required=True, help="directory for the model and prompt files")
    p.add_argument("--shape", default="llama3-8b", choices=("llama3-8b", "llama3-1b"))
    p.add_argument("--tokens", type=int, default=128, help="new tokens per prompt (decode runs)")
    p.add_argument("--batches", default="1,16,64,256",
                   help="comma-separated batch sizes (prompts decoded together)")
    p.add_argument("--prompt-len", type=int, default=64, help="prompt tokens of the batch runs")
    p.add_argument("--prefill-lens", default="512,2048",
                   help="comma-separated prompt lengths prefilled alone (batch 1)")
    p.add_argument("--skip-prefill", action="store_true",
                   help="leave out the --prefill-lens runs (batch runs still give prefill rows)")
    p.add_argument("--sets", default="",
                   help=f"comma-separated REE labels to keep: {REE_LABELS} (default: all), "
                        "or none")
    p.add_argument("--skip-repops2", action="store_true", help="leave out REE under repops-2")
    p.add_argument("--skip-repops3", action="store_true", help="leave out REE under repops-3")
    p.add_argument("--baseline-ree", default="",
                   help="another ree-launch (e.g. built from an earlier commit): its default set "
                        "runs beside this one's, in the same run")
    p.add_argument("--hf", default="eager,compile",
                   help="transformers systems: eager, compile (static cache + torch.compile), "
                        "comma-separated, or none")
    p.add_argument("--skip-hf", action="store_true", help="same as --hf none")
    p.add_argument("--hf-compile-mode", default="reduce-overhead",
                   help="torch.compile mode of the compiled system (reduce-overhead: CUDA graphs; "
                        "max-autotune-no-cudagraphs; default)")
    p.add_argument("--max-context", type=int, default=0,
                   help="REE --max-context (default 0: each run's prompt + tokens, rounded up "
                        "to 16)")
    p.add_argument("--ree-extra", default="",
                   help="more ree-launch flags for every REE run, e.g. '--kv-memory-fraction 0.8'")
    p.add_argument("--time-limit", type=float, default=0,
                   help="seconds from the start: measurements that would start later are "
                        "reported as skipped, an REE run still going then is ended (0: none)")
    p.add_argument("--json", default="", help="write every row to this JSON file")
    p.add_argument("--commit", default="", help="commit to record (default: git rev-parse)")
    p.add_argument("--quick", action="store_true",
                   help="the reproducible set only (every spec), batch 1 and prefill 2048")
    p.add_argument("--cold-start", action="store_true",
                   help="only measure cold start to first token of a llama3-1b-shaped model")
    args = p.parse_args(argv)
    args.batches = [int(b) for b in args.batches.split(",")]
    args.prefill_lens = [] if args.skip_prefill else [int(n) for n in args.prefill_lens.split(",")]
    args.hf = [] if args.skip_hf or args.hf == "none" else args.hf.split(",")
    args.ree_extra = shlex.split(args.ree_extra)
    for name in args.hf:
        if name not in ("eager", "compile"):
            p.error(f"--hf: unknown system '{name}' (eager, compile or none)")
    return args


def ree_configs(args):
    """(ree binary, label, operation set, spec, extra flags) of every REE configuration to
    measure."""
    if args.sets == "none":
        return []
    skipped = {spec for spec, skip in (("repops-2", args.skip_repops2),
                                        ("repops-3", args.skip_repops3)) if skip}
    configs = [(args.ree,) + c for c in e2e_ree.CONFIGS if c[2] not in skipped]
    if args.sets:
        keep = args.sets.split(",")
        unknown = set(keep) - {c[1].split()[-1] for c in configs}
        if unknown:
            sys.exit(f"--sets: unknown or skipped label(s) {', '.join(sorted(unknown))} "
                     f"(known: {REE_LABELS})")
        configs = [c for c in configs if c[1].split()[-1] in keep]
    if args.baseline_ree:
        configs.append((args.baseline_ree, "ree default (baseline)", "default", None, ()))
    if args.quick:
        configs = [c for c in configs if c[2] == "reproducible"]
    if configs and not args.ree:
        sys.exit("--ree: the ree-launch to measure is required (or --sets none)")
    return configs


def _git_commit():
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        head = subprocess.run(["git", "-C", here, "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "-C", here, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    if head.returncode != 0:
        return "unknown"
    return head.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


def _ree_version(ree):
    if not ree:
        return None
    try:
        out = subprocess.run([ree, "--version"], capture_output=True, text=True, timeout=60)
        return out.stdout.strip() or None
    except (OSError, subprocess.TimeoutExpired):
        return None


def header(args, gpu):
    import transformers
    return dict(gpu=gpu, commit=args.commit or _git_commit(),
                date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                shape=args.shape, dtype="bf16", prompt_len=args.prompt_len,
                new_tokens=args.tokens, batches=args.batches, prefill_lens=args.prefill_lens,
                ree_version=_ree_version(args.ree), torch=torch.__version__,
                transformers=transformers.__version__, hf_compile_mode=args.hf_compile_mode,
                command=" ".join(shlex.quote(a) for a in sys.argv))


class Clock:
    """Time since the start against --time-limit."""

    def __init__(self, limit):
        self.start = time.perf_counter()
        self.limit = limit

    def elapsed(self):
        return time.perf_counter() - self.start

    def remaining(self):
        return self.limit - self.elapsed() if self.limit else None

    def out(self):
        return self.limit and self.remaining() <= 0


def skipped(system, label, phases, batch, prompt_len, tokens):
    return [row(system, label, ph, batch, prompt_len, tokens, status="skipped: time limit")
            for ph in phases]


def run_ree(args, configs, report, clock):
    jobs = [(b, args.prompt_len, args.tokens) for b in args.batches]
    jobs += [(1, n, 1) for n in args.prefill_lens]
    for batch, prompt_len, tokens in jobs:
        prompts = [prompt(prompt_len, seed=b) for b in range(batch)]
        for config in configs:
            phases = ("decode", "prefill") if tokens > 1 else ("prefill",)
            if clock.out():
                rows = skipped("ree", config[1], phases, batch, prompt_len, tokens)
            else:
                rows = e2e_ree.measure(config, prompts, tokens, args, clock.remaining())
            for r in rows:
                report.add(r, clock.elapsed())
            if batch == 1 and tokens > 1 and rows[0].get("output_ids_sha256"):
                print(f"# {config[1]} batch 1 output ids sha256 {rows[0]['output_ids_sha256']}",
                      flush=True)


def run_hf(args, report, clock):
    import e2e_hf
    if clock.out():
        model = None
    else:
        t0 = time.perf_counter()
        model = e2e_hf.load(args.model_dir)
        print(f"# transformers model loaded in {time.perf_counter() - t0:.1f} s", flush=True)
    jobs = [(b, args.prompt_len, args.tokens) for b in args.batches]
    jobs += [(1, n, 1) for n in args.prefill_lens]
    for system in args.hf:
        if model is not None:
            e2e_hf.use_system(model, system)
        for batch, prompt_len, tokens in jobs:
            phases = ("decode", "prefill") if tokens > 1 else ("prefill",)
            if clock.out() or model is None:
                rows = skipped("transformers", e2e_hf.SYSTEMS[system], phases, batch, prompt_len,
                               tokens)
            else:
                prompts = [prompt(prompt_len, seed=b) for b in range(batch)]
                rows = e2e_hf.measure(model, system, prompts, tokens, args.hf_compile_mode)
            for r in rows:
                report.add(r, clock.elapsed())
    del model
    torch.cuda.empty_cache()


def cold_start(args, gpu):
    model_dir = os.path.join(args.work, "llama3-1b")
    make_model("llama3-1b", model_dir)
    for opset in ("reproducible", "default"):
        walls = sorted(e2e_ree.run(args.ree, model_dir, opset, None, [prompt(16)], 1, args.work,
                                   4096)[1]["wall_s"] for _ in range(3))
        print(f"cold start to first token, llama3-1b shape, ree {opset} on {gpu}: "
              f"{walls[1]:.2f} s (median of 3 whole ree-launch processes)")
    return 0


def main(argv=None):
    args = parse_args(argv)
    if not torch.cuda.is_available():
        sys.exit("e2e_bench.py: needs a CUDA GPU (torch.cuda.is_available() is False)")
    gpu = torch.cuda.get_device_name(0)
    if args.cold_start:
        return cold_start(args, gpu)
    if args.quick:
        args.batches, args.prefill_lens = [1], [2048]
    configs = ree_configs(args)
    clock = Clock(args.time_limit)
    args.model_dir = os.path.join(args.work, args.shape)
    make_model(args.shape, args.model_dir)
    torch.cuda.empty_cache()  # the generator's memory back, before any REE run sizes its pool
    print(f"# {args.shape}-shaped model with random bf16 weights ready in {clock.elapsed():.1f} s",
          flush=True)
    report = Report(header(args, gpu), args.json)
    run_ree(args, configs, report, clock)
    if args.hf:
        run_hf(args, report, clock)
    print(f"\n{args.shape} on {gpu}, bf16 weights, {args.prompt_len}-token prompts, "
          f"{args.tokens} new tokens, commit {report.header['commit']}")
    report.print_list()
    print()
    report.print_side_by_side()
    if args.json:
        print(f"# rows written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
