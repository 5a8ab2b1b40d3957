#!/usr/bin/env python3
"""transformers' own modules on the inputs that aten_transformers_bits_test.cpp wrote.

usage: aten_transformers_reference.py DIR
DIR/cases.json lists the cases; each input is DIR/<case>.<name>.bin (raw little-endian values of the
case's dtype). Writes DIR/<case>.out.bin with what transformers computes on the CPU.
"""
import json
import sys
from pathlib import Path

import torch
import transformers
from transformers.activations import ACT2FN
from transformers.models.llama.modeling_llama import (LlamaRMSNorm, LlamaRotaryEmbedding,
                                                      apply_rotary_pos_emb)

DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}


def load(directory, case, name, shape):
    data = (directory / f"{case['name']}.{name}.bin").read_bytes()
    return torch.frombuffer(bytearray(data), dtype=DTYPES[case["dtype"]]).reshape(shape)


def rms_norm(directory, case):
    tokens, hidden = case["tokens"], case["hidden"]
    norm = LlamaRMSNorm(hidden, eps=case["eps"])
    norm.weight = torch.nn.Parameter(load(directory, case, "weight", [hidden]))
    return norm(load(directory, case, "x", [tokens, hidden]))


def rope(directory, case):
    tokens, heads, head_dim = case["tokens"], case["heads"], case["head_dim"]
    settings = dict(hidden_size=heads * head_dim, num_attention_heads=heads,
                    num_key_value_heads=heads, head_dim=head_dim, rope_theta=case["theta"])
    if case["llama3"]:
        settings["rope_scaling"] = dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0,
                                        high_freq_factor=4.0, original_max_position_embeddings=32)
    rotary = LlamaRotaryEmbedding(transformers.LlamaConfig(**settings))
    x = load(directory, case, "x", [tokens, heads, head_dim])
    q = x.transpose(0, 1).unsqueeze(0).contiguous()  # [1, heads, tokens, head_dim]
    positions = torch.tensor([case["positions"]], dtype=torch.long)
    cos, sin = rotary(q, positions)
    q_embed, _ = apply_rotary_pos_emb(q, q, cos, sin)
    return q_embed[0].transpose(0, 1)


def gated(directory, case):
    shape = [case["tokens"], case["inner"]]
    act = ACT2FN[case["act"]]
    return act(load(directory, case, "gate", shape)) * load(directory, case, "up", shape)


def main():
    directory = Path(sys.argv[1])
    torch.manual_seed(0)
    with torch.no_grad():
        for case in json.loads((directory / "cases.json").read_text()):
            out = {"rms_norm": rms_norm, "rope": rope, "gated": gated}[case["op"]](directory, case)
            out = out.contiguous().to(DTYPES[case["dtype"]])
            (directory / f"{case['name']}.out.bin").write_bytes(out.view(torch.uint8).numpy().tobytes())


if __name__ == "__main__":
    main()
