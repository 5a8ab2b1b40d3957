#!/usr/bin/env python3
"""Reference encodings and decodings from Hugging Face `tokenizers` for the C++ tokenizer test.

For each tokenizer.json given, encodes an embedded corpus (Unicode scripts, accents, combining
marks, emoji with ZWJ sequences, whitespace runs, tabs/newlines, digits, punctuation, the
tokenizer's own added/special tokens inside text) with and without special tokens, decodes the
ids with and without skip_special_tokens, and replays tokenizers.decoders.DecodeStream token by
token. Random id sequences (fixed seed) exercise decoding of broken UTF-8 and byte tokens.

Usage: tokenize_reference.py OUTPUT.json TOKENIZER.json [TOKENIZER.json ...]
Output: {"<file name>": {"added_tokens": {content: id}, "vocab_size": n,
         "texts": [{"text", "ids", "ids_no_special", "decoded", "decoded_skip",
                    "stream", "stream_skip"}],
         "random_ids": [{"ids", "decoded", "decoded_skip", "stream", "stream_skip"}]}}
where "stream" lists DecodeStream.step results (null when it returned None; a final
{"error": message} when step raised, e.g. InvalidPrefix after broken UTF-8).
"""
import json
import os
import random
import sys

try:
    from tokenizers import Tokenizer
    from tokenizers.decoders import DecodeStream
except ImportError as error:  # the C++ test reports this line
    print(f"tokenize_reference.py: the Python package 'tokenizers' is missing or too old "
          f"({error}); install tokenizers >= 0.21 in the interpreter given by REE_PYTHON",
          file=sys.stderr)
    sys.exit(3)

CORPUS = [
    "",
    " ",
    "x",
    "\n",
    "Hello world! This is a test.",
    "The quick brown fox jumps over the lazy dog.",
    "  leading spaces and trailing   ",
    "a  b   c    d\t\t\te\u00a0nbsp\u3000ideographic space\u2003em space",
    "tabs\tand\nnewlines\r\n\n\nmultiple\n\n \n  \n",
    "Numbers: 1234567890 3.14159 1,000,000 and 42nd 7 77 777 7777 ٣٤٥ ²³",
    "Punctuation!!! ??? ... --- (parens) [brackets] {braces} <angle> 'quotes' \"double\" «»",
    "Contractions: I'm, you're, it's, we've, they'll, he'd, I'M, YOU'RE, IT'S, don't",
    "日本語のテキストです。東京は日本の首都です。中文文本测试。한국어 텍스트입니다.",
    "Café naïve résumé façade São Paulo Zürich Ångström",
    "Decomposed: e\u0301 a\u0308 n\u0303 o\u0302\u0323 Z\u0335\u0321\u0353a\u0336\u0322l\u0337",
    "Emoji: 👍🏽 👨‍👩‍👧‍👦 🏳️‍🌈 😀😃😄 ❤️ 🇯🇵 🧑🏿‍💻",
    "Привет мир. Γειά σου κόσμε. مرحبا بالعالم. שלום עולם. नमस्ते दुनिया. ສະບາຍດີ",
    "def f(x):\n    return x**2  # comment\n\tif x != y: pass\n",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    "∑ ∫ √ ≈ ≠ ∞ 𝔸𝔹ℂ ½ ™ © ®",
    "Rare: ꙮ 𓀀 🦜 ㊙ 〠",
    "zero\u200bwidth\u200djoiner\u200c\ufeffbom",
    "Say hello world to everyone, hello  world, Hello world.",
    "Hello   <mask> world <rs>   next [SW] x[SW] [SW]y <mask><mask>",
    "I'm here.  It's 2024-05-17T12:34:56Z; the price is $1,234.56 (≈ €1.1k).",
    "URLs: https://example.com/path?query=1&x=y#frag and emails a.b@c.de",
    "\t\n\r\u000b\u000c\u0085\u2028\u2029 mixed control whitespace",
    "Ｆｕｌｌｗｉｄｔｈ ＡＢＣ １２３ ｶﾀｶﾅ",
    # Unicode whitespace runs: the regexes must treat them as \s (PCRE2_UCP), not as punctuation.
    "x\u3000\u3000y 1\u2003\u20032\n\u00a0\u00a0\u00a0z \u2009\u2009\u2009\u2009.",
    "a\u3000 <mask>b c\u00a0<rs>\u2003 d [SW]\u3000e",
]


def special_texts(tokenizer):
    """Texts with the tokenizer's added tokens inside, next to spaces and other tokens."""
    contents = sorted(tokenizer.get_added_tokens_decoder().items())
    texts = []
    for _, token in contents:
        t = token.content
        texts.append(f"{t}Hello{t} world {t}\n{t}{t} tail")
        texts.append(f"  {t}  spaced  {t}")
    if contents:
        all_tokens = "".join(token.content for _, token in contents)
        texts.append(f"all: {all_tokens} end")
    return texts


def vocabulary_texts(tokenizer):
    """The last BPE tokens alone and joined: the newest merges (and ignore_merges) at work."""
    added = set(tokenizer.get_added_tokens_decoder())
    model_ids = [i for i in sorted(tokenizer.get_vocab().values()) if i not in added]
    last = [tokenizer.decode([i]) for i in model_ids[-12:]]
    return last + ["".join(last), " ".join(last)]


def stream(tokenizer, ids, skip):
    decoder = DecodeStream(skip_special_tokens=skip)
    steps = []
    for i in ids:
        try:
            steps.append(decoder.step(tokenizer, i))
        except Exception as error:  # e.g. "Invalid prefix": lossy decoding is not prefix-stable
            steps.append({"error": str(error)})
            break
    return steps


def decodings(tokenizer, ids):
    return {
        "decoded": tokenizer.decode(ids, skip_special_tokens=False),
        "decoded_skip": tokenizer.decode(ids, skip_special_tokens=True),
        "stream": stream(tokenizer, ids, False),
        "stream_skip": stream(tokenizer, ids, True),
    }


def reference(path):
    tokenizer = Tokenizer.from_file(path)
    vocab_size = tokenizer.get_vocab_size(with_added_tokens=True)
    out = {
        "added_tokens": {t.content: i for i, t in tokenizer.get_added_tokens_decoder().items()},
        "vocab_size": vocab_size,
        "texts": [],
        "random_ids": [],
    }
    for text in CORPUS + special_texts(tokenizer) + vocabulary_texts(tokenizer):
        ids = tokenizer.encode(text, add_special_tokens=True).ids
        entry = {"text": text, "ids": ids,
                 "ids_no_special": tokenizer.encode(text, add_special_tokens=False).ids}
        entry.update(decodings(tokenizer, ids))
        out["texts"].append(entry)
    rng = random.Random(20240517)
    # Byte tokens (ids of single bytes) are favoured so that sequences split UTF-8 characters.
    # Sorted: get_vocab() comes from a Rust HashMap whose order changes from run to run, and the
    # random sequences must be the same in every run.
    byte_ids = sorted(i for tok, i in tokenizer.get_vocab().items()
                      if tok.startswith("<0x") or len(tok) == 1)
    for n in range(40):
        length = rng.randint(1, 24)
        pool = byte_ids if n % 2 else list(range(vocab_size))
        ids = [rng.choice(pool) for _ in range(length)]
        entry = {"ids": ids}
        entry.update(decodings(tokenizer, ids))
        out["random_ids"].append(entry)
    return out


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    result = {os.path.basename(p): reference(p) for p in sys.argv[2:]}
    with open(sys.argv[1], "w", encoding="utf-8") as f:
        json.dump(result, f, ensure_ascii=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
