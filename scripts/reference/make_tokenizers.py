#!/usr/bin/env python3
"""Builds small test tokenizer.json files with Hugging Face `tokenizers` (nothing downloaded).

Each tokenizer is a BPE model trained on the embedded corpus below and wired like a real model
family, so the C++ tokenizer (models/src/tokenizer*.cpp) can be compared with `tokenizers` on the
same files:

  gpt2.json               ByteLevel(use_regex=true) pre-tokenizer, ByteLevel decoder and
                          post-processor, <|endoftext|> plus added tokens using lstrip, rstrip and
                          single_word; merges as [a, b] pairs.
  gpt2_legacy.json        the same model with merges as "a b" strings and add_prefix_space=true.
  llama3.json             Llama 3 pipeline: Sequence[Split(Llama 3 regex, Isolated),
                          ByteLevel(use_regex=false)], ignore_merges, <|begin_of_text|> BOS via
                          TemplateProcessing, Llama 3 special tokens.
  llama2.json             Llama 2 / Mistral SentencePiece-style BPE: normalizer
                          Sequence[Prepend("▁"), Replace(" ", "▁")], no pre-tokenizer,
                          byte_fallback with <0x00>..<0xFF>, decoder
                          Sequence[Replace, ByteFallback, Fuse, Strip], <s> BOS.
  llama2_metaspace.json   the same model with the newer Metaspace(prepend_scheme="first",
                          split=false) pre-tokenizer and a Metaspace decoder.
  split_<behavior>[_invert].json
                          the GPT-2 model behind Sequence[Split(regex that also matches the
                          empty string, behavior, invert), ByteLevel(use_regex=false)], for each
                          of the five behaviors with and without invert: empty matches are split
                          points in tokenizers (Oniguruma's find_iter), which REE must reproduce.
  replace_empty.json      the GPT-2 model with a Replace decoder whose regex matches the empty
                          string. (A Replace *normalizer* like that makes tokenizers 0.23 panic
                          on many texts; REE refuses it.)

Usage: make_tokenizers.py OUTPUT_DIR
"""
import json
import os
import sys

try:
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers
    from tokenizers import pre_tokenizers, processors, trainers
except ImportError as error:  # the C++ test reports this line
    print(f"make_tokenizers.py: the Python package 'tokenizers' is missing ({error}); "
          f"install it in the interpreter given by REE_PYTHON", file=sys.stderr)
    sys.exit(3)

LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                  r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

TRAINING_TEXT = [
    "The quick brown fox jumps over the lazy dog. The dog sleeps; the fox runs away.",
    "Tokenizers split text into tokens, and the tokens are mapped to integer ids.",
    "Large language models read tokens, predict the next token, and write text back.",
    "It's a test: we're checking that they'll handle contractions, I'm sure you'd agree.",
    "Numbers like 1234567890, 3.14159 and 2024-05-17 appear in text too.",
    "def tokenize(text):\n    return [vocab[t] for t in text.split()]\n",
    "日本語のテキストです。東京は日本の首都です。",
    "中文文本测试。我们正在测试分词器。",
    "한국어 텍스트입니다. 안녕하세요.",
    "Café, naïve, résumé, façade, São Paulo, Zürich, Ångström, Ελληνικά, Русский язык.",
    "Привет мир! Как дела? Γειά σου κόσμε. مرحبا بالعالم",
    "Emoji: 😀 😃 😄 👍 🎉 and more text after them.",
    "    indented line\n\ttabbed line\n\n\nblank lines above\r\nwindows newline",
    "Hello world! Hello again, world. Say hello to the world of tokenization.",
    "the the the and and of of to to in in is is that that it it",
    # Unicode whitespace runs, so that merges exist whose use depends on \s being Unicode-aware.
    "wide\u3000\u3000\u3000\u3000\nnbsp\u00a0\u00a0\u00a0\u00a0\nthin\u2009\u2009\u2009\n",
]


def training_corpus():
    # Repeated so that BPE learns merges for every script of the corpus.
    return [line for _ in range(20) for line in TRAINING_TEXT]


def save(tokenizer_json, path):
    # Reload through `tokenizers` to make sure the edited JSON is valid for it.
    Tokenizer.from_str(json.dumps(tokenizer_json))
    with open(path, "w", encoding="utf-8") as f:
        json.dump(tokenizer_json, f, ensure_ascii=False, indent=1)


def make_gpt2(out_dir):
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=700, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tokenizer.train_from_iterator(training_corpus(), trainer)
    tokenizer.add_special_tokens([AddedToken("<mask>", lstrip=True, special=True,
                                             normalized=False)])
    tokenizer.add_special_tokens([AddedToken("<rs>", rstrip=True, special=True,
                                             normalized=False)])
    tokenizer.add_tokens([AddedToken("[SW]", single_word=True, normalized=False)])
    tokenizer.add_tokens([AddedToken("hello world", normalized=True)])
    data = json.loads(tokenizer.to_str())
    save(data, os.path.join(out_dir, "gpt2.json"))

    legacy = json.loads(json.dumps(data))
    legacy["model"]["merges"] = [f"{a} {b}" for a, b in data["model"]["merges"]]
    legacy["pre_tokenizer"]["add_prefix_space"] = True
    save(legacy, os.path.join(out_dir, "gpt2_legacy.json"))


def make_llama3(out_dir):
    tokenizer = Tokenizer(models.BPE(ignore_merges=True))
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False),
    ])
    tokenizer.decoder = decoders.ByteLevel()
    specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>",
                "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]
    trainer = trainers.BpeTrainer(vocab_size=800, special_tokens=[],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tokenizer.train_from_iterator(training_corpus(), trainer)
    # Like Llama 3, the special tokens come after the BPE vocabulary.
    tokenizer.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in specials])
    bos_id = tokenizer.token_to_id("<|begin_of_text|>")
    tokenizer.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(single="<|begin_of_text|> $A",
                                      pair="<|begin_of_text|> $A <|begin_of_text|> $B:1",
                                      special_tokens=[("<|begin_of_text|>", bos_id)]),
    ])
    data = json.loads(tokenizer.to_str())
    data["model"]["ignore_merges"] = True
    # Drop the last merge: its token stays in the vocabulary, so only ignore_merges (a whole
    # pre-token found in the vocabulary) still produces it.
    data["model"]["merges"] = data["model"]["merges"][:-1]
    save(data, os.path.join(out_dir, "llama3.json"))


def make_llama2(out_dir):
    byte_tokens = [f"<0x{b:02X}>" for b in range(256)]
    tokenizer = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    # Training splits on ▁ like SentencePiece does; the saved pipeline has no pre-tokenizer.
    tokenizer.normalizer = normalizers.Sequence([normalizers.Prepend("▁"),
                                                 normalizers.Replace(" ", "▁")])
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="never",
                                                       split=True)
    trainer = trainers.BpeTrainer(vocab_size=900,
                                  special_tokens=["<unk>", "<s>", "</s>"] + byte_tokens,
                                  limit_alphabet=120, show_progress=False)
    tokenizer.train_from_iterator(training_corpus(), trainer)
    tokenizer.add_tokens([AddedToken("hello world", normalized=True)])
    data = json.loads(tokenizer.to_str())
    # Byte tokens are plain vocabulary entries in Llama 2, not added tokens.
    data["added_tokens"] = [t for t in data["added_tokens"] if t["content"] not in byte_tokens]
    data["pre_tokenizer"] = None
    data["model"].update({"unk_token": "<unk>", "byte_fallback": True, "fuse_unk": True})
    data["decoder"] = json.loads(decoders.Sequence([
        decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
        decoders.Strip(content=" ", left=1, right=0)]).__getstate__())
    data["post_processor"] = json.loads(processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", 1)]).__getstate__())
    save(data, os.path.join(out_dir, "llama2.json"))

    metaspace = json.loads(json.dumps(data))
    metaspace["normalizer"] = None
    metaspace["pre_tokenizer"] = json.loads(pre_tokenizers.Metaspace(
        replacement="▁", prepend_scheme="first", split=False).__getstate__())
    metaspace["decoder"] = json.loads(decoders.Sequence([
        decoders.Metaspace(replacement="▁", prepend_scheme="first"), decoders.ByteFallback(),
        decoders.Fuse()]).__getstate__())
    save(metaspace, os.path.join(out_dir, "llama2_metaspace.json"))


# Matches vowel runs and, in between, the empty string (and before each capital letter).
EMPTY_MATCHING_PATTERN = r"[aeiou]*|(?=[A-Z])"
SPLIT_BEHAVIORS = ["isolated", "removed", "merged_with_previous", "merged_with_next", "contiguous"]


def split_file_names():
    return [f"split_{b}{'_invert' if invert else ''}.json"
            for b in SPLIT_BEHAVIORS for invert in (False, True)]


def make_empty_match(out_dir):
    with open(os.path.join(out_dir, "gpt2.json"), encoding="utf-8") as f:
        gpt2 = json.load(f)
    for behavior in SPLIT_BEHAVIORS:
        for invert in (False, True):
            data = json.loads(json.dumps(gpt2))
            data["pre_tokenizer"] = json.loads(pre_tokenizers.Sequence([
                pre_tokenizers.Split(Regex(EMPTY_MATCHING_PATTERN), behavior=behavior,
                                     invert=invert),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
            ]).__getstate__())
            name = f"split_{behavior}{'_invert' if invert else ''}.json"
            save(data, os.path.join(out_dir, name))
    data = json.loads(json.dumps(gpt2))
    data["decoder"] = json.loads(decoders.Sequence([
        decoders.ByteLevel(), decoders.Replace(Regex("x*"), "-")]).__getstate__())
    save(data, os.path.join(out_dir, "replace_empty.json"))


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    make_gpt2(out_dir)
    make_llama3(out_dir)
    make_llama2(out_dir)
    make_empty_match(out_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
