#!/usr/bin/env python3
"""References for tests/models/gguf_tokenizer_test.cpp: GGUF tokenizers as transformers reads them.

  python gguf_tokenizer_reference.py OUT_DIR
  python gguf_tokenizer_reference.py --smollm2 SMOLLM2.gguf gguf_tokenizer_smollm2_reference.json

writes into OUT_DIR tiny GGUF files whose tokenizer.ggml.* metadata hold vocabularies trained with
`tokenizers` on a small corpus (nothing downloaded), written by the `gguf` package as llama.cpp's
converter writes them:

  llama_bpe.gguf   general.architecture llama, tokenizer.ggml.model gpt2, pre llama-bpe (Llama 3:
                   ignore_merges, add_bos_token true, eot <|eot_id|>), special tokens CONTROL
  qwen2.gguf       qwen2, gpt2, pre qwen2 (NFC), <|endoftext|>/<|im_start|>/<|im_end|> and
                   <|vision_start|> CONTROL, <tool_call> USER_DEFINED
  smollm.gguf      llama, gpt2, pre smollm (digits one by one), a vocabulary with digit merges
  gpt2.gguf        llama, gpt2, pre gpt-2
  llama_spm.gguf   llama, tokenizer.ggml.model llama (SentencePiece BPE): scores and no merges
                   (transformers builds them from the scores), <0xNN> BYTE tokens, <unk> UNKNOWN,
                   <s> </s> CONTROL, add_space_prefix, add_bos_token true
  llama_spm_nospace.gguf  the same with add_space_prefix false and add_eos_token true

and reference.json: for each file and each line of the corpus, the ids, the ids with special
tokens and both decodings, and the SHA-256 of every id decoded (both ways). With --smollm2 it
writes the same for SmolLM2's real GGUF (and the file's SHA-256) into the committed
tests/models/gguf_tokenizer_smollm2_reference.json. The reference is transformers' own GGUF
tokenizer (AutoTokenizer.from_pretrained(dir, gguf_file=...)), its backend tokenizer edited where
transformers drops what the file states and llama.cpp (like the model's original tokenizer.json)
reads:
  - the pre-tokenizer (and Qwen2's NFC normalizer, Llama 3's ignore_merges) named by
    tokenizer.ggml.pre; transformers applies the GPT-2 regex to every llama-architecture file;
  - the post-processor from tokenizer.ggml.add_bos_token / add_eos_token (transformers adds
    neither);
  - no Strip decoder for byte-level vocabularies (transformers strips a leading space when
    tokenizer.ggml.add_space_prefix is absent);
  - USER_DEFINED tokens as added tokens, and for qwen2 every CONTROL token as a special token
    (transformers adds three fixed ones).
"raw_ids" holds what unedited transformers gives, for the record.
"""
import hashlib
import json
import os
import sys

try:
    import numpy as np
    import gguf
    from gguf import TokenType
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers
    from tokenizers import trainers
    import transformers
    from transformers import AutoTokenizer
except ImportError as error:
    print(f"gguf_tokenizer_reference.py: missing Python package ({error})", file=sys.stderr)
    sys.exit(3)

transformers.logging.set_verbosity_error()

LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                  r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
                 r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

TRAINING_TEXT = [
    "The quick brown fox jumps over the lazy dog. The dog sleeps; the fox runs away.",
    "Tokenizers split text into tokens, and the tokens are mapped to integer ids.",
    "It's a test: we're checking that they'll handle contractions, I'm sure you'd agree.",
    "Numbers like 1234567890, 3.14159 and 2024-05-17 appear in text too. 100 200 300 2024",
    "def tokenize(text):\n    return [vocab[t] for t in text.split()]\n",
    "日本語のテキストです。東京は日本の首都です。中文文本测试。",
    "Café, naïve, résumé, façade, São Paulo, Zürich, Ελληνικά, Русский язык.",
    "Emoji: 😀 👍 🎉 and more text after them.",
    "    indented line\n\ttabbed line\n\n\nblank lines above\r\nwindows newline",
    "Hello world! Hello again, world. Say hello to the world of tokenization.",
]

CORPUS = [
    "Hello world!",
    "The capital of France is Paris.",
    "  leading spaces and trailing  ",
    "It's DON'T we'll THEY'RE I'M",
    "Numbers: 1 12 123 1234 12345 3.14159 2024-05-17, x1y22z333",
    "  2024 and\t\t42",
    "def f(x):\n    return x * 2\n\n\n# comment\r\n",
    "日本語のテキスト、中文，한국어 텍스트",
    "Ελληνικά Русский עברית العربية हिन्दी ไทย",
    "Emoji 😀👍🏽 👨‍👩‍👧 🎉🎉",
    "Cafe\u0301 vs Café, ﬁ ligature, Ａ full width",
    "rare 龘 𠀋 ꙮ characters",
    "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n",
    "<s>[INST] hi [/INST]</s> <unk>",
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>",
    "<tool_call>{\"name\": \"f\"}</tool_call><|vision_start|>",
    "<|endoftext|>",
    "\n",
    " ",
    "",
    "tab\tnewline\nnbsp\u00a0thin\u2009ideographic\u3000end",
    "a" * 40 + " " + "ab" * 20,
]


def training_corpus():
    return [line for _ in range(20) for line in TRAINING_TEXT]


def train_byte_level(split_pattern, size):
    """A byte-level BPE vocabulary and merges as llama.cpp's converter writes them."""
    tokenizer = Tokenizer(models.BPE())
    if split_pattern is None:
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    else:
        tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(split_pattern), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    trainer = trainers.BpeTrainer(vocab_size=size, special_tokens=[],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tokenizer.train_from_iterator(training_corpus(), trainer)
    data = json.loads(tokenizer.to_str())
    vocab = sorted(data["model"]["vocab"].items(), key=lambda item: item[1])
    tokens = [token for token, _ in vocab]
    merges = [f"{a} {b}" for a, b in data["model"]["merges"]]
    return tokens, merges


def start_writer(path, arch):
    writer = gguf.GGUFWriter(path, arch)
    writer.add_block_count(1)
    writer.add_context_length(64)
    writer.add_embedding_length(8)
    writer.add_feed_forward_length(16)
    writer.add_head_count(2)
    writer.add_head_count_kv(2)
    writer.add_layer_norm_rms_eps(1e-6)
    return writer


def finish_writer(writer, n_tokens):
    writer.add_tensor("token_embd.weight", np.zeros((n_tokens, 8), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def write_byte_level(path, arch, pre, tokens, merges, specials, user_defined=(), extra=None):
    """tokens + specials (CONTROL) + user_defined (USER_DEFINED) as one gpt2-model GGUF."""
    all_tokens = tokens + list(specials) + list(user_defined)
    types = ([TokenType.NORMAL] * len(tokens) + [TokenType.CONTROL] * len(specials) +
             [TokenType.USER_DEFINED] * len(user_defined))
    writer = start_writer(path, arch)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre(pre)
    writer.add_token_list(all_tokens)
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    for key, value in (extra or {}).items():
        getattr(writer, key)(all_tokens.index(value) if isinstance(value, str) else value)
    finish_writer(writer, len(all_tokens))


def write_spm(path, add_space_prefix, add_eos):
    """A SentencePiece-style vocabulary: <unk> <s> </s>, 256 byte tokens, pieces with scores."""
    byte_tokens = [f"<0x{b:02X}>" for b in range(256)]
    tokenizer = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True))
    tokenizer.normalizer = normalizers.Sequence([normalizers.Prepend("▁"),
                                                 normalizers.Replace(" ", "▁")])
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="never",
                                                       split=True)
    trainer = trainers.BpeTrainer(vocab_size=900, special_tokens=["<unk>", "<s>", "</s>"] +
                                  byte_tokens, limit_alphabet=120, show_progress=False)
    tokenizer.train_from_iterator(training_corpus(), trainer)
    vocab = sorted(json.loads(tokenizer.to_str())["model"]["vocab"].items(),
                   key=lambda item: item[1])
    tokens = [token for token, _ in vocab] + ["<tool_call>"]
    types, scores = [], []
    for i, token in enumerate(tokens):
        if token == "<unk>":
            types.append(TokenType.UNKNOWN)
        elif token in ("<s>", "</s>"):
            types.append(TokenType.CONTROL)
        elif token in byte_tokens:
            types.append(TokenType.BYTE)
        elif token == "<tool_call>":
            types.append(TokenType.USER_DEFINED)
        else:
            types.append(TokenType.NORMAL)
        # SentencePiece BPE: a piece's score falls with its merge order; specials score 0.
        scores.append(0.0 if types[-1] != TokenType.NORMAL else -float(i))
    writer = start_writer(path, "llama")
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_unk_token_id(0)
    writer.add_add_bos_token(True)
    writer.add_add_eos_token(add_eos)
    writer.add_add_space_prefix(add_space_prefix)
    finish_writer(writer, len(tokens))


def make_files(out):
    llama3_tokens, llama3_merges = train_byte_level(LLAMA3_PATTERN, 800)
    llama3_merges = llama3_merges[:-1]  # its token stays: only ignore_merges produces it
    write_byte_level(os.path.join(out, "llama_bpe.gguf"), "llama", "llama-bpe", llama3_tokens,
                     llama3_merges,
                     ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>",
                      "<|end_header_id|>", "<|eot_id|>"],
                     extra={"add_bos_token_id": "<|begin_of_text|>",
                            "add_eos_token_id": "<|end_of_text|>",
                            "add_eot_token_id": "<|eot_id|>", "add_add_bos_token": True})
    qwen_tokens, qwen_merges = train_byte_level(QWEN2_PATTERN, 800)
    write_byte_level(os.path.join(out, "qwen2.gguf"), "qwen2", "qwen2", qwen_tokens, qwen_merges,
                     ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>"],
                     user_defined=["<tool_call>", "</tool_call>"],
                     extra={"add_eos_token_id": "<|im_end|>", "add_pad_token_id": "<|endoftext|>",
                            "add_bos_token_id": "<|endoftext|>", "add_add_bos_token": False})
    gpt2_tokens, gpt2_merges = train_byte_level(None, 700)
    for name, pre in (("smollm.gguf", "smollm"), ("gpt2.gguf", "gpt-2")):
        write_byte_level(os.path.join(out, name), "llama", pre, gpt2_tokens, gpt2_merges,
                         ["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
                         extra={"add_bos_token_id": "<|im_start|>",
                                "add_eos_token_id": "<|im_end|>",
                                "add_unk_token_id": "<|endoftext|>",
                                "add_add_bos_token": False})
    write_spm(os.path.join(out, "llama_spm.gguf"), add_space_prefix=True, add_eos=False)
    write_spm(os.path.join(out, "llama_spm_nospace.gguf"), add_space_prefix=False, add_eos=True)


def metadata(path):
    reader = gguf.GGUFReader(path)
    out = {}
    for key, field in reader.fields.items():
        if key.startswith("tokenizer.") or key == "general.architecture":
            out[key] = field.contents()
    return out


PRE_TOKENIZERS = {
    "gpt-2": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
              "use_regex": True},
    "smollm": {"type": "Sequence", "pretokenizers": [
        {"type": "Digits", "individual_digits": True},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}]},
    "llama-bpe": {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": LLAMA3_PATTERN}, "behavior": "Isolated",
         "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
         "use_regex": False}]},
    "qwen2": {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": QWEN2_PATTERN}, "behavior": "Isolated",
         "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
         "use_regex": False}]},
}


def corrected(backend_json, meta):
    """transformers' backend tokenizer with what the file states and transformers drops."""
    data = json.loads(backend_json)
    tokens = meta["tokenizer.ggml.tokens"]
    types = meta.get("tokenizer.ggml.token_type", [])
    model_type = meta["tokenizer.ggml.model"]
    pre = meta.get("tokenizer.ggml.pre")
    if model_type == "gpt2":
        data["pre_tokenizer"] = PRE_TOKENIZERS[pre]
        if pre == "qwen2":
            data["normalizer"] = {"type": "NFC"}
        if pre == "llama-bpe":
            data["model"]["ignore_merges"] = True
        # A byte-level vocabulary's text keeps its leading space (transformers strips one when
        # tokenizer.ggml.add_space_prefix is absent, a SentencePiece setting).
        if data["decoder"]["type"] == "Sequence":
            data["decoder"]["decoders"] = [d for d in data["decoder"]["decoders"]
                                           if d["type"] != "Strip"]
    present = {t["content"] for t in data["added_tokens"]}
    vocab = data["model"]["vocab"]
    arch = meta["general.architecture"]
    for i, kind in enumerate(types):
        special = kind == TokenType.CONTROL
        wanted = kind == TokenType.USER_DEFINED or (special and arch in ("qwen2", "qwen3"))
        if wanted and tokens[i] not in present:
            data["added_tokens"].append({"id": vocab[tokens[i]], "content": tokens[i],
                                         "single_word": False, "lstrip": False, "rstrip": False,
                                         "normalized": False, "special": special})
            present.add(tokens[i])
    default_bos = model_type == "llama" or pre == "llama-bpe"
    add_bos = meta.get("tokenizer.ggml.add_bos_token", default_bos)
    add_eos = meta.get("tokenizer.ggml.add_eos_token", False)
    single, specials = [], {}
    for flag, key, where in ((add_bos, "tokenizer.ggml.bos_token_id", 0),
                             (add_eos, "tokenizer.ggml.eos_token_id", 1)):
        if flag:
            token = tokens[meta[key]]
            specials[token] = {"id": token, "ids": [meta[key]], "tokens": [token]}
            single.append((where, {"SpecialToken": {"id": token, "type_id": 0}}))
    items = [item for where, item in single if where == 0]
    items.append({"Sequence": {"id": "A", "type_id": 0}})
    items += [item for where, item in single if where == 1]
    data["post_processor"] = {"type": "TemplateProcessing", "single": items,
                              "pair": items + [{"Sequence": {"id": "B", "type_id": 1}}],
                              "special_tokens": specials}
    return Tokenizer.from_str(json.dumps(data))


def reference_of(path):
    directory, name = os.path.split(os.path.abspath(path))
    hf = AutoTokenizer.from_pretrained(directory, gguf_file=name)
    meta = metadata(path)
    fixed = corrected(hf.backend_tokenizer.to_str(), meta)
    cases = []
    for text in CORPUS:
        ids = fixed.encode(text, add_special_tokens=False).ids
        with_special = fixed.encode(text, add_special_tokens=True).ids
        cases.append({
            "text": text, "ids": ids, "ids_special": with_special,
            "raw_ids": hf.encode(text, add_special_tokens=False),
            "decoded": fixed.decode(with_special, skip_special_tokens=False),
            "decoded_skip": fixed.decode(with_special, skip_special_tokens=True),
        })
    # Every id decoded alone and with its neighbours (special tokens and byte tokens included).
    every = list(range(len(meta["tokenizer.ggml.tokens"])))
    def digest(text):
        return hashlib.sha256(text.encode("utf-8")).hexdigest()
    return {"path": os.path.abspath(path), "cases": cases,
            "all_ids_decoded_sha256": digest(fixed.decode(every, skip_special_tokens=False)),
            "all_ids_decoded_skip_sha256": digest(fixed.decode(every, skip_special_tokens=True))}


def main():
    if sys.argv[1] == "--smollm2":
        # The committed reference for SmolLM2's real file (transformers converts its 49,152
        # tokens in half a minute here, so the test does not run it).
        path, out_json = sys.argv[2], sys.argv[3]
        result = reference_of(path)
        del result["path"]
        with open(path, "rb") as f:
            result["gguf_sha256"] = hashlib.sha256(f.read()).hexdigest()
        with open(out_json, "w", encoding="utf-8") as f:
            json.dump(result, f, ensure_ascii=False, indent=1)
        return
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    make_files(out)
    files = ["llama_bpe.gguf", "qwen2.gguf", "smollm.gguf", "gpt2.gguf", "llama_spm.gguf",
             "llama_spm_nospace.gguf"]
    result = {name: reference_of(os.path.join(out, name)) for name in files}
    with open(os.path.join(out, "reference.json"), "w", encoding="utf-8") as f:
        json.dump(result, f, ensure_ascii=False, indent=1)


if __name__ == "__main__":
    main()
