"""ree-launch compile on models exported by torch.onnx.export, against onnxruntime.

Usage: onnx_models_test.py REE_LAUNCH WORK_DIR [cuda]

With `cuda` (ctest compiler_onnx_models_gpu, label gpu): every model also runs with --device cuda
and must give the CPU's bits; exit 77 (skipped) when ree-launch cannot run a one-node graph on
cuda:0 (no GPU, or a build without CUDA).

For every model of export_models.py (an MLP at opsets 17 and 20 and with external weights, a CNN
with a residual block, an attention block with a written-out RMSNorm, a two-layer transformers
Llama without KV cache, and the model tests' six tiny transformers architectures hf_llama3,
hf_llama2_tied, hf_mistral, hf_qwen2, hf_qwen3, hf_gpt2 with random weights):
  - the reproducible outputs match onnxruntime's within the tolerance below (fp32 throughout; the
    differences come from summation order and correctly rounded vs. vendor math);
  - where the exporter saved the framework's own fp32 outputs (torch_0.npy: the transformers
    models), they match those within models_hf_parity_test's tolerance,
    2e-4 * max|transformers| + 2e-5;
  - they are bitwise identical run to run, with 1 and 3 CPU threads, and batch row by row vs. the
    whole batch at once (each row run alone gives the bits of its row in the batch);
  - the artifacts hold plan.json and constants.bin, and external tensor files are symlinked
    (default) or copied (--colocate-tensors).
Exit 0 when all pass, 1 otherwise (each failure is printed).
"""
import json
import os
import subprocess
import sys

try:
    import numpy as np
    import onnx  # noqa: F401
    import onnxruntime  # noqa: F401
except ImportError as error:  # a visible skip: ctest maps 77 to Skipped
    print(f"skipped: {error} (pip install -r requirements.txt)")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
# |ree - onnxruntime| <= ATOL + RTOL * |onnxruntime| for every element.
ATOL = 1e-5
RTOL = 1e-4

failures = []


def check(condition, message):
    if not condition:
        failures.append(message)
        print("FAIL:", message)


def run_compile(launch, model, inputs, out_dir, *flags, artifacts=None):
    command = [launch, "compile", model]
    if artifacts:
        command += ["--artifacts-dir", artifacts]
    for path in inputs:
        command += ["--run", path]
    command += ["--output-dir", out_dir, *flags]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300)
    if result.returncode != 0:
        check(False, f"{' '.join(command)}: exit {result.returncode}: {result.stderr.strip()}")
        return None
    outputs = []
    i = 0
    while os.path.exists(os.path.join(out_dir, f"output_{i}.npy")):
        outputs.append(np.load(os.path.join(out_dir, f"output_{i}.npy")))
        i += 1
    return outputs


def case_inputs(directory):
    inputs = []
    while os.path.exists(os.path.join(directory, f"input_{len(inputs)}.npy")):
        inputs.append(os.path.join(directory, f"input_{len(inputs)}.npy"))
    return inputs


def check_against_onnxruntime(name, directory, outputs):
    for i, got in enumerate(outputs):
        want = np.load(os.path.join(directory, f"ort_{i}.npy"))
        check(got.shape == want.shape, f"{name} output {i}: shape {got.shape} vs {want.shape}")
        if got.shape != want.shape:
            continue
        excess = np.abs(got - want) - (ATOL + RTOL * np.abs(want))
        worst = float(np.abs(got - want).max()) if got.size else 0.0
        print(f"{name} output {i}: max |ree - onnxruntime| = {worst:.3g}")
        check(bool((excess <= 0).all()), f"{name} output {i}: differs from onnxruntime by {worst}")


def check_against_torch(name, directory, outputs):
    """transformers' fp32 logits, within models_hf_parity_test's tolerance."""
    path = os.path.join(directory, "torch_0.npy")
    if not os.path.exists(path):
        return
    want = np.load(path)
    got = outputs[0]
    check(got.shape == want.shape, f"{name}: shape {got.shape} vs transformers' {want.shape}")
    if got.shape != want.shape:
        return
    worst = float(np.abs(got - want).max())
    tolerance = 2e-4 * float(np.abs(want).max()) + 2e-5
    print(f"{name}: max |ree - transformers| = {worst:.3g} (tolerance {tolerance:.3g})")
    check(worst <= tolerance, f"{name}: differs from transformers by {worst} > {tolerance}")


def check_bitwise(name, a, b, what):
    same = a is not None and b is not None and len(a) == len(b) and all(
        x.shape == y.shape and x.tobytes() == y.tobytes() for x, y in zip(a, b))
    check(same, f"{name}: outputs differ {what}")


def check_rows(launch, name, directory, model, work, outputs):
    """Each batch row run alone gives the bits of that row in the whole batch."""
    inputs = [np.load(p) for p in case_inputs(directory)]
    for row in range(inputs[0].shape[0]):
        paths = []
        for i, array in enumerate(inputs):
            path = os.path.join(work, f"{name}_row{row}_input{i}.npy")
            np.save(path, array[row:row + 1])
            paths.append(path)
        alone = run_compile(launch, model, paths, os.path.join(work, f"{name}_row{row}"))
        if alone is None:
            return
        for i, out in enumerate(outputs):
            check(alone[i].tobytes() == out[row:row + 1].tobytes(),
                  f"{name}: row {row} alone differs from the batch (output {i})")


def check_artifacts(name, artifacts, colocate):
    plan_path = os.path.join(artifacts, "plan.json")
    check(os.path.exists(plan_path) and os.path.exists(os.path.join(artifacts, "constants.bin")),
          f"{name}: artifacts lack plan.json or constants.bin")
    if not os.path.exists(plan_path):
        return
    with open(plan_path) as f:
        plan = json.load(f)
    check(plan["operation_set"] == "reproducible" and len(plan["nodes"]) > 0,
          f"{name}: plan.json: {plan.get('operation_set')}, {len(plan.get('nodes', []))} nodes")
    for entry in plan.get("external_files", []):
        path = os.path.join(artifacts, entry["artifact"])
        check(os.path.islink(path) != colocate and os.path.isfile(path),
              f"{name}: external file {entry['artifact']} should be a "
              f"{'copy' if colocate else 'symlink'}")
    if name.endswith("_ext"):
        check(len(plan.get("external_files", [])) == 1, f"{name}: plan lists no external file")


def has_gpu(launch, work):
    """Whether ree-launch can run a graph on cuda:0 (a one-node model), before any export."""
    from onnx import TensorProto, helper
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["x2"])], "probe", [],
                              [helper.make_tensor_value_info("x2", TensorProto.FLOAT, [1])],
                              [helper.make_tensor("x", TensorProto.FLOAT, [1], [1.0])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = os.path.join(work, "probe.onnx")
    with open(path, "wb") as f:
        f.write(model.SerializeToString())
    result = subprocess.run([launch, "compile", path, "--device", "cuda", "--output-dir",
                             os.path.join(work, "probe")], capture_output=True, text=True)
    if result.returncode != 0:
        print(f"skipped: no GPU for ree-launch: {result.stderr.strip()}")
    return result.returncode == 0


def compare_gpu(launch, models_dir, work):
    """Every model on cuda:0 against its CPU bits; 77 when there is no GPU."""
    for name in sorted(os.listdir(models_dir)):
        directory = os.path.join(models_dir, name)
        model = os.path.join(directory, "model.onnx")
        inputs = case_inputs(directory)
        cpu = run_compile(launch, model, inputs, os.path.join(work, name, "cpu"))
        command = [launch, "compile", model, "--device", "cuda", "--output-dir",
                   os.path.join(work, name, "cuda")]
        for path in inputs:
            command += ["--run", path]
        result = subprocess.run(command, capture_output=True, text=True, timeout=300)
        check(result.returncode == 0, f"{name} on cuda: {result.stderr.strip()}")
        if result.returncode != 0:
            continue
        gpu = []
        while os.path.exists(os.path.join(work, name, "cuda", f"output_{len(gpu)}.npy")):
            gpu.append(np.load(os.path.join(work, name, "cuda", f"output_{len(gpu)}.npy")))
        check_bitwise(name, cpu, gpu, "between the CPU and cuda:0")
        print(f"{name}: cuda:0 {'==' if cpu and all(a.tobytes() == b.tobytes() for a, b in zip(cpu, gpu)) else '!='} CPU")
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


def main():
    launch, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    models_dir = os.path.join(work, "models")
    gpu = len(sys.argv) > 3 and sys.argv[3] == "cuda"
    if gpu and not has_gpu(launch, work):
        return 77
    subprocess.run([sys.executable, os.path.join(HERE, "export_models.py"), models_dir], check=True)
    if gpu:
        return compare_gpu(launch, models_dir, work)
    for name in sorted(os.listdir(models_dir)):
        directory = os.path.join(models_dir, name)
        model = os.path.join(directory, "model.onnx")
        inputs = case_inputs(directory)
        artifacts = os.path.join(work, "artifacts", name)
        outputs = run_compile(launch, model, inputs, os.path.join(work, name, "t1"), "--threads",
                              "1", artifacts=artifacts)
        if outputs is None:
            continue
        check_against_onnxruntime(name, directory, outputs)
        check_against_torch(name, directory, outputs)
        check_artifacts(name, artifacts, colocate=False)
        again = run_compile(launch, model, inputs, os.path.join(work, name, "t3"), "--threads", "3")
        check_bitwise(name, outputs, again, "between 1 and 3 threads")
        check_rows(launch, name, directory, model, os.path.join(work, name), outputs)
        if name.endswith("_ext"):
            copied = os.path.join(work, "artifacts", name + "_copy")
            run_compile(launch, model, inputs, os.path.join(work, name, "copy"),
                        "--colocate-tensors", artifacts=copied)
            check_artifacts(name, copied, colocate=True)
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
