#!/usr/bin/env python3
"""Draws tokens/s vs batch size per system from e2e_bench.py --json output: a decode panel and a
prefill panel (the batch runs' prompts; the --prefill-lens rows are single prompts and left out),
log-log, the GPU named in the title. Several JSON files (e.g. the REE and the transformers halves
of one comparison) are drawn together when they name the same GPU, shape, prompt length and new
tokens.

usage: plot_throughput.py RESULTS.json [MORE.json ...] [-o docs/throughput.png]
Needs matplotlib (bench/requirements.txt).
"""
import argparse
import json
import sys

SAME_IN_EVERY_FILE = ("gpu", "shape", "prompt_len", "new_tokens")


def fail(message):
    print(f"plot_throughput.py: {message}", file=sys.stderr)
    sys.exit(2)


def load(paths):
    """(header of the first file, every row, the files' commits) after checking they agree."""
    runs = []
    for path in paths:
        try:
            with open(path) as f:
                runs.append(json.load(f))
        except (OSError, ValueError) as e:
            fail(f"{path}: cannot read it as JSON ({e})")
        if not isinstance(runs[-1], dict) or not isinstance(runs[-1].get("rows"), list):
            fail(f"{path}: not e2e_bench.py --json output (no 'rows' list)")
    for key in SAME_IN_EVERY_FILE:
        values = {str(run.get(key)) for run in runs}
        if len(values) > 1:
            fail(f"the files differ in '{key}' ({', '.join(sorted(values))}); plot one run's files")
    commits = list(dict.fromkeys(str(run.get("commit")) for run in runs))
    return runs[0], [r for run in runs for r in run["rows"]], commits


def series(rows, phase):
    """{label: ([batches], [tok/s], [batches that failed, as 'OOM@256' notes])} of one panel."""
    out = {}
    for r in rows:
        if r.get("phase") != phase or r.get("long_prefill"):
            continue
        batches, values, notes = out.setdefault(r["label"], ([], [], []))
        if r.get("status") == "ok":
            batches.append(r["batch"])
            values.append(r["tokens_per_s"])
        elif not str(r.get("status")).startswith("skipped"):
            notes.append(f"{str(r['status']).split(':')[0]} at {r['batch']}")
    return out


def draw(header, rows, commits, output):
    try:
        import matplotlib
    except ImportError:
        fail("matplotlib is not installed: pip install -r bench/requirements.txt")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(13, 5.5))
    for ax, phase in zip(axes, ("decode", "prefill")):
        drawn = False
        for label, (batches, values, notes) in series(rows, phase).items():
            if not batches and not notes:
                continue
            pairs = sorted(zip(batches, values))
            ax.plot([b for b, _ in pairs], [v for _, v in pairs], marker="o",
                    label=label + (f" ({', '.join(notes)})" if notes else ""))
            drawn = drawn or bool(pairs)
        ax.set_xscale("log", base=2)
        ticks = sorted({r["batch"] for r in rows if r.get("phase") == phase})
        ax.set_xticks(ticks, [str(b) for b in ticks])
        ax.minorticks_off()
        if drawn:
            ax.set_yscale("log")
        ax.set_xlabel("batch (prompts run together)")
        ax.set_ylabel(f"aggregate {phase} tokens/s")
        prompts = f"prefill of {header.get('prompt_len')}-token prompts"
        ax.set_title("decode" if phase == "decode" else prompts)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"{header.get('shape')} shape, bf16, {header.get('prompt_len')}-token prompts + "
                 f"{header.get('new_tokens')} new tokens: tokens/s vs batch\n{header.get('gpu')}, "
                 f"commit {', '.join(commits)}, {header.get('date', '')}")
    fig.tight_layout()
    fig.savefig(output, dpi=110)
    print(f"wrote {output}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", nargs="+", help="e2e_bench.py --json files")
    parser.add_argument("-o", "--output", default="docs/throughput.png")
    args = parser.parse_args(argv)
    header, rows, commits = load(args.results)
    if not any(r.get("status") == "ok" for r in rows):
        fail("no measured rows in the file(s)")
    draw(header, rows, commits, args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
