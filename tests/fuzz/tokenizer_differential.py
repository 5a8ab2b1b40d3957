#!/usr/bin/env python3
"""Compares REE's tokenizer with Hugging Face `tokenizers` on fuzz inputs (a corpus the fuzzers grew).

The two tokenizer fuzz targets print, with REE_FUZZ_DUMP=1, one JSON line per input saying what
REE computed; this script recomputes it with `tokenizers` and lists the disagreements:

  encode  fuzz_tokenizer_encode: the ids of the text (after the selector byte) with the fixed
          tokenizer the selector picks (tests/fuzz/data/). Text that is not UTF-8 is skipped.
  load    fuzz_tokenizer_load: whether the fuzzed tokenizer.json loads, and the ids of the target's
          sample text. REE refusing what tokenizers accepts is expected (unsupported components);
          REE accepting what tokenizers refuses, or encoding differently, is reported.

Usage: tokenizer_differential.py {encode|load} FUZZ_BINARY CORPUS_DIR... [--max N]
Exit status 1 when some input disagrees (each printed with its file), 0 otherwise.
"""
import argparse
import json
import os
import subprocess
import sys

from tokenizers import Tokenizer

HERE = os.path.dirname(os.path.abspath(__file__))
SAMPLE_TEXT = ("Hello, world! It's 2024:  tabs\tand\nnewlines... caf\u00e9 \u65e5\u672c "
               "\U0001F600 <|endoftext|> <s>x</s>")
ENCODE_TOKENIZERS = ["gpt2.json", "llama3.json", "llama2.json", "unigram.json"]  # as fuzz_tokenizer_encode.cpp


def fnv1a(data):
    value = 0xcbf29ce484222325
    for byte in data:
        value = ((value ^ byte) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return f"{value:016x}"


def run_target(binary, files):
    """REE's dump lines, by input key (the target runs each file once)."""
    results = {}
    env = dict(os.environ, REE_FUZZ_DUMP="1", ASAN_OPTIONS="detect_leaks=0")
    for start in range(0, len(files), 500):
        chunk = files[start:start + 500]
        out = subprocess.run([binary, *chunk], env=env, capture_output=True,
                             text=True, errors="replace").stdout
        for line in out.splitlines():
            if line.startswith("{\"input\""):
                entry = json.loads(line)
                results[entry["input"]] = entry
    return results


def check_encode(files, ree):
    tokenizers = {name: Tokenizer.from_file(os.path.join(HERE, "data", name))
                  for name in ENCODE_TOKENIZERS}
    problems = 0
    for path, data in files:
        if not data:
            continue
        entry = ree.get(fnv1a(data))
        if entry is None:
            continue
        try:
            text = data[1:].decode("utf-8")
        except UnicodeDecodeError:
            continue
        name = ENCODE_TOKENIZERS[data[0] % len(ENCODE_TOKENIZERS)]
        expected = tokenizers[name].encode(text, add_special_tokens=entry["add_special"]).ids
        if not entry["ok"] or entry["ids"] != expected:
            problems += 1
            print(f"{path}: {name} text {text!r}\n  ree  {entry['ids'] if entry['ok'] else 'refused'}"
                  f"\n  ref  {expected}")
    return problems


def check_load(files, ree):
    problems = 0
    for path, data in files:
        entry = ree.get(fnv1a(data))
        if entry is None:
            continue
        try:
            reference = Tokenizer.from_str(data.decode("utf-8"))
        except (KeyboardInterrupt, SystemExit):
            raise
        # tokenizers refuses, or panics (pyo3's PanicException is a BaseException, e.g. on a
        # malformed Precompiled charsmap): REE must refuse too
        except BaseException as error:
            if entry["ok"]:
                problems += 1
                print(f"{path}: REE loads a tokenizer.json that tokenizers refuses ({error})")
            continue
        if not entry["ok"]:
            continue  # unsupported by REE: refused with a message, as documented
        for key, special in (("ids", False), ("ids_special", True)):
            try:
                expected = reference.encode(SAMPLE_TEXT, add_special_tokens=special).ids
            except (KeyboardInterrupt, SystemExit):
                raise
            except BaseException:  # an error or a panic: REE's encode must fail too
                expected = None
            if entry[key] != expected:
                problems += 1
                print(f"{path}: sample text ({key})\n  ree  {entry[key]}\n  ref  {expected}")
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["encode", "load"])
    parser.add_argument("binary")
    parser.add_argument("corpus", nargs="+")
    parser.add_argument("--max", type=int, default=5000, help="inputs at most")
    args = parser.parse_args()
    paths = []
    for directory in args.corpus:
        paths += sorted(os.path.join(directory, f) for f in os.listdir(directory))
    paths = paths[:args.max]
    files = [(p, open(p, "rb").read()) for p in paths]
    ree = run_target(args.binary, paths)
    check = check_encode if args.mode == "encode" else check_load
    problems = check(files, ree)
    print(f"{args.mode}: {len(files)} inputs, {len(ree)} dumped by REE, {problems} disagreement(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
