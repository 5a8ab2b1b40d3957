"""Bitwise checks: the Python operators give exactly the bits of the C++ RepOps they wrap.

Two independent witnesses:
- the golden hashes that pin the C++ kernels (tests/kernels/cpu/crmath_test.cpp) on inputs that
  this file rebuilds exactly: every correctly rounded function called through ree.ops must hash to
  the C++ test's value;
- the RepOps specification re-evaluated here in numpy, IEEE operation by IEEE operation (the
  canonical 128-chunk orders of reduce.h, fma with one rounding), for linear/matmul, the
  reductions, the norms and softmax: the operators must match it bit for bit.
Plus run-to-run determinism of every operator.
"""

import numpy as np
import pytest
import torch

import ree
from conftest import DTYPES, assert_bits_equal, randn

CHUNK = 128

# ---- golden pins of the C++ tests ---------------------------------------------------------------

# tests/kernels/cpu/crmath_test.cpp, GoldenHashesPinTheSpec (FNV-1a 64 of the fp32 outputs).
CRMATH_GOLDEN = {
    "exp": 0xF8CA4F9BB50BC11E, "expm1": 0xAC7137B2B1CC202F, "log": 0xD0CEE68217C643AB,
    "log1p": 0xB69EBC184F1A7FCC, "tanh": 0x252A1AB8FA4E26DA, "erf": 0xA96C7308499962CE,
    "sin": 0x038553B512B29F30, "cos": 0xB6B49A36C622B5E0, "rsqrt": 0x537DD7BD86EC98C0,
    "sigmoid": 0xB354CD313B80D7A1, "silu": 0x7F151F460B13BF4D, "gelu_erf": 0x47BF63557CFC9127,
    "gelu_tanh": 0x31BC22DDD986AD3A, "softplus": 0x5DAD05D7377F3CAA,
}


def fnv1a(data: bytes) -> int:
    h = 1469598103934665603
    for byte in data:
        h = ((h ^ byte) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return h


def crmath_golden_inputs() -> torch.Tensor:
    """The C++ test's inputs: every 65537th bit pattern, then i / 4096 for i in [-32768, 32768)."""
    patterns = np.arange(0, 2**32, 65537, dtype=np.uint64).astype(np.uint32).view(np.float32)
    sweep = (np.arange(-32768, 32768, dtype=np.float32) / np.float32(4096.0)).astype(np.float32)
    return torch.from_numpy(np.concatenate([patterns, sweep]))


@pytest.mark.parametrize("name", sorted(CRMATH_GOLDEN))
def test_crmath_golden_hashes(name):
    x = crmath_golden_inputs()
    assert x.numel() == 65536 + 65536
    if name == "gelu_erf":
        y = ree.ops.gelu(x)
    elif name == "gelu_tanh":
        y = ree.ops.gelu(x, approximate="tanh")
    else:
        y = getattr(ree.ops, name)(x)
    assert fnv1a(y.numpy().tobytes()) == CRMATH_GOLDEN[name], f"{name}: not the C++ kernel's bits"


# ---- the specification in numpy ------------------------------------------------------------------

def fma32(a, b, c):
    """Correctly rounded fp32 fma of float32 arrays: the exact a*b (a double holds it) plus c,
    summed exactly by TwoSum, rounded to odd in double, then to nearest in fp32 (round-to-odd
    at 53 bits makes the second rounding innocuous)."""
    a, b, c = (np.asarray(t, dtype=np.float64) for t in (a, b, c))
    p = a * b
    s = p + c
    bp = s - p
    err = (p - (s - bp)) + (c - bp)
    inexact_even = (err != 0) & ((s.view(np.int64) & 1) == 0) & np.isfinite(s)
    toward = np.where(err > 0, np.inf, -np.inf)
    s = np.where(inexact_even, np.nextafter(s, toward), s)
    return s.astype(np.float32)


def canonical(rows: np.ndarray, step):
    """Rows reduced along the last axis in the canonical order; step(partial, k) -> partial."""
    n = rows.shape[-1]
    total = None
    for begin in range(0, n, CHUNK):
        partial = np.zeros(rows.shape[:-1], dtype=np.float32)
        for k in range(begin, min(begin + CHUNK, n)):
            partial = step(partial, k)
        total = partial if total is None else (total + partial).astype(np.float32)
    return total


def csum(x):
    return canonical(x, lambda p, k: (p + x[..., k]).astype(np.float32))


def cdot(a, b):
    return canonical(a, lambda p, k: fma32(a[..., k], b[..., k], p))


def f32(t: torch.Tensor) -> np.ndarray:
    return t.detach().float().numpy()


def canonical_nan(v):
    return np.where(np.isnan(v), np.float32(np.nan), v).astype(np.float32)


@pytest.mark.parametrize("dtype", DTYPES)
def test_linear_is_the_canonical_dot(dtype):
    m, n, k = 3, 5, 300
    x, w, b = randn(m, k, dtype=dtype, seed=31), randn(n, k, dtype=dtype, seed=32), randn(n, seed=33)
    dots = cdot(f32(x)[:, None, :], f32(w)[None, :, :])  # [m, n]
    expected = torch.from_numpy(canonical_nan((dots + f32(b)).astype(np.float32))).to(dtype)
    assert_bits_equal(ree.ops.linear(x, w, b), expected, "linear")
    expected_mm = torch.from_numpy(dots).to(dtype)
    assert_bits_equal(ree.ops.matmul(x, w.t()), expected_mm, "matmul")


@pytest.mark.parametrize("dtype", DTYPES)
def test_reductions_are_canonical(dtype):
    x = randn(4, 391, dtype=dtype, seed=34, scale=3)
    xs = f32(x)
    n = np.float32(xs.shape[-1])
    s = csum(xs)
    mean = (s / n).astype(np.float32)
    d = (xs - mean[:, None]).astype(np.float32)
    var = (cdot(d, d) / n).astype(np.float32)
    for name, value in (("sum", s), ("mean", mean), ("var", var),
                        ("max", xs.max(-1)), ("min", xs.min(-1))):
        expected = torch.from_numpy(np.ascontiguousarray(value)).to(dtype)
        assert_bits_equal(getattr(ree.ops, name)(x), expected, name)


def test_norms_and_softmax_follow_the_spec():
    x, w, b = randn(3, 300, seed=35, scale=2), randn(300, seed=36), randn(300, seed=37)
    xs, ws, bs = f32(x), f32(w), f32(b)
    n = np.float32(300)
    eps = np.float32(1e-6)
    # RMSNorm: r = crRsqrt(CDOT(x, x) / n + eps); y = (x * r) * w.
    inner = ((cdot(xs, xs) / n).astype(np.float32) + eps).astype(np.float32)
    r = f32(ree.ops.rsqrt(torch.from_numpy(inner)))
    expected = ((xs * r[:, None]).astype(np.float32) * ws).astype(np.float32)
    assert_bits_equal(ree.ops.rms_norm(x, w, eps=1e-6), torch.from_numpy(expected), "rms_norm")
    # LayerNorm: mean, d = x - mean, var = CDOT(d, d) / n, r = crRsqrt(var + eps), fma(d r, w, b).
    mean = (csum(xs) / n).astype(np.float32)
    d = (xs - mean[:, None]).astype(np.float32)
    var_eps = ((cdot(d, d) / n).astype(np.float32) + np.float32(1e-5)).astype(np.float32)
    r = f32(ree.ops.rsqrt(torch.from_numpy(var_eps)))
    expected = fma32((d * r[:, None]).astype(np.float32), ws[None, :], bs[None, :])
    assert_bits_equal(ree.ops.layer_norm(x, w, b, eps=1e-5), torch.from_numpy(expected), "layer_norm")
    # Softmax: e = crExp(x - max), y = e / CSUM(e); log-softmax: (x - max) - crLog(CSUM(e)).
    shifted = (xs - xs.max(-1, keepdims=True)).astype(np.float32)
    e = f32(ree.ops.exp(torch.from_numpy(shifted)))
    s = csum(e)
    assert_bits_equal(ree.ops.softmax(x), torch.from_numpy((e / s[:, None]).astype(np.float32)),
                      "softmax")
    log_s = f32(ree.ops.log(torch.from_numpy(s)))
    expected = (shifted - log_s[:, None]).astype(np.float32)
    assert_bits_equal(ree.ops.log_softmax(x), torch.from_numpy(expected), "log_softmax")


def test_swiglu_rounding_points():
    gate, up = randn(7, 65, dtype=torch.bfloat16, seed=38, scale=3), randn(7, 65, dtype=torch.bfloat16, seed=39)
    activated = ree.ops.silu(gate.float()).to(torch.bfloat16)  # R(act(gate))
    expected = (activated.float() * up.float()).to(torch.bfloat16)  # R(R(act) * up)
    assert_bits_equal(ree.ops.swiglu(gate, up), expected, "swiglu")
    assert_bits_equal(ree.ops.silu(gate), activated, "silu bf16 = R(silu fp32)")


# ---- determinism ------------------------------------------------------------------------------------

def _every_op_once(dtype):
    x = randn(5, 200, dtype=dtype, seed=40, scale=2)
    w = randn(9, 200, dtype=dtype, seed=41)
    q = randn(1, 4, 4, 16, dtype=dtype, seed=42)
    kv = randn(1, 70, 2, 16, dtype=dtype, seed=43)
    inv = ree.ops.rope_inv_freq(16)
    outs = [ree.ops.linear(x, w), ree.ops.matmul(x, w.t()), ree.ops.rms_norm(x, w[0]),
            ree.ops.layer_norm(x, w[0], w[1]), ree.ops.softmax(x), ree.ops.log_softmax(x),
            ree.ops.silu(x), ree.ops.gelu(x), ree.ops.swiglu(x, x), ree.ops.sigmoid(x),
            ree.ops.exp(x), ree.ops.tanh(x), ree.ops.erf(x), ree.ops.sin(x), ree.ops.cos(x),
            ree.ops.attention(q, kv, kv), ree.ops.rope(q[0], torch.arange(4), inv),
            ree.ops.embedding(torch.tensor([1, 3]), x), ree.ops.argmax(x),
            ree.ops.sample(x.float(), temperature=0.8, seed=3)]
    outs += [getattr(ree.ops, r)(x) for r in ("sum", "mean", "max", "min", "var")]
    return outs


@pytest.mark.parametrize("dtype", DTYPES)
def test_run_to_run_determinism(dtype):
    for i, (a, b) in enumerate(zip(_every_op_once(dtype), _every_op_once(dtype))):
        assert_bits_equal(a, b, f"op #{i}")
