"""How ree.ops reach their kernels (python/src/torch_ops_library.cpp, torch_ops_fast.cpp): the
operators are torch library operators with custom_op's schemas; a plain eager call takes the direct
route (the fast entry), and every other route (inference mode, a dispatch mode, an input requiring
grad, torch.compile) gives the same bits; backward raises; outputs never alias inputs."""

import inspect

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import ree
from conftest import assert_bits_equal, randn

# The schemas torch.library.custom_op inferred before the operators were defined directly: callers
# (positional and keyword arguments, defaults) and compiled graphs see the same operators.
SCHEMAS = {
    "sum": "ree::sum(Tensor x, SymInt dim=-1, bool keepdim=False) -> Tensor",
    "rms_norm": "ree::rms_norm(Tensor x, Tensor? weight=None, float eps=9.9999999999999995e-07, "
                "bool cast_before_weight=False) -> Tensor",
    "layer_norm": "ree::layer_norm(Tensor x, Tensor? weight=None, Tensor? bias=None, "
                  "float eps=1.0000000000000001e-05) -> Tensor",
    "sigmoid": "ree::sigmoid(Tensor x) -> Tensor",
    "gelu": 'ree::gelu(Tensor x, str approximate="none") -> Tensor',
    "attention": "ree::attention(Tensor q, Tensor k, Tensor v, float? scale=None) -> Tensor",
    "sample": "ree::sample(Tensor logits, float temperature=1., SymInt top_k=0, float top_p=1., "
              "SymInt seed=0, SymInt sequence=0, SymInt step=0) -> Tensor",
    "rope": "ree::rope(Tensor x, Tensor positions, Tensor inv_freq, bool interleaved=False) -> "
            "Tensor",
    "embedding": "ree::embedding(Tensor ids, Tensor table) -> Tensor",
    "cast": "ree::cast(Tensor x, ScalarType dtype) -> Tensor",
}


class Forwarding(TorchDispatchMode):
    """A dispatch mode that only records and forwards: the call leaves the direct route."""

    def __init__(self):
        super().__init__()
        self.seen = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.seen.append(str(func))
        return func(*args, **(kwargs or {}))


def calls():
    x = randn(5, 300, seed=1)
    w = randn(300, seed=2)
    inv_freq = ree.ops.rope_inv_freq(30)
    return {
        "sum": lambda t: ree.ops.sum(t),
        "max": lambda t: ree.ops.max(t, 0, True),
        "var": lambda t: ree.ops.var(t, dim=-1),
        "sigmoid": ree.ops.sigmoid,
        "rms_norm": lambda t: ree.ops.rms_norm(t, w, 1e-6),
        "layer_norm": lambda t: ree.ops.layer_norm(t, w, None, eps=1e-5),
        "softmax": lambda t: ree.ops.softmax(t, 0),
        "silu": ree.ops.silu,
        "rope": lambda t: ree.ops.rope(t.reshape(5, 10, 30), torch.arange(5) * 3, inv_freq),
        "attention": lambda t: ree.ops.attention(*[t.reshape(1, 5, 10, 30)] * 3, scale=0.5),
        "embedding": lambda t: ree.ops.embedding(torch.tensor([[4, 0], [2, 2]]), t),
    }, x


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_operators_keep_their_schemas(name):
    op = getattr(torch.ops.ree, name).default
    assert str(op._schema) == SCHEMAS[name]
    entry = getattr(ree.ops, name)  # the operator's fast entry, with the schema's signature
    assert (entry, op) in ree.ops._FAST_OPS
    params = inspect.signature(entry).parameters
    assert [(p.name, p.default) for p in params.values()] == [
        (a.name, a.default_value if a.has_default_value() else inspect.Parameter.empty)
        for a in op._schema.arguments]


def test_every_route_gives_the_direct_bits():
    fns, x = calls()
    for name, fn in fns.items():
        direct = fn(x)
        with torch.inference_mode():  # below autograd: the backend kernel alone
            assert_bits_equal(fn(x), direct, f"{name} inference_mode")
        with torch.no_grad():
            assert_bits_equal(fn(x), direct, f"{name} no_grad")
        mode = Forwarding()
        with mode:  # through the dispatcher's normal route (Python dispatch key)
            assert_bits_equal(fn(x), direct, f"{name} dispatch mode")
        assert any(s.startswith("ree.") for s in mode.seen), f"{name}: {mode.seen}"
        grad_input = x.clone().requires_grad_()
        out = fn(grad_input)
        assert out.requires_grad, name
        assert_bits_equal(out, direct, f"{name} requires_grad")


def test_backward_raises_naming_the_operator():
    x = randn(3, 4).requires_grad_()
    y = ree.ops.rms_norm(x).sum()
    with pytest.raises(RuntimeError, match="ree.ops.rms_norm has no backward"):
        y.backward()
    with torch.no_grad():
        assert not ree.ops.rms_norm(x).requires_grad


def test_outputs_never_alias_inputs():
    x = randn(4, 6)
    y = ree.ops.cast(x, torch.float32)  # same dtype: a copy (custom_op refused the alias)
    assert y.data_ptr() != x.data_ptr()
    assert_bits_equal(y, x, "cast to the same dtype")


def test_profiler_sees_the_operators():
    x = randn(4, 64)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        ree.ops.sum(x)
        ree.ops.sigmoid(x)
    names = {e.name for e in prof.events()}
    assert {"ree::sum", "ree::sigmoid"} <= names, sorted(names)


def test_compiled_calls_equal_eager():
    fns, x = calls()
    for name in ("sum", "rms_norm", "sigmoid"):
        compiled = torch.compile(fns[name], fullgraph=True, backend="aot_eager")
        assert_bits_equal(compiled(x), fns[name](x), f"{name} compiled")
