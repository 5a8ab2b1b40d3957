"""The benchmark's results: one row per (system, phase, batch), printed as it comes, written to
the --json file after every row (a run cut short keeps what it measured), and printed at the end
as a list and as a side-by-side table (one column per system)."""
import json
import os

GIB = 1024.0 ** 3


def row(system, label, phase, batch, prompt_len, new_tokens, **fields):
    """A result row. status is "ok" (tokens_per_s set), "OOM", "error: ..." or "skipped: ...".
    A run of one new token is a --prefill-lens run (long_prefill: one prompt prefilled alone)."""
    base = dict(system=system, label=label, phase=phase, batch=batch, prompt_len=prompt_len,
                new_tokens=new_tokens, long_prefill=new_tokens == 1, tokens_per_s=None,
                status="ok", gpu_mem_gib=None, mem_source=None)
    base.update(fields)
    return base


def what(r):
    """The row's measurement in words: "decode batch 16", "prefill 16x64", "prefill 2048"."""
    if r["phase"] == "decode":
        return f"decode batch {r['batch']}"
    if r.get("long_prefill"):
        return f"prefill {r['prompt_len']}"
    return f"prefill {r['batch']}x{r['prompt_len']}"


def value_text(r):
    if r["status"] != "ok":
        return r["status"]
    mem = f" {r['gpu_mem_gib']:6.1f} GiB" if r.get("gpu_mem_gib") is not None else ""
    return f"{r['tokens_per_s']:10.1f} tok/s{mem}"


class Report:
    def __init__(self, header, json_path=""):
        self.header = header  # gpu, commit, shape, ... (written at the top of the JSON)
        self.rows = []
        self.json_path = json_path

    def add(self, r, elapsed=None):
        r.setdefault("gpu", self.header.get("gpu"))  # each row names its GPU and commit, so rows
        r.setdefault("commit", self.header.get("commit"))  # of several files stay attributable
        self.rows.append(r)
        stamp = f"  [{elapsed:.0f} s]" if elapsed is not None else ""
        print(f"  {what(r):18s} {r['label']:30s} {value_text(r)}{stamp}", flush=True)
        self.write_json()

    def write_json(self):
        if not self.json_path:
            return
        tmp = self.json_path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(dict(self.header, rows=self.rows), f, indent=1)
            f.write("\n")
        os.replace(tmp, self.json_path)

    def print_list(self):
        for r in self.rows:
            print(f"{what(r):18s} {r['label']:30s} {value_text(r)}")

    def print_side_by_side(self):
        labels = list(dict.fromkeys(r["label"] for r in self.rows))
        keys = list(dict.fromkeys(what(r) for r in self.rows))
        cells = {(what(r), r["label"]): r for r in self.rows}
        width = max([14] + [len(lab) for lab in labels])
        print(f"{'tok/s (GiB)':18s} " + " ".join(f"{lab:>{width}s}" for lab in labels))
        for key in keys:
            line = [f"{key:18s}"]
            for lab in labels:
                line.append(f"{_cell(cells.get((key, lab))):>{width}s}")
            print(" ".join(line))


def _cell(r):
    if r is None:
        return "-"
    if r["status"] != "ok":
        return r["status"].split(":")[0]
    mem = f" ({r['gpu_mem_gib']:.1f})" if r.get("gpu_mem_gib") is not None else ""
    return f"{r['tokens_per_s']:.1f}{mem}"
