"""The compiler's pattern fusions (graph_fusion.h) on graphs built with onnx.helper, through
`ree-launch compile --run`:
  - an RMSNorm written out as Pow/ReduceMean/Add/Sqrt/Div/Mul/Mul is fused: plan.json lists a
    SimplifiedLayerNormalization, and the output has the bits of a graph that says
    SimplifiedLayerNormalization itself; within 1e-5 + 1e-5 * |x| of onnxruntime;
  - softmax(Q K^T * scale + causal mask) V is fused (ReeCausalAttention in plan.json), within
    1e-5 + 1e-5 * |x| of onnxruntime;
  - with a mask that is not causal (padding) or a scale that is not 1/sqrt(head_dim), the fused
    node runs its original nodes: bitwise the output of the same graph kept unfused (a twin whose
    softmax is also a graph output, so nothing is fused);
  - a pattern whose intermediate is read elsewhere is not fused.

Usage: fusion_test.py REE_LAUNCH WORK_DIR
"""
import json
import os
import subprocess
import sys

try:
    import numpy as np
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper
except ImportError as error:  # a visible skip: ctest maps 77 to Skipped
    print(f"skipped: {error} (pip install -r requirements.txt)")
    sys.exit(77)

RNG = np.random.default_rng(7)
failures = []


def check(condition, message):
    print(f"{'ok  ' if condition else 'FAIL'} {message}")
    if not condition:
        failures.append(message)


def model(nodes, inputs, outputs, constants, opset=17, domains=()):
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, a.shape)
                     for n, a in inputs.items()],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outputs],
        [numpy_helper.from_array(np.asarray(a, np.float32), n) for n, a in constants.items()])
    imports = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, 1) for d in domains]
    m = helper.make_model(graph, opset_imports=imports)
    m.ir_version = 8
    return m


def run(launch, work, name, m, inputs):
    """(outputs, plan ops) of ree-launch compile --run."""
    path = os.path.join(work, f"{name}.onnx")
    with open(path, "wb") as f:
        f.write(m.SerializeToString())
    artifacts, out_dir = os.path.join(work, f"{name}_artifacts"), os.path.join(work, name)
    command = [launch, "compile", path, "--artifacts-dir", artifacts, "--output-dir", out_dir]
    for n, array in inputs.items():
        np.save(os.path.join(work, f"{name}_{n}.npy"), array)
        command += ["--run", os.path.join(work, f"{name}_{n}.npy")]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    check(result.returncode == 0, f"{name}: compiles and runs {result.stderr.strip()[:300]}")
    if result.returncode != 0:
        return None, []
    outputs = []
    while os.path.exists(os.path.join(out_dir, f"output_{len(outputs)}.npy")):
        outputs.append(np.load(os.path.join(out_dir, f"output_{len(outputs)}.npy")))
    with open(os.path.join(artifacts, "plan.json")) as f:
        ops = [node["op"] for node in json.load(f)["nodes"]]
    return outputs, ops


def near_onnxruntime(name, m, inputs, got):
    want = ort.InferenceSession(m.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, inputs)[0]
    worst = float(np.abs(got - want).max())
    check(bool((np.abs(got - want) <= 1e-5 + 1e-5 * np.abs(want)).all()),
          f"{name}: within tolerance of onnxruntime (max diff {worst:.3g})")


def rms_norm_cases(launch, work):
    x = RNG.standard_normal((2, 5, 8)).astype(np.float32)
    constants = {"w": RNG.standard_normal(8), "two": 2.0, "eps": 1e-6, "one": 1.0}
    chain = [helper.make_node("Pow", ["x", "two"], ["p"]),
             helper.make_node("ReduceMean", ["p"], ["r"], axes=[-1], keepdims=1),
             helper.make_node("Add", ["r", "eps"], ["t"]),
             helper.make_node("Sqrt", ["t"], ["s"]),
             helper.make_node("Div", ["one", "s"], ["d"]),
             helper.make_node("Mul", ["x", "d"], ["n"]),
             helper.make_node("Mul", ["w", "n"], ["y"])]
    written = model(chain, {"x": x}, ["y"], constants)
    fused, ops = run(launch, work, "rms_written", written, {"x": x})
    check("SimplifiedLayerNormalization" in ops and "Pow" not in ops,
          f"rms_written: fused into SimplifiedLayerNormalization ({ops})")
    direct = model([helper.make_node("SimplifiedLayerNormalization", ["x", "w"], ["y"], axis=-1,
                                     epsilon=1e-6)], {"x": x}, ["y"], {"w": constants["w"]})
    expected, _ = run(launch, work, "rms_direct", direct, {"x": x})
    if fused and expected:
        check(fused[0].tobytes() == expected[0].tobytes(),
              "rms_written: bitwise the SimplifiedLayerNormalization graph's output")
        near_onnxruntime("rms_written", written, {"x": x}, fused[0])
    shared = model(chain, {"x": x}, ["y", "s"], constants)  # s read outside: not fused
    _, ops = run(launch, work, "rms_shared", shared, {"x": x})
    check("SimplifiedLayerNormalization" not in ops, "rms_shared: not fused (an output inside)")


def attention_model(scale, outputs):
    nodes = [helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
             helper.make_node("MatMul", ["q", "kt"], ["qk"]),
             helper.make_node("Mul", ["qk", "scale"], ["scaled"]),
             helper.make_node("Add", ["scaled", "mask"], ["masked"]),
             helper.make_node("Softmax", ["masked"], ["p"], axis=-1),
             helper.make_node("MatMul", ["p", "v"], ["y"])]
    shapes = {"q": Q, "k": Q, "v": Q, "mask": CAUSAL}
    return model(nodes, shapes, outputs, {"scale": scale})


Q = np.zeros((2, 2, 5, 8), np.float32)
CAUSAL = np.triu(np.full((5, 5), np.finfo(np.float32).min, np.float32), 1)[None, None].repeat(2, 0)


def attention_cases(launch, work):
    qkv = {n: RNG.standard_normal(Q.shape).astype(np.float32) for n in ("q", "k", "v")}
    rsqrt8 = np.float32(8 ** -0.5)
    padding = CAUSAL.copy()
    padding[1, :, :, 0] = np.finfo(np.float32).min  # sequence 1's first key is padding
    padding[1, :, 0, 0] = 0.0
    cases = [("causal", rsqrt8, CAUSAL, True), ("padding mask", rsqrt8, padding, False),
             ("other scale", np.float32(0.3), CAUSAL, False)]
    for name, scale, mask, native in cases:
        inputs = dict(qkv, mask=mask)
        tag = name.replace(" ", "_")
        fused, ops = run(launch, work, f"attn_{tag}", attention_model(scale, ["y"]), inputs)
        twin, twin_ops = run(launch, work, f"attn_{tag}_twin", attention_model(scale, ["y", "p"]),
                             inputs)
        check("ReeCausalAttention" in ops and "ReeCausalAttention" not in twin_ops,
              f"attention {name}: fused, and its twin (softmax an output) not")
        if not fused or not twin:
            continue
        near_onnxruntime(f"attention {name}", attention_model(scale, ["y"]), inputs, fused[0])
        if not native:
            check(fused[0].tobytes() == twin[0].tobytes(),
                  f"attention {name}: the original nodes ran (bitwise the unfused twin)")


def main():
    launch, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    rms_norm_cases(launch, work)
    attention_cases(launch, work)
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
