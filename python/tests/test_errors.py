"""Bad dtypes, shapes, devices and values raise Python exceptions with messages that name the
operator, the argument and the limit; nothing crashes the interpreter."""

import pytest
import torch

import ree
from conftest import randn


def raises(exc, match, fn, *args, **kwargs):
    with pytest.raises(exc, match=match):
        fn(*args, **kwargs)


def test_dtype_errors():
    x = randn(3, 4)
    raises(TypeError, r"ree.ops.linear: x has dtype float64", ree.ops.linear, x.double(), x)
    raises(TypeError, r"ree.ops.sum: x has dtype int64", ree.ops.sum, torch.ones(3, dtype=torch.int64))
    raises(TypeError, r"one dtype", ree.ops.matmul, x, x.t().to(torch.bfloat16))
    raises(TypeError, r"positions must be integers", ree.ops.rope, randn(2, 1, 8),
           torch.tensor([0.0, 1.0]), ree.ops.rope_inv_freq(8))
    raises(TypeError, r"ids must be integers", ree.ops.embedding, torch.tensor([0.0]), x)


def test_shape_errors():
    x = randn(3, 4)
    raises(ValueError, r"in_features = 5", ree.ops.linear, x, randn(2, 5))
    raises(ValueError, r"bias must have shape \(2,\)", ree.ops.linear, x, randn(2, 4), randn(3))
    raises(ValueError, r"inner dimensions differ", ree.ops.matmul, x, randn(5, 2))
    raises(ValueError, r"weight must have shape \(4,\)", ree.ops.rms_norm, x, randn(5))
    raises(ValueError, r"last dimension of at least 1", ree.ops.softmax, torch.empty(3, 0))
    raises(ValueError, r"kv_heads dividing heads", ree.ops.attention, randn(1, 2, 3, 8),
           randn(1, 2, 2, 8), randn(1, 2, 2, 8))
    raises(ValueError, r"kv_len >= q_len", ree.ops.attention, randn(1, 4, 2, 8),
           randn(1, 2, 2, 8), randn(1, 2, 2, 8))
    raises(ValueError, r"gate and up must have one shape", ree.ops.swiglu, x, randn(3, 5))


def test_value_errors_from_the_kernels():
    x = randn(3, 4)
    raises(ValueError, r"ids\[2\] = 9 is outside the vocabulary \[0, 3\)", ree.ops.embedding,
           torch.tensor([0, 1, 9]), x)
    raises(ValueError, r"eps", ree.ops.rms_norm, x, None, -1.0)  # from the C++ argument check
    raises(ValueError, r"temperature", ree.ops.sample, x, temperature=-1.0)
    raises(ValueError, r"top_p", ree.ops.sample, x, top_p=0.0)
    raises(ValueError, r"seed must be in", ree.ops.sample, x, seed=-1)
    raises(ValueError, r"approximate must be 'none' or 'tanh'", ree.ops.gelu, x, approximate="x")
    raises(ValueError, r"rotary_dim must be even", ree.ops.rope_inv_freq, 7)


def test_device_errors():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device: the mixed-device check needs one")
    raises(ValueError, r"one device", ree.ops.linear, randn(2, 4), randn(3, 4, device="cuda"))


def test_backward_is_refused():
    x = randn(3, 4).requires_grad_()
    y = ree.ops.sigmoid(x).sum()
    with pytest.raises(RuntimeError):
        y.backward()
