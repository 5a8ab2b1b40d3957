"""CPU == CUDA, bit for bit, for every operator on random odd shapes (the REE promise across
devices). Runs only where a CUDA device and a CUDA build of ree._C exist; elsewhere every test
skips, saying why. On a GPU machine:

    python -m pytest python/tests/test_cuda.py -v
"""

import pytest
import torch

import ree
from conftest import DTYPES, assert_bits_equal, randn

pytestmark = pytest.mark.skipif(
    not (torch.cuda.is_available() and ree._C.has_cuda),
    reason="needs a CUDA device and ree._C built with CUDA (torch.cuda.is_available()="
           f"{torch.cuda.is_available()}, ree._C.has_cuda={ree._C.has_cuda})")


def same_on_both(fn, *args, what=""):
    cpu = fn(*args)
    cuda = fn(*[a.cuda() if isinstance(a, torch.Tensor) else a for a in args])
    torch.cuda.synchronize()
    assert cuda.device.type == "cuda"
    assert_bits_equal(cuda.cpu(), cpu, what)


SHAPES = [(1, 1), (3, 127), (5, 129), (17, 1000), (33, 4099)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_row_and_element_ops(dtype, shape):
    x = randn(*shape, dtype=dtype, seed=80, scale=3)
    w, b = randn(shape[1], dtype=dtype, seed=81), randn(shape[1], dtype=dtype, seed=82)
    same_on_both(lambda t, ww: ree.ops.rms_norm(t, ww), x, w, what="rms_norm")
    same_on_both(lambda t, ww: ree.ops.rms_norm(t, ww, cast_before_weight=True), x, w, what="rms hf")
    same_on_both(lambda t, ww, bb: ree.ops.layer_norm(t, ww, bb), x, w, b, what="layer_norm")
    for name in ("softmax", "log_softmax", "sum", "mean", "max", "min", "var", "argmax",
                 "sigmoid", "exp", "expm1", "log1p", "tanh", "erf", "sin", "cos", "softplus",
                 "silu", "gelu"):
        arg = x.abs() if name == "log1p" else x
        same_on_both(getattr(ree.ops, name), arg, what=name)
    same_on_both(lambda t: ree.ops.gelu(t, approximate="tanh"), x, what="gelu tanh")
    same_on_both(lambda t: ree.ops.log(t.abs()), x, what="log")
    same_on_both(ree.ops.swiglu, x, x.flip(-1), what="swiglu")
    same_on_both(ree.ops.geglu, x, x.flip(-1), what="geglu")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mnk", [(1, 1, 1), (1, 4096, 513), (7, 33, 300), (64, 129, 1000),
                                 (300, 70, 257)])
def test_linear_and_matmul(dtype, mnk):
    m, n, k = mnk
    x, w, b = randn(m, k, dtype=dtype, seed=83), randn(n, k, dtype=dtype, seed=84), randn(n, seed=85)
    same_on_both(ree.ops.linear, x, w, what="linear")
    same_on_both(ree.ops.linear, x, w, b, what="linear + bias")
    same_on_both(ree.ops.matmul, x, w.t().contiguous(), what="matmul")


@pytest.mark.parametrize("dtype", DTYPES)
def test_attention_rope_embedding_sample(dtype):
    for (b, tq, tk, h, hkv, d) in [(1, 1, 1, 1, 1, 8), (2, 5, 150, 6, 2, 64), (3, 77, 77, 4, 1, 128)]:
        q = randn(b, tq, h, d, dtype=dtype, seed=86)
        k, v = randn(b, tk, hkv, d, dtype=dtype, seed=87), randn(b, tk, hkv, d, dtype=dtype, seed=88)
        same_on_both(ree.ops.attention, q, k, v, what=f"attention {b, tq, tk, h, hkv, d}")
    x = randn(13, 3, 96, dtype=dtype, seed=89)
    positions = torch.tensor([0, 1, 5, 63, 64, 100, 511, 1000, 4096, 9999, 20000, 65535, 7])
    for interleaved in (False, True):
        inv = ree.ops.rope_inv_freq(64, base=500000.0)
        same_on_both(lambda t, p, f: ree.ops.rope(t, p, f, interleaved=interleaved), x, positions,
                     inv, what="rope")
    table = randn(1001, 67, dtype=dtype, seed=90)
    same_on_both(ree.ops.embedding, torch.tensor([[0, 1000, 5], [77, 77, 3]]), table, what="embedding")
    logits = randn(9, 32003, seed=91, scale=3)
    for params in ({"temperature": 0.0}, {"temperature": 0.8, "top_p": 0.9, "seed": 7},
                   {"temperature": 1.3, "top_k": 40, "seed": 8, "step": 12, "sequence": 5}):
        same_on_both(lambda t: ree.ops.sample(t, **params), logits, what=f"sample {params}")


def test_embedding_errors_on_cuda_are_the_cpu_s():
    table = randn(3, 4, seed=94)
    for ids in ([0, 1, 9], [[0, -1], [5, 1]], [2**40], [-(2**40)]):
        with pytest.raises(ValueError) as on_cpu:
            ree.ops.embedding(torch.tensor(ids), table)
        with pytest.raises(ValueError) as on_cuda:
            ree.ops.embedding(torch.tensor(ids).cuda(), table.cuda())
        assert str(on_cuda.value) == str(on_cpu.value), ids
        assert "ree.ops.embedding: ids[" in str(on_cuda.value)
    same_on_both(ree.ops.embedding, torch.tensor([2, 0]), table, what="embedding after errors")


def test_host_table_operators_refuse_graph_capture():
    q = randn(1, 3, 2, 8, seed=95, device="cuda")
    ids, table = torch.tensor([0, 2], device="cuda"), randn(3, 4, seed=96, device="cuda")
    logits = randn(2, 50, seed=97, device="cuda")
    for name, call in (("attention", lambda: ree.ops.attention(q, q, q)),
                       ("embedding", lambda: ree.ops.embedding(ids, table)),
                       ("sample", lambda: ree.ops.sample(logits, temperature=0.7))):
        call()  # warm: allocations before the capture
        graph = torch.cuda.CUDAGraph()
        with pytest.raises(ValueError, match=f"ree.ops.{name} cannot run while a CUDA graph is "
                                             "captured"):
            with torch.cuda.graph(graph):
                call()
    same_on_both(ree.ops.embedding, torch.tensor([2, 0]), table.cpu(), what="after the captures")


def test_compile_on_cuda():
    x, w = randn(5, 64, seed=92, device="cuda"), randn(32, 64, seed=93, device="cuda")
    fn = lambda a, b: ree.ops.softmax(ree.ops.linear(ree.ops.rms_norm(a), b))  # noqa: E731
    assert_bits_equal(torch.compile(fn, fullgraph=True)(x, w).cpu(), fn(x.cpu(), w.cpu()), "compiled")


def test_reproducible_llama_same_logits_on_cpu_and_cuda():
    import copy

    from test_reproducible import logits, tiny_llama

    model = tiny_llama()
    ids = torch.randint(0, 300, (2, 100), generator=torch.Generator().manual_seed(3))
    with ree.reproducible(model):
        cpu = logits(model, ids)
    gpu_model = copy.deepcopy(model).cuda()
    with ree.reproducible(gpu_model):
        gpu = logits(gpu_model, ids.cuda())
    assert_bits_equal(gpu.cpu(), cpu, "tiny Llama logits, CPU vs CUDA")
