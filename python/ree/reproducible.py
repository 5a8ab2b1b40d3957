"""ree.reproducible(): run a PyTorch model's forward pass on REE's operators.

In the spirit of Thinking Machines' ``set_batch_invariant_mode``: inside the context, the ATen
operators whose results depend on batch composition, thread count or hardware are replaced, for
CPU and CUDA tensors, by REE's RepOps (torch.library overrides of the aten kernels):

- ``mm``, ``addmm``, ``bmm`` (every nn.Linear, matmul and the lm_head) -> ree.ops.linear/matmul
- ``_softmax``, ``_log_softmax`` -> ree.ops.softmax/log_softmax
- ``mean.dim`` (RMSNorm's statistics) -> ree.ops.mean
- ``native_layer_norm`` (nn.LayerNorm, forward) -> ree.ops.layer_norm
- ``silu``, ``gelu``, ``sigmoid``, ``tanh``, ``exp``, ``log``, ``erf``, ``rsqrt``, ``sin``,
  ``cos`` -> the correctly rounded functions (the same bits on CPUs and GPUs)

and a Hugging Face transformers model passed in attends with ree.ops.attention (registered as
the attention implementation "ree" for the duration). Element-wise add/mul/div and gathers are
already exact IEEE operations per element and stay ATen's.

Limits: forward only; float32/bfloat16/float16 tensors (other dtypes reaching a replaced operator
raise); causal attention without padding masks (a padded batch raises NotImplementedError).
"""

import contextlib
import warnings
from typing import Optional

import torch

from . import ops

_FLOATS = (torch.float32, torch.bfloat16, torch.float16)
_ATTENTION_NAME = "ree"


def _check(op: str, *tensors):
    for t in tensors:
        if t.dtype not in _FLOATS:
            raise TypeError(f"ree.reproducible: aten::{op} on {t.dtype} has no RepOp "
                            "(float32, bfloat16, float16)")


def _mm(a, b):
    _check("mm", a, b)
    return ops.matmul(a, b)


def _bmm(a, b):
    _check("bmm", a, b)
    return ops.matmul(a, b)


def _addmm(bias, a, b, *, beta=1, alpha=1):
    _check("addmm", bias, a, b)
    if beta == 1 and alpha == 1 and bias.dim() == 1 and bias.shape[0] == b.shape[1]:
        return ops.linear(a, b.t(), bias)  # F.linear's bias: added once in fp32 after the dot
    out = ops.matmul(a, b)
    if alpha != 1:
        out = out * alpha
    return out if beta == 0 else out + (bias if beta == 1 else bias * beta)


def _softmax(x, dim, half_to_float):
    _check("_softmax", x)
    return ops.softmax(x.float() if half_to_float else x, dim)


def _log_softmax(x, dim, half_to_float):
    _check("_log_softmax", x)
    return ops.log_softmax(x.float() if half_to_float else x, dim)


def _mean_dim(x, dim, keepdim=False, *, dtype=None):
    _check("mean", x)
    if dtype is not None:
        x = x.to(dtype)
    dims = sorted({d % x.dim() for d in (dim if dim else range(x.dim()))})
    if len(dims) == 1:
        return ops.mean(x, dims[0], keepdim)
    # Several dimensions: gathered last and reduced as one row (the canonical order over them).
    rest = [d for d in range(x.dim()) if d not in dims]
    moved = x.permute(*rest, *dims)
    out = ops.mean(moved.reshape(*moved.shape[:len(rest)], -1), -1)
    if keepdim:
        for d in dims:
            out = out.unsqueeze(d)
    return out


def _native_layer_norm(x, normalized_shape, weight, bias, eps):
    _check("native_layer_norm", x)
    if len(normalized_shape) != 1:
        raise NotImplementedError("ree.reproducible: layer_norm over several dimensions")
    y = ops.layer_norm(x, weight, bias, eps)
    # mean and rstd outputs (for backward, which REE does not provide): placeholders.
    stats = x.new_empty((*x.shape[:-1], 1), dtype=torch.float32)
    return y, stats, stats


def _unary(name):
    op = getattr(ops, name)

    def impl(x):
        _check(name, x)
        return op(x)

    return impl


def _gelu(x, *, approximate="none"):
    _check("gelu", x)
    return ops.gelu(x, approximate=approximate)


_OVERRIDES = {
    "mm": _mm, "bmm": _bmm, "addmm": _addmm, "_softmax": _softmax, "_log_softmax": _log_softmax,
    "mean.dim": _mean_dim, "native_layer_norm": _native_layer_norm, "gelu": _gelu,
    **{name: _unary(name) for name in ("silu", "sigmoid", "tanh", "exp", "log", "erf", "rsqrt",
                                       "sin", "cos")},
}


def ree_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """transformers attention function: query [B, H, Tq, D], key/value [B, Hkv, Tk, D]; causal,
    the queries being the last Tq positions. Returns ([B, Tq, H, D], None)."""
    if attention_mask is not None:
        raise NotImplementedError("ree.reproducible: attention masks (padding) are not supported; "
                                  "run sequences without padding")
    if dropout:
        raise NotImplementedError("ree.reproducible: attention dropout (inference only)")
    out = ops.attention(query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2),
                        scale=scaling)
    return out, None


def _register_attention():
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(_ATTENTION_NAME, ree_attention)
    # The causal mask is skipped when it is purely causal (no padding): ree_attention then gets
    # None; a padded batch gets a mask, which ree_attention refuses.
    AttentionMaskInterface.register(_ATTENTION_NAME, sdpa_mask)


def _set_attention(model, name):
    configs = [model.config] + [getattr(model.config, k) for k in getattr(
        model.config, "sub_configs", {}) if getattr(model.config, k, None) is not None]
    for config in configs:
        config._attn_implementation = name


@contextlib.contextmanager
def reproducible(model: Optional[torch.nn.Module] = None):
    """Context manager: ATen's batch- and hardware-dependent operators run as REE RepOps inside
    it (see the module docstring). `model`: a transformers model whose attention then runs on
    ree.ops.attention. Yields the model."""
    library = torch.library.Library("aten", "IMPL")
    previous = None
    try:
        with warnings.catch_warnings():  # "Overriding a previously registered kernel": intended
            warnings.simplefilter("ignore", UserWarning)
            for name, fn in _OVERRIDES.items():
                for key in ("CPU", "CUDA"):
                    library.impl(name, fn, key)
        if model is not None and hasattr(getattr(model, "config", None), "_attn_implementation"):
            _register_attention()
            previous = model.config._attn_implementation
            _set_attention(model, _ATTENTION_NAME)
        yield model
    finally:
        library._destroy()
        if previous is not None:
            _set_attention(model, previous)


__all__ = ["reproducible", "ree_attention"]
