"""The fast eager entries of the C++ operators (python/src/torch_ops_fast.cpp): ree.ops.<name> is a
builtin that runs a plain eager call's kernel directly and hands every other call to the operator
torch.ops.ree.<name>.default. Checked here: the same bits as the operator for every C++ operator
(positional, keyword and default arguments, every dtype), the fast path taken for plain calls
(its call counter), the operator's route (and behaviour) under every mode, subclass, tracer,
autograd and compile case, and the same exception type and message for bad arguments."""

import inspect
import subprocess
import sys
import threading
import types
from pathlib import Path

import pytest
import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

import ree
from conftest import DTYPES, assert_bits_equal, randn

CPP_OPS = ["cast", "linear", "matmul", "rms_norm", "layer_norm", "sum", "mean", "max", "min", "var",
           "softmax", "log_softmax", "argmax", "sigmoid", "exp", "expm1", "log", "log1p", "tanh",
           "erf", "sin", "cos", "rsqrt", "softplus", "silu", "gelu", "swiglu", "geglu", "rope",
           "attention", "embedding", "sample"]
UNARY = ["sigmoid", "exp", "expm1", "log", "log1p", "tanh", "erf", "sin", "cos", "rsqrt",
         "softplus", "silu"]


def fast_calls():
    return ree.ops._fast.fast_calls()


def operator(name):
    return getattr(torch.ops.ree, name).default


def calls_of(name, dtype, seed):
    """(positional args, keyword args) of calls of `name` on random shapes: defaults, positional
    and keyword forms."""
    g = torch.Generator().manual_seed(seed)
    rows = int(torch.randint(1, 6, (), generator=g))
    cols = int(torch.randint(1, 300, (), generator=g))
    x = randn(rows, cols, dtype=dtype, seed=seed)
    w, b = randn(cols, dtype=dtype, seed=seed + 1), randn(cols, seed=seed + 2)
    if name == "cast":
        return [((x, d), {}) for d in DTYPES] + [((x,), {"dtype": torch.bfloat16})]
    if name == "linear":
        weight = randn(7, cols, dtype=dtype, seed=seed + 3)
        return [((x, weight), {}), ((x, weight, randn(7, seed=seed + 4)), {}),
                ((x,), {"weight": weight, "bias": None})]
    if name == "matmul":
        return [((x, randn(cols, 5, dtype=dtype, seed=seed + 5)), {}),
                ((), {"a": x[None], "b": randn(1, cols, 3, dtype=dtype, seed=seed + 6)})]
    if name == "rms_norm":
        return [((x,), {}), ((x, w, 1e-5, True), {}), ((x,), {"weight": w, "eps": 1e-3}),
                ((x, None), {"cast_before_weight": True}), ((x, w, 1), {})]  # int eps -> float
    if name == "layer_norm":
        return [((x,), {}), ((x, w, b, 1e-6), {}), ((x,), {"bias": b, "eps": 2e-5})]
    if name in ("sum", "mean", "max", "min", "var", "argmax"):
        return [((x,), {}), ((x, 0, True), {}), ((x,), {"dim": 0}), ((x, -1), {"keepdim": True})]
    if name in ("softmax", "log_softmax"):
        return [((x,), {}), ((x, 0), {}), ((), {"x": x, "dim": -1})]
    if name == "gelu":
        return [((x,), {}), ((x, "tanh"), {}), ((x,), {"approximate": "none"})]
    if name in ("swiglu", "geglu"):
        up = randn(rows, cols, dtype=dtype, seed=seed + 7)
        forms = [((x, up), {}), ((x,), {"up": up})]
        return forms + ([((x, up, "none"), {})] if name == "geglu" else [])
    if name in ("rope", "attention", "embedding", "sample"):
        return model_calls_of(name, x, rows, cols, dtype, seed)
    return [((x,), {}), ((), {"x": x})]


def model_calls_of(name, x, rows, cols, dtype, seed):
    """calls_of for the model operators (torch_ops_model.cpp), shaped from x [rows, cols]."""
    if name == "rope":
        half = 1 + cols // 8
        x3 = randn(rows, 3, 2 * half + 1, dtype=dtype, seed=seed + 8)
        positions, inv = torch.arange(rows) * 7, ree.ops.rope_inv_freq(2 * half)
        return [((x3, positions, inv), {}), ((x3, positions, inv, True), {}),
                ((x3,), {"positions": positions, "inv_freq": inv[:1], "interleaved": False})]
    if name == "attention":
        d = 1 + cols % 64
        q = randn(1, rows, 4, d, dtype=dtype, seed=seed + 9)
        k, v = (randn(1, rows + 3, 2, d, dtype=dtype, seed=seed + s) for s in (10, 11))
        return [((q, k, v), {}), ((q, k, v, 0.25), {}), ((q, k, v), {"scale": None}),
                ((q,), {"k": k, "v": v, "scale": 1})]  # int scale -> float
    if name == "embedding":
        ids = torch.randint(0, rows, (2, 3), generator=torch.Generator().manual_seed(seed))
        return [((ids, x), {}), ((), {"ids": ids.to(torch.int32), "table": x})]
    return [((x,), {}), ((x, 0.7, 5, 0.9, 1, 2, 3), {}), ((x,), {"temperature": 0.0}),
            ((x[0],), {"top_p": 0.5, "seed": 4, "step": 9}), ((x,), {"temperature": 1, "top_k": 3})]


@pytest.mark.parametrize("name", CPP_OPS)
def test_fast_entry_equals_the_operator_bitwise(name):
    fast, op = getattr(ree.ops, name), operator(name)
    for dtype in DTYPES:
        for seed in (1, 2):
            for args, kwargs in calls_of(name, dtype, seed * 10):
                before = fast_calls()
                got = fast(*args, **kwargs)
                assert fast_calls() == before + 1, (name, "the plain call took the slow path")
                assert_bits_equal(got, op(*args, **kwargs), f"{name} {dtype} {kwargs}")


@pytest.mark.parametrize("name", CPP_OPS)
def test_fast_entry_is_a_builtin_with_the_schema_signature(name):
    fast, op = getattr(ree.ops, name), operator(name)
    assert isinstance(fast, types.BuiltinFunctionType) and fast.__name__ == name
    assert fast.__module__ == "ree.ops" and fast.__doc__
    params = inspect.signature(fast).parameters
    assert list(params) == [a.name for a in op._schema.arguments]
    for arg in op._schema.arguments:
        expected = arg.default_value if arg.has_default_value() else inspect.Parameter.empty
        assert params[arg.name].default == expected, (name, arg.name)


def test_parameters_views_and_inference_mode_are_fast():
    x, w = randn(6, 40, seed=3), torch.nn.Parameter(randn(40, seed=4))
    before = fast_calls()
    assert_bits_equal(ree.ops.rms_norm(x, w.detach()), operator("rms_norm")(x, w.detach()))
    view = randn(40, 6, seed=5).t()
    assert_bits_equal(ree.ops.sum(view), operator("sum")(view.contiguous()), "view")
    with torch.inference_mode():
        assert_bits_equal(ree.ops.sigmoid(x), operator("sigmoid")(x), "inference mode")
    with torch.no_grad():
        y = ree.ops.rms_norm(x, w)  # w requires grad, but no graph is recorded
    assert y.grad_fn is None and not y.requires_grad
    assert fast_calls() == before + 4


def test_inputs_requiring_grad_take_the_operator_route():
    x = randn(3, 8, seed=6).requires_grad_()
    before = fast_calls()
    y = ree.ops.rms_norm(x)
    assert fast_calls() == before and y.requires_grad and y.grad_fn is not None
    with pytest.raises(RuntimeError, match="ree.ops.rms_norm has no backward"):
        y.sum().backward()
    param = torch.nn.Parameter(randn(8, seed=7))
    z = ree.ops.rms_norm(x.detach(), param)
    assert fast_calls() == before and z.requires_grad


class RecordingFunctionMode(TorchFunctionMode):
    def __init__(self):
        super().__init__()
        self.seen = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.seen.append(func)
        return func(*args, **(kwargs or {}))


class RecordingDispatchMode(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.seen = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.seen.append(func)
        return func(*args, **(kwargs or {}))


class Recorded(torch.Tensor):
    """A subclass whose __torch_function__ records the calls it sees."""
    seen = []

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        cls.seen.append(func)
        return super().__torch_function__(func, types, args, kwargs or {})


def test_modes_and_subclasses_see_the_operator():
    x = randn(4, 9, seed=8)
    expected = operator("sum")(x, 0)
    before = fast_calls()
    with RecordingFunctionMode() as mode:
        assert_bits_equal(ree.ops.sum(x, 0), expected, "torch function mode")
    assert operator("sum") in mode.seen, mode.seen
    with RecordingDispatchMode() as dispatch:
        assert_bits_equal(ree.ops.sum(x, dim=0), expected, "dispatch mode")
    assert operator("sum") in dispatch.seen, dispatch.seen
    Recorded.seen.clear()
    out = ree.ops.sum(x.as_subclass(Recorded), 0)
    assert operator("sum") in Recorded.seen and type(out) is Recorded
    assert_bits_equal(out.as_subclass(torch.Tensor), expected, "subclass")
    assert fast_calls() == before


def test_fake_tensors_autocast_profiler_and_meta_take_the_operator_route():
    from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

    before = fast_calls()
    with FakeTensorMode():
        out = ree.ops.sum(torch.empty(5, 7), 0, True)
    assert isinstance(out, FakeTensor) and out.shape == (1, 7)
    x = randn(5, 7, seed=9)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert_bits_equal(ree.ops.sigmoid(x), operator("sigmoid")(x), "autocast")
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        ree.ops.sum(x)
    assert "ree::sum" in {e.name for e in prof.events()}
    meta = torch.empty(5, 7, device="meta")
    assert ree.ops.max(meta).shape == (5,) and ree.ops.max(meta).device.type == "meta"
    assert fast_calls() == before


def test_vmap_make_fx_and_jit_trace_as_the_operator():
    x = randn(3, 4, 6, seed=10)
    before = fast_calls()
    assert_bits_equal(torch.func.vmap(ree.ops.sum)(x), torch.func.vmap(operator("sum"))(x), "vmap")
    from torch.fx.experimental.proxy_tensor import make_fx

    graph = make_fx(lambda t: ree.ops.softmax(t, 0))(x)
    targets = [n.target for n in graph.graph.nodes if n.op == "call_function"]
    assert targets == [operator("softmax")], targets
    assert fast_calls() == before
    traced = torch.jit.trace(lambda t: ree.ops.sigmoid(t), (x,), check_trace=False)
    assert "ree::sigmoid" in str(traced.graph)
    assert_bits_equal(traced(x), operator("sigmoid")(x), "jit trace")


def test_compile_traces_the_fast_entry_as_the_operator():
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    def fn(t, w):
        return ree.ops.rms_norm(ree.ops.sum(t, dim=0, keepdim=True), w, eps=1e-5)

    x, w = randn(4, 33, seed=11), randn(33, seed=12)
    compiled = torch.compile(fn, fullgraph=True, backend=backend)
    assert_bits_equal(compiled(x, w), fn(x, w), "compiled")
    targets = [n.target for n in graphs[0].graph.nodes if n.op == "call_function"]
    assert targets == [operator("sum"), operator("rms_norm")], targets


def outcome(fn, args, kwargs):
    """A call's result, or its exception's type and message."""
    try:
        return fn(*args, **kwargs)
    except Exception as error:  # noqa: BLE001  (any exception: compared, not handled)
        return type(error), str(error)


def test_bad_arguments_raise_the_operators_errors():
    x, x_int = randn(3, 4, seed=13), randn(3, 4, seed=13).to(torch.int32)
    cases = [
        ("sum", (x_int,), {}),                            # wrong dtype (the kernel's check)
        ("rms_norm", (x, randn(5)), {}),                  # wrong weight shape (the kernel)
        ("sum", (x, 5), {}),                              # dim out of range (the kernel)
        ("matmul", (x, randn(5, 2)), {}),                 # inner dimensions (the kernel)
        ("cast", (x, torch.float64), {}),                 # unsupported dtype (the kernel)
        ("gelu", (x, "cubic"), {}),                       # unknown approximation (the kernel)
        ("rms_norm", (x, torch.empty(4, device="meta")), {}),  # a device mix (meta wins)
        ("sum", (x, 1.5), {}),                            # wrong type for dim
        ("sum", (x, True), {}),                           # bool for dim (torch: 1)
        ("rms_norm", (x, None, "1e-5"), {}),              # wrong type for eps
        ("sum", (x, 0, True, 1), {}),                     # too many arguments
        ("sum", (x,), {"axis": 0}),                       # unknown keyword
        ("sum", (x,), {"x": x}),                          # given twice
        ("cast", (x,), {}),                               # missing argument
        ("sum", ([1.0, 2.0],), {}),                       # not a tensor
        ("sigmoid", (None,), {}),                         # None for a tensor
    ]
    raised = 0
    for name, args, kwargs in cases:
        fast, slow = (outcome(fn, args, kwargs) for fn in (getattr(ree.ops, name), operator(name)))
        if isinstance(slow, torch.Tensor):  # torch accepts it (True is 1; meta wins the mix)
            assert isinstance(fast, torch.Tensor), (name, args, kwargs, fast)
            assert (fast.shape, fast.dtype, fast.device) == (slow.shape, slow.dtype, slow.device)
            if not any(isinstance(a, torch.Tensor) and a.is_meta for a in args):  # else: fake
                assert_bits_equal(fast, slow, f"{name} {args} {kwargs}")  # kernel, no values
        else:
            assert fast == slow, (name, args, kwargs)
            raised += 1
    assert raised >= len(cases) - 2


def test_threads_calling_cpu_kernels():
    """CPU kernels run with the GIL released: concurrent calls give the single-thread bits."""
    x = randn(64, 257, seed=14)
    expected = operator("softmax")(x)
    failures = []

    def work():
        for _ in range(20):
            if not torch.equal(ree.ops.softmax(x), expected):
                failures.append(1)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures


def test_fresh_interpreter_imports_no_dynamo_and_compiles():
    """`import ree` leaves torch._dynamo unimported (it costs about a second) and registers the
    fast entries with it when it is imported later; errors on the fast path are exceptions there
    too (a crash fails this test, not the run)."""
    code = (
        "import sys, pickle, torch, ree\n"
        "assert 'torch._dynamo' not in sys.modules\n"
        "x = torch.randn(3, 5)\n"
        "f = torch.compile(lambda t: ree.ops.max(t, 0), fullgraph=True, backend='eager')\n"
        "assert torch.equal(f(x), torch.ops.ree.max.default(x, 0))\n"
        "assert pickle.loads(pickle.dumps(ree.ops.max)) is ree.ops.max\n"
        "try:\n    ree.ops.sum(torch.empty(3, 0))\n"
        "except ValueError as e:\n    print('raised', e)\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         cwd=Path(__file__).parent)
    assert run.returncode == 0 and "raised ree.ops.sum: x needs a last dimension" in run.stdout, (
        run.returncode, run.stdout, run.stderr[-2000:])


@pytest.mark.skipif(not (torch.cuda.is_available() and ree._C.has_cuda),
                    reason="needs a CUDA device and ree built with CUDA (torch.cuda.is_available()"
                           f"={torch.cuda.is_available()}, ree._C.has_cuda={ree._C.has_cuda})")
def test_cuda_fast_entries_equal_the_operator_and_the_cpu():
    """On CUDA tensors the fast path runs the CUDA kernel (GIL kept, the current stream): the
    operator's bits and the CPU's; a CPU/CUDA mix takes the operator's route."""
    for name in CPP_OPS:
        fast, op = getattr(ree.ops, name), operator(name)
        for args, kwargs in calls_of(name, torch.float32, 30):
            on_gpu = [a.cuda() if isinstance(a, torch.Tensor) else a for a in args]
            kw_gpu = {k: v.cuda() if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()}
            before = fast_calls()
            got = fast(*on_gpu, **kw_gpu)
            assert fast_calls() == before + 1 and got.device.type == "cuda", name
            assert_bits_equal(got, op(*on_gpu, **kw_gpu), f"{name} cuda {kwargs}")
            assert_bits_equal(got, fast(*args, **kwargs), f"{name} cuda == cpu {kwargs}")
    x = randn(3, 40, device="cuda")
    before = fast_calls()
    mixed = [outcome(fn, (x, randn(40)), {}) for fn in (ree.ops.rms_norm, operator("rms_norm"))]
    assert mixed[0] == mixed[1] and mixed[0][0] is ValueError, mixed
    assert fast_calls() == before
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):  # the kernel is queued on the current stream
        y = ree.ops.sum(x)
    stream.synchronize()
    assert_bits_equal(y, operator("sum")(x), "side stream")
