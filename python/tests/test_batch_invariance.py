"""Batch invariance: a row's bits never depend on how many rows, or which, are computed with it
(the property that makes REE's results independent of batch composition)."""

import pytest
import torch

import ree
from conftest import DTYPES, assert_bits_equal, randn


@pytest.mark.parametrize("dtype", DTYPES)
def test_linear_rows_alone_and_in_batches(dtype):
    w = randn(33, 515, dtype=dtype, seed=50)
    rows = randn(64, 515, dtype=dtype, seed=51)
    alone = torch.cat([ree.ops.linear(rows[i:i + 1], w) for i in range(rows.shape[0])])
    for batch in (2, 3, 16, 17, 64):
        together = torch.cat([ree.ops.linear(rows[i:i + batch], w) for i in range(0, 64, batch)])
        assert_bits_equal(together, alone, f"linear batch {batch}")
    # Different batch-mates: row 0 next to random others.
    others = randn(40, 515, dtype=dtype, seed=52, scale=100)
    mixed = ree.ops.matmul(torch.cat([rows[:1], others]), w.t())
    assert_bits_equal(mixed[:1], alone[:1], "matmul with other batch-mates")


@pytest.mark.parametrize("dtype", DTYPES)
def test_row_operators_alone_and_in_batches(dtype):
    x = randn(37, 700, dtype=dtype, seed=53, scale=3)
    w, b = randn(700, dtype=dtype, seed=54), randn(700, dtype=dtype, seed=55)
    ops = {
        "rms_norm": lambda t: ree.ops.rms_norm(t, w),
        "layer_norm": lambda t: ree.ops.layer_norm(t, w, b),
        "softmax": ree.ops.softmax, "log_softmax": ree.ops.log_softmax,
        "sum": ree.ops.sum, "mean": ree.ops.mean, "var": ree.ops.var,
        "max": ree.ops.max, "min": ree.ops.min, "argmax": ree.ops.argmax,
    }
    for name, op in ops.items():
        batched = op(x)
        for i in (0, 5, 36):
            assert_bits_equal(op(x[i:i + 1]), batched[i:i + 1], f"{name} row {i}")


@pytest.mark.parametrize("dtype", DTYPES)
def test_attention_sequence_alone_batched_and_decoded(dtype):
    heads, kv_heads, d, length = 8, 2, 64, 200
    q = randn(3, length, heads, d, dtype=dtype, seed=56)
    k = randn(3, length, kv_heads, d, dtype=dtype, seed=57)
    v = randn(3, length, kv_heads, d, dtype=dtype, seed=58)
    batched = ree.ops.attention(q, k, v)
    alone = ree.ops.attention(q[1:2], k[1:2], v[1:2])
    assert_bits_equal(batched[1:2], alone, "sequence alone vs in a batch")
    # Decode: the query at position t alone over the cache [0, t] equals prefill's row t.
    for t in (0, 63, 64, 130, length - 1):
        step = ree.ops.attention(q[:, t:t + 1], k[:, :t + 1], v[:, :t + 1])
        assert_bits_equal(step, batched[:, t:t + 1], f"decode at position {t}")
    # Chunked prefill: the last 50 queries over the full cache.
    tail = ree.ops.attention(q[:, -50:], k, v)
    assert_bits_equal(tail, batched[:, -50:], "chunked prefill")


def test_sampling_rows_keyed_by_sequence():
    logits = randn(6, 500, seed=59, scale=2)
    batched = ree.ops.sample(logits, temperature=0.9, top_p=0.95, seed=11, sequence=100, step=4)
    for i in range(6):
        alone = ree.ops.sample(logits[i:i + 1], temperature=0.9, top_p=0.95, seed=11,
                               sequence=100 + i, step=4)
        assert torch.equal(alone, batched[i:i + 1])


@pytest.mark.parametrize("dtype", DTYPES)
def test_elementwise_independent_of_neighbours(dtype):
    x = randn(3000, dtype=dtype, seed=60, scale=4)
    for name in ("sigmoid", "exp", "tanh", "erf", "sin", "cos", "silu", "gelu"):
        op = getattr(ree.ops, name)
        assert_bits_equal(op(x)[1234:1301], op(x[1234:1301]), name)
