#!/usr/bin/env python3
"""CPU smoke test of the end-to-end benchmark's plumbing (no GPU, no model): the options, the
REE runner against a stand-in ree-launch that prints --json lines (one configuration failing out
of memory), the rows' throughput arithmetic, the --json file, the tables, plot_throughput.py
reading that file back, and the transformers runner on a tiny random Llama on the CPU (eager;
with E2E_SMOKE_COMPILE=1 also static cache + torch.compile, about a minute more).
Run: python3 bench/e2e/e2e_smoke_test.py (about 10 s)."""
import io
import json
import os
import stat
import sys
import tempfile
from contextlib import redirect_stdout

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_bench  # noqa: E402
import plot_throughput  # noqa: E402
from e2e_report import Report  # noqa: E402

# Prefill 0.01 s per 64 prompt tokens, decode 0.01 s per token; the deterministic set runs out of
# memory above batch 4.
FAKE_REE = r'''#!/usr/bin/env python3
import json, sys
a = sys.argv[1:]
if "--version" in a:
    sys.exit(print("ree-launch stand-in"))
arg = lambda name: a[a.index(name) + 1]
new = int(arg("--max-new-tokens"))
if arg("--operation-set") == "deterministic" and int(arg("--max-batch")) > 4:
    sys.exit(print("error: CUDA out of memory (the KV cache)", file=sys.stderr) or 1)
print("[ree] KV cache: 12 blocks of 16 tokens (192 tokens, 0.094 GiB)", file=sys.stderr)
for line in open(arg("--prompt-file")):
    p = json.loads(line)["prompt_ids"]
    print(json.dumps({"prompt_ids": p, "output_ids_sha256": "ab" * 32, "timing": {
        "prefill_seconds": 0.01 * len(p) / 64, "decode_seconds": 0.01 * (new - 1),
        "generated_tokens": new}}))
'''


def check(condition, what):
    if not condition:
        sys.exit(f"FAILED: {what}")


def run_fake(tmp):
    ree = os.path.join(tmp, "ree-launch")
    with open(ree, "w") as f:
        f.write(FAKE_REE.replace("/usr/bin/env python3", sys.executable, 1))
    os.chmod(ree, os.stat(ree).st_mode | stat.S_IXUSR)
    json_path = os.path.join(tmp, "rows.json")
    args = e2e_bench.parse_args(["--ree", ree, "--work", tmp, "--batches", "1,8", "--tokens", "11",
                                 "--sets", "reproducible,deterministic,default", "--hf", "none",
                                 "--prefill-lens", "256", "--json", json_path])
    args.model_dir = os.path.join(tmp, "model")
    configs = e2e_bench.ree_configs(args)
    check([c[1] for c in configs] == ["ree reproducible", "ree deterministic", "ree default"],
          "--sets picks the named configurations in order")
    look = e2e_bench.ree_configs(e2e_bench.parse_args(
        ["--ree", ree, "--work", tmp, "--sets", "reproducible,lookahead", "--hf", "none"]))
    check([(c[1], c[4]) for c in look] == [("ree reproducible", ()),
                                           ("ree lookahead", ("--decode-lookahead",))],
          "--sets lookahead is the reproducible set with --decode-lookahead")
    report = Report(dict(gpu="stand-in", commit="test", shape="llama3-8b", prompt_len=64,
                         new_tokens=11), json_path)
    with redirect_stdout(io.StringIO()) as out:
        e2e_bench.run_ree(args, configs, report, e2e_bench.Clock(0))
        report.print_side_by_side()
    return json_path, out.getvalue()


def run_transformers(tmp):
    import torch
    import transformers

    import e2e_hf
    from e2e_model import prompt
    config = transformers.LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2,
                                      vocab_size=130000, max_position_embeddings=512)
    torch.manual_seed(0)
    transformers.LlamaForCausalLM(config).to(torch.bfloat16).save_pretrained(tmp)
    e2e_hf.DEVICE = "cpu"
    model = e2e_hf.load(tmp)
    systems = ["eager"] + (["compile"] if os.environ.get("E2E_SMOKE_COMPILE") == "1" else [])
    for system in systems:
        e2e_hf.use_system(model, system)
        rows = e2e_hf.measure(model, system, [prompt(16, seed=s) for s in range(3)], 6, "default")
        check([(r["phase"], r["batch"], r["status"]) for r in rows]
              == [("decode", 3, "ok"), ("prefill", 3, "ok")], f"{system}: {rows}")
        check(all(r["tokens_per_s"] > 0 for r in rows), f"{system}: tokens/s measured")
        check((rows[0]["compile_s"] is not None) == (system == "compile"), "compile_s")
        check(rows[0]["compiled"] == (True if system == "compile" else None),
              f"{system}: generate() compiled the decode forward (or was not asked to)")
        rows = e2e_hf.measure(model, system, [prompt(40)], 1, "default")
        check(len(rows) == 1 and rows[0]["long_prefill"] and rows[0]["status"] == "ok",
              f"{system}: one prompt prefilled alone")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        json_path, printed = run_fake(tmp)
        with open(json_path) as f:
            rows = json.load(f)["rows"]
        by = {(r["label"], r["phase"], r["batch"], r["prompt_len"]): r for r in rows}
        check(len(rows) == 3 * 2 * 2 + 3, f"3 configurations x 2 batches x 2 phases + 3 long "
                                          f"prefills, got {len(rows)} rows")
        decode8 = by[("ree default", "decode", 8, 64)]
        check(abs(decode8["tokens_per_s"] - 800.0) < 1e-6, "decode: 8 x 10 tokens in 0.1 s")
        check(decode8["max_context"] == 80 and decode8["kv_pool_gib"] == 0.094,
              "max-context 64 + 11 rounded up to 16; the KV pool from the info log")
        check(abs(by[("ree default", "prefill", 8, 64)]["tokens_per_s"] - 51200.0) < 1e-6,
              "prefill: 8 x 64 tokens in 0.01 s")
        check(by[("ree deterministic", "decode", 8, 64)]["status"] == "OOM", "OOM is a row")
        check(all(r["gpu"] == "stand-in" and r["commit"] == "test" for r in rows),
              "every row names the GPU and the commit")
        check(by[("ree reproducible", "prefill", 1, 256)].get("long_prefill"), "long prefill row")
        check("OOM" in printed and "ree deterministic" in printed, "side-by-side table")
        header, plotted, commits = plot_throughput.load([json_path])
        panels = plot_throughput.series(plotted, "prefill")
        check(panels["ree default"][0] == [1, 8], "the prefill panel leaves long prefills out")
        check(panels["ree deterministic"][2] == ["OOM at 8"], "the plot notes the OOM")
    with tempfile.TemporaryDirectory() as tmp:
        run_transformers(tmp)
    print("e2e_smoke_test: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
