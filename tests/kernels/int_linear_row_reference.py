#!/usr/bin/env python3
"""Independent reference of repops-3 linear (docs/repops-spec/linear-int-row.md).

Written from the spec text with Python integers, math.frexp and numpy only (no REE code): reads
the cases that tests/kernels/cpu/int_linear_row_test.cpp wrote (inputs and the C++ outputs),
computes every output from the definition and compares the bits. Exit 0: every output equal;
1: a difference (the first ones are printed); 77: numpy is missing (the test skips visibly).

File format (little-endian): b"REE3", uint32 case count, then per case: int64 m, n, k; uint8
x_dtype, w_dtype, y_dtype, has_bias, bias_dtype, accumulate (dtype 0 = fp32, 1 = bf16, 2 = fp16);
x [m, k], w [n, k], bias [n] (if has_bias), y before the call [m, n], y after it [m, n], each
dense in its dtype's bytes.
"""
import math
import struct
import sys

try:
    import numpy as np
except ImportError:  # pragma: no cover
    print("numpy is not installed: the independent repops-3 reference is skipped")
    sys.exit(77)

SX, SW = 27, 20  # bits of the x and w integers
X_DIGITS, W_DIGITS = 4, 3
KEPT = 3  # digit pairs (i, j) with i + j <= KEPT are multiplied
DTYPE_SIZE = {0: 4, 1: 2, 2: 2}


def to_float32(raw, dtype):
    """Raw storage bytes to exact float32 values (bf16: the top half of a float32)."""
    if dtype == 0:
        return np.frombuffer(raw, dtype="<f4").astype(np.float32)
    if dtype == 1:
        return (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
    return np.frombuffer(raw, dtype="<f2").astype(np.float32)


def row_exponent(row):
    """frexp exponent of the largest magnitude; 0 for all zeros; None with a NaN or infinity."""
    if not np.all(np.isfinite(row)):
        return None
    largest = float(np.max(np.abs(row))) if row.size else 0.0
    return 0 if largest == 0.0 else math.frexp(largest)[1]


def digits(value, count):
    """Balanced base-128 digits, most significant first: every digit but the first in [-64, 63]."""
    out = [0] * count
    for i in range(count - 1, 0, -1):
        low = (value + 64) % 128 - 64  # Python's % is non-negative for a positive modulus
        out[i] = low
        value = (value - low) // 128
    out[0] = value
    return out


def integers(row, exponent, shift):
    """RNE(v * 2^(shift - e)): the product is exact in binary64, round() rounds half to even."""
    return [round(math.ldexp(float(v), shift - exponent)) for v in row]


def digit_planes(row, exponent, shift, count):
    """The digits of every element as a [count, K] int64 array."""
    planes = np.zeros((count, row.size), dtype=np.int64)
    for k, value in enumerate(integers(row, exponent, shift)):
        assert abs(value) <= 2**shift, (value, shift)
        planes[:, k] = digits(value, count)
    return planes


def dots(x, w):
    """dot(m, n) as float32 for every output: the exact integer P, rounded once."""
    m, n = x.shape[0], w.shape[0]
    result = np.zeros((m, n), dtype=np.float32)
    x_exp = [row_exponent(x[r]) for r in range(m)]
    w_exp = [row_exponent(w[r]) for r in range(n)]
    x_digits = [None if e is None else digit_planes(x[r], e, SX, X_DIGITS)
                for r, e in enumerate(x_exp)]
    w_digits = [None if e is None else digit_planes(w[r], e, SW, W_DIGITS)
                for r, e in enumerate(w_exp)]
    for r in range(m):
        for c in range(n):
            if x_exp[r] is None or w_exp[c] is None:
                result[r, c] = np.float32("nan")
                continue
            product = 0  # Python int: exact
            for i in range(X_DIGITS):
                for j in range(W_DIGITS):
                    if i + j <= KEPT:
                        pair = int(np.dot(x_digits[r][i], w_digits[c][j]))  # |.| < 2^31: exact
                        product += pair * 2 ** (7 * (KEPT - i - j))
            assert abs(product) < 2**52
            scaled = math.ldexp(float(product), x_exp[r] + w_exp[c] - SX - SW + 14)  # exact
            with np.errstate(over="ignore"):
                result[r, c] = np.float32(scaled)  # the one rounding: binary64 -> binary32 RNE
    return result


def canonical(values):
    values = values.copy()
    values[np.isnan(values)] = np.uint32(0x7FC00000).view(np.float32)
    return values


def bf16_bits(values):
    """RNE to bf16 of float32 values (no NaN here: they are canonical already)."""
    bits = values.view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    nan = np.isnan(values)
    rounded[nan] = (bits[nan] >> 16) & 0x8000 | 0x7FC0
    return rounded.astype(np.uint16)


def expected_bits(case):
    """The stored bits of y after the call (repops-1's finish, rounding and accumulate)."""
    with np.errstate(over="ignore", invalid="ignore"):
        v = dots(case["x"], case["w"])
        if case["bias"] is not None:
            v = (v + case["bias"][None, :]).astype(np.float32)
        v = canonical(v)
        if case["y_dtype"] == 0:
            if case["accumulate"]:
                v = canonical((case["y_init"] + v).astype(np.float32))
            return v.view(np.uint32)
        if case["accumulate"]:
            rounded = (bf16_bits(v).astype(np.uint32) << 16).view(np.float32)
            v = canonical((case["y_init"] + rounded).astype(np.float32))
        return bf16_bits(v)


def read_cases(path):
    with open(path, "rb") as f:
        data = f.read()
    assert data[:4] == b"REE3", "not a repops-3 case file"
    (count,), at = struct.unpack_from("<I", data, 4), 8
    cases = []

    def take(size):
        nonlocal at
        chunk = data[at : at + size]
        assert len(chunk) == size, "truncated case file"
        at += size
        return chunk

    for _ in range(count):
        m, n, k = struct.unpack("<qqq", take(24))
        xd, wd, yd, has_bias, bd, acc = struct.unpack("<6B", take(6))
        case = {"m": m, "n": n, "k": k, "y_dtype": yd, "accumulate": acc}
        case["x"] = to_float32(take(m * k * DTYPE_SIZE[xd]), xd).reshape(m, k)
        case["w"] = to_float32(take(n * k * DTYPE_SIZE[wd]), wd).reshape(n, k)
        case["bias"] = to_float32(take(n * DTYPE_SIZE[bd]), bd) if has_bias else None
        case["y_init"] = to_float32(take(m * n * DTYPE_SIZE[yd]), yd).reshape(m, n)
        out = take(m * n * DTYPE_SIZE[yd])
        case["y_bits"] = np.frombuffer(out, dtype="<u4" if yd == 0 else "<u2").reshape(m, n)
        case["describe"] = f"m={m} n={n} k={k} x={xd} w={wd} y={yd} bias={has_bias} acc={acc}"
        cases.append(case)
    assert at == len(data), "trailing bytes in the case file"
    return cases


def main():
    if len(sys.argv) != 2:
        print("usage: int_linear_row_reference.py CASES_FILE")
        return 2
    cases = read_cases(sys.argv[1])
    outputs = 0
    for index, case in enumerate(cases):
        want = expected_bits(case)
        got = case["y_bits"]
        bad = np.argwhere(want != got)
        if bad.size:
            for r, c in bad[:5]:
                print(f"case {index} ({case['describe']}) at ({r},{c}): "
                      f"C++ 0x{int(got[r, c]):x}, reference 0x{int(want[r, c]):x}")
            print(f"{len(bad)} of {got.size} outputs differ in case {index}")
            return 1
        outputs += got.size
    print(f"{len(cases)} cases, {outputs} outputs: bitwise equal to the reference")
    return 0


if __name__ == "__main__":
    sys.exit(main())
