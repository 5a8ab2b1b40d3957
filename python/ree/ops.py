"""RepOps as PyTorch operators: ``torch.ops.ree.<name>`` and the functions of this module.

Every operator is forward only (no autograd formula; calling backward through one raises). Each
has a fake (meta) implementation, so ``torch.compile(fullgraph=True)`` traces it as one opaque
node. CPU and CUDA tensors are accepted (float32, bfloat16, float16 unless an operator says
otherwise), and both devices compute the same bits: the arithmetic is the RepOps specification
(docs/repops-spec.md), run by REE's CPU or CUDA kernels (kernels/).

Non-contiguous inputs are copied to contiguous ones first (a copy changes no value). Outputs are
new contiguous tensors. What each operator computes, and its rounding points, is in docs/python.md.

Most operators are C++ kernels registered with torch's dispatcher (python/src/torch_ops_*.cpp).
For those, ``torch.ops.ree.sum.default`` is the operator and ``ree.ops.sum`` its fast eager entry
(a C builtin, python/src/torch_ops_fast.cpp): a plain call (tensors exactly ``torch.Tensor`` or
``nn.Parameter`` on the CPU or CUDA, no torch function or dispatch mode, nothing for autograd to
record, no profiler) is parsed by the operator's schema and runs its kernel below autograd, with no
Python in between; every other call is handed to the operator with the same arguments. Both give
the same bits and raise the same errors; ``torch.compile`` traces ``ree.ops.sum`` as a call of the
operator. rope, attention, embedding and sample are still Python implementations over ree._C
(registered below), and ``ree.ops.rope`` *is* ``torch.ops.ree.rope.default``.
"""

import contextlib
import importlib.abc
import importlib.util
import os
import sys
import warnings
from typing import Optional

import torch
from torch import Tensor

from . import _C

# The C++ operators (TORCH_LIBRARY(ree, ...)) are in their own library beside _C, linked like a
# torch C++ extension (python/CMakeLists.txt); loading it registers them. The same library is the
# extension module that makes their fast entries (torch_ops_fast.cpp).
torch.ops.load_library(os.path.join(os.path.dirname(__file__), "libree_torch_ops.so"))
from . import libree_torch_ops as _fast  # noqa: E402  (after load_library: needs the operators)

__all__ = [
    "matmul", "linear", "rms_norm", "layer_norm", "sum", "mean", "max", "min", "var",
    "softmax", "log_softmax", "sigmoid", "exp", "expm1", "log", "log1p", "tanh", "erf", "sin",
    "cos", "rsqrt", "softplus", "silu", "gelu", "swiglu", "geglu", "rope", "rope_inv_freq",
    "attention", "embedding", "argmax", "sample", "cast",
]

_F32, _BF16, _F16 = torch.float32, torch.bfloat16, torch.float16
_DTYPE_CODE = {_F32: 0, _BF16: 1, _F16: 2}

# The library "ree": TORCH_LIBRARY in python/src/torch_ops_library.cpp defines it; the operators
# below and every fake kernel are added to it here.
_LIB = torch.library.Library("ree", "FRAGMENT")


def _fake(overload):
    """Registers the decorated function as the operator's fake (meta) kernel."""
    return lambda fn: torch.library.register_fake(overload, fn, lib=_LIB)


# ---- the C++ operators ------------------------------------------------------------------------
#
# Each is the fast entry of its OpOverload (a builtin with the C++ schema's parameters, defaults and
# keywords); its docstring and the operator's fake kernel are given here.

_FAST_OPS = []  # (fast entry, its OpOverload) of every C++ operator


def _text_signature(name: str, overload) -> str:
    """The builtin's signature line as CPython reads it from a docstring (inspect.signature)."""
    params = []
    for arg in overload._schema.arguments:
        if arg.kwarg_only and "*" not in params:
            params.append("*")
        default = f"={arg.default_value!r}" if arg.has_default_value() else ""
        params.append(arg.name + default)
    return f"{name}({', '.join(params)})\n--\n\n"


def _cpp(name: str, doc: str):
    overload = getattr(torch.ops.ree, name).default
    overload.__doc__ = doc
    fast = _fast.fast_op(name, overload, _text_signature(name, overload) + doc, __name__)
    _FAST_OPS.append((fast, overload))
    return fast


def _traced_as(overload):
    """What torch.compile traces for a fast entry (it cannot trace into a builtin): the operator."""

    def call(*args, **kwargs):
        return overload(*args, **kwargs)

    return call


def _register_with_dynamo():
    for fast, overload in _FAST_OPS:
        torch.compiler.substitute_in_graph(fast)(_traced_as(overload))


class _AfterDynamoImport(importlib.abc.MetaPathFinder):
    """Runs _register_with_dynamo once torch._dynamo has been imported (importing it with ree would
    add about a second to every `import ree`); removes itself at that import."""

    def find_spec(self, name, path=None, target=None):
        if name != "torch._dynamo":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        loader, exec_module = spec.loader, spec.loader.exec_module

        def exec_then_register(module):
            del loader.exec_module
            exec_module(module)
            try:
                _register_with_dynamo()
            except Exception as error:  # never break torch._dynamo's import itself
                warnings.warn(f"ree.ops: torch.compile cannot trace ree.ops' C++ operators "
                              f"({error})", RuntimeWarning)

        loader.exec_module = exec_then_register
        return spec


cast = _cpp("cast", "x converted to float32/bfloat16/float16: one round-to-nearest-even, NaN "
                    "canonical.")
linear = _cpp("linear", "y = x @ weight.T (+ bias), like torch.nn.functional.linear; output dtype "
                        "of x.")
matmul = _cpp("matmul", "a @ b for a [..., M, K] and b [K, N] (or batched a [B, M, K] @ b [B, K, "
                        "N], or 1-D).")
rms_norm = _cpp("rms_norm", "RMSNorm over the last dimension. cast_before_weight: transformers' "
                            "LlamaRMSNorm rounding (the normalised value is rounded to x's dtype "
                            "before the weight multiplies it).")
layer_norm = _cpp("layer_norm", "LayerNorm over the last dimension (population variance, two "
                                "passes).")
sum = _cpp("sum", "Canonical-order sum over `dim` (chunks of 128, merged left to right).")
mean = _cpp("mean", "Canonical sum over `dim` divided by its length.")
max = _cpp("max", "Maximum over `dim` (values only; NaN if any; max(-0, +0) = +0).")
min = _cpp("min", "Minimum over `dim` (values only; NaN if any; min(-0, +0) = -0).")
var = _cpp("var", "Population variance over `dim` (correction 0; two passes).")
softmax = _cpp("softmax", "Softmax over `dim`: crExp(x - max) / canonical sum.")
log_softmax = _cpp("log_softmax", "Log-softmax over `dim`: (x - max) - crLog(canonical sum of "
                                  "crExp(x - max)).")
argmax = _cpp("argmax", "Index of the largest element over `dim` (int64): the first NaN if any, "
                        "else the lowest index of the maximum (as torch.argmax).")
silu = _cpp("silu", "x * sigmoid(x), correctly rounded in fp32, then rounded once to x's dtype.")
gelu = _cpp("gelu", "GELU (approximate 'none': erf form; 'tanh': tanh form), as "
                    "torch.nn.functional.gelu.")
swiglu = _cpp("swiglu", "silu(gate) * up with transformers' rounding points (LlamaMLP's "
                        "act_fn(gate) * up).")
geglu = _cpp("geglu", "gelu(gate) * up (GeGLU), rounding as swiglu.")

_UNARY = ("sigmoid", "exp", "expm1", "log", "log1p", "tanh", "erf", "sin", "cos", "rsqrt",
          "softplus")
for _name in _UNARY:
    globals()[_name] = _cpp(_name, f"Correctly rounded {_name} (crmath.h) of every element; "
                                   "bf16/f16 round the fp32 result once.")


def _same_shape(x, *_):
    return x.new_empty(x.shape)


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


if "torch._dynamo" in sys.modules:
    _register_with_dynamo()
else:
    sys.meta_path.insert(0, _AfterDynamoImport())


def _fake_cpp(name: str):
    """Registers the decorated function as the fake kernel of the C++ operator ree::<name>."""
    return _fake(getattr(torch.ops.ree, name).default)


for _name in ("rms_norm", "layer_norm", "softmax", "log_softmax", "silu", "gelu", "swiglu",
              "geglu") + _UNARY:
    _fake_cpp(_name)(_same_shape)
for _name in ("sum", "mean", "max", "min", "var"):
    _fake_cpp(_name)(lambda x, dim=-1, keepdim=False: x.new_empty(
        _reduced_shape(x, dim, keepdim)))


@_fake_cpp("argmax")
def _(x, dim=-1, keepdim=False):
    return x.new_empty(_reduced_shape(x, dim, keepdim), dtype=torch.int64)


@_fake_cpp("cast")
def _(x, dtype):
    return x.new_empty(x.shape, dtype=dtype)


@_fake_cpp("linear")
def _(x, weight, bias=None):
    return x.new_empty((*x.shape[:-1], weight.shape[0]))


@_fake_cpp("matmul")
def _(a, b):
    return a.new_empty(_matmul_shape(a, b))


# ---- argument checks and plumbing of the Python operators ----------------------------------------

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


# ---- registration of the Python operators -----------------------------------------------------
#
# Each is added to the library "ree" with the schema torch.library.custom_op would infer from its
# Python signature, its implementation registered for every backend (CompositeExplicitAutograd:
# the device check then names an unsupported device) and a fake kernel for torch.compile. Not
# through torch.library.custom_op itself: its generic wrappers (an autograd Function, a dynamo
# guard, an aliasing check) cost 10-20 us of host time per call. Instead one Autograd kernel per
# operator (_autograd_kernel) calls the implementation directly when nothing else needs to see the
# call, and otherwise takes the dispatcher's normal route.

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
