"""RepOps as PyTorch operators: ``torch.ops.ree.<name>`` and the functions of this module.

Every operator is forward only (no autograd formula; calling backward through one raises). Each
has a fake (meta) implementation, so ``torch.compile(fullgraph=True)`` traces it as one opaque
node. CPU and CUDA tensors are accepted (float32, bfloat16, float16 unless an operator says
otherwise), and both devices compute the same bits: the arithmetic is the RepOps specification
(docs/repops-spec.md), run by REE's CPU or CUDA kernels (kernels/).

Non-contiguous inputs are copied to contiguous ones first (a copy changes no value). Outputs are
new contiguous tensors. What each operator computes, and its rounding points, is in docs/python.md.
"""

import contextlib
from typing import Optional

import torch
from torch import Tensor

from . import _C

__all__ = [
    "matmul", "linear", "rms_norm", "layer_norm", "sum", "mean", "max", "min", "var",
    "softmax", "log_softmax", "sigmoid", "exp", "expm1", "log", "log1p", "tanh", "erf", "sin",
    "cos", "rsqrt", "softplus", "silu", "gelu", "swiglu", "geglu", "rope", "rope_inv_freq",
    "attention", "embedding", "argmax", "sample", "cast",
]

_F32, _BF16, _F16 = torch.float32, torch.bfloat16, torch.float16
_DTYPE_CODE = {_F32: 0, _BF16: 1, _F16: 2}
_REDUCE_CODE = {"sum": 0, "mean": 1, "max": 2, "min": 3, "var": 4}
_ACTIVATION_CODE = {"silu": 0, "gelu_erf": 1, "gelu_tanh": 2}
_GELU_APPROXIMATE = {"none": "gelu_erf", "tanh": "gelu_tanh"}
# math_ops.h UnaryMathOp values.
_UNARY_CODE = {
    "exp": 0, "expm1": 1, "log": 2, "log1p": 3, "tanh": 4, "erf": 5, "sin": 6, "cos": 7,
    "rsqrt": 8, "sigmoid": 9, "softplus": 13,
}


# ---- argument checks and plumbing -------------------------------------------------------------

def _code(op: str, name: str, t: Tensor, allowed=(_F32, _BF16, _F16)) -> int:
    if t.dtype not in allowed:
        names = ", ".join(str(d).replace("torch.", "") for d in allowed)
        raise TypeError(f"ree.ops.{op}: {name} has dtype {str(t.dtype).replace('torch.', '')}; "
                        f"supported: {names}")
    return _DTYPE_CODE[t.dtype]


def _device(op: str, **tensors) -> torch.device:
    """The one device of an operator's tensors (None entries are absent inputs)."""
    device = None
    for t in tensors.values():
        if t is None:
            continue
        if device is None:
            device = t.device
        elif t.device != device:
            where = ", ".join(f"{name} on {t.device}" for name, t in tensors.items()
                              if t is not None)
            raise ValueError(f"ree.ops.{op}: tensors must be on one device ({where})")
    if device.type not in ("cpu", "cuda"):
        raise ValueError(f"ree.ops.{op}: device {device} is not supported (cpu, cuda)")
    return device


def _stream(device: torch.device) -> int:
    """-1 for the CPU, else the current CUDA stream of `device` (the raw cudaStream_t)."""
    if device.type == "cpu":
        return -1
    if not _C.has_cuda:
        raise RuntimeError("ree: this build has no CUDA kernels (build on a machine with nvcc)")
    return torch._C._cuda_getCurrentRawStream(device.index)


_NO_CONTEXT = contextlib.nullcontext()


def _on(device: torch.device):
    """Makes `device` current while REE's CUDA kernels are launched (a no-op when it is)."""
    if device.type != "cuda" or device.index == torch._C._cuda_getDevice():
        return _NO_CONTEXT
    return torch.cuda.device(device)


def _ptr(t: Optional[Tensor]) -> int:
    return 0 if t is None else t.data_ptr()


def _last_dim(op: str, x: Tensor) -> int:
    if x.dim() == 0 or x.shape[-1] < 1:
        raise ValueError(f"ree.ops.{op}: x needs a last dimension of at least 1 element "
                         f"(shape {tuple(x.shape)})")
    return x.shape[-1]


def _cast_raw(x: Tensor, dtype: torch.dtype) -> Tensor:
    """x converted to dtype by the RepOps cast (one RNE rounding; NaN canonical)."""
    x = x.contiguous()
    if x.dtype == dtype:
        return x
    y = torch.empty(x.shape, dtype=dtype, device=x.device)
    with _on(x.device):
        _C.cast(_ptr(x), _DTYPE_CODE[x.dtype], _ptr(y), _DTYPE_CODE[dtype], x.numel(),
                _stream(x.device))
    return y


# ---- registration ---------------------------------------------------------------------------
#
# Each operator is defined in the library "ree" with the schema torch.library.custom_op would infer
# from its Python signature, its implementation registered for every backend
# (CompositeExplicitAutograd: the device check then names an unsupported device) and a fake kernel
# for torch.compile. Not through torch.library.custom_op itself: its generic wrappers (an autograd
# Function, a dynamo guard, an aliasing check) cost 10-20 us of host time per call, about the time
# of a 64 MB reduction's kernel on an H100. Instead one Autograd kernel per operator (_autograd_kernel)
# calls the implementation directly when nothing else needs to see the call, and otherwise takes
# the dispatcher's normal route.

_LIB = torch.library.Library("ree", "DEF")
_AFTER_AUTOGRAD = torch._C._after_autograd_keyset
_AD_INPLACE_OR_VIEW = torch._C.DispatchKey.ADInplaceOrView
# The keys left below autograd for plain dense CPU or CUDA tensors with no mode active.
_PLAIN_KEYS = frozenset(torch._C.DispatchKeySet(key).raw_repr()
                        for key in (torch._C.DispatchKey.CPU, torch._C.DispatchKey.CUDA))


class _ForwardOnly(torch.autograd.Function):
    """Runs an operator below autograd and gives its outputs a backward that raises (forward
    only), for calls where an input requires grad."""

    @staticmethod
    def forward(ctx, overload, keyset, *args):
        ctx.op_name = overload._opname
        with torch._C._AutoDispatchBelowAutograd():
            return overload.redispatch(keyset & _AFTER_AUTOGRAD, *args)

    @staticmethod
    def backward(ctx, *grads):
        raise RuntimeError(f"ree.ops.{ctx.op_name} has no backward: the RepOps are forward only "
                           "(docs/python.md)")


_PLAIN_BY_KEYSET = {}  # DispatchKeySet.raw_repr() -> whether it is plain


def _plain(keyset) -> bool:
    """Whether a call's dispatch keys below autograd are those of plain CPU or CUDA tensors with
    no mode active (no fake tensors, functionalization, Python dispatch, vmap)."""
    raw = keyset.raw_repr()
    plain = _PLAIN_BY_KEYSET.get(raw)
    if plain is None:
        below = (keyset & _AFTER_AUTOGRAD).remove(_AD_INPLACE_OR_VIEW)
        plain = _PLAIN_BY_KEYSET[raw] = below.raw_repr() in _PLAIN_KEYS
    return plain


def _autograd_kernel(overload, impl):
    def kernel(keyset, *args):
        if torch.is_grad_enabled():
            for a in args:
                if isinstance(a, Tensor) and a.requires_grad:
                    return _ForwardOnly.apply(overload, keyset, *args)
        if _plain(keyset):
            # The normal route would reach `impl` through ADInplaceOrView's fallthrough.
            return impl(*args)
        with torch._C._AutoDispatchBelowAutograd():
            return overload.redispatch(keyset & _AFTER_AUTOGRAD, *args)

    return kernel


def _op(name: str):
    """Defines ree::<name> from the decorated function (schema, implementation, autograd kernel);
    returns the operator (an OpOverload, callable with the function's defaults and keywords)."""

    def define(impl):
        _LIB.define(name + torch.library.infer_schema(impl, mutates_args=()))
        overload = getattr(torch.ops.ree, name).default
        _LIB.impl(name, impl, "CompositeExplicitAutograd")
        _LIB.impl(name, _autograd_kernel(overload, impl), "Autograd", with_keyset=True)
        overload.__doc__ = impl.__doc__
        return overload

    return define


def _fake(overload):
    """Registers the decorated function as the operator's fake (meta) kernel."""
    return lambda fn: torch.library.register_fake(overload, fn, lib=_LIB)


# ---- cast ---------------------------------------------------------------------------------------

@_op("cast")
def cast(x: Tensor, dtype: torch.dtype) -> Tensor:
    """x converted to float32/bfloat16/float16: one round-to-nearest-even, NaN canonical."""
    _code("cast", "x", x)
    _code("cast", "dtype", torch.empty(0, dtype=dtype))
    _device("cast", x=x)
    y = _cast_raw(x, dtype)
    return x.clone() if y is x else y  # an operator's output never aliases its input


@_fake(cast)
def _(x, dtype):
    return x.new_empty(x.shape, dtype=dtype)


# ---- linear / matmul --------------------------------------------------------------------------

def _linear_raw(op: str, x: Tensor, weight: Tensor, bias: Optional[Tensor]) -> Tensor:
    device = _device(op, x=x, weight=weight, bias=bias)
    _code(op, "x", x)
    _code(op, "weight", weight)
    if weight.dim() != 2:
        raise ValueError(f"ree.ops.{op}: weight must be 2-D [out_features, in_features], got "
                         f"shape {tuple(weight.shape)}")
    n, k = weight.shape
    if x.dim() < 1 or x.shape[-1] != k:
        raise ValueError(f"ree.ops.{op}: x's last dimension must be in_features = {k}, got shape "
                         f"{tuple(x.shape)}")
    if bias is not None:
        _code(op, "bias", bias)
        if tuple(bias.shape) != (n,):
            raise ValueError(f"ree.ops.{op}: bias must have shape ({n},), got {tuple(bias.shape)}")
        if bias.dtype not in (_F32, weight.dtype):
            bias = _cast_raw(bias, _F32)  # exact widening
        bias = bias.contiguous()
    out_shape = (*x.shape[:-1], n)
    x2 = x.reshape(-1, k).contiguous()
    m = x2.shape[0]
    # The kernel reads f32/bf16 activations and writes f32/bf16: f16 activations are widened
    # (exact) and the f32 result rounded once to f16.
    if x2.dtype == _F16:
        x2 = _cast_raw(x2, _F32)
    y = torch.empty((m, n), dtype=x2.dtype, device=device)
    if m > 0 and n > 0:
        weight = weight.contiguous()
        with _on(device):
            _C.linear(_ptr(x2), _DTYPE_CODE[x2.dtype], _ptr(weight), _DTYPE_CODE[weight.dtype],
                      _ptr(bias), _DTYPE_CODE[bias.dtype] if bias is not None else 0, _ptr(y),
                      _DTYPE_CODE[y.dtype], m, n, k, _stream(device))
    return _cast_raw(y, x.dtype).reshape(out_shape)


@_op("linear")
def linear(x: Tensor, weight: Tensor, bias: Optional[Tensor] = None) -> Tensor:
    """y = x @ weight.T (+ bias), like torch.nn.functional.linear; output dtype of x."""
    return _linear_raw("linear", x, weight, bias)


@_fake(linear)
def _(x, weight, bias=None):
    return x.new_empty((*x.shape[:-1], weight.shape[0]))


def _matmul_shape(a: Tensor, b: Tensor):
    if a.dim() < 1 or b.dim() < 1 or b.dim() > 3:
        raise ValueError(f"ree.ops.matmul: shapes {tuple(a.shape)} and {tuple(b.shape)}: b must be "
                         "1-D, 2-D [K, N] or 3-D [batch, K, N]")
    if b.dim() == 3 and (a.dim() != 3 or a.shape[0] != b.shape[0]):
        raise ValueError(f"ree.ops.matmul: a 3-D b needs a 3-D a with the same batch, got "
                         f"{tuple(a.shape)} and {tuple(b.shape)}")
    if a.shape[-1] != b.shape[-2 if b.dim() > 1 else 0]:
        raise ValueError(f"ree.ops.matmul: inner dimensions differ: {tuple(a.shape)} @ "
                         f"{tuple(b.shape)}")
    lead = a.shape[:-1] if a.dim() > 1 else ()
    n = (b.shape[-1],) if b.dim() > 1 else ()
    return (*lead, *n)


@_op("matmul")
def matmul(a: Tensor, b: Tensor) -> Tensor:
    """a @ b for a [..., M, K] and b [K, N] (or batched a [B, M, K] @ b [B, K, N], or 1-D)."""
    shape = _matmul_shape(a, b)
    if a.dtype != b.dtype:
        raise TypeError(f"ree.ops.matmul: a and b must have one dtype, got {a.dtype} and {b.dtype}")
    a2 = a.unsqueeze(0) if a.dim() == 1 else a
    if b.dim() == 3:
        parts = [_linear_raw("matmul", a2[i], b[i].t().contiguous(), None) for i in range(b.shape[0])]
        out = torch.stack(parts) if parts else a2.new_empty((0, a2.shape[1], b.shape[2]))
    else:
        w = b.unsqueeze(1).t() if b.dim() == 1 else b.t()
        out = _linear_raw("matmul", a2, w.contiguous(), None)
    return out.reshape(shape)


@_fake(matmul)
def _(a, b):
    return a.new_empty(_matmul_shape(a, b))


# ---- normalisation ----------------------------------------------------------------------------

def _vector(op: str, name: str, v: Optional[Tensor], cols: int) -> Optional[Tensor]:
    if v is None:
        return None
    _code(op, name, v)
    if v.numel() != cols or v.dim() != 1:
        raise ValueError(f"ree.ops.{op}: {name} must have shape ({cols},), got {tuple(v.shape)}")
    return v.contiguous()


@_op("rms_norm")
def rms_norm(x: Tensor, weight: Optional[Tensor] = None, eps: float = 1e-6,
             cast_before_weight: bool = False) -> Tensor:
    """RMSNorm over the last dimension. cast_before_weight: transformers' LlamaRMSNorm rounding
    (the normalised value is rounded to x's dtype before the weight multiplies it)."""
    device = _device("rms_norm", x=x, weight=weight)
    code = _code("rms_norm", "x", x)
    cols = _last_dim("rms_norm", x)
    weight = _vector("rms_norm", "weight", weight, cols)
    x = x.contiguous()
    y = torch.empty_like(x)
    rows = x.numel() // cols
    with _on(device):
        _C.rms_norm(_ptr(x), code, _ptr(weight), _DTYPE_CODE[weight.dtype] if weight is not None
                    else 0, _ptr(y), code, rows, cols, eps, cast_before_weight, _stream(device))
    return y


@_fake(rms_norm)
def _(x, weight=None, eps=1e-6, cast_before_weight=False):
    return x.new_empty(x.shape)


@_op("layer_norm")
def layer_norm(x: Tensor, weight: Optional[Tensor] = None, bias: Optional[Tensor] = None,
               eps: float = 1e-5) -> Tensor:
    """LayerNorm over the last dimension (population variance, two passes)."""
    device = _device("layer_norm", x=x, weight=weight, bias=bias)
    code = _code("layer_norm", "x", x)
    cols = _last_dim("layer_norm", x)
    weight = _vector("layer_norm", "weight", weight, cols)
    bias = _vector("layer_norm", "bias", bias, cols)
    x = x.contiguous()
    y = torch.empty_like(x)
    rows = x.numel() // cols
    with _on(device):
        _C.layer_norm(_ptr(x), code, _ptr(weight), _DTYPE_CODE.get(getattr(weight, "dtype", None), 0),
                      _ptr(bias), _DTYPE_CODE.get(getattr(bias, "dtype", None), 0), _ptr(y), code,
                      rows, cols, eps, _stream(device))
    return y


@_fake(layer_norm)
def _(x, weight=None, bias=None, eps=1e-5):
    return x.new_empty(x.shape)


# ---- row reductions, softmax, argmax --------------------------------------------------------------

def _rows_last(op: str, x: Tensor, dim: int):
    """x with `dim` moved last, contiguous, and (rows, cols)."""
    if x.dim() == 0:
        x = x.reshape(1)
        dim = 0
    xm = x.movedim(dim, -1).contiguous()
    cols = _last_dim(op, xm)
    return xm, xm.numel() // cols, cols


def _reduced_shape(x: Tensor, dim: int, keepdim: bool):
    if x.dim() == 0:
        return ()
    dim = dim % x.dim()
    shape = list(x.shape)
    if keepdim:
        shape[dim] = 1
    else:
        del shape[dim]
    return tuple(shape)


def _reduce(op: str, x: Tensor, dim: int, keepdim: bool) -> Tensor:
    device = _device(op, x=x)
    code = _code(op, "x", x)
    if x.dim() and dim in (-1, x.dim() - 1):  # the common case: no movedim view, no shape work
        xm, cols = x.contiguous(), x.shape[-1]
        if cols < 1:
            _last_dim(op, x)
        rows = xm.numel() // cols
    else:
        xm, rows, cols = _rows_last(op, x, dim)
    # Allocated in the result's shape: rows values in row order, contiguous.
    out = x.new_empty(_reduced_shape(x, dim, keepdim))
    with _on(device):
        _C.reduce_rows(_REDUCE_CODE[op], _ptr(xm), code, _ptr(out), code, rows, cols,
                       _stream(device))
    return out


def _make_reduction(op: str, doc: str):
    def impl(x: Tensor, dim: int = -1, keepdim: bool = False) -> Tensor:
        return _reduce(op, x, dim, keepdim)

    impl.__name__ = op
    impl.__doc__ = doc
    custom = _op(op)(impl)

    @_fake(custom)
    def _(x, dim=-1, keepdim=False):
        return x.new_empty(_reduced_shape(x, dim, keepdim))

    return custom


sum = _make_reduction("sum", "Canonical-order sum over `dim` (chunks of 128, merged left to right).")
mean = _make_reduction("mean", "Canonical sum over `dim` divided by its length.")
max = _make_reduction("max", "Maximum over `dim` (values only; NaN if any; max(-0, +0) = +0).")
min = _make_reduction("min", "Minimum over `dim` (values only; NaN if any; min(-0, +0) = -0).")
var = _make_reduction("var", "Population variance over `dim` (correction 0; two passes).")


def _softmax(op: str, x: Tensor, dim: int, log: bool) -> Tensor:
    device = _device(op, x=x)
    code = _code(op, "x", x)
    xm, rows, cols = _rows_last(op, x, dim)
    y = torch.empty_like(xm)
    with _on(device):
        _C.softmax(_ptr(xm), code, _ptr(y), code, rows, cols, log, _stream(device))
    return y.movedim(-1, dim if x.dim() else 0).reshape(x.shape).contiguous()


@_op("softmax")
def softmax(x: Tensor, dim: int = -1) -> Tensor:
    """Softmax over `dim`: crExp(x - max) / canonical sum."""
    return _softmax("softmax", x, dim, False)


@_fake(softmax)
def _(x, dim=-1):
    return x.new_empty(x.shape)


@_op("log_softmax")
def log_softmax(x: Tensor, dim: int = -1) -> Tensor:
    """Log-softmax over `dim`: (x - max) - crLog(canonical sum of crExp(x - max))."""
    return _softmax("log_softmax", x, dim, True)


@_fake(log_softmax)
def _(x, dim=-1):
    return x.new_empty(x.shape)


@_op("argmax")
def argmax(x: Tensor, dim: int = -1, keepdim: bool = False) -> Tensor:
    """Index of the largest element over `dim` (int64): the first NaN if any, else the lowest
    index of the maximum (as torch.argmax)."""
    device = _device("argmax", x=x)
    code = _code("argmax", "x", x)
    xm, rows, cols = _rows_last("argmax", x, dim)
    out = torch.empty(rows, dtype=torch.int32, device=device)
    with _on(device):
        _C.argmax_rows(_ptr(xm), code, _ptr(out), rows, cols, _stream(device))
    return out.to(torch.int64).reshape(_reduced_shape(x, dim, keepdim))


@_fake(argmax)
def _(x, dim=-1, keepdim=False):
    return x.new_empty(_reduced_shape(x, dim, keepdim), dtype=torch.int64)


# ---- element-wise ------------------------------------------------------------------------------

def _unary(op: str, x: Tensor) -> Tensor:
    """A correctly rounded fp32 function (crmath); bf16/f16 inputs are widened exactly and the
    fp32 result rounded once to their dtype."""
    device = _device(op, x=x)
    _code(op, "x", x)
    f32 = x.dtype == _F32
    xf = x.contiguous() if f32 else _cast_raw(x, _F32)
    y = torch.empty_like(xf)
    with _on(device):
        _C.unary_math(_UNARY_CODE[op], _ptr(xf), _ptr(y), xf.numel(), _stream(device))
    return y if f32 else _cast_raw(y, x.dtype)


def _make_unary(op: str):
    def impl(x: Tensor) -> Tensor:
        return _unary(op, x)

    impl.__name__ = op
    impl.__doc__ = (f"Correctly rounded {op} (crmath.h) of every element; bf16/f16 round the fp32 "
                    "result once.")
    custom = _op(op)(impl)

    @_fake(custom)
    def _(x):
        return x.new_empty(x.shape)

    return custom


sigmoid = _make_unary("sigmoid")
exp = _make_unary("exp")
expm1 = _make_unary("expm1")
log = _make_unary("log")
log1p = _make_unary("log1p")
tanh = _make_unary("tanh")
erf = _make_unary("erf")
sin = _make_unary("sin")
cos = _make_unary("cos")
rsqrt = _make_unary("rsqrt")
softplus = _make_unary("softplus")


def _activation(op: str, activation: str, x: Tensor) -> Tensor:
    device = _device(op, x=x)
    code = _code(op, "x", x)
    x = x.contiguous()
    y = torch.empty_like(x)
    with _on(device):
        _C.activation(_ACTIVATION_CODE[activation], code, _ptr(x), _ptr(y), x.numel(),
                      _stream(device))
    return y


def _gelu_kind(approximate: str) -> str:
    if approximate not in _GELU_APPROXIMATE:
        raise ValueError(f"ree.ops.gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    return _GELU_APPROXIMATE[approximate]


@_op("silu")
def silu(x: Tensor) -> Tensor:
    """x * sigmoid(x), correctly rounded in fp32, then rounded once to x's dtype."""
    return _activation("silu", "silu", x)


@_fake(silu)
def _(x):
    return x.new_empty(x.shape)


@_op("gelu")
def gelu(x: Tensor, approximate: str = "none") -> Tensor:
    """GELU (approximate 'none': erf form; 'tanh': tanh form), as torch.nn.functional.gelu."""
    return _activation("gelu", _gelu_kind(approximate), x)


@_fake(gelu)
def _(x, approximate="none"):
    return x.new_empty(x.shape)


def _gated(op: str, activation: str, gate: Tensor, up: Tensor) -> Tensor:
    device = _device(op, gate=gate, up=up)
    code = _code(op, "gate", gate)
    if up.dtype != gate.dtype or up.shape != gate.shape:
        raise ValueError(f"ree.ops.{op}: gate and up must have one shape and dtype, got "
                         f"{tuple(gate.shape)} {gate.dtype} and {tuple(up.shape)} {up.dtype}")
    cols = _last_dim(op, gate)
    gate, up = gate.contiguous(), up.contiguous()
    out = torch.empty_like(gate)
    with _on(device):
        _C.gated(_ACTIVATION_CODE[activation], code, _ptr(gate), _ptr(up), _ptr(out),
                 gate.numel() // cols, cols, _stream(device))
    return out


@_op("swiglu")
def swiglu(gate: Tensor, up: Tensor) -> Tensor:
    """silu(gate) * up with transformers' rounding points (LlamaMLP's act_fn(gate) * up)."""
    return _gated("swiglu", "silu", gate, up)


@_fake(swiglu)
def _(gate, up):
    return gate.new_empty(gate.shape)


@_op("geglu")
def geglu(gate: Tensor, up: Tensor, approximate: str = "tanh") -> Tensor:
    """gelu(gate) * up (GeGLU), rounding as swiglu."""
    return _gated("geglu", _gelu_kind(approximate), gate, up)


@_fake(geglu)
def _(gate, up, approximate="tanh"):
    return gate.new_empty(gate.shape)


# ---- RoPE, attention, embedding ----------------------------------------------------------------

def rope_inv_freq(rotary_dim: int, base: float = 10000.0, llama3: Optional[dict] = None,
                  device="cpu") -> Tensor:
    """The inverse frequencies [rotary_dim / 2] (fp32) of transformers' default rope, or of its
    "llama3" scaling when `llama3` holds the config's rope_scaling keys (factor, low_freq_factor,
    high_freq_factor, original_max_position_embeddings). Computed on the host (the same bits as
    the CUDA kernel) and copied to `device`."""
    if rotary_dim <= 0 or rotary_dim % 2:
        raise ValueError(f"ree.ops.rope_inv_freq: rotary_dim must be even and > 0, got {rotary_dim}")
    scaling = None
    if llama3 is not None:
        scaling = (float(llama3["factor"]), float(llama3["low_freq_factor"]),
                   float(llama3["high_freq_factor"]),
                   int(llama3["original_max_position_embeddings"]))
    out = torch.empty(rotary_dim // 2, dtype=_F32)
    _C.rope_inv_freq(float(base), rotary_dim, scaling, _ptr(out))
    return out.to(device)


def _rope_geometry(x: Tensor, positions: Tensor, inv_freq: Tensor):
    if x.dim() < 3:
        raise ValueError(f"ree.ops.rope: x must be [..., tokens, heads, head_dim], got shape "
                         f"{tuple(x.shape)}")
    lead = tuple(x.shape[:-2])
    if tuple(positions.shape) not in (lead, lead[-1:]):
        raise ValueError(f"ree.ops.rope: positions must have shape {lead} or {lead[-1:]}, got "
                         f"{tuple(positions.shape)}")
    if inv_freq.dim() != 1 or 2 * inv_freq.numel() > x.shape[-1] or inv_freq.numel() == 0:
        raise ValueError(f"ree.ops.rope: inv_freq must be 1-D with 1 .. head_dim/2 entries, got "
                         f"shape {tuple(inv_freq.shape)} for head_dim {x.shape[-1]}")
    return lead


@_op("rope")
def rope(x: Tensor, positions: Tensor, inv_freq: Tensor, interleaved: bool = False) -> Tensor:
    """Rotary embedding of x [..., tokens, heads, head_dim] at integer `positions` ([..., tokens]
    or [tokens]); the first 2 * len(inv_freq) channels of each head rotate (half-split pairs, or
    interleaved (2i, 2i+1) pairs). Rounding as transformers' apply_rotary_pos_emb."""
    device = _device("rope", x=x, positions=positions, inv_freq=inv_freq)
    code = _code("rope", "x", x)
    _code("rope", "inv_freq", inv_freq, allowed=(_F32,))
    lead = _rope_geometry(x, positions, inv_freq)
    if positions.dtype.is_floating_point or positions.dtype == torch.bool:
        raise TypeError(f"ree.ops.rope: positions must be integers, got {positions.dtype}")
    heads, head_dim = x.shape[-2], x.shape[-1]
    pos = positions.expand(lead).reshape(-1).to(torch.int32).contiguous()
    y = x.contiguous().clone()
    tokens = pos.numel()
    if tokens:
        with _on(device):
            _C.rope(code, _ptr(y), tokens, heads, head_dim, heads * head_dim, _ptr(pos),
                    _ptr(inv_freq.contiguous()), 2 * inv_freq.numel(), interleaved,
                    _stream(device))
    return y


@_fake(rope)
def _(x, positions, inv_freq, interleaved=False):
    return x.new_empty(x.shape)


def _attention_shapes(q: Tensor, k: Tensor, v: Tensor):
    if q.dim() != 4 or k.dim() != 4 or k.shape != v.shape:
        raise ValueError(f"ree.ops.attention: q [batch, q_len, heads, head_dim] and k, v [batch, "
                         f"kv_len, kv_heads, head_dim] of one shape, got {tuple(q.shape)}, "
                         f"{tuple(k.shape)}, {tuple(v.shape)}")
    b, tq, h, d = q.shape
    if k.shape[0] != b or k.shape[3] != d or k.shape[1] < tq or k.shape[2] < 1 or h % k.shape[2]:
        raise ValueError(f"ree.ops.attention: k/v {tuple(k.shape)} do not fit q {tuple(q.shape)} "
                         "(same batch and head_dim, kv_len >= q_len, kv_heads dividing heads)")


@_op("attention")
def attention(q: Tensor, k: Tensor, v: Tensor, scale: Optional[float] = None) -> Tensor:
    """Causal grouped-query attention. q [batch, q_len, heads, head_dim]; k, v [batch, kv_len,
    kv_heads, head_dim] (a KV cache holding every position, the new ones last): query i sits at
    position kv_len - q_len + i and attends positions 0 .. itself. Output as q. scale: default
    1/sqrt(head_dim) (correctly rounded). Fixed 64-position KV chunks: a query's bits do not depend
    on q_len, the batch or the device."""
    _attention_shapes(q, k, v)
    device = _device("attention", q=q, k=k, v=v)
    q_code = _code("attention", "q", q)
    kv_code = _code("attention", "k", k)
    if v.dtype != k.dtype:
        raise TypeError(f"ree.ops.attention: k and v must have one dtype, got {k.dtype}, {v.dtype}")
    b, tq, h, d = q.shape
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    out = torch.empty_like(q)
    with _on(device):
        _C.attention(b, tq, k.shape[1], h, k.shape[2], d, _ptr(q), q_code, _ptr(k), _ptr(v),
                     kv_code, _ptr(out), q_code, 0.0 if scale is None else float(scale),
                     _stream(device))
    return out


@_fake(attention)
def _(q, k, v, scale=None):
    return q.new_empty(q.shape)


@_op("embedding")
def embedding(ids: Tensor, table: Tensor) -> Tensor:
    """table[ids] (rows of a [vocab, dim] table), as torch.nn.functional.embedding(ids, table).
    An id outside [0, vocab) raises, naming its position."""
    device = _device("embedding", ids=ids, table=table)
    code = _code("embedding", "table", table)
    if ids.dtype.is_floating_point or ids.dtype == torch.bool:
        raise TypeError(f"ree.ops.embedding: ids must be integers, got {ids.dtype}")
    if table.dim() != 2:
        raise ValueError(f"ree.ops.embedding: table must be 2-D [vocab, dim], got "
                         f"{tuple(table.shape)}")
    vocab, dim = table.shape
    flat = ids.reshape(-1).to(torch.int64)
    if device.type == "cpu" and flat.numel() and (int(flat.min()) < 0 or int(flat.max()) >= vocab):
        bad = int(((flat < 0) | (flat >= vocab)).nonzero()[0])
        raise ValueError(f"ree.ops.embedding: ids[{bad}] = {int(flat[bad])} is outside the "
                         f"vocabulary [0, {vocab})")
    # On CUDA the kernel checks the ids (no host round trip unless one is bad); ids beyond int32
    # become -1 so that they are reported rather than wrapped.
    flat = torch.where((flat < 0) | (flat > 2**31 - 1), -1, flat).to(torch.int32).contiguous()
    table = table.contiguous()
    out = torch.empty((flat.numel(), dim), dtype=table.dtype, device=device)
    if flat.numel():
        with _on(device):
            _C.embedding(code, _ptr(table), vocab, dim, _ptr(flat), flat.numel(), _ptr(out),
                         _stream(device))
    return out.reshape(*ids.shape, dim)


@_fake(embedding)
def _(ids, table):
    return table.new_empty((*ids.shape, table.shape[1]))


# ---- sampling ----------------------------------------------------------------------------------

@_op("sample")
def sample(logits: Tensor, temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0,
           seed: int = 0, sequence: int = 0, step: int = 0) -> Tensor:
    """One token per row of logits [batch, vocab] (or [vocab]): temperature / top-k / top-p
    sampling with the Philox4x32-10 draw keyed by (seed, sequence + row, step); temperature 0 is
    argmax. int64 ids. Logits are fp32 (bf16/f16 are widened exactly)."""
    device = _device("sample", logits=logits)
    _code("sample", "logits", logits)
    if logits.dim() not in (1, 2) or logits.shape[-1] < 1:
        raise ValueError(f"ree.ops.sample: logits must be [batch, vocab] or [vocab], got "
                         f"{tuple(logits.shape)}")
    for name, value in (("seed", seed), ("sequence", sequence), ("step", step)):
        if not 0 <= value < 2**64:
            raise ValueError(f"ree.ops.sample: {name} must be in [0, 2^64), got {value}")
    rows = _cast_raw(logits.reshape(-1, logits.shape[-1]), _F32)
    out = torch.empty(rows.shape[0], dtype=torch.int32, device=device)
    with _on(device):
        _C.sample(_ptr(rows), rows.shape[0], rows.shape[1], float(temperature), int(top_k),
                  float(top_p), int(seed), int(sequence), int(step), _ptr(out), _stream(device))
    return out.to(torch.int64).reshape(logits.shape[:-1])


@_fake(sample)
def _(logits, temperature=1.0, top_k=0, top_p=1.0, seed=0, sequence=0, step=0):
    return logits.new_empty(logits.shape[:-1], dtype=torch.int64)
