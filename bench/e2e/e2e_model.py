"""The benchmark's model and prompts: Llama-shaped checkpoints with RANDOM bf16 weights generated
on the GPU (nothing downloaded), written once as a Hugging Face directory that REE and transformers
both load, and deterministic prompt ids."""
import json
import os

import torch

SHAPES = {
    "llama3-8b": dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                      num_attention_heads=32, num_key_value_heads=8, vocab_size=128256,
                      tie_word_embeddings=False),
    "llama3-1b": dict(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
                      num_attention_heads=32, num_key_value_heads=8, vocab_size=128256,
                      tie_word_embeddings=True),
}


def _config(shape):
    return dict(SHAPES[shape], architectures=["LlamaForCausalLM"], model_type="llama",
                head_dim=128 if shape == "llama3-8b" else 64, max_position_embeddings=8192,
                rms_norm_eps=1e-5, rope_theta=500000.0,
                rope_scaling=dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0,
                                  high_freq_factor=4.0, original_max_position_embeddings=8192),
                hidden_act="silu", torch_dtype="bfloat16", bos_token_id=128000,
                eos_token_id=128001, attention_bias=False, mlp_bias=False)


def make_model(shape, directory, device="cuda"):
    """Writes config.json + model.safetensors under directory unless they exist."""
    if os.path.exists(os.path.join(directory, "model.safetensors")):
        return
    from safetensors.torch import save_file
    config = _config(shape)
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(config, f)
    g = torch.Generator(device=device).manual_seed(0)
    h, i, hd = config["hidden_size"], config["intermediate_size"], config["head_dim"]
    nh, nkv = config["num_attention_heads"], config["num_key_value_heads"]
    tensors = {}

    def rnd(*shape_):
        t = torch.randn(*shape_, generator=g, device=device, dtype=torch.float32)
        return (t * (shape_[-1] ** -0.5)).to(torch.bfloat16).cpu()

    tensors["model.embed_tokens.weight"] = rnd(config["vocab_size"], h)
    for layer in range(config["num_hidden_layers"]):
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
    if not config["tie_word_embeddings"]:
        tensors["lm_head.weight"] = rnd(config["vocab_size"], h)
    save_file(tensors, os.path.join(directory, "model.safetensors"), metadata={"format": "pt"})


def prompt(n, seed=0):
    """n token ids: BOS, then ids that differ per seed from the second position on."""
    return [128000] + [(seed * 7919 + k * 104729) % 120000 + 1000 for k in range(n - 1)]
