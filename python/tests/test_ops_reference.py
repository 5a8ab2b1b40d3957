"""Every ree.ops operator against torch's own operator evaluated in float64, within a stated bound.

Bounds (u = 2^-24, the fp32 unit roundoff; U = the output dtype's unit roundoff; "ulp" = 2U|ref|):
- correctly rounded element functions (exp, expm1, log, log1p, tanh, erf, sin, cos, rsqrt): 1 ulp
  of the output dtype (fp32: correctly rounded, within 1/2 ulp; bf16/f16: one more rounding);
- the composites of crmath.md section 3 (sigmoid, silu, gelu, softplus: fixed fp32 sequences over
  correctly rounded steps): 3 ulps + 4 u |x| (the cancellation of 1 + erf / 1 + tanh at negative
  x, which torch's fp32 formula has too);
- dot products and sums of n terms: (n + 2) u sum|terms| + 1 ulp (the classic n u bound of a
  recursive sum, which the chunked order never exceeds), norms and softmax: (n + 8) u relative;
- selections (max, min, argmax, embedding): equal.
"""

import math

import pytest
import torch
import torch.nn.functional as F

import ree
from conftest import DTYPES, UNIT, assert_bits_equal, assert_within, randn, ulp_bound

u = 2.0**-24


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("bias", [False, True])
def test_linear(dtype, bias):
    m, n, k = 5, 7, 300  # k crosses two 128-element chunks
    x, w = randn(m, k, dtype=dtype, seed=1), randn(n, k, dtype=dtype, seed=2)
    b = randn(n, dtype=dtype, seed=3) if bias else None
    y = ree.ops.linear(x, w, b)
    assert y.dtype == dtype and y.shape == (m, n)
    ref = F.linear(x.double(), w.double(), b.double() if bias else None)
    magnitude = x.double().abs() @ w.double().abs().T + (b.double().abs() if bias else 0)
    assert_within(y, ref, (k + 2) * u * magnitude + ulp_bound(ref, dtype), "linear")


@pytest.mark.parametrize("dtype", DTYPES)
def test_matmul_shapes(dtype):
    a, b = randn(3, 4, 130, dtype=dtype, seed=4), randn(130, 9, dtype=dtype, seed=5)
    for lhs, rhs in [(a, b), (a[0, 0], b), (a[0], b[:, 0]), (a, randn(3, 130, 6, dtype=dtype, seed=6))]:
        y = ree.ops.matmul(lhs, rhs)
        ref = torch.matmul(lhs.double(), rhs.double())
        assert y.shape == ref.shape and y.dtype == dtype
        magnitude = torch.matmul(lhs.double().abs(), rhs.double().abs())
        assert_within(y, ref, 132 * u * magnitude + ulp_bound(ref, dtype), "matmul")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("cols", [1, 7, 128, 129, 1000])
def test_rms_norm(dtype, cols):
    x, w = randn(6, cols, dtype=dtype, seed=7, scale=3), randn(cols, dtype=dtype, seed=8)
    y = ree.ops.rms_norm(x, w, eps=1e-6)
    ref = F.rms_norm(x.double(), (cols,), w.double(), eps=1e-6)
    assert_within(y, ref, (cols + 8) * u * ref.abs() + ulp_bound(ref, dtype), "rms_norm")
    # transformers' LlamaRMSNorm rounding points: normalised value rounded to x's dtype first.
    hf = (x.float() * torch.rsqrt(x.double().pow(2).mean(-1, keepdim=True) + 1e-6).float())
    ref_hf = w.double() * hf.to(dtype).double()
    y_hf = ree.ops.rms_norm(x, w, eps=1e-6, cast_before_weight=True)
    assert_within(y_hf, ref_hf, 3 * ulp_bound(ref_hf, dtype) + (cols + 8) * u * ref_hf.abs(),
                  "rms_norm cast_before_weight")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("affine", [(False, False), (True, False), (False, True), (True, True)])
def test_layer_norm(dtype, affine):
    cols = 257
    x = randn(4, cols, dtype=dtype, seed=9, scale=2) + 0.5
    w = randn(cols, dtype=dtype, seed=10) if affine[0] else None
    b = randn(cols, dtype=dtype, seed=11) if affine[1] else None
    y = ree.ops.layer_norm(x, w, b, eps=1e-5)
    ref = F.layer_norm(x.double(), (cols,), None if w is None else w.double(),
                       None if b is None else b.double(), eps=1e-5)
    scale = (x.double() - x.double().mean(-1, keepdim=True)).abs() / x.double().std(-1, keepdim=True)
    scale = scale * (w.double().abs() if w is not None else 1) + (b.double().abs() if b is not None else 0)
    assert_within(y, ref, (cols + 8) * u * (scale + 1) + ulp_bound(ref, dtype), "layer_norm")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", ["sum", "mean", "max", "min", "var"])
def test_reductions(dtype, op):
    x = randn(5, 6, 301, dtype=dtype, seed=12, scale=2)
    for dim in (-1, 1, 0):
        for keepdim in (False, True):
            y = getattr(ree.ops, op)(x, dim=dim, keepdim=keepdim)
            xd = x.double()
            if op == "var":
                ref = xd.var(dim=dim, correction=0, keepdim=keepdim)
            elif op in ("max", "min"):
                ref = getattr(torch, "a" + op)(xd, dim=dim, keepdim=keepdim)
            else:
                ref = getattr(torch, op)(xd, dim=dim, keepdim=keepdim)
            assert y.shape == ref.shape and y.dtype == dtype
            n = x.shape[dim]
            if op in ("max", "min"):
                assert_bits_equal(y, ref.to(dtype), f"{op} dim={dim}")
                continue
            magnitude = xd.abs().sum(dim=dim, keepdim=keepdim)
            if op == "mean":
                magnitude = magnitude / n
            if op == "var":
                magnitude = 4 * xd.pow(2).mean(dim=dim, keepdim=keepdim)
            assert_within(y, ref, (n + 2) * u * magnitude + ulp_bound(ref, dtype), f"{op} dim={dim}")


@pytest.mark.parametrize("dtype", DTYPES)
def test_softmax_and_log_softmax(dtype):
    x = randn(4, 3, 333, dtype=dtype, seed=13, scale=4)
    for dim in (-1, 1):
        ref = torch.softmax(x.double(), dim=dim)
        y = ree.ops.softmax(x, dim=dim)
        shifted = x.double() - x.double().amax(dim=dim, keepdim=True)
        # x - max is rounded (relative u): e = exp(x - max) carries u |x - max| relative error.
        bound = ((x.shape[dim] + 8) * u + 2 * u * shifted.abs()) * ref + ulp_bound(ref, dtype)
        assert_within(y, ref, bound, "softmax")
        ref_log = torch.log_softmax(x.double(), dim=dim)
        y_log = ree.ops.log_softmax(x, dim=dim)
        shifted = x.double() - x.double().amax(dim=dim, keepdim=True)
        # log(s) carries the sum's relative error (n + 2) u as an absolute error.
        bound = 8 * u * (shifted.abs() + ref_log.abs()) + (x.shape[dim] + 2) * u + ulp_bound(ref_log, dtype)
        assert_within(y_log, ref_log, bound, "log_softmax")


UNARY = {
    "exp": (torch.exp, 2.0, 0.0),  # scale 2: e^x stays finite in float16
    "expm1": (torch.expm1, 2.0, 0.0),
    "log": (torch.log, 4.0, None),
    "log1p": (torch.log1p, 1.0, None),
    "tanh": (torch.tanh, 3.0, 0.0),
    "erf": (torch.erf, 2.0, 0.0),
    "sin": (torch.sin, 20.0, 0.0),
    "cos": (torch.cos, 20.0, 0.0),
    "rsqrt": (torch.rsqrt, 4.0, None),
    "sigmoid": (torch.sigmoid, 6.0, 0.0),
    "softplus": (F.softplus, 6.0, 0.0),
    "silu": (F.silu, 6.0, 0.0),
    "gelu": (F.gelu, 4.0, 0.0),
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(UNARY))
def test_element_functions(dtype, name):
    fn, scale, _ = UNARY[name]
    x = randn(37, 41, dtype=dtype, seed=14, scale=scale)
    if name in ("log", "rsqrt"):
        x = x.abs() + 1e-3
    if name == "log1p":
        x = x.abs()
    y = getattr(ree.ops, name)(x)
    ref = fn(x.double())
    assert y.dtype == dtype and y.shape == x.shape
    assert_within(y, ref, element_bound(name, x, ref, dtype), name)


COMPOSITES = ("sigmoid", "silu", "gelu", "gelu_tanh", "softplus")


def element_bound(name, x, ref, dtype):
    if name in COMPOSITES:
        return ulp_bound(ref, dtype, 3.0) + 4 * u * x.double().abs()
    return ulp_bound(ref, dtype, 1.0)


@pytest.mark.parametrize("dtype", DTYPES)
def test_gelu_tanh_and_gated(dtype):
    x = randn(33, 65, dtype=dtype, seed=15, scale=4)
    ref = F.gelu(x.double(), approximate="tanh")
    assert_within(ree.ops.gelu(x, approximate="tanh"), ref, element_bound("gelu_tanh", x, ref, dtype),
                  "gelu tanh")
    gate, up = x, randn(33, 65, dtype=dtype, seed=16)
    for op, act in ((ree.ops.swiglu, F.silu), (ree.ops.geglu, lambda t: F.gelu(t, approximate="tanh"))):
        activated = act(gate.double())
        ref = activated * up.double()
        # act (a composite) rounded to the dtype, then the product rounded.
        act_error = element_bound("gelu_tanh", gate, activated, dtype) + 2 * UNIT[dtype] * activated.abs()
        bound = ulp_bound(ref, dtype, 1.0) + act_error * up.double().abs()
        assert_within(op(gate, up), ref, bound, op.__name__ if hasattr(op, "__name__") else "gated")


def _rope_reference(x, positions, inv_freq, interleaved):
    """transformers' rotation in float64 at fp32-rounded angles (the angle is an fp32 product)."""
    angle = (positions.float()[:, None] * inv_freq[None, :]).double()  # [tokens, pairs]
    cos, sin = angle.cos()[:, None, :], angle.sin()[:, None, :]
    xd = x.double().clone()
    half = inv_freq.numel()
    if interleaved:
        a, b = xd[..., 0:2 * half:2].clone(), xd[..., 1:2 * half:2].clone()
        xd[..., 0:2 * half:2], xd[..., 1:2 * half:2] = a * cos - b * sin, b * cos + a * sin
    else:
        a, b = xd[..., :half].clone(), xd[..., half:2 * half].clone()
        xd[..., :half], xd[..., half:2 * half] = a * cos - b * sin, b * cos + a * sin
    return xd


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("interleaved", [False, True])
def test_rope(dtype, interleaved):
    head_dim, rotary = 64, 48
    inv_freq = ree.ops.rope_inv_freq(rotary, base=10000.0)
    exact = 1.0 / (10000.0 ** (torch.arange(0, rotary, 2, dtype=torch.float64) / rotary))
    assert_within(inv_freq, exact, ulp_bound(exact, torch.float32, 2.0), "inv_freq")
    x = randn(9, 3, head_dim, dtype=dtype, seed=17)
    positions = torch.tensor([0, 1, 2, 7, 100, 513, 1000, 4095, 20000])
    y = ree.ops.rope(x, positions, inv_freq, interleaved=interleaved)
    ref = _rope_reference(x, positions, inv_freq, interleaved)
    # cos/sin, the four products and the two sums are each rounded to the dtype (transformers).
    assert_within(y, ref, 6 * UNIT[dtype] * x.double().abs().amax() + 64 * u, "rope")
    llama3 = {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
              "original_max_position_embeddings": 8192}
    scaled = ree.ops.rope_inv_freq(128, base=500000.0, llama3=llama3)
    assert scaled.shape == (64,) and bool((scaled <= ree.ops.rope_inv_freq(128, 500000.0)).all())


def _attention_reference(q, k, v, scale=None):
    b, tq, h, d = q.shape
    tk, hkv = k.shape[1], k.shape[2]
    qd, kd, vd = (t.double().transpose(1, 2) for t in (q, k, v))  # [b, heads, t, d]
    kd = kd.repeat_interleave(h // hkv, dim=1)
    vd = vd.repeat_interleave(h // hkv, dim=1)
    scores = qd @ kd.transpose(-1, -2) * (scale if scale is not None else d ** -0.5)
    query_pos = torch.arange(tk - tq, tk)[:, None]
    scores = scores.masked_fill(torch.arange(tk)[None, :] > query_pos, float("-inf"))
    return (torch.softmax(scores, dim=-1) @ vd).transpose(1, 2)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("heads,kv_heads", [(4, 4), (6, 2), (4, 1)])
def test_attention(dtype, heads, kv_heads):
    q = randn(2, 5, heads, 32, dtype=dtype, seed=18)
    k = randn(2, 150, kv_heads, 32, dtype=dtype, seed=19)
    v = randn(2, 150, kv_heads, 32, dtype=dtype, seed=20)
    ref = _attention_reference(q, k, v)
    y = ree.ops.attention(q, k, v)
    assert y.shape == q.shape and y.dtype == dtype
    assert_within(y, ref, 1e-5 * v.double().abs().amax() + ulp_bound(ref, dtype, 2.0), "attention")
    ref_scaled = _attention_reference(q, k, v, scale=0.1)
    assert_within(ree.ops.attention(q, k, v, scale=0.1), ref_scaled,
                  1e-5 * v.double().abs().amax() + ulp_bound(ref_scaled, dtype, 2.0), "scale")


@pytest.mark.parametrize("dtype", DTYPES)
def test_embedding_argmax(dtype):
    table = randn(50, 24, dtype=dtype, seed=21)
    ids = torch.tensor([[3, 0, 49], [7, 7, 1]])
    assert_bits_equal(ree.ops.embedding(ids, table), F.embedding(ids, table), "embedding")
    x = randn(6, 5, 77, dtype=dtype, seed=22)
    for dim in (-1, 1):
        assert torch.equal(ree.ops.argmax(x, dim=dim), torch.argmax(x, dim=dim))
    ties = torch.tensor([[1.0, 3.0, 3.0], [-0.0, 0.0, -1.0], [1.0, float("nan"), float("nan")]],
                        dtype=dtype)
    assert ree.ops.argmax(ties).tolist() == [1, 0, 1]


def test_sample():
    logits = randn(3, 1000, seed=23, scale=3)
    assert torch.equal(ree.ops.sample(logits, temperature=0.0), torch.argmax(logits, dim=-1))
    assert torch.equal(ree.ops.sample(logits, temperature=0.7, top_k=1), torch.argmax(logits, -1))
    # The draws follow softmax(logits / T): frequencies over 4000 steps of a 4-token vocabulary.
    small = torch.tensor([[0.0, 1.0, 2.0, -1.0]])
    draws = torch.stack([ree.ops.sample(small, temperature=1.0, seed=5, step=s) for s in range(4000)])
    freq = torch.bincount(draws.reshape(-1), minlength=4).double() / 4000
    assert_within(freq, torch.softmax(small[0].double(), -1), 0.03, "sampling frequencies")
    # top_p keeps the smallest prefix reaching p: with p = 0.5 only the best token of `small`
    # (probability 0.64) can be drawn.
    top = torch.stack([ree.ops.sample(small, temperature=1.0, top_p=0.5, step=s) for s in range(200)])
    assert bool((top == 2).all())


def test_cast_rounding():
    x = torch.tensor([1.0 + 2.0**-8, 1.0 + 3 * 2.0**-9, 65520.0, float("nan"), -0.0, 1e-40])
    assert_bits_equal(ree.ops.cast(x, torch.bfloat16)[:3], x[:3].to(torch.bfloat16), "bf16 RNE")
    assert math.isinf(ree.ops.cast(x, torch.float16)[2].item())
    assert int(ree.ops.cast(x, torch.bfloat16)[3:4].view(torch.int16)) == 0x7FC0
