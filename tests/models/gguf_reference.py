#!/usr/bin/env python3
"""GGUF references for tests/models/gguf_test.cpp, written by the PyPI `gguf` package itself.

  python gguf_reference.py OUT_DIR

writes into OUT_DIR:
  types.gguf, types/<TYPE>.f32  one [3, 512] tensor per supported type (named after the type) and
                                the values gguf.quants.dequantize gives for it (raw fp32, row-major)
  <model>.gguf, <model>_hf/     tiny random models as GGUF and as a Hugging Face directory
                                (config.json + model.safetensors, fp32) holding the same weights:
    llama_f32    Llama (untied), every tensor F32; the GGUF's attn_q/attn_k rows permuted as
                 llama.cpp's convert_hf_to_gguf.py does
    llama_quant  the same model with its linear weights Q8_0 (attention) and Q4_1 (MLP, head);
                 the HF directory holds gguf.quants.dequantize's values, un-permuted the way
                 transformers' GGUF loader does
    qwen2_f32    Qwen2 (tied embeddings, q/k/v biases; no permutation), F32
    qwen3_f32    Qwen3 (q/k norms, head_dim from attention.key_length), F32
  manifest.json the list of the above
Each HF directory is checked to hold exactly what transformers' own GGUF loader
(load_gguf_checkpoint: dequantization, q/k un-permutation, names) reads from the GGUF.
"""
import json
import os
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as Q

ROWS, COLS = 3, 512
ROPE_THETA = 10000.0


def finite_half_bits(rng, n):
    """Random fp16 scales in [2^-12, 2^-4], either sign: finite and normal."""
    values = rng.uniform(2.0**-12, 2.0**-4, n) * rng.choice([-1.0, 1.0], n)
    return np.asarray(values, dtype=np.float16).view(np.uint8).reshape(n, 2)


def random_k_blocks(rng, qtype, n_blocks):
    """Random K-quant blocks whose fp16 fields (d, dmin) are finite."""
    block_size, type_size = gguf.GGML_QUANT_SIZES[qtype]
    blocks = rng.integers(0, 256, (n_blocks, type_size), dtype=np.uint8)
    if qtype in (Q.Q4_K, Q.Q5_K):
        blocks[:, 0:2] = finite_half_bits(rng, n_blocks)
        blocks[:, 2:4] = finite_half_bits(rng, n_blocks)
    elif qtype == Q.Q6_K:
        blocks[:, type_size - 2:] = finite_half_bits(rng, n_blocks)
    return blocks


def type_tensor(rng, qtype):
    """[ROWS, COLS] of `qtype` as stored (uint8 bytes, or a float array for F32/F16)."""
    values = rng.standard_normal((ROWS, COLS)).astype(np.float32)
    if qtype in (Q.F32, Q.F16):
        return gguf.quants.quantize(values, qtype)
    if qtype in (Q.BF16, Q.Q8_0, Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1):
        return gguf.quants.quantize(values, qtype)
    block_size, type_size = gguf.GGML_QUANT_SIZES[qtype]
    n_blocks = ROWS * COLS // block_size
    return random_k_blocks(rng, qtype, n_blocks).reshape(ROWS, -1)


def write_types(out):
    rng = np.random.default_rng(1)
    os.makedirs(os.path.join(out, "types"), exist_ok=True)
    writer = gguf.GGUFWriter(os.path.join(out, "types.gguf"), "types")
    names = []
    for qtype in (Q.F32, Q.F16, Q.BF16, Q.Q8_0, Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1, Q.Q4_K, Q.Q5_K,
                  Q.Q6_K):
        stored = type_tensor(rng, qtype)
        raw = qtype not in (Q.F32, Q.F16)
        writer.add_tensor(qtype.name, stored, raw_dtype=qtype if raw else None)
        raw_bytes = np.ascontiguousarray(stored).view(np.uint8)
        expected = gguf.quants.dequantize(raw_bytes, qtype).astype(np.float32)
        assert expected.shape == (ROWS, COLS), (qtype.name, expected.shape)
        expected.tofile(os.path.join(out, "types", qtype.name + ".f32"))
        names.append(qtype.name)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return names


# ---- tiny models -------------------------------------------------------------------------------

LAYER_NAMES = {
    "input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output",
    "self_attn.q_norm": "attn_q_norm", "self_attn.k_norm": "attn_k_norm",
    "post_attention_layernorm": "ffn_norm", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
}


def gguf_name(hf):
    if hf.startswith("model.layers."):
        layer, rest = hf[len("model.layers."):].split(".", 1)
        stem, suffix = rest.rsplit(".", 1)
        return "blk.%s.%s.%s" % (layer, LAYER_NAMES[stem], suffix)
    return {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight":
            "output_norm.weight", "lm_head.weight": "output.weight"}[hf]


def permute(weights, n_head, n_head_kv):
    """convert_hf_to_gguf.py LlamaModel.permute."""
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    return (weights.reshape(n_head, 2, weights.shape[0] // n_head // 2, *weights.shape[1:])
            .swapaxes(1, 2).reshape(weights.shape))


def reverse_permute(weights, n_head, num_kv_heads):
    """transformers' LlamaTensorProcessor._reverse_permute_weights."""
    if num_kv_heads is not None and n_head != num_kv_heads:
        n_head = num_kv_heads
    dim = weights.shape[0] // n_head // 2
    w = weights.reshape(n_head, dim, 2, *weights.shape[1:])
    return w.swapaxes(2, 1).reshape(weights.shape)


def tiny_model(kind):
    import torch
    import transformers
    common = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, vocab_size=256,
                  max_position_embeddings=128, rms_norm_eps=1e-5, rope_theta=ROPE_THETA,
                  bos_token_id=1, eos_token_id=2)
    torch.manual_seed({"llama": 7, "qwen2": 8, "qwen3": 9}[kind])
    if kind == "llama":
        config = transformers.LlamaConfig(tie_word_embeddings=False, **common)
        model = transformers.LlamaForCausalLM(config)
    elif kind == "qwen3":
        config = transformers.Qwen3Config(tie_word_embeddings=False, head_dim=16, **common)
        model = transformers.Qwen3ForCausalLM(config)
    else:
        config = transformers.Qwen2Config(tie_word_embeddings=True, **common)
        model = transformers.Qwen2ForCausalLM(config)
    with torch.no_grad():
        for name, tensor in model.named_parameters():
            if name.endswith("norm.weight"):
                tensor.copy_(1.0 + 0.1 * torch.randn_like(tensor))
            elif name.endswith(".bias"):
                tensor.copy_(0.1 * torch.randn_like(tensor))
    return model.float().eval(), config


def metadata(writer, arch, config):
    writer.add_block_count(config.num_hidden_layers)
    writer.add_context_length(config.max_position_embeddings)
    writer.add_embedding_length(config.hidden_size)
    writer.add_feed_forward_length(config.intermediate_size)
    writer.add_head_count(config.num_attention_heads)
    writer.add_head_count_kv(config.num_key_value_heads)
    writer.add_layer_norm_rms_eps(config.rms_norm_eps)
    writer.add_rope_freq_base(ROPE_THETA)
    head_dim = config.hidden_size // config.num_attention_heads
    writer.add_rope_dimension_count(head_dim)
    if arch == "qwen3":
        writer.add_key_length(head_dim)
        writer.add_value_length(head_dim)
    writer.add_vocab_size(config.vocab_size)
    writer.add_bos_token_id(config.bos_token_id)
    writer.add_eos_token_id(config.eos_token_id)


def quant_type(name, quantize):
    if not quantize or not name.endswith(".weight") or "norm" in name or "embed" in name:
        return None
    return Q.Q8_0 if "self_attn" in name else Q.Q4_1


def check_against_transformers(path, model, hf_weights):
    """transformers' own GGUF loader (dequantization, q/k un-permutation, names) must give exactly
    the weights of the HF directory."""
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint
    loaded = load_gguf_checkpoint(path, return_tensors=True, model_to_load=model)["tensors"]
    assert sorted(loaded) == sorted(hf_weights), (sorted(loaded), sorted(hf_weights))
    for name, values in hf_weights.items():
        theirs = np.asarray(loaded[name], dtype=np.float32)
        assert theirs.shape == values.shape and np.array_equal(theirs.view(np.uint32),
                                                               values.view(np.uint32)), name


def write_model(out, label, kind, quantize):
    """Writes <label>.gguf and <label>_hf/ holding the same weights."""
    import torch
    from safetensors.torch import save_file
    model, config = tiny_model(kind)
    heads, kv_heads = config.num_attention_heads, config.num_key_value_heads
    writer = gguf.GGUFWriter(os.path.join(out, label + ".gguf"), kind)
    metadata(writer, kind, config)
    hf_weights = {}
    for name, tensor in model.state_dict().items():
        if name == "lm_head.weight" and config.tie_word_embeddings:
            continue
        values = tensor.detach().numpy().astype(np.float32)
        stored = values
        is_q, is_k = ".q_proj." in name, ".k_proj." in name
        if kind == "llama" and (is_q or is_k):
            stored = permute(values, heads, heads if is_q else kv_heads)
        qtype = quant_type(name, quantize)
        if qtype is None:
            writer.add_tensor(gguf_name(name), np.ascontiguousarray(stored))
            hf_weights[name] = values
            continue
        quantized = gguf.quants.quantize(np.ascontiguousarray(stored), qtype)
        writer.add_tensor(gguf_name(name), quantized, raw_dtype=qtype)
        loaded = gguf.quants.dequantize(quantized, qtype).astype(np.float32)
        if kind == "llama" and (is_q or is_k):
            loaded = reverse_permute(loaded, heads, heads if is_q else kv_heads)
        hf_weights[name] = loaded
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    check_against_transformers(os.path.join(out, label + ".gguf"), model, hf_weights)
    hf_dir = os.path.join(out, label + "_hf")
    os.makedirs(hf_dir, exist_ok=True)
    config.save_pretrained(hf_dir)
    save_file({k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in hf_weights.items()},
              os.path.join(hf_dir, "model.safetensors"))


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    manifest = {"types": write_types(out), "models": []}
    for label, kind, quantize in (("llama_f32", "llama", False), ("llama_quant", "llama", True),
                                  ("qwen2_f32", "qwen2", False), ("qwen3_f32", "qwen3", False)):
        write_model(out, label, kind, quantize)
        manifest["models"].append(label)
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(manifest, f)


if __name__ == "__main__":
    main()
