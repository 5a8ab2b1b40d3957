#!/usr/bin/env python3
"""End-to-end generation benchmark on one GPU: REE (reproducible under repops-1, repops-2 and
repops-3, and the default operation set) side by side with Hugging Face transformers (eager
attention, same GPU, same weights) in one run.

Models are Llama-shaped with RANDOM bf16 weights generated on the GPU (nothing downloaded):
  llama3-8b  (hidden 4096, 32 layers, 32/8 heads, MLP 14336, vocab 128256)
  llama3-1b  (Llama-3.2-1B shape: hidden 2048, 16 layers, 32/8 heads, MLP 8192, tied)

usage: e2e_bench.py --ree BUILD/launcher/ree-launch --work DIR [--shape llama3-8b] [--tokens 128]
                    [--skip-hf] [--skip-repops2] [--skip-repops3] [--quick] [--batches 1,8]
                    [--prompt-len 32] [--sets default,reproducible]
                    [--baseline-ree OTHER/ree-launch] [--skip-prefill]
Prints a table; timings are medians of --repeats runs; tokens/s are decode tokens/s.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import torch

SHAPES = {
    "llama3-8b": dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                      num_attention_heads=32, num_key_value_heads=8, vocab_size=128256,
                      tie_word_embeddings=False),
    "llama3-1b": dict(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
                      num_attention_heads=32, num_key_value_heads=8, vocab_size=128256,
                      tie_word_embeddings=True),
}


def make_model(shape, directory):
    if os.path.exists(os.path.join(directory, "model.safetensors")):
        return
    from safetensors.torch import save_file
    s = SHAPES[shape]
    os.makedirs(directory, exist_ok=True)
    config = dict(s, architectures=["LlamaForCausalLM"], model_type="llama", head_dim=128 if shape == "llama3-8b" else 64,
                  max_position_embeddings=8192, rms_norm_eps=1e-5, rope_theta=500000.0,
                  rope_scaling=dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0,
                                    high_freq_factor=4.0, original_max_position_embeddings=8192),
                  hidden_act="silu", torch_dtype="bfloat16", bos_token_id=128000,
                  eos_token_id=128001, attention_bias=False, mlp_bias=False)
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(config, f)
    g = torch.Generator(device="cuda").manual_seed(0)
    h, i, hd = s["hidden_size"], s["intermediate_size"], config["head_dim"]
    nh, nkv = s["num_attention_heads"], s["num_key_value_heads"]
    tensors = {}

    def rnd(*shape_):
        t = torch.randn(*shape_, generator=g, device="cuda", dtype=torch.float32)
        return (t * (shape_[-1] ** -0.5)).to(torch.bfloat16).cpu()

    tensors["model.embed_tokens.weight"] = rnd(s["vocab_size"], h)
    for layer in range(s["num_hidden_layers"]):
        p = f"model.layers.{layer}."
        tensors[p + "input_layernorm.weight"] = torch.ones(h, dtype=torch.bfloat16)
        tensors[p + "post_attention_layernorm.weight"] = torch.ones(h, dtype=torch.bfloat16)
        tensors[p + "self_attn.q_proj.weight"] = rnd(nh * hd, h)
        tensors[p + "self_attn.k_proj.weight"] = rnd(nkv * hd, h)
        tensors[p + "self_attn.v_proj.weight"] = rnd(nkv * hd, h)
        tensors[p + "self_attn.o_proj.weight"] = rnd(h, nh * hd)
        tensors[p + "mlp.gate_proj.weight"] = rnd(i, h)
        tensors[p + "mlp.up_proj.weight"] = rnd(i, h)
        tensors[p + "mlp.down_proj.weight"] = rnd(h, i)
    tensors["model.norm.weight"] = torch.ones(h, dtype=torch.bfloat16)
    if not s["tie_word_embeddings"]:
        tensors["lm_head.weight"] = rnd(s["vocab_size"], h)
    save_file(tensors, os.path.join(directory, "model.safetensors"), metadata={"format": "pt"})


def prompt(n, seed=0):
    return [128000] + [(seed * 7919 + k * 104729) % 120000 + 1000 for k in range(n - 1)]


# The REE configurations measured: (label, --operation-set, --repops-spec or None).
CONFIGS = [("ree reproducible", "reproducible", "repops-1"),
           ("ree repops-2", "reproducible", "repops-2"),
           ("ree repops-3", "reproducible", "repops-3"),
           ("ree default", "default", None)]


def ree_run(ree, model, opset, prompts, new_tokens, work, spec=None):
    path = os.path.join(work, "prompts.jsonl")
    with open(path, "w") as f:
        for p in prompts:
            f.write(json.dumps({"prompt_ids": p}) + "\n")
    cmd = [ree, "--model", model, "--prompt-file", path, "--max-new-tokens", str(new_tokens),
           "--operation-set", opset, "--device", "cuda:0", "--json", "--max-batch", str(len(prompts)),
           "--max-context", "4096"] + (["--repops-spec", spec] if spec else [])
    start = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if out.returncode != 0:
        raise RuntimeError(out.stderr.strip())
    results = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    return results, wall


def ree_decode_tps(results):
    # Every prompt of the batch decodes together: aggregate decode tokens over the longest decode.
    tokens = sum(r["timing"]["generated_tokens"] - 1 for r in results)
    seconds = max(r["timing"]["decode_seconds"] for r in results)
    return tokens / seconds


def hf_model(model_dir):
    import transformers
    return transformers.AutoModelForCausalLM.from_pretrained(
        model_dir, torch_dtype=torch.bfloat16, attn_implementation="eager").cuda().eval()


def hf_decode_tps(model, prompts, new_tokens):
    ids = torch.tensor(prompts, device="cuda")
    with torch.no_grad():
        model.generate(ids, max_new_tokens=4, min_new_tokens=4, do_sample=False, pad_token_id=0)
        torch.cuda.synchronize()
        start = time.perf_counter()
        model.generate(ids, max_new_tokens=1, min_new_tokens=1, do_sample=False, pad_token_id=0)
        torch.cuda.synchronize()
        prefill = time.perf_counter() - start
        start = time.perf_counter()
        model.generate(ids, max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False,
                       pad_token_id=0)
        torch.cuda.synchronize()
        total = time.perf_counter() - start
    return len(prompts) * (new_tokens - 1) / (total - prefill), prefill


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--ree", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--shape", default="llama3-8b")
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--skip-hf", action="store_true")
    parser.add_argument("--skip-repops2", action="store_true",
                        help="leave out the reproducible set under --repops-spec repops-2")
    parser.add_argument("--skip-repops3", action="store_true",
                        help="leave out the reproducible set under --repops-spec repops-3")
    parser.add_argument("--quick", action="store_true",
                        help="the reproducible set only (every spec), decode batch 1 and prefill 2048")
    parser.add_argument("--batches", default="1,8",
                        help="comma-separated decode batch sizes (aggregate decode tok/s each)")
    parser.add_argument("--prompt-len", type=int, default=32, help="prompt tokens of the decode runs")
    parser.add_argument("--sets", default="",
                        help="comma-separated labels to keep: reproducible, repops-2, repops-3, "
                             "default")
    parser.add_argument("--baseline-ree", default="",
                        help="another ree-launch (e.g. built from an earlier commit): its default "
                             "set runs beside this one's, in the same run")
    parser.add_argument("--skip-prefill", action="store_true")
    parser.add_argument("--cold-start", action="store_true",
                        help="only measure cold start to first token of a llama3-1b-shaped model")
    args = parser.parse_args()
    gpu = torch.cuda.get_device_name(0)
    if args.cold_start:
        model_dir = os.path.join(args.work, "llama3-1b")
        make_model("llama3-1b", model_dir)
        for opset in ("reproducible", "default"):
            walls = sorted(ree_run(args.ree, model_dir, opset, [prompt(16)], 1, args.work)[1]
                           for _ in range(3))
            print(f"cold start to first token, llama3-1b shape, ree {opset} on {gpu}: "
                  f"{walls[1]:.2f} s (median of 3 whole ree-launch processes)")
        return 0
    model_dir = os.path.join(args.work, args.shape)
    t0 = time.perf_counter()
    make_model(args.shape, model_dir)
    print(f"# {args.shape}-shaped model with random bf16 weights ready in {time.perf_counter() - t0:.1f} s", flush=True)
    rows = []

    class Rows(list):
        def append(self, row):
            super().append(row)
            print(f"  {row[0]:18s} {row[1]:22s} {row[2]:10.1f} {row[3]}", flush=True)

    rows = Rows()
    skipped = {spec for spec, skip in (("repops-2", args.skip_repops2),
                                        ("repops-3", args.skip_repops3)) if skip}
    configs = [(args.ree,) + c for c in CONFIGS if c[2] not in skipped]
    if args.sets:
        keep = args.sets.split(",")
        configs = [c for c in configs if c[1].split()[-1] in keep]
    if args.baseline_ree:
        configs.append((args.baseline_ree, "ree default (baseline)", "default", None))
    batches = tuple(int(b) for b in args.batches.split(","))
    prefills = () if args.skip_prefill else (512, 2048)
    if args.quick:
        configs = [c for c in configs if c[2] == "reproducible"]
        batches, prefills = (1,), (2048,)
    for batch in batches:
        prompts = [prompt(args.prompt_len, seed=b) for b in range(batch)]
        for ree, label, opset, spec in configs:
            results, wall = ree_run(ree, model_dir, opset, prompts, args.tokens, args.work, spec)
            rows.append((f"decode batch {batch}", label, ree_decode_tps(results), "tok/s"))
            if batch == 1:
                same = results[0]["output_ids_sha256"]
                print(f"# {label} batch 1 output ids sha256 {same}", flush=True)
    for n in prefills:
        for ree, label, opset, spec in configs:
            results, _ = ree_run(ree, model_dir, opset, [prompt(n)], 1, args.work, spec)
            rows.append((f"prefill {n}", label, n / results[0]["timing"]["prefill_seconds"], "tok/s"))
    if not args.skip_hf:
        model = hf_model(model_dir)
        for batch in batches:
            tps, _ = hf_decode_tps(model, [prompt(args.prompt_len, seed=b) for b in range(batch)],
                                   args.tokens)
            rows.append((f"decode batch {batch}", "transformers eager", tps, "tok/s"))
        for n in prefills:
            _, prefill = hf_decode_tps(model, [prompt(n)], 2)
            rows.append((f"prefill {n}", "transformers eager", n / prefill, "tok/s"))
        del model
        torch.cuda.empty_cache()
    print(f"\n{args.shape} on {gpu}, bf16 weights, {args.tokens} new tokens")
    for what, who, value, unit in rows:
        print(f"{what:18s} {who:22s} {value:10.1f} {unit}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
