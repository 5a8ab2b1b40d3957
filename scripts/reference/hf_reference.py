#!/usr/bin/env python3
"""Reference outputs from Hugging Face transformers for REE's model tests.

Creates small random models of each supported architecture with transformers itself (fixed seeds,
nothing downloaded), saves them as safetensors directories, and records what transformers computes
for them in float32: the logits of every position of a prompt followed by transformers' own greedy
continuation, and that greedy continuation (generate(do_sample=False)).

Every architecture of REE's table (models/include/ree/models/architecture.h) needs at least one
entry in MODELS, named in tests/models/architectures.h (models_hf_parity_test checks the cover).

usage: hf_reference.py OUT_DIR [--steps N]
Writes OUT_DIR/<name>/ (config.json, model.safetensors, generation_config.json) and
OUT_DIR/<name>/reference.json.
"""
import argparse
import json
import os
import sys

import torch
import transformers

COMMON = dict(vocab_size=320, hidden_size=64, intermediate_size=176, num_hidden_layers=3,
              num_attention_heads=4, max_position_embeddings=256, bos_token_id=1, eos_token_id=2,
              pad_token_id=0)

MODELS = {
    "llama3": (transformers.LlamaConfig, dict(
        COMMON, num_key_value_heads=2, rms_norm_eps=1e-5, rope_theta=500000.0, tie_word_embeddings=False,
        rope_scaling=dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                          original_max_position_embeddings=32))),
    "llama2_tied": (transformers.LlamaConfig, dict(
        COMMON, num_key_value_heads=4, rms_norm_eps=1e-6, rope_theta=10000.0, tie_word_embeddings=True)),
    "mistral": (transformers.MistralConfig, dict(
        COMMON, num_key_value_heads=2, rms_norm_eps=1e-5, rope_theta=1000000.0, sliding_window=None)),
    "qwen2": (transformers.Qwen2Config, dict(
        COMMON, num_key_value_heads=2, rms_norm_eps=1e-6, rope_theta=1000000.0, tie_word_embeddings=True,
        use_sliding_window=False)),
    "qwen3": (transformers.Qwen3Config, dict(
        COMMON, num_key_value_heads=2, head_dim=32, rms_norm_eps=1e-6, rope_theta=1000000.0,
        tie_word_embeddings=False, use_sliding_window=False)),
    "gpt2": (transformers.GPT2Config, dict(
        vocab_size=320, n_embd=64, n_layer=3, n_head=4, n_positions=256, bos_token_id=1, eos_token_id=2,
        activation_function="gelu_new", resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)),
}

PROMPT = [1, 17, 250, 3, 99, 42, 7, 300, 128, 64, 5, 11]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--steps", type=int, default=32)
    parser.add_argument("--only", default="")
    args = parser.parse_args()
    torch.set_num_threads(2)
    names = [n for n in MODELS if not args.only or n in args.only.split(",")]
    for index, name in enumerate(names):
        config_class, kwargs = MODELS[name]
        config = config_class(**kwargs)
        torch.manual_seed(1000 + index)
        model = transformers.AutoModelForCausalLM.from_config(config, torch_dtype=torch.float32)
        model.eval()
        # Random init leaves norms at 1; perturb them so norm weights are exercised too.
        with torch.no_grad():
            for pname, param in model.named_parameters():
                if "norm" in pname or "ln_" in pname:
                    param.add_(0.1 * torch.randn_like(param))
        directory = os.path.join(args.out, name)
        model.save_pretrained(directory, safe_serialization=True)
        prompt = torch.tensor([PROMPT])
        with torch.no_grad():
            generated = model.generate(prompt, max_new_tokens=args.steps, do_sample=False,
                                       min_new_tokens=args.steps, pad_token_id=0)
            greedy = generated[0, len(PROMPT):].tolist()
            full = torch.tensor([PROMPT + greedy])
            logits = model(full).logits[0].float()
        reference = {
            "transformers": transformers.__version__,
            "torch": torch.__version__,
            "prompt_ids": PROMPT,
            "greedy_ids": greedy,
            "logits_shape": list(logits.shape),
            "logits": [round(float(v), 7) for v in logits.flatten().tolist()],
        }
        with open(os.path.join(directory, "reference.json"), "w") as f:
            json.dump(reference, f)
        print(f"{name}: {len(greedy)} greedy tokens, logits {tuple(logits.shape)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
