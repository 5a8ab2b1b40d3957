"""The model operators rope, attention, embedding and sample (python/src/torch_ops_model.cpp): C++
operators like the others (CPU, CUDA and Autograd kernels from C++, a fast entry), giving bitwise
the results of the ree._C kernel calls the Python operators of ree/ops.py made before them (the
calls are written out below with the same arguments), raising the same exceptions and messages,
and traced by torch.compile(fullgraph=True) as one node each."""

import subprocess
import sys
from pathlib import Path

import pytest
import torch

import ree
from ree import _C
from conftest import DTYPES, assert_bits_equal, randn

MODEL_OPS = ["rope", "attention", "embedding", "sample"]
CODE = {torch.float32: 0, torch.bfloat16: 1, torch.float16: 2}
LLAMA3 = {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 64}


# ---- the kernel calls of the former Python operators (CPU: stream -1) ---------------------------

def nb_rope(x, positions, inv_freq, interleaved=False):
    lead = tuple(x.shape[:-2])
    pos = positions.expand(lead).reshape(-1).to(torch.int32).contiguous()
    y = x.contiguous().clone()
    if pos.numel():
        heads, head_dim = x.shape[-2], x.shape[-1]
        _C.rope(CODE[x.dtype], y.data_ptr(), pos.numel(), heads, head_dim, heads * head_dim,
                pos.data_ptr(), inv_freq.contiguous().data_ptr(), 2 * inv_freq.numel(),
                interleaved, -1)
    return y


def nb_attention(q, k, v, scale=None):
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    b, tq, h, d = q.shape
    out = torch.empty_like(q)
    _C.attention(b, tq, k.shape[1], h, k.shape[2], d, q.data_ptr(), CODE[q.dtype], k.data_ptr(),
                 v.data_ptr(), CODE[k.dtype], out.data_ptr(), CODE[q.dtype],
                 0.0 if scale is None else float(scale), -1)
    return out


def nb_embedding(ids, table):
    flat = ids.reshape(-1).to(torch.int32).contiguous()
    table = table.contiguous()
    out = torch.empty((flat.numel(), table.shape[1]), dtype=table.dtype)
    if flat.numel():
        _C.embedding(CODE[table.dtype], table.data_ptr(), table.shape[0], table.shape[1],
                     flat.data_ptr(), flat.numel(), out.data_ptr(), -1)
    return out.reshape(*ids.shape, table.shape[1])


def nb_sample(logits, temperature=1.0, top_k=0, top_p=1.0, seed=0, sequence=0, step=0):
    rows = logits.reshape(-1, logits.shape[-1]).contiguous()
    if rows.dtype != torch.float32:
        wide = torch.empty(rows.shape, dtype=torch.float32)
        _C.cast(rows.data_ptr(), CODE[rows.dtype], wide.data_ptr(), 0, rows.numel(), -1)
        rows = wide
    out = torch.empty(rows.shape[0], dtype=torch.int32)
    _C.sample(rows.data_ptr(), rows.shape[0], rows.shape[1], float(temperature), int(top_k),
              float(top_p), seed, sequence, step, out.data_ptr(), -1)
    return out.to(torch.int64).reshape(logits.shape[:-1])


# ---- registration --------------------------------------------------------------------------------

@pytest.mark.parametrize("name", MODEL_OPS)
def test_operators_are_registered_by_torch_ops_model(name):
    """test_ops_cpp.py checks every operator's CPU, CUDA and Autograd kernels and its fast entry;
    these four come from torch_ops_model.cpp and keep a Meta (fake) kernel for torch.compile."""
    qualname = f"ree::{name}"
    assert torch._C._dispatch_has_kernel_for_dispatch_key(qualname, "Meta"), qualname
    table = torch._C._dispatch_dump_table(qualname)
    cpu_line = next(line for line in table.splitlines() if line.startswith("CPU:"))
    assert "torch_ops_model.cpp" in cpu_line, cpu_line


def test_operators_with_host_tables_are_marked_cudagraph_unsafe():
    """attention, embedding and sample read host tables through reused pinned buffers (and
    embedding waits for its id check), so a CUDA graph must not capture them: their schemas say
    so (torch.compile's cudagraph trees split there) and a capture is refused by name (test_cuda.py)."""
    for name in MODEL_OPS:
        tags = getattr(torch.ops.ree, name).default.tags
        assert (torch.Tag.cudagraph_unsafe in tags) == (name != "rope"), (name, tags)


def test_public_signatures_are_unchanged():
    import inspect

    expected = {
        "rope": [("x", None), ("positions", None), ("inv_freq", None), ("interleaved", False)],
        "attention": [("q", None), ("k", None), ("v", None), ("scale", None)],
        "embedding": [("ids", None), ("table", None)],
        "sample": [("logits", None), ("temperature", 1.0), ("top_k", 0), ("top_p", 1.0),
                   ("seed", 0), ("sequence", 0), ("step", 0)],
    }
    for name, params in expected.items():
        got = inspect.signature(getattr(ree.ops, name)).parameters.values()
        assert [(p.name, None if p.default is inspect.Parameter.empty else p.default)
                for p in got] == params, name


# ---- bits ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
def test_rope_equals_the_kernel_call(dtype):
    g = torch.Generator().manual_seed(1)
    cases = [((5, 3, 8), 8, False, None), ((2, 7, 3, 10), 6, True, LLAMA3),
             ((1, 4, 2, 64), 64, False, LLAMA3), ((3, 1, 5, 18), 18, True, None),
             ((2, 0, 3, 8), 8, False, None)]
    for seed, (shape, rotary, interleaved, llama3) in enumerate(cases):
        x = randn(*shape, dtype=dtype, seed=seed, scale=3.0)
        positions = torch.randint(0, 5000, shape[:-2], generator=g)
        inv = ree.ops.rope_inv_freq(rotary, base=500000.0, llama3=llama3)
        what = f"rope {shape} {interleaved} {dtype}"
        assert_bits_equal(ree.ops.rope(x, positions, inv, interleaved),
                          nb_rope(x, positions, inv, interleaved), what)
        tokens = positions.reshape(-1)[:shape[-3]].to(torch.int32)  # [tokens] positions
        assert_bits_equal(ree.ops.rope(x, tokens, inv, interleaved=interleaved),
                          nb_rope(x, tokens, inv, interleaved), what + " [tokens]")
        partial = inv[:max(1, inv.numel() // 2)]  # fewer rotated channels than head_dim
        assert_bits_equal(ree.ops.rope(x, positions, partial), nb_rope(x, positions, partial),
                          what + " partial")
        view = randn(*shape[:-2], shape[-1], shape[-2], dtype=dtype, seed=seed + 50).transpose(-1, -2)
        assert_bits_equal(ree.ops.rope(view, positions, inv), nb_rope(view, positions, inv),
                          what + " non-contiguous")


@pytest.mark.parametrize("dtype", DTYPES)
def test_attention_equals_the_kernel_call(dtype):
    shapes = [(1, 1, 1, 1, 1, 8), (2, 3, 7, 4, 2, 16), (1, 5, 70, 6, 3, 10), (3, 65, 130, 2, 1, 4),
              (1, 4, 4, 8, 1, 64), (2, 0, 4, 2, 2, 8), (0, 2, 2, 2, 2, 8)]
    for seed, (b, tq, tk, h, hkv, d) in enumerate(shapes):
        q = randn(b, tq, h, d, dtype=dtype, seed=seed, scale=2.0)
        k = randn(b, tk, hkv, d, dtype=dtype, seed=seed + 20, scale=2.0)
        v = randn(b, tk, hkv, d, dtype=dtype, seed=seed + 40)
        what = f"attention {b, tq, tk, h, hkv, d} {dtype}"
        assert_bits_equal(ree.ops.attention(q, k, v), nb_attention(q, k, v), what)
        assert_bits_equal(ree.ops.attention(q, k, v, 0.3), nb_attention(q, k, v, 0.3), what)
        assert_bits_equal(ree.ops.attention(q, k=k, v=v, scale=2), nb_attention(q, k, v, 2.0), what)
        q_view = randn(b, h, tq, d, dtype=dtype, seed=seed + 60).transpose(1, 2)
        k_view = randn(b, hkv, tk, d, dtype=dtype, seed=seed + 80).transpose(1, 2)
        assert_bits_equal(ree.ops.attention(q_view, k_view, v), nb_attention(q_view, k_view, v),
                          what + " non-contiguous")
        if dtype != torch.float32:  # fp32 queries over a bf16/f16 cache
            assert_bits_equal(ree.ops.attention(q.float(), k, v), nb_attention(q.float(), k, v),
                              what + " fp32 q")


@pytest.mark.parametrize("dtype", DTYPES)
def test_embedding_equals_the_kernel_call(dtype):
    for seed, (vocab, dim, shape) in enumerate([(10, 3, (4,)), (7, 129, (2, 3)), (1, 1, (5,)),
                                                (50, 8, ()), (5, 4, (0, 3))]):
        table = randn(vocab, dim, dtype=dtype, seed=seed)
        ids = torch.randint(0, vocab, shape, generator=torch.Generator().manual_seed(seed))
        what = f"embedding {vocab, dim, shape} {dtype}"
        assert_bits_equal(ree.ops.embedding(ids, table), nb_embedding(ids, table), what)
        assert_bits_equal(ree.ops.embedding(ids.to(torch.int32), table), nb_embedding(ids, table),
                          what + " int32 ids")
        view = randn(dim, vocab, dtype=dtype, seed=seed + 10).t()
        assert_bits_equal(ree.ops.embedding(ids=ids, table=view), nb_embedding(ids, view),
                          what + " non-contiguous")


@pytest.mark.parametrize("dtype", DTYPES)
def test_sample_equals_the_kernel_call(dtype):
    params = [{}, {"temperature": 0.0}, {"temperature": 0.7, "top_k": 5},
              {"temperature": 1.3, "top_p": 0.9, "seed": 7, "sequence": 3, "step": 11},
              {"top_k": 50, "top_p": 0.5, "seed": 2**63 - 1, "sequence": 2**63 - 2, "step": 2**40},
              {"temperature": 2, "top_k": 1}, {"temperature": 1e-3, "seed": 99}]
    for seed, shape in enumerate([(5, 1000), (1, 3), (17,), (3, 257), (0, 5)]):
        logits = randn(*shape, dtype=dtype, seed=seed, scale=4.0)
        for kwargs in params:
            assert_bits_equal(ree.ops.sample(logits, **kwargs), nb_sample(logits, **kwargs),
                              f"sample {shape} {kwargs} {dtype}")
        assert_bits_equal(ree.ops.sample(logits, 0.8, 3, 0.95, 1, 2, 3),
                          nb_sample(logits, 0.8, 3, 0.95, 1, 2, 3), f"sample {shape} positional")
        if len(shape) == 2:
            view = randn(shape[1], shape[0], dtype=dtype, seed=seed + 10).t()
            assert_bits_equal(ree.ops.sample(view, seed=5), nb_sample(view, seed=5),
                              f"sample {shape} non-contiguous")


# ---- errors --------------------------------------------------------------------------------------

def outcome(fn, *args, **kwargs):
    try:
        fn(*args, **kwargs)
    except Exception as error:  # noqa: BLE001  (compared, not handled)
        return type(error), str(error)
    return None


def test_errors_keep_their_types_and_messages():
    """The messages of the Python operators, verbatim (recorded before the move to C++)."""
    x, f8, q, t = randn(2, 3, 8), ree.ops.rope_inv_freq(8), randn(1, 2, 4, 8), randn(3, 4)
    shape_msg = ("ree.ops.attention: q [batch, q_len, heads, head_dim] and k, v [batch, kv_len, "
                 "kv_heads, head_dim] of one shape, got ")
    fit_msg = " (same batch and head_dim, kv_len >= q_len, kv_heads dividing heads)"
    cases = [
        (ValueError, "ree.ops.rope: x must be [..., tokens, heads, head_dim], got shape (3, 8)",
         ree.ops.rope, (randn(3, 8), torch.arange(3), f8)),
        (ValueError, "ree.ops.rope: positions must have shape (2, 3) or (3,), got (4,)",
         ree.ops.rope, (randn(2, 3, 2, 8), torch.arange(4), f8)),
        (ValueError, "ree.ops.rope: inv_freq must be 1-D with 1 .. head_dim/2 entries, got shape "
                     "(5,) for head_dim 8", ree.ops.rope, (x, torch.arange(2), ree.ops.rope_inv_freq(10))),
        (ValueError, "ree.ops.rope: inv_freq must be 1-D with 1 .. head_dim/2 entries, got shape "
                     "(0,) for head_dim 8", ree.ops.rope, (x, torch.arange(2), torch.empty(0))),
        (TypeError, "ree.ops.rope: inv_freq has dtype float64; supported: float32",
         ree.ops.rope, (x, torch.arange(2), f8.double())),
        (TypeError, "ree.ops.rope: x has dtype float64; supported: float32, bfloat16, float16",
         ree.ops.rope, (x.double(), torch.arange(2), f8)),
        (TypeError, "ree.ops.rope: positions must be integers, got torch.float32",
         ree.ops.rope, (x, torch.arange(2.0), f8)),
        (TypeError, "ree.ops.rope: positions must be integers, got torch.bool",
         ree.ops.rope, (x, torch.ones(2, dtype=torch.bool), f8)),
        (ValueError, shape_msg + "(2, 4, 8), (1, 2, 4, 8), (1, 2, 4, 8)",
         ree.ops.attention, (q[0], q, q)),
        (ValueError, shape_msg + "(1, 2, 4, 8), (1, 2, 4, 8), (1, 3, 4, 8)",
         ree.ops.attention, (q, q, randn(1, 3, 4, 8))),
        (ValueError, "ree.ops.attention: k/v (1, 2, 3, 8) do not fit q (1, 2, 4, 8)" + fit_msg,
         ree.ops.attention, (q, randn(1, 2, 3, 8), randn(1, 2, 3, 8))),
        (ValueError, "ree.ops.attention: k/v (1, 1, 2, 8) do not fit q (1, 2, 4, 8)" + fit_msg,
         ree.ops.attention, (q, randn(1, 1, 2, 8), randn(1, 1, 2, 8))),
        (ValueError, "ree.ops.attention: k/v (1, 2, 0, 8) do not fit q (1, 2, 4, 8)" + fit_msg,
         ree.ops.attention, (q, randn(1, 2, 0, 8), randn(1, 2, 0, 8))),
        (TypeError, "ree.ops.attention: k has dtype float64; supported: float32, bfloat16, float16",
         ree.ops.attention, (q, q.double(), q.double())),
        (TypeError, "ree.ops.attention: k and v must have one dtype, got torch.float32, "
                    "torch.float16", ree.ops.attention, (q, q, q.half())),
        (ValueError, "attention: need 0 <= q_len <= kv_len and kv_len >= 1",
         ree.ops.attention, (randn(1, 0, 2, 8),) * 3),
        (ValueError, "ree.ops.embedding: ids[2] = 9 is outside the vocabulary [0, 3)",
         ree.ops.embedding, (torch.tensor([0, 1, 9]), t)),
        (ValueError, "ree.ops.embedding: ids[1] = -1 is outside the vocabulary [0, 3)",
         ree.ops.embedding, (torch.tensor([[0, -1], [5, 1]]), t)),
        (ValueError, "ree.ops.embedding: ids[0] = 1099511627776 is outside the vocabulary [0, 3)",
         ree.ops.embedding, (torch.tensor([2**40]), t)),
        (TypeError, "ree.ops.embedding: ids must be integers, got torch.float32",
         ree.ops.embedding, (torch.tensor([0.0]), t)),
        (ValueError, "ree.ops.embedding: table must be 2-D [vocab, dim], got (4,)",
         ree.ops.embedding, (torch.tensor([0]), randn(4))),
        (TypeError, "ree.ops.embedding: table has dtype int32; supported: float32, bfloat16, "
                    "float16", ree.ops.embedding, (torch.tensor([0]), t.int())),
        (ValueError, "ree.ops.sample: seed must be in [0, 2^64), got -1",
         lambda: ree.ops.sample(t, seed=-1), ()),
        (ValueError, "ree.ops.sample: sequence must be in [0, 2^64), got -5",
         lambda: ree.ops.sample(t, sequence=-5), ()),
        (ValueError, "ree.ops.sample: step must be in [0, 2^64), got -9223372036854775808",
         lambda: ree.ops.sample(t, step=-2**63), ()),
        (ValueError, "ree.ops.sample: logits must be [batch, vocab] or [vocab], got ()",
         ree.ops.sample, (torch.tensor(1.0),)),
        (ValueError, "ree.ops.sample: logits must be [batch, vocab] or [vocab], got (2, 0)",
         ree.ops.sample, (torch.empty(2, 0),)),
        (TypeError, "ree.ops.sample: logits has dtype float64; supported: float32, bfloat16, "
                    "float16", ree.ops.sample, (t.double(),)),
    ]
    for exc, message, fn, args in cases:
        assert outcome(fn, *args) == (exc, message), message
    # The kernels' own checks (their messages name the source line): ValueError, field named.
    for kwargs, field in (({"temperature": -1.0}, "temperature"), ({"top_p": 0.0}, "top_p"),
                          ({"top_k": -1}, "top_k"), ({"temperature": float("nan")}, "temperature")):
        exc, message = outcome(ree.ops.sample, t, **kwargs)
        assert exc is ValueError and message.startswith(f"sample: params[0].{field} must be"), message
    exc, message = outcome(ree.ops.embedding, torch.tensor([0]), torch.empty(3, 0))
    assert exc is ValueError and message.startswith("embedding: bad shape vocab=3 dim=0"), message
    exc, message = outcome(ree.ops.sample, t, top_k=2**40)  # beyond the kernel's int32
    assert exc is TypeError and "top_k must fit in 32 bits" in message, message


def test_errors_in_a_fresh_interpreter():
    """The C++ checks raise Python exceptions, never crash (a child interpreter: a crash fails
    this test instead of ending the run)."""
    code = ("import torch, ree\n"
            "for call in (lambda: ree.ops.embedding(torch.tensor([0, 7]), torch.ones(3, 2)),\n"
            "             lambda: ree.ops.sample(torch.ones(2, 3), seed=-1),\n"
            "             lambda: ree.ops.attention(*[torch.ones(1, 0, 2, 8)] * 3)):\n"
            "    try:\n        call()\n"
            "    except ValueError as e:\n        print('raised', e)\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         cwd=Path(__file__).parent)
    assert run.returncode == 0 and run.stdout.count("raised") == 3, (
        run.returncode, run.stdout, run.stderr[-2000:])
    assert "ids[1] = 7 is outside the vocabulary [0, 3)" in run.stdout, run.stdout


# ---- tracing -------------------------------------------------------------------------------------

def test_compile_traces_each_model_operator_as_one_node():
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    def fn(x, positions, inv_freq, table, ids):
        q = ree.ops.rope(x, positions, inv_freq, interleaved=True)
        a = ree.ops.attention(q, x, x, scale=0.5)
        e = ree.ops.embedding(ids, table)
        return a, e, ree.ops.sample(table, temperature=0.5, top_k=3, seed=4)

    args = (randn(1, 6, 4, 8, seed=1), torch.arange(6), ree.ops.rope_inv_freq(8),
            randn(9, 5, seed=2), torch.tensor([[1, 8], [0, 3]]))
    compiled = torch.compile(fn, fullgraph=True, backend=backend)
    for got, expected in zip(compiled(*args), fn(*args)):
        assert_bits_equal(got, expected, "compiled")
    targets = [n.target for n in graphs[0].graph.nodes if n.op == "call_function"]
    assert targets == [getattr(torch.ops.ree, name).default for name in MODEL_OPS], targets


def test_opcheck_schemas_and_fake_kernels():
    x = randn(1, 4, 2, 8, seed=3)
    cases = [
        (torch.ops.ree.rope.default, (x, torch.arange(4), ree.ops.rope_inv_freq(8), False)),
        (torch.ops.ree.attention.default, (x, x, x, 0.25)),
        (torch.ops.ree.embedding.default, (torch.tensor([[1, 0]]), randn(3, 5))),
        (torch.ops.ree.sample.default, (randn(2, 9), 0.7, 2, 0.9, 1, 2, 3)),
    ]
    for op, args in cases:
        torch.library.opcheck(op, args, test_utils=("test_schema", "test_faketensor",
                                                    "test_aot_dispatch_static"))
