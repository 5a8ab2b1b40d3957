"""ree.reproducible(): run a PyTorch model's forward pass on REE's operators.

In the spirit of Thinking Machines' ``set_batch_invariant_mode``: inside the context, the ATen
operators whose results depend on batch composition, thread count or hardware are replaced, for
CPU and CUDA tensors, by REE's RepOps (torch.library overrides of the aten kernels):

- ``mm``, ``addmm``, ``bmm``, ``baddbmm``, ``mv``, ``dot`` (every nn.Linear, GPT-2's Conv1D,
  matmul and the lm_head) -> ree.ops.linear/matmul
- ``scaled_dot_product_attention`` (causal, or causal with padded keys) -> ree.ops.attention
- ``_softmax``, ``_log_softmax`` -> ree.ops.softmax/log_softmax
- ``mean.dim`` (a written-out RMSNorm's statistics) -> ree.ops.mean
- ``native_layer_norm`` (nn.LayerNorm, forward) -> ree.ops.layer_norm
- ``silu``, ``gelu`` (erf and tanh), ``sigmoid``, ``tanh``, ``exp``, ``log``, ``erf``, ``rsqrt``,
  ``sin``, ``cos`` -> the correctly rounded functions (the same bits on CPUs and GPUs)

Element-wise add/mul/div, pow by 2 or 3 (ATen multiplies, on CPUs and GPUs alike), casts and
gathers (embedding) are single IEEE operations per element, the same on every device, and stay
ATen's. GPT-2's "gelu_new", written out as 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 *
pow(x, 3)))), is then in fp32 exactly crGeluTanh's sequence (docs/repops-spec/crmath.md).

With a model passed, for the duration:

- a transformers model attends with ree.ops.attention (registered as the attention
  implementation "ree"), padding masks included;
- modules whose forward is transformers' LlamaRMSNorm formula (Llama, Mistral, Qwen2, Qwen3, ...)
  run as ree.ops.rms_norm(cast_before_weight=True): the same function as one RepOp, which is
  what REE's own runtime computes (its sum of squares is a dot product, no rounded squares);
- rotary embeddings of the "default" and "llama3" types get REE's correctly rounded inverse
  frequencies (ree.ops.rope_inv_freq) instead of torch's pow, which may differ by an ulp between
  devices and from REE's runtime.

A transformers Llama, Mistral, Qwen2, Qwen3 or GPT-2 then gives the same logits bits on CPU and
GPU, for any batch composition and padding, and in fp32 the bits of REE's own runtime on the
same checkpoint (docs/python.md).

Limits: forward only; float32/bfloat16/float16 tensors (other dtypes reaching a replaced operator
raise TypeError); attention masks must be causal with padded keys (a sliding window, packed
sequences or bidirectional attention raise NotImplementedError); the outputs at padded query
positions are zeros.
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


# ---- matrix products -------------------------------------------------------------------------

def _mm(a, b):
    _check("mm", a, b)
    return ops.matmul(a, b)


def _bmm(a, b):
    _check("bmm", a, b)
    return ops.matmul(a, b)


def _mv(a, v):
    _check("mv", a, v)
    return ops.matmul(a, v)


def _dot(a, b):
    _check("dot", a, b)
    return ops.matmul(a, b)


def _scaled_sum(product, bias, beta, alpha):
    """beta * bias + alpha * product as torch's addmm family: bias ignored when beta is 0."""
    if alpha != 1:
        product = product * alpha
    if beta == 0:
        return product
    return product + (bias if beta == 1 else bias * beta)


def _addmm(bias, a, b, *, beta=1, alpha=1):
    _check("addmm", bias, a, b)
    if beta == 1 and alpha == 1 and bias.dim() == 1 and bias.shape[0] == b.shape[1]:
        return ops.linear(a, b.t(), bias)  # F.linear's bias: added once in fp32 after the dot
    return _scaled_sum(ops.matmul(a, b), bias, beta, alpha)


def _baddbmm(bias, a, b, *, beta=1, alpha=1):
    _check("baddbmm", bias, a, b)
    return _scaled_sum(ops.matmul(a, b), bias, beta, alpha)


# ---- rows and element-wise functions ---------------------------------------------------------

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


# ---- attention -------------------------------------------------------------------------------

def _allowed(mask: torch.Tensor) -> torch.Tensor:
    """An SDPA mask as booleans (True: the key takes part). A float mask must be additive
    0 / -inf (or transformers' finfo.min): other biases have no RepOp."""
    if mask.dtype == torch.bool:
        return mask
    _check("scaled_dot_product_attention (attn_mask)", mask)
    masked = mask <= torch.finfo(mask.dtype).min
    if not bool(((mask == 0) | masked).all()):
        raise NotImplementedError("ree.reproducible: an additive attention mask with values other "
                                  "than 0 and -inf (an attention bias) has no RepOp")
    return ~masked


def _valid_keys(allowed: torch.Tensor, batch: int, q_len: int, kv_len: int) -> torch.Tensor:
    """[batch, kv_len] booleans: the keys that are not padding, checked to be all the mask holds
    (causal over the valid keys, the queries being the last q_len positions). Raises otherwise."""
    while allowed.dim() < 4:
        allowed = allowed.unsqueeze(0)
    allowed = torch.broadcast_to(allowed, (batch, allowed.shape[1], q_len, kv_len))
    if allowed.shape[1] > 1 and not bool((allowed == allowed[:, :1]).all()):
        raise NotImplementedError("ree.reproducible: attention masks that differ between heads")
    allowed = allowed[:, 0]
    keys = allowed[:, -1, :]  # the last query may see every key at or before it
    causal = torch.ones(q_len, kv_len, dtype=torch.bool, device=keys.device)
    causal = causal.tril(diagonal=kv_len - q_len)
    expected = causal[None] & keys[:, None, :]
    real_queries = keys[:, kv_len - q_len:]  # padded queries' rows are free (their output is 0)
    if bool(((allowed != expected) & real_queries[:, :, None]).any()):
        raise NotImplementedError("ree.reproducible: the attention mask is not causal with padded "
                                  "keys (a sliding window, packed sequences or bidirectional "
                                  "attention have no RepOp)")
    return keys


def _attend(q, k, v, allowed: Optional[torch.Tensor], scale):
    """q [B, H, Tq, D], k/v [B, Hkv, Tk, D], the queries being the last Tq positions; causal,
    keys where `allowed` is False left out. Returns [B, Tq, H, D]."""
    qt, kt, vt = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
    if allowed is None:
        return ops.attention(qt, kt, vt, scale=scale)
    batch, q_len, kv_len = q.shape[0], q.shape[2], k.shape[2]
    keys = _valid_keys(allowed, batch, q_len, kv_len)
    full = keys.all(dim=1)
    if bool(full.all()):
        return ops.attention(qt, kt, vt, scale=scale)
    out = qt.new_zeros(qt.shape)
    if bool(full.any()):  # rows without padding together (batch invariance: the same bits)
        rows = full.nonzero().squeeze(1)
        out[rows] = ops.attention(qt[rows], kt[rows], vt[rows], scale=scale)
    for row in (~full).nonzero().squeeze(1).tolist():
        # A padded row: its valid keys gathered into a dense sequence, where the real queries
        # are the last ones; attention over it is the masked attention, bit for bit.
        kept = keys[row].nonzero().squeeze(1)
        queries = keys[row, kv_len - q_len:].nonzero().squeeze(1)
        if queries.numel():
            out[row, queries] = ops.attention(qt[row:row + 1, queries], kt[row:row + 1, kept],
                                              vt[row:row + 1, kept], scale=scale)[0]
    return out


def _sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, *,
          enable_gqa=False):
    _check("scaled_dot_product_attention", query, key, value)
    if dropout_p:
        raise NotImplementedError("ree.reproducible: attention dropout (inference only)")
    if query.dim() != 4:
        raise NotImplementedError("ree.reproducible: scaled_dot_product_attention on tensors "
                                  "other than [batch, heads, tokens, head_dim], got "
                                  f"{tuple(query.shape)}")
    q_len, kv_len = query.shape[2], key.shape[2]
    # torch aligns is_causal's mask top-left, REE's attention bottom-right (a KV cache): they
    # agree for q_len == kv_len; one query with no mask sees every key, which is causal too.
    causal = (is_causal and q_len == kv_len) or (not is_causal and q_len == 1)
    if attn_mask is None and not causal:
        raise NotImplementedError("ree.reproducible: scaled_dot_product_attention that is not "
                                  f"causal (is_causal={is_causal}, {q_len} queries, {kv_len} keys)")
    if attn_mask is not None and is_causal:
        raise NotImplementedError("ree.reproducible: attn_mask with is_causal=True")
    allowed = None if attn_mask is None else _allowed(attn_mask)
    return _attend(query, key, value, allowed, scale).transpose(1, 2)


def ree_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """transformers attention function: query [B, H, Tq, D], key/value [B, Hkv, Tk, D]; causal,
    the queries being the last Tq positions, padded keys masked. Returns ([B, Tq, H, D], None)."""
    if dropout:
        raise NotImplementedError("ree.reproducible: attention dropout (inference only)")
    is_causal = kwargs.get("is_causal")
    if not (getattr(module, "is_causal", True) if is_causal is None else is_causal):
        raise NotImplementedError("ree.reproducible: bidirectional attention has no RepOp")
    allowed = None if attention_mask is None else _allowed(attention_mask)
    return _attend(query, key, value, allowed, scaling), None


def _register_attention():
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(_ATTENTION_NAME, ree_attention)
    # sdpa_mask gives None for a purely causal batch and booleans for padded ones.
    AttentionMaskInterface.register(_ATTENTION_NAME, sdpa_mask)


def _set_attention(model, name):
    configs = [model.config] + [getattr(model.config, k) for k in getattr(
        model.config, "sub_configs", {}) if getattr(model.config, k, None) is not None]
    for config in configs:
        config._attn_implementation = name


_OVERRIDES = {
    "mm": _mm, "bmm": _bmm, "mv": _mv, "dot": _dot, "addmm": _addmm, "baddbmm": _baddbmm,
    "scaled_dot_product_attention": _sdpa, "_softmax": _softmax, "_log_softmax": _log_softmax,
    "mean.dim": _mean_dim, "native_layer_norm": _native_layer_norm, "gelu": _gelu,
    **{name: _unary(name) for name in ("silu", "sigmoid", "tanh", "exp", "log", "erf", "rsqrt",
                                       "sin", "cos")},
}


# ---- module swaps (with a model) -------------------------------------------------------------

def _code_key(function):
    code = getattr(function, "__code__", None)
    return None if code is None else (code.co_code, code.co_consts, code.co_names)


def _llama_rms_norm_code():
    """The code of transformers' LlamaRMSNorm.forward (None without transformers): modules whose
    forward has the same code compute the same formula, whatever their class is called."""
    try:
        from transformers.models.llama.modeling_llama import LlamaRMSNorm
    except ImportError:
        return None
    return _code_key(LlamaRMSNorm.forward)


def _rms_norm_forward(module):
    original = type(module).forward

    def forward(hidden_states):
        if hidden_states.dtype != module.weight.dtype or hidden_states.dtype not in _FLOATS:
            return original(module, hidden_states)  # transformers' own type promotion
        return ops.rms_norm(hidden_states, module.weight, module.variance_epsilon,
                            cast_before_weight=True)

    return forward


def _rope_inv_freq(module) -> Optional[torch.Tensor]:
    """REE's inverse frequencies for a transformers rotary embedding module of the "default" or
    "llama3" type with attention scaling 1, else None (left as it is)."""
    inv_freq, config = getattr(module, "inv_freq", None), getattr(module, "config", None)
    rope_type = getattr(module, "rope_type", None)
    if (rope_type not in ("default", "llama3") or config is None or
            not isinstance(inv_freq, torch.Tensor) or inv_freq.dtype != torch.float32 or
            getattr(module, "attention_scaling", 1.0) != 1.0):
        return None
    params = getattr(config, "rope_parameters", None) or {}
    base = params.get("rope_theta", getattr(config, "rope_theta", None))
    heads = getattr(config, "num_attention_heads", None)
    head_dim = getattr(config, "head_dim", None) or (heads and config.hidden_size // heads)
    if not isinstance(base, (int, float)) or not head_dim:
        return None
    factor = params.get("partial_rotary_factor", getattr(config, "partial_rotary_factor", 1.0))
    exact = ops.rope_inv_freq(int(head_dim * factor), float(base),
                              llama3=params if rope_type == "llama3" else None,
                              device=inv_freq.device)
    return exact if exact.shape == inv_freq.shape else None


def _swap_modules(model: torch.nn.Module, stack: contextlib.ExitStack):
    """Applies the module swaps of the module docstring; `stack` undoes them."""
    rms_code = _llama_rms_norm_code()
    for module in model.modules():
        if rms_code is not None and _code_key(type(module).forward) == rms_code:
            stack.callback(_restore_attribute, module, "forward", module.__dict__.get("forward"))
            module.forward = _rms_norm_forward(module)
        exact = _rope_inv_freq(module)
        if exact is not None:
            for name in ("inv_freq", "original_inv_freq"):
                if isinstance(getattr(module, name, None), torch.Tensor):
                    stack.callback(setattr, module, name, getattr(module, name))
                    setattr(module, name, exact.clone())


def _restore_attribute(module, name, previous):
    if previous is None:
        module.__dict__.pop(name, None)
    else:
        module.__dict__[name] = previous


@contextlib.contextmanager
def reproducible(model: Optional[torch.nn.Module] = None):
    """Context manager: ATen's batch- and hardware-dependent operators run as REE RepOps inside
    it, and `model`, when given, gets the module swaps and attention of the module docstring.
    Everything is restored on exit. Yields the model."""
    library = torch.library.Library("aten", "IMPL")
    with contextlib.ExitStack() as stack:
        stack.callback(library._destroy)
        with warnings.catch_warnings():  # "Overriding a previously registered kernel": intended
            warnings.simplefilter("ignore", UserWarning)
            for name, fn in _OVERRIDES.items():
                for key in ("CPU", "CUDA"):
                    library.impl(name, fn, key)
        if model is not None:
            _swap_modules(model, stack)
            if hasattr(getattr(model, "config", None), "_attn_implementation"):
                _register_attention()
                stack.callback(_set_attention, model, model.config._attn_implementation)
                _set_attention(model, _ATTENTION_NAME)
        yield model


__all__ = ["reproducible", "ree_attention"]
