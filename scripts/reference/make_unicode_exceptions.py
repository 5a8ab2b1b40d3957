#!/usr/bin/env python3
"""Prints models/src/tokenizer/tokenizer_unicode_tables.cpp: where `tokenizers` and utf8proc
disagree about a character, so that the C++ tokenizer can follow `tokenizers`.

`tokenizers` normalizes with the tables of the unicode-normalization-alignments crate (an older
Unicode version than Debian's utf8proc), lowercases with Rust's std (a newer one) and tells
combining marks with the old crate. REE uses utf8proc (tokenizer_unicode.cpp) and corrects it with
three tables that this script derives by asking both libraries about every code point:

  kNormalizationOpaque  characters that tokenizers' normalizers do not know (unassigned in its
                        tables) but utf8proc decomposes, reorders or composes: tokenizers leaves
                        them as they are, and so does REE, normalizing only the text between them.
  kLowercase            characters whose tokenizers Lowercase differs from utf8proc_tolower.
  kMarkFlips            characters whose "is a combining mark" (StripAccents) differs.

It then checks, on random strings mixing those characters with letters, marks and Hangul, that
normalizing between the opaque characters gives tokenizers' result exactly.

Usage: make_unicode_exceptions.py > models/src/tokenizer/tokenizer_unicode_tables.cpp
(with the interpreter that has `tokenizers`, on a machine with libutf8proc.so.2; takes minutes).
"""
import ctypes
import random
import sys

from tokenizers import normalizers

LIB = ctypes.CDLL("libutf8proc.so.2")
LIB.utf8proc_map.argtypes = [ctypes.c_char_p, ctypes.c_ssize_t, ctypes.POINTER(ctypes.c_void_p),
                             ctypes.c_int]
LIB.utf8proc_map.restype = ctypes.c_ssize_t
LIB.utf8proc_tolower.argtypes = [ctypes.c_int32]
LIB.utf8proc_tolower.restype = ctypes.c_int32
LIB.utf8proc_category.argtypes = [ctypes.c_int32]
LIB.utf8proc_category.restype = ctypes.c_int
LIB.utf8proc_version.restype = ctypes.c_char_p
LIBC = ctypes.CDLL("libc.so.6")
STABLE, COMPAT, COMPOSE, DECOMPOSE = 1 << 1, 1 << 2, 1 << 3, 1 << 4
OPTIONS = {"NFC": STABLE | COMPOSE, "NFD": STABLE | DECOMPOSE,
           "NFKC": STABLE | COMPOSE | COMPAT, "NFKD": STABLE | DECOMPOSE | COMPAT}
TOKENIZERS = {form: getattr(normalizers, form)() for form in OPTIONS}
MARK_CATEGORIES = (6, 7, 8)  # UTF8PROC_CATEGORY_MN, MC, ME
CODE_POINTS = [cp for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF]


def utf8proc(form, text):
    data = text.encode("utf-8")
    out = ctypes.c_void_p()
    length = LIB.utf8proc_map(data, len(data), ctypes.byref(out), OPTIONS[form])
    if length < 0:
        raise ValueError(f"utf8proc_map failed on {text!r}")
    result = ctypes.string_at(out, length).decode("utf-8")
    LIBC.free(out)
    return result


def agree(text):
    return all(utf8proc(form, text) == TOKENIZERS[form].normalize_str(text) for form in OPTIONS)


def opaque_characters():
    """Characters on which the two disagree alone or beside a base letter or a mark (U+0316 has
    combining class 220, U+0301 230: a new mark of any class gets reordered by one of them)."""
    opaque = set()
    for cp in CODE_POINTS:
        c = chr(cp)
        if not agree(c) or not all(agree(p) for p in ("a" + c + "\u0316", "a\u0301" + c,
                                                      c + "\u0301", "a" + c)):
            opaque.add(cp)
    # A new precomposed character composes from its parts in utf8proc only (U+11935 U+11930 ->
    # U+11938). By Unicode's stability policy such parts are new characters too: opaque.
    for cp in list(opaque):
        parts = utf8proc("NFD", chr(cp))
        if len(parts) > 1 and utf8proc("NFC", parts) != TOKENIZERS["NFC"].normalize_str(parts):
            if any(ord(p) < 0x1000 for p in parts):
                sys.exit(f"U+{cp:04X}: an old character composes anew; the opaque split is wrong")
            opaque.update(ord(p) for p in parts)
    return sorted(opaque)


def split_normalize(form, text, opaque):
    out, segment = [], []
    for c in text:
        if ord(c) in opaque:
            out.append(utf8proc(form, "".join(segment)) if segment else "")
            out.append(c)
            segment = []
        else:
            segment.append(c)
    out.append(utf8proc(form, "".join(segment)) if segment else "")
    return "".join(out)


def validate(opaque):
    rng = random.Random(1)
    pool = ([chr(cp) for cp in opaque] + list("aeoAEOsS ") +
            [chr(cp) for cp in (0x301, 0x316, 0x323, 0x302, 0x1100, 0x1161, 0x11A8, 0xAC00,
                                0xFB01, 0xFF11, 0x212B, 0x1E9B, 0x3099, 0x304B)])
    for _ in range(30000):
        text = "".join(rng.choice(pool) for _ in range(rng.randint(1, 8)))
        for form in OPTIONS:
            expected = TOKENIZERS[form].normalize_str(text)
            if split_normalize(form, text, set(opaque)) != expected:
                sys.exit(f"opaque split disagrees with tokenizers {form} on {text!r}")


def lowercase_table():
    lower = normalizers.Lowercase()
    table = []
    for cp in CODE_POINTS:
        mine = "i\u0307" if cp == 0x130 else chr(LIB.utf8proc_tolower(cp))
        theirs = lower.normalize_str(chr(cp))
        if theirs != mine:
            if len(theirs) != 1:
                sys.exit(f"U+{cp:04X} lowercases to several characters: extend the table")
            table.append((cp, ord(theirs)))
    return table


def mark_flips():
    strip = normalizers.StripAccents()
    return [cp for cp in CODE_POINTS
            if (strip.normalize_str(chr(cp)) == "") != (LIB.utf8proc_category(cp) in MARK_CATEGORIES)]


def array(name, values, fmt):
    lines = [f"const uint32_t {name}[] = {{"]
    row = []
    for v in values:
        row.append(fmt(v))
        if len(row) == 8:
            lines.append("    " + " ".join(row))
            row = []
    if row:
        lines.append("    " + " ".join(row))
    return "\n".join(lines + ["};"])


def main():
    opaque = opaque_characters()
    validate(opaque)
    lower = lowercase_table()
    flips = mark_flips()
    import tokenizers
    print(f"""// Generated by scripts/reference/make_unicode_exceptions.py (tokenizers {tokenizers.__version__},
// utf8proc {LIB.utf8proc_version().decode()}); do not edit. Where tokenizers and utf8proc disagree
// about a character (see tokenizer_unicode.h).
// clang-format off
#include "tokenizer_unicode_tables.h"

#include <iterator>

namespace ree::models::tokenizer_internal {{
namespace {{

{array("kNormalizationOpaque", opaque, lambda v: f"0x{v:05X},")}

// Pairs: character, its lowercase in tokenizers.
{array("kLowercase", [x for pair in lower for x in pair], lambda v: f"0x{v:05X},")}

{array("kMarkFlips", flips, lambda v: f"0x{v:05X},")}

}}  // namespace

const UnicodeExceptions& unicodeExceptions() {{
  static const UnicodeExceptions tables = [] {{
    UnicodeExceptions t;
    t.normalization_opaque.assign(std::begin(kNormalizationOpaque), std::end(kNormalizationOpaque));
    for (size_t i = 0; i + 1 < std::size(kLowercase); i += 2)
      t.lowercase.emplace_back(kLowercase[i], kLowercase[i + 1]);
    t.mark_flips.assign(std::begin(kMarkFlips), std::end(kMarkFlips));
    return t;
  }}();
  return tables;
}}

}}  // namespace ree::models::tokenizer_internal""")


if __name__ == "__main__":
    main()
