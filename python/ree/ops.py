"""RepOps as PyTorch operators: ``torch.ops.ree.<name>`` and the functions of this module.

Every operator is forward only (no autograd formula; calling backward through one raises). Each
has a fake (meta) implementation, so ``torch.compile(fullgraph=True)`` traces it as one opaque
node. CPU and CUDA tensors are accepted (float32, bfloat16, float16 unless an operator says
otherwise), and both devices compute the same bits: the arithmetic is the RepOps specification
(docs/repops-spec.md), run by REE's CPU or CUDA kernels (kernels/).

Non-contiguous inputs are copied to contiguous ones first (a copy changes no value). Outputs are
new contiguous tensors. What each operator computes, and its rounding points, is in docs/python.md.

Every operator is a C++ kernel registered with torch's dispatcher (python/src/torch_ops_*.cpp):
``torch.ops.ree.sum.default`` is the operator and ``ree.ops.sum`` its fast eager entry
(a C builtin, python/src/torch_ops_fast.cpp): a plain call (tensors exactly ``torch.Tensor`` or
``nn.Parameter`` on the CPU or CUDA, no torch function or dispatch mode, nothing for autograd to
record, no profiler) is parsed by the operator's schema and runs its kernel below autograd, with no
Python in between; every other call is handed to the operator with the same arguments. Both give
the same bits and raise the same errors; ``torch.compile`` traces ``ree.ops.sum`` as a call of the
operator. ``rope_inv_freq`` is a host helper (a plain function, not an operator).
"""

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

# The library "ree": TORCH_LIBRARY in python/src/torch_ops_library.cpp defines it (with a FRAGMENT
# in torch_ops_model.cpp); every fake kernel is added to it here.
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
rope = _cpp("rope", "Rotary embedding of x [..., tokens, heads, head_dim] at integer `positions` "
                    "([..., tokens] or [tokens]); the first 2 * len(inv_freq) channels of each head "
                    "rotate (half-split pairs, or interleaved (2i, 2i+1) pairs). Rounding as "
                    "transformers' apply_rotary_pos_emb.")
attention = _cpp("attention", "Causal grouped-query attention. q [batch, q_len, heads, head_dim]; "
                              "k, v [batch, kv_len, kv_heads, head_dim] (a KV cache holding every "
                              "position, the new ones last): query i sits at position kv_len - "
                              "q_len + i and attends positions 0 .. itself. Output as q. scale: "
                              "default 1/sqrt(head_dim) (correctly rounded). Fixed 64-position KV "
                              "chunks: a query's bits do not depend on q_len, the batch or the "
                              "device.")
embedding = _cpp("embedding", "table[ids] (rows of a [vocab, dim] table), as "
                              "torch.nn.functional.embedding(ids, table). An id outside [0, vocab) "
                              "raises, naming its position.")
sample = _cpp("sample", "One token per row of logits [batch, vocab] (or [vocab]): temperature / "
                        "top-k / top-p sampling with the Philox4x32-10 draw keyed by (seed, "
                        "sequence + row, step); temperature 0 is argmax. int64 ids. Logits are "
                        "fp32 (bf16/f16 are widened exactly).")

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


_fake_cpp("rope")(_same_shape)
_fake_cpp("attention")(_same_shape)


@_fake_cpp("embedding")
def _(ids, table):
    return table.new_empty((*ids.shape, table.shape[1]))


@_fake_cpp("sample")
def _(logits, temperature=1.0, top_k=0, top_p=1.0, seed=0, sequence=0, step=0):
    return logits.new_empty(logits.shape[:-1], dtype=torch.int64)


# ---- a host helper ----------------------------------------------------------------------------

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
    out = torch.empty(rotary_dim // 2, dtype=torch.float32)
    _C.rope_inv_freq(float(base), rotary_dim, scaling, out.data_ptr())
    return out.to(device)
