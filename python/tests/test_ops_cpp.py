"""The C++ operators (python/src/torch_ops_*.cpp): registered with torch's dispatcher for CPU and
CUDA from C++, and giving bitwise the results of the nanobind kernel calls that ree/ops.py made
before (ree._C.reduce_rows, rms_norm, layer_norm, linear, unary_math, activation, gated, softmax,
argmax_rows, cast with the same arguments)."""

import struct
import subprocess
import sys
import types
from pathlib import Path

import pytest
import torch

import ree
from ree import _C
from conftest import DTYPES, assert_bits_equal, randn

CPP_OPS = ["cast", "linear", "matmul", "rms_norm", "layer_norm", "sum", "mean", "max", "min", "var",
           "softmax", "log_softmax", "argmax", "sigmoid", "exp", "expm1", "log", "log1p", "tanh",
           "erf", "sin", "cos", "rsqrt", "softplus", "silu", "gelu", "swiglu", "geglu", "rope",
           "attention", "embedding", "sample"]
CODE = {torch.float32: 0, torch.bfloat16: 1, torch.float16: 2}


@pytest.mark.parametrize("name", CPP_OPS)
def test_operator_kernels_are_cpp(name):
    qualname = f"ree::{name}"
    for key in ("CPU", "CUDA", "Autograd"):
        assert torch._C._dispatch_has_kernel_for_dispatch_key(qualname, key), (qualname, key)
    # The CPU kernel's registration names the C++ file (a Python kernel's names /dev/null).
    table = torch._C._dispatch_dump_table(qualname)
    cpu_line = next(line for line in table.splitlines() if line.startswith("CPU:"))
    assert "torch_ops_" in cpu_line, cpu_line
    # ree.ops.<name> is the operator's fast entry (a builtin, torch_ops_fast.cpp; test_fast_path.py)
    fast = getattr(ree.ops, name)
    assert (fast, getattr(torch.ops.ree, name).default) in ree.ops._FAST_OPS
    assert isinstance(fast, types.BuiltinFunctionType) and fast.__name__ == name


def nb_reduce(op, x):
    out = torch.empty(x.shape[:-1], dtype=x.dtype)
    _C.reduce_rows(op, x.data_ptr(), CODE[x.dtype], out.data_ptr(), CODE[x.dtype],
                   x.numel() // x.shape[-1], x.shape[-1], -1)
    return out


@pytest.mark.parametrize("dtype", DTYPES)
def test_reductions_equal_the_nanobind_calls(dtype):
    x = randn(7, 301, dtype=dtype, seed=3)
    for code, name in enumerate(("sum", "mean", "max", "min", "var")):
        assert_bits_equal(getattr(ree.ops, name)(x), nb_reduce(code, x), name)
        # another dim: the moved-last copy, as before
        assert_bits_equal(getattr(ree.ops, name)(x, 0), nb_reduce(code, x.t().contiguous()),
                          f"{name} dim 0")


@pytest.mark.parametrize("dtype", DTYPES)
def test_norms_equal_the_nanobind_calls(dtype):
    x, w, b = randn(5, 129, dtype=dtype, seed=4), randn(129, seed=5), randn(129, seed=6)
    for cast_before in (False, True):
        y = torch.empty_like(x)
        _C.rms_norm(x.data_ptr(), CODE[dtype], w.data_ptr(), 0, y.data_ptr(), CODE[dtype], 5, 129,
                    1e-6, cast_before, -1)
        assert_bits_equal(ree.ops.rms_norm(x, w, 1e-6, cast_before), y, "rms_norm")
    y = torch.empty_like(x)
    _C.layer_norm(x.data_ptr(), CODE[dtype], w.data_ptr(), 0, b.data_ptr(), 0, y.data_ptr(),
                  CODE[dtype], 5, 129, 1e-5, -1)
    assert_bits_equal(ree.ops.layer_norm(x, w, b, 1e-5), y, "layer_norm")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_linear_and_matmul_equal_the_nanobind_call(dtype):
    x, w, bias = randn(6, 70, dtype=dtype, seed=7), randn(33, 70, dtype=dtype, seed=8), randn(33)
    y = torch.empty(6, 33, dtype=dtype)
    _C.linear(x.data_ptr(), CODE[dtype], w.data_ptr(), CODE[dtype], bias.data_ptr(), 0,
              y.data_ptr(), CODE[dtype], 6, 33, 70, -1)
    assert_bits_equal(ree.ops.linear(x, w, bias), y, "linear")
    _C.linear(x.data_ptr(), CODE[dtype], w.data_ptr(), CODE[dtype], 0, 0, y.data_ptr(),
              CODE[dtype], 6, 33, 70, -1)
    assert_bits_equal(ree.ops.matmul(x, w.t()), y, "matmul")
    assert_bits_equal(ree.ops.matmul(x[None], w.t()[None]), y[None], "batched matmul")


def test_pointwise_equal_the_nanobind_calls():
    x = randn(3, 257, seed=9)
    for code, name in ((0, "exp"), (4, "tanh"), (9, "sigmoid"), (13, "softplus")):
        y = torch.empty_like(x)
        _C.unary_math(code, x.data_ptr(), y.data_ptr(), x.numel(), -1)
        assert_bits_equal(getattr(ree.ops, name)(x), y, name)
    for dtype in DTYPES:
        xd = x.to(dtype)
        for code, (name, kwargs) in enumerate((("silu", {}), ("gelu", {}),
                                               ("gelu", {"approximate": "tanh"}))):
            y = torch.empty_like(xd)
            _C.activation(code, CODE[dtype], xd.data_ptr(), y.data_ptr(), xd.numel(), -1)
            assert_bits_equal(getattr(ree.ops, name)(xd, **kwargs), y, f"{name} {kwargs} {dtype}")
        up = randn(3, 257, dtype=dtype, seed=10)
        y = torch.empty_like(xd)
        _C.gated(0, CODE[dtype], xd.data_ptr(), up.data_ptr(), y.data_ptr(), 3, 257, -1)
        assert_bits_equal(ree.ops.swiglu(xd, up), y, f"swiglu {dtype}")


@pytest.mark.parametrize("dtype", DTYPES)
def test_softmax_argmax_cast_equal_the_nanobind_calls(dtype):
    x = randn(4, 200, dtype=dtype, seed=11, scale=3.0)
    for log in (False, True):
        y = torch.empty_like(x)
        _C.softmax(x.data_ptr(), CODE[dtype], y.data_ptr(), CODE[dtype], 4, 200, log, -1)
        assert_bits_equal((ree.ops.log_softmax if log else ree.ops.softmax)(x), y, "softmax")
    idx = torch.empty(4, dtype=torch.int32)
    _C.argmax_rows(x.data_ptr(), CODE[dtype], idx.data_ptr(), 4, 200, -1)
    assert torch.equal(ree.ops.argmax(x), idx.long())
    y = torch.empty(4, 200, dtype=torch.float16)
    _C.cast(x.data_ptr(), CODE[dtype], y.data_ptr(), 2, x.numel(), -1)
    assert_bits_equal(ree.ops.cast(x, torch.float16), y, "cast")


def test_non_contiguous_and_zero_dim_inputs():
    x = randn(64, 9, seed=12).t()  # [9, 64], not contiguous
    assert_bits_equal(ree.ops.sum(x), ree.ops.sum(x.contiguous()), "sum of a transposed view")
    assert_bits_equal(ree.ops.rms_norm(x), ree.ops.rms_norm(x.contiguous()), "rms_norm")
    assert_bits_equal(ree.ops.sigmoid(x), ree.ops.sigmoid(x.contiguous()), "sigmoid")
    s = torch.tensor(2.5)
    assert ree.ops.sum(s).shape == () and ree.ops.sum(s).item() == 2.5
    assert ree.ops.softmax(s).shape == () and ree.ops.softmax(s).item() == 1.0
    assert ree.ops.sum(torch.empty(0, 5)).shape == (0,)


def test_cpp_errors_are_python_exceptions():
    x = randn(3, 4)
    with pytest.raises(ValueError, match=r"ree.ops.sum: x needs a last dimension of at least 1"):
        ree.ops.sum(torch.empty(3, 0))
    with pytest.raises(IndexError):
        ree.ops.sum(x, 5)
    with pytest.raises(TypeError, match=r"ree.ops.cast: dtype has dtype float64"):
        ree.ops.cast(x, torch.float64)
    with pytest.raises(ValueError, match=r"ree.ops.layer_norm: bias must have shape \(4,\)"):
        ree.ops.layer_norm(x, None, randn(5))
    with pytest.raises(ValueError, match=r"a 3-D b needs a 3-D a"):
        ree.ops.matmul(x, randn(2, 4, 3))


def test_cpp_error_in_a_fresh_interpreter():
    """An operator's C++ error is a Python exception, not a crash (one killed Python when the
    libraries exported a static libstdc++: cmake/ReeLibstdcxx.cmake); a child interpreter, so a
    crash fails this test instead of ending the run."""
    code = ("import torch, ree\n"
            "try:\n    ree.ops.sum(torch.empty(3, 0))\n"
            "except ValueError as e:\n    print('raised', e)\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         cwd=Path(__file__).parent)
    assert run.returncode == 0 and "raised ree.ops.sum: x needs a last dimension" in run.stdout, (
        run.returncode, run.stdout, run.stderr[-2000:])


def needed_libraries(path: Path):
    """The DT_NEEDED entries of a 64-bit little-endian ELF shared object, in order."""
    data = path.read_bytes()
    assert data[:4] == b"\x7fELF" and data[4] == 2 and data[5] == 1, f"{path}: not ELF64 LE"
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    dynamic = next(s for s in sections if s[1] == 6)  # SHT_DYNAMIC
    strtab_offset = sections[dynamic[6]][4]  # sh_link: its string table
    names = []
    for at in range(dynamic[4], dynamic[4] + dynamic[5], 16):
        tag, value = struct.unpack_from("<qQ", data, at)
        if tag == 0:
            break
        if tag == 1:  # DT_NEEDED
            end = data.index(b"\0", strtab_offset + value)
            names.append(data[strtab_offset + value:end].decode())
    return names


def is_torch_library(name):
    return name.startswith(("libtorch", "libc10"))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="ELF link order (Linux only)")
def test_link_order_of_the_native_libraries():
    """libree_torch_ops.so is linked like a torch C++ extension: LibTorch before libstdc++ where the
    linker records libstdc++ (Ubuntu's default --as-needed may leave it out); ree._C does not link
    LibTorch itself (its exported copies of libstdc++'s std::filesystem crashed ree.compile)."""
    package = Path(ree.__file__).parent
    ops_needed = needed_libraries(package / "libree_torch_ops.so")
    torch_at = [i for i, name in enumerate(ops_needed) if is_torch_library(name)]
    stdcxx_at = [i for i, name in enumerate(ops_needed) if name.startswith("libstdc++")]
    assert torch_at, ops_needed
    assert not stdcxx_at or max(torch_at) < min(stdcxx_at), ops_needed
    module_needed = needed_libraries(Path(_C.__file__))
    assert not [name for name in module_needed if is_torch_library(name)], module_needed
