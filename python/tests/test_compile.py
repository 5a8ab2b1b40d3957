"""The operators are real torch operators: torch.compile(fullgraph=True) traces them through
their fake kernels (one graph, no breaks), and the compiled function gives the eager bits."""

import pytest
import torch

import ree
from conftest import assert_bits_equal, randn


def block(x, w_qkv, w_out, norm_w, inv_freq, positions):
    """A small transformer block made only of REE operators (plus views)."""
    h = ree.ops.rms_norm(x, norm_w, eps=1e-5)
    qkv = ree.ops.linear(h, w_qkv).reshape(x.shape[0], x.shape[1], 3, 4, 16)
    q = ree.ops.rope(qkv[:, :, 0], positions, inv_freq)
    k = ree.ops.rope(qkv[:, :, 1], positions, inv_freq)
    a = ree.ops.attention(q, k, qkv[:, :, 2]).reshape(x.shape[0], x.shape[1], 64)
    y = ree.ops.linear(a, w_out)
    z = ree.ops.swiglu(y, ree.ops.gelu(y, approximate="tanh"))
    # Only REE operators and views: Inductor then has no kernel of its own to compile (fast).
    return ree.ops.softmax(z), ree.ops.mean(z, keepdim=True)


def test_compile_fullgraph_matches_eager():
    x = randn(2, 10, 64, seed=70)
    args = (x, randn(192, 64, seed=71), randn(64, 64, seed=72), randn(64, seed=73),
            ree.ops.rope_inv_freq(16), torch.arange(10))
    eager = block(*args)
    compiled = torch.compile(block, fullgraph=True)(*args)  # the default backend, Inductor
    for c, e in zip(compiled, eager):
        assert_bits_equal(c, e, "compiled block")


@pytest.mark.parametrize("name", ["matmul", "sum", "var", "max", "sigmoid", "layer_norm",
                                  "log_softmax", "argmax", "embedding", "sample"])
def test_compile_each_bitexact_op(name):
    x = randn(7, 33, seed=74)
    calls = {
        "matmul": lambda t: ree.ops.matmul(t, t.t()),
        "layer_norm": lambda t: ree.ops.layer_norm(t, eps=1e-5),
        "embedding": lambda t: ree.ops.embedding(torch.tensor([[1, 2], [6, 0]]), t),
        "sample": lambda t: ree.ops.sample(t, temperature=0.5, seed=9),
    }
    fn = calls.get(name, getattr(ree.ops, name))
    compiled = torch.compile(fn, fullgraph=True, backend="aot_eager")
    assert_bits_equal(compiled(x), fn(x), name)


def test_opcheck_schema_and_fake_kernels():
    x = randn(4, 40, seed=75)
    w = randn(6, 40, seed=76)
    cases = [
        (torch.ops.ree.linear.default, (x, w, None)),
        (torch.ops.ree.rms_norm.default, (x, w[0], 1e-6, False)),
        (torch.ops.ree.softmax.default, (x, 0)),
        (torch.ops.ree.sum.default, (x, 1, True)),
        (torch.ops.ree.attention.default, (x.reshape(1, 4, 5, 8), x.reshape(1, 4, 5, 8),
                                           x.reshape(1, 4, 5, 8), None)),
        (torch.ops.ree.argmax.default, (x, -1, False)),
    ]
    for op, args in cases:
        torch.library.opcheck(op, args, test_utils=("test_schema", "test_faketensor",
                                                    "test_aot_dispatch_static"))
