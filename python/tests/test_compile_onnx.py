"""ree.compile on models exported here by torch.onnx.export (the models of the C++ compiler tests,
tests/compiler/export_models.py: an MLP at opsets 17 and 20 and with external weights, a CNN with
a residual block, an attention block with a written-out RMSNorm and causal mask, a two-layer
transformers Llama without KV cache):

- outputs within 1e-5 + 1e-4 * |ort| of onnxruntime (the C++ tests' tolerance: fp32 throughout,
  the differences come from summation orders and correctly rounded vs. vendor math);
- reproducible outputs bitwise equal run to run, for each batch row alone, in another batch
  composition, for a ModelProto and its file, and to `ree-launch compile --run`'s bits;
- artifacts: a temporary directory removed with the module (kept with REE_DEBUG), an explicit
  one kept, external tensors symlinked or copied (colocate_tensors);
- argument conversions and errors;
- CPU == CUDA bitwise (skipped, saying why, without a GPU and a CUDA build):

    .venv/bin/python -m pytest python/tests/test_compile_onnx.py -v -k cuda
"""

import gc
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

import ree
from conftest import REPO, assert_bits_equal

onnx = pytest.importorskip("onnx", reason="needs onnx (pip install -r requirements.txt)")
ort = pytest.importorskip("onnxruntime", reason="needs onnxruntime (requirements.txt)")

sys.path.insert(0, str(REPO / "tests" / "compiler"))
import export_models  # noqa: E402  (the C++ tests' models, reused)

# torch.onnx.export's deprecation and tracer warnings are the exporter's, not ours.
pytestmark = pytest.mark.filterwarnings("ignore")

ATOL, RTOL = 1e-5, 1e-4
MODELS = ["mlp", "mlp_opset20", "mlp_ext", "cnn", "attention", "llama"]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """Exports every model once: {name: (directory, [input arrays])}."""
    if not ree.has_compiler:
        pytest.skip("ree._C was built without the ONNX compiler (REE_COMPILER off)")
    out = tmp_path_factory.mktemp("onnx_models")
    torch.manual_seed(0)
    saved = sys.argv
    try:
        sys.argv = ["export_models.py", str(out)]
        export_models.main()
    finally:
        sys.argv = saved
    cases = {}
    for name in sorted(os.listdir(out)):
        directory = out / name
        inputs, i = [], 0
        while (directory / f"input_{i}.npy").exists():
            inputs.append(np.load(directory / f"input_{i}.npy"))
            i += 1
        cases[name] = (directory, inputs)
    return cases


@pytest.mark.skipif(ree.has_compiler, reason="this build has the compiler")
def test_without_the_compiler_compile_says_so():
    with pytest.raises(RuntimeError, match="has no ONNX compiler"):
        ree.compile("model.onnx")


def case(models, name):
    if name not in models:
        pytest.skip(f"model {name} was not exported (transformers missing?)")
    return models[name]


def as_tuple(result):
    return result if isinstance(result, tuple) else (result,)


def run(module, inputs):
    return as_tuple(module(*[torch.from_numpy(a) for a in inputs]))


@pytest.mark.parametrize("name", MODELS)
def test_matches_onnxruntime_and_is_reproducible(models, name):
    directory, inputs = case(models, name)
    module = ree.compile(directory / "model.onnx")
    assert isinstance(module, torch.nn.Module) and module.operation_set == "reproducible"
    outputs = run(module, inputs)
    session = ort.InferenceSession(str(directory / "model.onnx"),
                                   providers=["CPUExecutionProvider"])
    feeds = {i.name: a for i, a in zip(session.get_inputs(), inputs)}
    expected = session.run(None, feeds)
    assert len(outputs) == len(expected) and module.output_names == [
        o.name for o in session.get_outputs()]
    for got, want in zip(outputs, expected):
        assert got.shape == want.shape and got.dtype == torch.float32
        err = (got.double() - torch.from_numpy(want).double()).abs()
        bound = ATOL + RTOL * torch.from_numpy(want).double().abs()
        assert bool((err <= bound).all()), f"{name}: max |ree - ort| = {err.max().item():.3g}"
    for got, again in zip(outputs, run(module, inputs)):
        assert_bits_equal(again, got, f"{name}: run to run")


@pytest.mark.parametrize("name", MODELS)
def test_batch_composition_does_not_change_bits(models, name):
    directory, inputs = case(models, name)
    module = ree.compile(directory / "model.onnx")
    whole = run(module, inputs)
    rows = inputs[0].shape[0]
    for row in range(rows):
        alone = run(module, [a[row:row + 1] for a in inputs])
        for i, (a, w) in enumerate(zip(alone, whole)):
            assert_bits_equal(a, w[row:row + 1], f"{name}: row {row} alone, output {i}")
    # Another composition: the rows reversed and the first one repeated.
    order = list(range(rows - 1, -1, -1)) + [0]
    mixed = run(module, [a[order] for a in inputs])
    for i, (m, w) in enumerate(zip(mixed, whole)):
        assert_bits_equal(m, w[order], f"{name}: reordered batch, output {i}")


@pytest.mark.parametrize("name", MODELS)
def test_equals_ree_launch_compile_run(models, name, launcher, tmp_path):
    directory, inputs = case(models, name)
    command = [launcher, "compile", str(directory / "model.onnx"), "--output-dir",
               str(tmp_path / "out")]
    for i, _ in enumerate(inputs):
        command += ["--run", str(directory / f"input_{i}.npy")]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    outputs = run(ree.compile(directory / "model.onnx"), inputs)
    for i, got in enumerate(outputs):
        cli = torch.from_numpy(np.load(tmp_path / "out" / f"output_{i}.npy"))
        assert_bits_equal(got, cli, f"{name}: output {i} vs ree-launch compile --run")


def test_modelproto_bytes_and_path_agree(models):
    directory, inputs = case(models, "attention")
    by_path = run(ree.compile(str(directory / "model.onnx")), inputs)
    proto = onnx.load(str(directory / "model.onnx"))
    for source in (proto, proto.SerializeToString()):
        for a, b in zip(run(ree.compile(source), inputs), by_path):
            assert_bits_equal(a, b, "ModelProto vs path")
    # A ModelProto of the external-data model, loaded with its tensors, needs no directory.
    ext_dir, ext_inputs = case(models, "mlp_ext")
    loaded = onnx.load(str(ext_dir / "model.onnx"))
    for a, b in zip(run(ree.compile(loaded), ext_inputs),
                    run(ree.compile(ext_dir / "model.onnx"), ext_inputs)):
        assert_bits_equal(a, b, "external data: ModelProto vs path")


def test_input_conversions_and_keywords(models):
    directory, inputs = case(models, "mlp")
    module = ree.compile(directory / "model.onnx")
    x = torch.from_numpy(inputs[0])
    base = run(module, [inputs[0]])
    assert module.input_names == ["x"]
    # Keyword, a non-contiguous view, float64 (rounded once: exact here) all give the same bits.
    variants = [module(x=x), module(x.t().contiguous().t()), module(x.double())]
    for variant in variants:
        for a, b in zip(as_tuple(variant), base):
            assert_bits_equal(a, b, "converted input")
    # bfloat16 values widen exactly: the same bits as their float32 copy.
    for a, b in zip(as_tuple(module(x.bfloat16())), as_tuple(module(x.bfloat16().float()))):
        assert_bits_equal(a, b, "bfloat16 input")
    llama_dir, llama_inputs = case(models, "llama")
    llama = ree.compile(llama_dir / "model.onnx")
    ids = torch.from_numpy(llama_inputs[0])
    assert_bits_equal(llama(ids.int()), llama(ids), "int32 ids widened to int64")


def test_errors_are_one_line(models, tmp_path):
    directory, inputs = case(models, "mlp")
    module = ree.compile(directory / "model.onnx")
    with pytest.raises(TypeError, match="input 'x'.*expects float32.*torch.int64"):
        module(torch.zeros(4, 12, dtype=torch.int64))
    with pytest.raises(ValueError, match="input 'x': rank 3, expected 2"):
        module(torch.zeros(1, 4, 12))
    with pytest.raises(ValueError, match="input 'x': dim 1 is 11, expected 12"):
        module(torch.zeros(4, 11))
    with pytest.raises(TypeError, match="missing inputs"):
        module()
    with pytest.raises(TypeError, match="no graph input named 'y'"):
        module(y=torch.zeros(4, 12))
    from onnx import TensorProto, helper
    graph = helper.make_graph([helper.make_node("FrobnicateAll", ["x"], ["y"], name="frob")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(Exception, match="node 'frob' \\(FrobnicateAll\\).*not supported") as error:
        ree.compile(model)
    assert "\n" not in str(error.value)
    with pytest.raises(Exception, match="missing.onnx"):
        ree.compile(tmp_path / "missing.onnx")
    with pytest.raises(Exception):
        ree.compile(b"not a protobuf at all")
    with pytest.raises(TypeError, match="expected a path"):
        ree.compile(42)
    with pytest.raises(ValueError, match="device"):
        ree.compile(directory / "model.onnx", ree.CompileOptions(device="tpu"))


def test_temporary_artifacts_removed_or_kept_with_ree_debug(models, monkeypatch):
    directory, _ = case(models, "mlp")
    monkeypatch.delenv("REE_DEBUG", raising=False)
    module = ree.compile(directory / "model.onnx")
    temporary = module.artifacts_dir
    assert os.path.isfile(os.path.join(temporary, "plan.json"))
    del module
    gc.collect()
    assert not os.path.exists(temporary), "a temporary artifacts directory outlived its module"
    monkeypatch.setenv("REE_DEBUG", "1")
    module = ree.compile(directory / "model.onnx")
    kept = module.artifacts_dir
    del module
    gc.collect()
    try:
        assert os.path.isfile(os.path.join(kept, "plan.json")), "REE_DEBUG: artifacts not kept"
    finally:
        import shutil
        shutil.rmtree(kept, ignore_errors=True)


@pytest.mark.parametrize("colocate", [False, True])
def test_artifacts_dir_and_external_tensors(models, tmp_path, colocate):
    directory, inputs = case(models, "mlp_ext")
    artifacts = tmp_path / "artifacts"
    options = ree.CompileOptions(artifacts_dir=artifacts, colocate_tensors=colocate)
    module = ree.compile(directory / "model.onnx", options)
    assert module.artifacts_dir == str(artifacts)
    outputs = run(module, inputs)
    del module
    gc.collect()
    with open(artifacts / "plan.json") as f:
        plan = json.load(f)
    assert plan["operation_set"] == "reproducible" and len(plan["external_files"]) == 1
    entry = plan["external_files"][0]
    path = artifacts / entry["artifact"]
    assert path.is_file() and path.is_symlink() != colocate, entry
    assert entry["mode"] == ("copy" if colocate else "symlink")
    reference = run(ree.compile(directory / "model.onnx"), inputs)
    for a, b in zip(outputs, reference):
        assert_bits_equal(a, b, "artifacts_dir / colocate_tensors vs the defaults")


def test_non_reproducible_set_within_tolerance(models):
    directory, inputs = case(models, "cnn")
    options = ree.CompileOptions(requires_reproducibility=False)
    try:
        module = ree.compile(directory / "model.onnx", options)
    except RuntimeError as error:
        if "LibTorch" in str(error) or "unavailable" in str(error) or "not available" in str(error):
            pytest.skip(f"this build has no ATen operation sets: {error}")
        raise
    assert module.operation_set == "default"
    got = run(module, inputs)[0]
    want = run(ree.compile(directory / "model.onnx"), inputs)[0]
    err = (got.double() - want.double()).abs()
    assert bool((err <= 2 * ATOL + 2 * RTOL * want.double().abs()).all()), err.max().item()


cuda = pytest.mark.skipif(
    not (torch.cuda.is_available() and ree._C.has_cuda),
    reason="needs a CUDA device and ree._C built with CUDA (torch.cuda.is_available()="
           f"{torch.cuda.is_available()}, ree._C.has_cuda={ree._C.has_cuda})")


@cuda
@pytest.mark.parametrize("name", MODELS)
def test_cuda_outputs_equal_cpu_bitwise(models, name):
    directory, inputs = case(models, name)
    cpu = run(ree.compile(directory / "model.onnx"), inputs)
    module = ree.compile(directory / "model.onnx", ree.CompileOptions(device="cuda"))
    for tensors in ([torch.from_numpy(a) for a in inputs],
                    [torch.from_numpy(a).cuda() for a in inputs]):
        gpu = as_tuple(module(*tensors))
        for i, (g, c) in enumerate(zip(gpu, cpu)):
            assert g.device.type == "cuda", f"{name}: output {i} on {g.device}"
            assert_bits_equal(g.cpu(), c, f"{name}: output {i}, cuda vs cpu")
