"""A compiled graph split into pipeline stages by the graph partitioner (docs/compiler.md,
"Pipelines"), through `ree-launch compile --n-partitions N`:
  - a transformers Llama (export_models.py's tiny_llama, a batch of 2) gives the same output
    bits for N = 1..4 stages in one process and for N = 1..4 ranks under mpirun, as a plain run;
    the plan's stages are printed by rank 0;
  - a stage that fails names its rank, and the whole job ends (non-zero, within the timeout);
  - --n-partitions against another world size is refused on every rank.

Usage: graph_pipeline_test.py REE_LAUNCH MPIEXEC WORK_DIR
"""
import os
import subprocess
import sys

try:
    import numpy as np
    import torch
    from onnx import TensorProto, helper, numpy_helper
except ImportError as error:  # a visible skip: ctest maps 77 to Skipped
    print(f"skipped: {error} (pip install -r requirements.txt)")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import export_models  # noqa: E402

failures = []


def check(condition, message):
    print(f"{'ok  ' if condition else 'FAIL'} {message}")
    if not condition:
        failures.append(message)


def compile_run(launch, model, inputs, out_dir, *flags, mpirun=None, timeout=180):
    command = (mpirun or []) + [launch, "compile", model, "--output-dir", out_dir, *flags]
    for path in inputs:
        command += ["--run", path]
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None


def output_bytes(out_dir):
    path = os.path.join(out_dir, "output_0.npy")
    return np.load(path).tobytes() if os.path.exists(path) else None


def equivalence(launch, mpiexec, work):
    model = os.path.join(work, "llama.onnx")
    ids = torch.randint(0, 64, (2, 9))
    export_models.export(export_models.tiny_llama(), [ids], ["input_ids"],
                         {"input_ids": {0: "batch", 1: "sequence"}}, model, 17)
    inputs = [os.path.join(work, "ids.npy")]
    np.save(inputs[0], ids.numpy())
    plain = compile_run(launch, model, inputs, os.path.join(work, "plain"))
    check(plain is not None and plain.returncode == 0, "plain run")
    want = output_bytes(os.path.join(work, "plain"))
    mpirun = [mpiexec, "--oversubscribe", "--allow-run-as-root", "--bind-to", "none", "-n"]
    for n in range(1, 5):
        for mode in ("process", "mpirun"):
            out_dir = os.path.join(work, f"{mode}{n}")
            result = compile_run(launch, model, inputs, out_dir, "--n-partitions", str(n),
                                 "--threads", "1", mpirun=mpirun + [str(n)] if mode == "mpirun" else None)
            ok = result is not None and result.returncode == 0
            check(ok, f"n = {n} ({mode}): runs {'' if ok else (result.stderr if result else 'timeout')}")
            if ok and n > 1:
                check(f"stage {n - 1}: nodes" in result.stdout and result.stdout.count("plan:") == 1,
                      f"n = {n} ({mode}): rank 0 prints the plan of {n} stages")
            check(want is not None and output_bytes(out_dir) == want,
                  f"n = {n} ({mode}): the plain run's output bits")


def failing_stage(launch, mpiexec, work):
    # Relu x3 then a Gather whose index (a graph input) is out of range: the last stage fails.
    nodes = [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Relu", ["a"], ["b"]),
             helper.make_node("Relu", ["b"], ["c"]),
             helper.make_node("Gather", ["c", "i"], ["y"], name="take", axis=0)]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
                     helper.make_tensor_value_info("i", TensorProto.INT64, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    path = os.path.join(work, "gather.onnx")
    with open(path, "wb") as f:
        f.write(m.SerializeToString())
    inputs = [os.path.join(work, "x.npy"), os.path.join(work, "i.npy")]
    np.save(inputs[0], np.ones((2, 3), np.float32))
    np.save(inputs[1], np.array([0, 5], np.int64))
    mpirun = [mpiexec, "--oversubscribe", "--allow-run-as-root", "--bind-to", "none", "-n", "2"]
    result = compile_run(launch, path, inputs, os.path.join(work, "fail"), "--n-partitions", "2",
                         "--comm-timeout", "20", mpirun=mpirun, timeout=60)
    check(result is not None and result.returncode != 0 and
          "rank 1: node 'take' (Gather): index 5" in result.stderr,
          f"a failing stage names its rank: {result.stderr.strip()[:300] if result else 'timeout'}")
    result = compile_run(launch, path, inputs, os.path.join(work, "mismatch"), "--n-partitions",
                         "3", mpirun=mpirun, timeout=60)
    check(result is not None and result.returncode != 0 and
          "--n-partitions 3 does not match the MPI world size 2" in result.stderr,
          f"--n-partitions 3 under mpirun -n 2 is refused: "
          f"{result.stderr.strip()[:300] if result else 'timeout'}")


def main():
    launch, mpiexec, work = sys.argv[1], sys.argv[2], sys.argv[3]
    os.makedirs(work, exist_ok=True)
    os.environ.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                      OMPI_MCA_rmaps_base_oversubscribe="1")
    torch.manual_seed(0)
    equivalence(launch, mpiexec, work)
    failing_stage(launch, mpiexec, work)
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
