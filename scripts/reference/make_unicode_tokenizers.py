#!/usr/bin/env python3
"""Unicode-normalizing and Unigram tokenizer.json files, and their `tokenizers` reference data.

Builds small tokenizers with Hugging Face `tokenizers` (nothing downloaded), wired like real
files that use Unicode normalization forms or the Unigram model, then writes what `tokenizers`
gives on a multilingual corpus (tokenize_reference.py's corpus plus UNICODE_CORPUS below):

  unigram_nfkc.json          Unigram (SentencePiece-style, trained here) behind NFKC and a
                             Metaspace pre-tokenizer, Metaspace decoder, <s> BOS template.
  unigram_byte_fallback.json Llama-style Unigram: Sequence[NFC, Prepend, Replace] normalizer,
                             no pre-tokenizer, byte_fallback with <0x00>..<0xFF> pieces, decoder
                             Sequence[Replace, ByteFallback, Fuse, Strip].
  unigram_whitespace.json    T5-style Unigram: Sequence[Nmt, NFKC, Replace(runs of spaces)]
                             normalizer, Sequence[WhitespaceSplit, Metaspace] pre-tokenizer.
  bpe_nfc_byte_fallback.json Llama 2-style BPE with byte_fallback behind
                             Sequence[NFC, Prepend, Replace] (a small alphabet, so that many
                             characters fall back to bytes).
  qwen2_nfc.json             Qwen2-style byte-level BPE: NFC, Split(Qwen2 regex) + ByteLevel.
  bytelevel_nfkd_lower.json  byte-level BPE behind Sequence[NFKD, StripAccents, Lowercase,
                             Strip]; bytelevel_nfd.json the same behind NFD only.
  unigram_precompiled.json   T5/ALBERT-style Unigram from a SentencePiece model trained here:
                             Precompiled(nmt_nfkc charsmap) + Replace, Metaspace;
                             unigram_precompiled_cf.json the same with nmt_nfkc_cf.
  unigram_first.json         Metaspace(prepend_scheme="first") behind normalizers that remove
                             the first character of some texts (Nmt, StripAccents, Replace).
  unigram_random.json, unigram_ties.json
                             Unigram models of 20,000 random pieces (random scores; scores from
                             21 values, for ties), with the ids of a 100 kB random text.

Usage: make_unicode_tokenizers.py OUTPUT_DIR
Writes the files and OUTPUT_DIR/reference.json (tokenize_reference.py's format).
       make_unicode_tokenizers.py --fuzz-data FILE
Writes the Unigram tokenizer of tests/fuzz/data/unigram.json (fuzz_tokenizer_encode).
"""
import io
import json
import os
import random
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_tokenizers  # noqa: E402  (same folder)
import tokenize_reference  # noqa: E402

from tokenizers import Regex, Tokenizer, decoders, models, normalizers  # noqa: E402
from tokenizers import pre_tokenizers, processors, trainers  # noqa: E402

try:
    import sentencepiece  # noqa: E402
except ImportError as error:  # the C++ test reports this line
    sys.exit(f"make_unicode_tokenizers.py: the Python package 'sentencepiece' is missing ({error}); "
             f"install requirements.txt in the interpreter given by REE_PYTHON")

UNICODE_CORPUS = [
    "ﬁne ﬂow oﬀer eﬃcient ﬄ ﬆ office",
    "Ｆｕｌｌｗｉｄｔｈ １２３４５６７８９０ ＡＢＣ ｱｲｳ ﾊﾟﾝ ｶﾞ",
    "한국어 텍스트 \u1112\u1161\u11ab\u1100\u116e\u11a8\u110b\u1165 (decomposed jamo)",
    "e\u0301 é A\u030a Å \u212b \u2126 Ω \u1e9b\u0323 q\u0307\u0323",
    "العربية: مرحبا بالعالم، كيف حالك؟ ١٢٣ \ufefb \ufe8d\ufe8e",
    "中文测试，日本語の文章。㍿ ㌔ ㈱ ⑴ ①②③ ㊙",
    "👩\u200d💻 👨\u200d👩\u200d👧\u200d👦 🏳\ufe0f\u200d🌈 👍🏿 🇫🇷 ❤\ufe0f",
    "int main() {\n\tprintf(\"%d\\n\", x);\n\treturn 0;\n}\n",
    "İstanbul ΣΊΣΥΦΟΣ ǅungla Straße ẞ Ⅻ ⅻ ÀÉÎÕÜ",
    "x² + y³ = z⁴, ½ ¼ ™ ℃ ㎏ ℡ Ⅸ",
    "Tiếng Việt có dấu: ệ ộ ữ e\u0323\u0302 o\u0302\u0323",
    "क्षत्रिय नमस्ते ภาษาไทย Ελληνικά ά α\u0301",
    "\u00a0\u2002 padded \u3000text\u2003 \t",
    "ctrl\u0001\u0008\u000b\u001f\u007f x\u200bzero\ufeffbom\u2581lower\u2028line",
    "literal <0x41> and <unk> and <s> text ▁▁ ▁x",
    "mixed ﬁ１２ é한 ①e\u0301",
    # Newer than tokenizers' normalization tables, or cased/marked differently by Rust's std than
    # by utf8proc (tokenizer_unicode_tables.cpp).
    "new: \u32ff \ua7f2 \U00011935\U00011930 \U00011938 \ua7cb \U00010d50 a\u0898\u0301 "
    "e\u1dfa\u0316 \u1ac1x\u0301 \U0001e030 ä\u1df6",
    # Normalizers that remove the first character: Metaspace(prepend_scheme="first") then sees a
    # text that no longer starts at offset 0 (unigram_first.json).
    "\x01\x02start", "\tstart", "\u0301start", "abstart", "qstart", "zstart", "  start",
]

QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+"
                 r"[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
BYTE_TOKENS = [f"<0x{b:02X}>" for b in range(256)]


def training_corpus():
    return make_tokenizers.training_corpus() + UNICODE_CORPUS[:8] * 5


def state(component):
    return json.loads(component.__getstate__())


def train_unigram(normalizer, pre_tokenizer, vocab_size):
    tokenizer = Tokenizer(models.Unigram())
    tokenizer.normalizer = normalizer
    tokenizer.pre_tokenizer = pre_tokenizer
    trainer = trainers.UnigramTrainer(vocab_size=vocab_size, unk_token="<unk>",
                                      special_tokens=["<unk>", "<s>", "</s>"],
                                      max_piece_length=8, show_progress=False)
    tokenizer.train_from_iterator(training_corpus(), trainer)
    return json.loads(tokenizer.to_str())


def bos_template():
    return state(processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B",
                                               special_tokens=[("<s>", 1)]))


def make_unigram_first(out_dir):
    """Metaspace(prepend_scheme="first") behind normalizers that may remove the first character
    (Nmt, StripAccents, Replace removing one or two characters or replacing one)."""
    first = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first")
    data = train_unigram(normalizers.NFKC(), first, 300)
    data["normalizer"] = state(normalizers.Sequence([
        normalizers.Nmt(), normalizers.StripAccents(), normalizers.Replace("ab", "c"),
        normalizers.Replace("q", ""), normalizers.Replace("z", "yy")]))
    data["decoder"] = state(decoders.Metaspace(replacement="▁", prepend_scheme="first"))
    make_tokenizers.save(data, os.path.join(out_dir, "unigram_first.json"))


def make_unigrams(out_dir):
    metaspace = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    data = train_unigram(normalizers.NFKC(), metaspace, 400)
    data["decoder"] = state(decoders.Metaspace(replacement="▁", prepend_scheme="always"))
    data["post_processor"] = bos_template()
    make_tokenizers.save(data, os.path.join(out_dir, "unigram_nfkc.json"))

    data = train_unigram(normalizers.NFC(), metaspace, 300)
    data["normalizer"] = state(normalizers.Sequence([
        normalizers.NFC(), normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")]))
    data["pre_tokenizer"] = None
    # Byte pieces as in SentencePiece byte_fallback models: in the vocabulary, score 0.
    data["model"]["vocab"] += [[token, 0.0] for token in BYTE_TOKENS]
    data["model"]["byte_fallback"] = True
    data["decoder"] = state(decoders.Sequence([
        decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
        decoders.Strip(content=" ", left=1, right=0)]))
    data["post_processor"] = bos_template()
    make_tokenizers.save(data, os.path.join(out_dir, "unigram_byte_fallback.json"))

    t5_normalizer = normalizers.Sequence([
        normalizers.Nmt(), normalizers.NFKC(), normalizers.Replace(Regex(" {2,}"), " ")])
    t5_pre = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(), metaspace])
    data = train_unigram(t5_normalizer, t5_pre, 350)
    data["decoder"] = state(decoders.Metaspace(replacement="▁", prepend_scheme="always"))
    make_tokenizers.save(data, os.path.join(out_dir, "unigram_whitespace.json"))


RANDOM_ALPHABET = "abcdefghijklmnopqrstuvwxyzéü日本語▁"


def make_random_unigrams(out_dir):
    """Unigram models with 20,000 random pieces and random scores over a small alphabet, and a
    100 kB random text: the Viterbi search meets many overlapping candidates. unigram_ties.json
    draws its scores from 21 values, so that equal path scores are frequent."""
    for name, ties in (("unigram_random.json", False), ("unigram_ties.json", True)):
        rng = random.Random(20240517)
        pieces = set()
        while len(pieces) < 20000:
            pieces.add("".join(rng.choice(RANDOM_ALPHABET) for _ in range(rng.randint(1, 8))))
        score = (lambda: -float(rng.randint(0, 20))) if ties else (lambda: -rng.random() * 20)
        vocab = [["<unk>", 0.0]] + [[piece, score()] for piece in sorted(pieces)]
        data = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [],
                "normalizer": None, "pre_tokenizer": None, "post_processor": None,
                "decoder": None, "model": {"type": "Unigram", "unk_id": 0,
                                           "byte_fallback": False, "vocab": vocab}}
        make_tokenizers.save(data, os.path.join(out_dir, name))


def random_text():
    rng = random.Random(7)
    return "".join(rng.choice(RANDOM_ALPHABET + " x") for _ in range(100000))


def proto_fields(data):
    """(field number, value) of a protobuf message: varints, length-delimited bytes, fixed32."""
    def varint(at):
        value, shift = 0, 0
        while True:
            byte = data[at]
            value, shift, at = value | (byte & 0x7F) << shift, shift + 7, at + 1
            if byte < 0x80:
                return value, at
    at = 0
    while at < len(data):
        key, at = varint(at)
        wire = key & 7
        if wire == 0:
            value, at = varint(at)
        elif wire == 2:
            length, at = varint(at)
            value, at = data[at:at + length], at + length
        elif wire == 5:
            value, at = data[at:at + 4], at + 4
        else:
            value, at = data[at:at + 8], at + 8
        yield key >> 3, value


def train_sentencepiece(rule):
    """A SentencePiece Unigram model trained here with the normalization rule `rule`: its pieces
    as [piece, score], the index of <unk>, and its precompiled_charsmap."""
    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(training_corpus()), model_writer=model, vocab_size=250,
        model_type="unigram", normalization_rule_name=rule, minloglevel=2)
    vocab, unk_id, charsmap = [], 0, b""
    for number, value in proto_fields(model.getvalue()):
        if number == 1:  # ModelProto.pieces: piece (1), score (2, float), type (3; 2 = UNKNOWN)
            piece = dict(proto_fields(value))
            if piece.get(3) == 2:
                unk_id = len(vocab)
            score = struct.unpack("<f", piece.get(2, bytes(4)))[0]
            vocab.append([piece[1].decode("utf-8"), score])
        elif number == 3:  # ModelProto.normalizer_spec: precompiled_charsmap (2)
            charsmap = dict(proto_fields(value)).get(2, b"")
    return vocab, unk_id, charsmap


def make_precompiled(out_dir):
    """T5/ALBERT-style files as transformers writes them from a SentencePiece model: the
    Precompiled normalizer (nmt_nfkc, and nmt_nfkc_cf which also case-folds) before a Replace of
    space runs, Metaspace, the Unigram pieces and scores of the model."""
    for name, rule in (("unigram_precompiled.json", "nmt_nfkc"),
                       ("unigram_precompiled_cf.json", "nmt_nfkc_cf")):
        vocab, unk_id, charsmap = train_sentencepiece(rule)
        data = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [],
                "normalizer": state(normalizers.Sequence([
                    normalizers.Precompiled(charsmap),
                    normalizers.Replace(Regex(" {2,}"), " ")])),
                "pre_tokenizer": state(pre_tokenizers.Metaspace(replacement="▁",
                                                                prepend_scheme="always")),
                "post_processor": None,
                "decoder": state(decoders.Metaspace(replacement="▁", prepend_scheme="always")),
                "model": {"type": "Unigram", "unk_id": unk_id, "byte_fallback": False,
                          "vocab": vocab}}
        make_tokenizers.save(data, os.path.join(out_dir, name))


def train_bpe(normalizer, pre_tokenizer, trainer):
    tokenizer = Tokenizer(models.BPE())
    tokenizer.normalizer = normalizer
    tokenizer.pre_tokenizer = pre_tokenizer
    tokenizer.train_from_iterator(training_corpus(), trainer)
    return json.loads(tokenizer.to_str())


def byte_level_trainer():
    return trainers.BpeTrainer(vocab_size=600, special_tokens=["<|endoftext|>"],
                               initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                               show_progress=False)


def make_bpes(out_dir):
    trainer = trainers.BpeTrainer(vocab_size=500, special_tokens=["<unk>", "<s>", "</s>"],
                                  limit_alphabet=90, show_progress=False)
    data = train_bpe(normalizers.Sequence([normalizers.NFC(), normalizers.Prepend("▁"),
                                           normalizers.Replace(" ", "▁")]),
                     pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="never"), trainer)
    data["pre_tokenizer"] = None
    # Llama 2 lists the byte tokens right after <unk> <s> </s>; appended here (ids stay dense).
    next_id = len(data["model"]["vocab"])
    for token in BYTE_TOKENS:
        data["model"]["vocab"].setdefault(token, next_id)
        next_id = max(next_id, data["model"]["vocab"][token] + 1)
    data["model"].update({"unk_token": "<unk>", "byte_fallback": True, "fuse_unk": True})
    data["decoder"] = state(decoders.Sequence([
        decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
        decoders.Strip(content=" ", left=1, right=0)]))
    data["post_processor"] = bos_template()
    make_tokenizers.save(data, os.path.join(out_dir, "bpe_nfc_byte_fallback.json"))

    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    qwen_pre = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_PATTERN), behavior="isolated", invert=False), byte_level])
    data = train_bpe(normalizers.NFC(), qwen_pre, byte_level_trainer())
    data["decoder"] = state(decoders.ByteLevel())
    make_tokenizers.save(data, os.path.join(out_dir, "qwen2_nfc.json"))

    lower = normalizers.Sequence([normalizers.NFKD(), normalizers.StripAccents(),
                                  normalizers.Lowercase(), normalizers.Strip()])
    data = train_bpe(lower, pre_tokenizers.ByteLevel(add_prefix_space=False),
                     byte_level_trainer())
    data["decoder"] = state(decoders.ByteLevel())
    make_tokenizers.save(data, os.path.join(out_dir, "bytelevel_nfkd_lower.json"))
    data["normalizer"] = state(normalizers.NFD())
    make_tokenizers.save(data, os.path.join(out_dir, "bytelevel_nfd.json"))


RANDOM_FILES = ["unigram_random.json", "unigram_ties.json"]
FILES = ["unigram_nfkc.json", "unigram_byte_fallback.json", "unigram_whitespace.json",
         "unigram_precompiled.json", "unigram_precompiled_cf.json", "unigram_first.json",
         "bpe_nfc_byte_fallback.json", "qwen2_nfc.json", "bytelevel_nfkd_lower.json",
         "bytelevel_nfd.json"]


POW10 = [float(f"1e{i}") for i in range(309)]


def serde_f64(text):
    """serde_json's f64 from a JSON number (without float_roundtrip): the digits as a u64, then
    one multiplication or division by a power of ten (tokenizer_json_number.cpp does the same)."""
    mantissa, _, exp_text = text.lower().partition("e")
    negative = mantissa.startswith("-")
    integer, _, fraction = mantissa.lstrip("-").partition(".")
    significand, exponent, limit = 0, int(exp_text or 0), 2**64 - 1
    overflowed = False
    for digit in integer:
        if overflowed or significand * 10 + int(digit) > limit:
            overflowed, exponent = True, exponent + 1
        else:
            significand = significand * 10 + int(digit)
    for digit in fraction:
        if significand * 10 + int(digit) > limit:
            break
        significand, exponent = significand * 10 + int(digit), exponent - 1
    f = float(significand)
    while abs(exponent) > 308 and f != 0.0:
        f, exponent = f / 1e308, exponent + 308
    if abs(exponent) <= 308:
        f = f * POW10[exponent] if exponent >= 0 else f / POW10[-exponent]
    return -f if negative else f


def check_unigram_scores(path):
    """Unigram scores as tokenizers parsed them must be serde_f64 of their text: the C++ reader
    (tokenizer_json_number.cpp) reproduces that parse, so this checks its model on every score.
    tokenizers writes them back in shortest round-trip form; some differ from Python's."""
    with open(path, encoding="utf-8") as f:
        written = json.load(f, parse_float=str)["model"]
    if written.get("type") != "Unigram":
        return 0
    parsed = [s for _, s in json.loads(Tokenizer.from_file(path).to_str())["model"]["vocab"]]
    emulated = [serde_f64(str(s)) for _, s in written["vocab"]]
    if parsed != emulated:
        sys.exit(f"{path}: tokenizers read a Unigram score other than serde_f64 says")
    return sum(a != float(str(s)) for a, (_, s) in zip(parsed, written["vocab"]))


def make_fuzz_data(path):
    """A Unigram with byte fallback behind Nmt, NFKC, a small Precompiled charsmap (four
    SentencePiece rules) and Replace, with Metaspace(prepend_scheme="first")."""
    rules = os.path.join(os.path.dirname(os.path.abspath(path)), "rules.tsv.tmp")
    with open(rules, "w", encoding="utf-8") as f:
        f.write("FB01\t66 69\n3000\t20\n41 301\tC1\n2126\t3A9\n")
    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(["The quick brown fox jumps over the lazy dog."] * 20),
        model_writer=model, vocab_size=40, model_type="unigram", normalization_rule_tsv=rules,
        minloglevel=2, hard_vocab_limit=False)
    os.remove(rules)
    charsmap = [dict(proto_fields(value)).get(2, b"")
                for number, value in proto_fields(model.getvalue()) if number == 3][0]
    first = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first")
    data = train_unigram(normalizers.NFKC(), first, 300)
    data["normalizer"] = state(normalizers.Sequence([
        normalizers.Nmt(), normalizers.NFKC(), normalizers.Precompiled(charsmap),
        normalizers.Replace(Regex(" {2,}"), " ")]))
    data["model"]["vocab"] += [[token, 0.0] for token in BYTE_TOKENS]
    data["model"]["byte_fallback"] = True
    data["decoder"] = state(decoders.Sequence([
        decoders.Metaspace(replacement="▁", prepend_scheme="first"), decoders.ByteFallback(),
        decoders.Fuse()]))
    Tokenizer.from_str(json.dumps(data))
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f, ensure_ascii=False)


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--fuzz-data":
        make_fuzz_data(sys.argv[2])
        return 0
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    make_unigrams(out_dir)
    make_unigram_first(out_dir)
    make_bpes(out_dir)
    make_random_unigrams(out_dir)
    make_precompiled(out_dir)
    tokenize_reference.CORPUS = tokenize_reference.CORPUS + UNICODE_CORPUS
    result = {}
    for name in FILES:
        path = os.path.join(out_dir, name)
        result[name] = tokenize_reference.reference(path)
        result[name]["scores_off_by_serde"] = check_unigram_scores(path)
    text = random_text()
    for name in RANDOM_FILES:
        path = os.path.join(out_dir, name)
        result[name] = {"scores_off_by_serde": check_unigram_scores(path), "long_text": text,
                        "long_ids": Tokenizer.from_file(path).encode(text).ids}
    with open(os.path.join(out_dir, "reference.json"), "w", encoding="utf-8") as f:
        json.dump(result, f, ensure_ascii=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
