#!/usr/bin/env python3
"""Reference checkpoints and configs for the C++ checkpoint tests (tests/models/).

Usage: make_tiny_checkpoints.py OUT_DIR

Writes into OUT_DIR:
  models/<name>/    tiny random models saved by transformers' save_pretrained (safetensors):
                    llama (llama3 rope scaling, sharded), llama with biases, mistral, qwen2, qwen3,
                    gpt2; tied and untied embeddings; F32, F16 and BF16.
  configs/<name>/   config.json (+ generation_config.json) of real hub models in the spellings
                    transformers 4.x wrote (torch_dtype, rope_theta, rope_scaling), and minimal
                    configs that rely on the config classes' defaults.
  manifest.json     what the C++ side must find, computed by transformers/safetensors/hashlib:
                    per model, every tensor's dtype, shape and the SHA-256 of its bytes (read back
                    with safetensors' own reader and checked equal to the in-memory model); per
                    model and config, the values transformers derives from the config and the
                    names/shapes of the model's state_dict (instantiated on the meta device for
                    the big configs).
Deterministic: fixed seeds, no network.
"""
import hashlib
import json
import os
import sys

import torch
import transformers
from safetensors import safe_open
from transformers import (AutoConfig, AutoModelForCausalLM, GenerationConfig, GPT2Config,
                          LlamaConfig, MistralConfig, Qwen2Config, Qwen3Config)

transformers.logging.set_verbosity_error()

SMALL = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, vocab_size=256, max_position_embeddings=512,
             bos_token_id=1, eos_token_id=2)

DTYPE_NAMES = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16"}


def tiny_models():
    """(name, config, torch dtype, max_shard_size or None, generation eos or None)."""
    return [
        ("llama3_bf16_tied_sharded",
         LlamaConfig(**{**SMALL, "eos_token_id": [2, 3]}, rope_theta=500000.0,
                     rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                   "high_freq_factor": 4.0,
                                   "original_max_position_embeddings": 128},
                     tie_word_embeddings=True, rms_norm_eps=1e-5),
         torch.bfloat16, "20KB", [2, 3]),
        ("llama_bias_f32_untied",
         LlamaConfig(**SMALL, attention_bias=True, mlp_bias=True, tie_word_embeddings=False),
         torch.float32, None, None),
        ("mistral_f16_untied",
         MistralConfig(**SMALL, sliding_window=None, tie_word_embeddings=False, rope_theta=1e6),
         torch.float16, None, None),
        ("qwen2_bf16_tied",
         Qwen2Config(**{**SMALL, "bos_token_id": 250, "eos_token_id": 251},
                     tie_word_embeddings=True, rope_theta=1e6),
         torch.bfloat16, None, [251, 252]),
        ("qwen3_f32_untied",
         Qwen3Config(**{**SMALL, "bos_token_id": None, "eos_token_id": 200}, head_dim=32,
                     tie_word_embeddings=False),
         torch.float32, None, None),
        ("gpt2_f32_tied",
         GPT2Config(n_embd=64, n_head=4, n_layer=2, n_positions=128, vocab_size=256,
                    bos_token_id=255, eos_token_id=255),
         torch.float32, None, None),
        ("gpt2_bf16_untied",
         GPT2Config(n_embd=64, n_head=4, n_layer=2, n_positions=96, n_inner=160, vocab_size=256,
                    bos_token_id=255, eos_token_id=255, tie_word_embeddings=False,
                    activation_function="gelu_pytorch_tanh", layer_norm_epsilon=1e-6),
         torch.bfloat16, None, None),
    ]


# Configs of hub models, as they were published (transformers 4.x spellings), and minimal ones.
LEGACY_CONFIGS = {
    "llama31_8b_instruct": ({
        "architectures": ["LlamaForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
        "bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009], "hidden_act": "silu",
        "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 14336,
        "max_position_embeddings": 131072, "mlp_bias": False, "model_type": "llama",
        "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
        "pretraining_tp": 1, "rms_norm_eps": 1e-05,
        "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                         "original_max_position_embeddings": 8192, "rope_type": "llama3"},
        "rope_theta": 500000.0, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
        "transformers_version": "4.42.3", "use_cache": True, "vocab_size": 128256},
        {"bos_token_id": 128000, "do_sample": True, "eos_token_id": [128001, 128008, 128009],
         "temperature": 0.6, "top_p": 0.9, "transformers_version": "4.42.3"}),
    "llama32_1b": ({
        "architectures": ["LlamaForCausalLM"], "attention_bias": False, "bos_token_id": 128000,
        "eos_token_id": 128001, "head_dim": 64, "hidden_act": "silu", "hidden_size": 2048,
        "intermediate_size": 8192, "max_position_embeddings": 131072, "mlp_bias": False,
        "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 16,
        "num_key_value_heads": 8, "rms_norm_eps": 1e-05,
        "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                         "original_max_position_embeddings": 8192, "rope_type": "llama3"},
        "rope_theta": 500000.0, "tie_word_embeddings": True, "torch_dtype": "bfloat16",
        "vocab_size": 128256}, None),
    "llama2_7b": ({
        "architectures": ["LlamaForCausalLM"], "bos_token_id": 1, "eos_token_id": 2,
        "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02,
        "intermediate_size": 11008, "max_position_embeddings": 4096, "model_type": "llama",
        "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 32,
        "pretraining_tp": 1, "rms_norm_eps": 1e-05, "rope_scaling": None,
        "tie_word_embeddings": False, "torch_dtype": "float16", "use_cache": True,
        "vocab_size": 32000}, {"bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0}),
    "llama_rope_type_key": ({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 256,
        "intermediate_size": 512, "num_hidden_layers": 3, "num_attention_heads": 8,
        "num_key_value_heads": 2, "vocab_size": 1000, "max_position_embeddings": 65536,
        "rope_theta": 500000.0,
        "rope_scaling": {"type": "llama3", "factor": 4.0, "low_freq_factor": 2.0,
                         "high_freq_factor": 8.0, "original_max_position_embeddings": 4096},
        "torch_dtype": "float32"}, None),
    "mistral_7b_v01": ({
        "architectures": ["MistralForCausalLM"], "bos_token_id": 1, "eos_token_id": 2,
        "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02,
        "intermediate_size": 14336, "max_position_embeddings": 32768, "model_type": "mistral",
        "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
        "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "sliding_window": 4096,
        "tie_word_embeddings": False, "torch_dtype": "bfloat16", "use_cache": True,
        "vocab_size": 32000}, None),
    "mistral_nemo": ({
        "architectures": ["MistralForCausalLM"], "bos_token_id": 1, "eos_token_id": 2,
        "head_dim": 128, "hidden_act": "silu", "hidden_size": 5120, "intermediate_size": 14336,
        "max_position_embeddings": 1024000, "model_type": "mistral", "num_attention_heads": 32,
        "num_hidden_layers": 40, "num_key_value_heads": 8, "rms_norm_eps": 1e-05,
        "rope_theta": 1000000.0, "sliding_window": None, "tie_word_embeddings": False,
        "torch_dtype": "bfloat16", "vocab_size": 131072}, None),
    "mistral_minimal": ({
        "architectures": ["MistralForCausalLM"], "model_type": "mistral", "hidden_size": 128, "intermediate_size": 256,
        "num_hidden_layers": 2, "num_attention_heads": 16, "vocab_size": 512}, None),
    "qwen25_05b_instruct": ({
        "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0,
        "bos_token_id": 151643, "eos_token_id": 151645, "hidden_act": "silu",
        "hidden_size": 896, "initializer_range": 0.02, "intermediate_size": 4864,
        "max_position_embeddings": 32768, "max_window_layers": 21, "model_type": "qwen2",
        "num_attention_heads": 14, "num_hidden_layers": 24, "num_key_value_heads": 2,
        "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "sliding_window": 32768,
        "tie_word_embeddings": True, "torch_dtype": "bfloat16", "use_cache": True,
        "use_sliding_window": False, "vocab_size": 151936},
        {"bos_token_id": 151643, "do_sample": True, "eos_token_id": [151645, 151643],
         "pad_token_id": 151643, "repetition_penalty": 1.1, "temperature": 0.7, "top_k": 20,
         "top_p": 0.8}),
    "qwen3_06b": ({
        "architectures": ["Qwen3ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
        "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu",
        "hidden_size": 1024, "initializer_range": 0.02, "intermediate_size": 3072,
        "max_position_embeddings": 40960, "max_window_layers": 28, "model_type": "qwen3",
        "num_attention_heads": 16, "num_hidden_layers": 28, "num_key_value_heads": 8,
        "rms_norm_eps": 1e-06, "rope_scaling": None, "rope_theta": 1000000,
        "sliding_window": None, "tie_word_embeddings": True, "torch_dtype": "bfloat16",
        "use_cache": True, "use_sliding_window": False, "vocab_size": 151936}, None),
    "qwen2_sliding_upper_layers": ({
        "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 64,
        "intermediate_size": 96, "num_hidden_layers": 3, "num_attention_heads": 4,
        "num_key_value_heads": 2, "vocab_size": 300, "use_sliding_window": True,
        "sliding_window": 16, "max_window_layers": 1}, None),
    "qwen2_sliding_no_layer": ({
        "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 64,
        "intermediate_size": 96, "num_hidden_layers": 3, "num_attention_heads": 4,
        "num_key_value_heads": 2, "vocab_size": 300, "use_sliding_window": True,
        "sliding_window": 16, "max_window_layers": 3}, None),
    "qwen3_minimal": ({
        "model_type": "qwen3", "hidden_size": 64, "intermediate_size": 96,
        "num_hidden_layers": 1, "num_attention_heads": 64, "vocab_size": 300}, None),
    "gpt2_openai": ({
        "activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"],
        "attn_pdrop": 0.1, "bos_token_id": 50256, "embd_pdrop": 0.1, "eos_token_id": 50256,
        "initializer_range": 0.02, "layer_norm_epsilon": 1e-05, "model_type": "gpt2",
        "n_ctx": 1024, "n_embd": 768, "n_head": 12, "n_layer": 12, "n_positions": 1024,
        "resid_pdrop": 0.1, "summary_activation": None, "summary_first_dropout": 0.1,
        "summary_proj_to_labels": True, "summary_type": "cls_index", "summary_use_proj": True,
        "task_specific_params": {"text-generation": {"do_sample": True, "max_length": 50}},
        "vocab_size": 50257}, None),
}


def token_list(value):
    if value is None:
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]


def config_reference(cfg):
    """What transformers makes of a config: the values the C++ ModelConfig must reproduce."""
    dtype = getattr(cfg, "dtype", None)
    if isinstance(dtype, str):
        dtype = getattr(torch, dtype)
    ref = {"model_type": cfg.model_type, "dtype": DTYPE_NAMES.get(dtype),
           "tie_word_embeddings": bool(cfg.tie_word_embeddings),
           "bos_token_id": cfg.bos_token_id, "eos_token_ids": token_list(cfg.eos_token_id)}
    if cfg.model_type == "gpt2":
        ref.update(hidden_size=cfg.n_embd, intermediate_size=cfg.n_inner or 4 * cfg.n_embd,
                   num_layers=cfg.n_layer, num_heads=cfg.n_head, num_kv_heads=cfg.n_head,
                   head_dim=cfg.n_embd // cfg.n_head, vocab_size=cfg.vocab_size,
                   max_position_embeddings=cfg.n_positions, norm_eps=cfg.layer_norm_epsilon,
                   hidden_act=cfg.activation_function, rope_type="none", rope_theta=0.0,
                   sliding_window=0)
        return ref
    rope = dict(cfg.rope_parameters)
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    if cfg.model_type == "mistral":
        window = cfg.sliding_window or 0
    else:
        # Qwen: the window holds for the layers layer_types marks as sliding (derived from
        # use_sliding_window and max_window_layers when the file has no layer_types).
        sliding = "sliding_attention" in (getattr(cfg, "layer_types", None) or [])
        window = (cfg.sliding_window or 0) if sliding else 0
    ref.update(hidden_size=cfg.hidden_size, intermediate_size=cfg.intermediate_size,
               num_layers=cfg.num_hidden_layers, num_heads=cfg.num_attention_heads,
               num_kv_heads=cfg.num_key_value_heads, head_dim=head_dim,
               vocab_size=cfg.vocab_size, max_position_embeddings=cfg.max_position_embeddings,
               norm_eps=cfg.rms_norm_eps, hidden_act=cfg.hidden_act,
               rope_type=rope.get("rope_type", "default"), rope_theta=float(rope["rope_theta"]),
               sliding_window=window)
    if ref["rope_type"] == "llama3":
        ref.update(llama3_factor=rope["factor"], llama3_low_freq_factor=rope["low_freq_factor"],
                   llama3_high_freq_factor=rope["high_freq_factor"],
                   llama3_original_max_position_embeddings=rope[
                       "original_max_position_embeddings"])
    return ref


def state_dict_shapes(model, cfg):
    """Names and shapes of the tensors save_pretrained writes (tied lm_head dropped)."""
    shapes = {name: list(t.shape) for name, t in model.state_dict().items()}
    if cfg.tie_word_embeddings:
        shapes.pop("lm_head.weight", None)
    return shapes


def generation_eos(directory):
    if not os.path.exists(os.path.join(directory, "generation_config.json")):
        return None
    return token_list(GenerationConfig.from_pretrained(directory).eos_token_id)


def tensor_bytes(t):
    return t.detach().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


def make_model(root, name, cfg, dtype, shard_size, gen_eos):
    torch.manual_seed(1234)
    model = AutoModelForCausalLM.from_config(cfg)
    with torch.no_grad():
        # Random values everywhere (norm weights and biases too), so that every byte matters.
        for _, param in sorted(model.named_parameters()):
            param.copy_(torch.randn(param.shape, dtype=torch.float32) * 0.5)
    model = model.to(dtype)
    directory = os.path.join(root, "models", name)
    kwargs = {"safe_serialization": True}
    if shard_size:
        kwargs["max_shard_size"] = shard_size
    model.save_pretrained(directory, **kwargs)
    if gen_eos is not None:
        GenerationConfig(bos_token_id=cfg.bos_token_id, eos_token_id=gen_eos).save_pretrained(
            directory)
    elif os.path.exists(os.path.join(directory, "generation_config.json")):
        os.remove(os.path.join(directory, "generation_config.json"))

    files = sorted(f for f in os.listdir(directory) if f.endswith(".safetensors"))
    state = model.state_dict()
    tensors = {}
    for file in files:
        with safe_open(os.path.join(directory, file), framework="pt") as handle:
            for key in handle.keys():
                loaded = handle.get_tensor(key)
                data = tensor_bytes(loaded)
                # The file must hold exactly the model's bits.
                assert data == tensor_bytes(state[key]), key
                tensors[key] = {"dtype": DTYPE_NAMES[loaded.dtype], "shape": list(loaded.shape),
                                "sha256": hashlib.sha256(data).hexdigest(), "file": file}
    shapes = state_dict_shapes(model, cfg)
    assert set(shapes) == set(tensors), (name, set(shapes) ^ set(tensors))
    assert (len(files) > 1) == bool(shard_size), (name, files)
    saved = AutoConfig.from_pretrained(directory)
    return {"dir": directory, "sharded": len(files) > 1, "shard_files": files,
            "tensors": tensors, "hf_tensors": shapes, "config": config_reference(saved),
            "generation_eos": generation_eos(directory)}


def make_config_only(root, name, config_json, generation_json):
    directory = os.path.join(root, "configs", name)
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(config_json, f, indent=2)
    if generation_json is not None:
        with open(os.path.join(directory, "generation_config.json"), "w") as f:
            json.dump(generation_json, f, indent=2)
    cfg = AutoConfig.from_pretrained(directory)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(cfg)
    return {"dir": directory, "hf_tensors": state_dict_shapes(model, cfg),
            "config": config_reference(cfg), "generation_eos": generation_eos(directory)}


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    root = sys.argv[1]
    os.makedirs(root, exist_ok=True)
    manifest = {"transformers": transformers.__version__, "torch": torch.__version__,
                "models": {}, "configs": {}}
    for name, cfg, dtype, shard_size, gen_eos in tiny_models():
        manifest["models"][name] = make_model(root, name, cfg, dtype, shard_size, gen_eos)
    for name, (config_json, generation_json) in LEGACY_CONFIGS.items():
        manifest["configs"][name] = make_config_only(root, name, config_json, generation_json)
    with open(os.path.join(root, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()
