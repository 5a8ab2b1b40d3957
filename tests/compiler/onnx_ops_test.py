"""One-operator ONNX models (onnx.helper) through `ree-launch compile --run`, against onnxruntime:
the attribute and input variants of every supported operator that the exported models do not
reach (negative axes and steps, legacy opsets, keepdims, broadcasting of each kind, integer paths,
padding and strides). Tolerance: 1e-5 + 1e-5 * |x| (most cases are exact).

Usage: onnx_ops_test.py REE_LAUNCH WORK_DIR
"""
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

RNG = np.random.default_rng(0)
TYPES = {np.float32: TensorProto.FLOAT, np.int64: TensorProto.INT64, np.bool_: TensorProto.BOOL}


def f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def i64(*values):
    return np.array(values, np.int64)


def case(op, inputs, constants=None, opset=17, outputs=1, out=TensorProto.FLOAT, **attrs):
    """inputs: {name: array} fed at run time; constants: {name: array} initializers."""
    constants = constants or {}
    names = list(inputs) + list(constants)
    node = helper.make_node(op, names, [f"y{i}" for i in range(outputs)], name=op.lower(), **attrs)
    graph = helper.make_graph(
        [node], op, [helper.make_tensor_value_info(n, TYPES[a.dtype.type], a.shape)
                     for n, a in inputs.items()],
        [helper.make_tensor_value_info(f"y{i}", out, None)
         for i in range(outputs)],
        [numpy_helper.from_array(a, n) for n, a in constants.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model, inputs


def cases():
    x = f32(2, 3, 4)
    yield "add broadcast", case("Add", {"a": x, "b": f32(3, 1)})
    yield "sub scalar", case("Sub", {"a": x}, {"b": np.array(0.5, np.float32)})
    yield "mul", case("Mul", {"a": x, "b": f32(1, 3, 4)})
    yield "div", case("Div", {"a": x, "b": f32(4)})
    yield "pow int exponent", case("Pow", {"a": x}, {"b": np.array(2, np.int64)})
    yield "pow", case("Pow", {"a": np.abs(x)}, {"b": np.array(0.75, np.float32)})
    yield "max", case("Max", {"a": x, "b": f32(4)})
    yield "min", case("Min", {"a": x, "b": f32(4)})
    yield "int add", case("Add", {"a": i64(1, 2, 3)}, {"b": i64(10)}, out=TensorProto.INT64)
    yield "int div truncates", case("Div", {"a": i64(7, -7, 9)}, {"b": i64(2, 2, -4)}, out=TensorProto.INT64)
    for op in ["Neg", "Abs", "Relu", "Exp", "Tanh", "Erf", "Sigmoid", "Sin", "Cos", "Softplus"]:
        yield op.lower(), case(op, {"a": x})
    yield "sqrt", case("Sqrt", {"a": np.abs(x)})
    yield "log", case("Log", {"a": np.abs(x) + 0.1})
    yield "reciprocal", case("Reciprocal", {"a": x})
    yield "gelu tanh", case("Gelu", {"a": x}, opset=20, approximate="tanh")
    yield "where", case("Where", {"c": RNG.random((3, 4)) > 0.5, "a": x, "b": f32(4)})
    yield "equal int", case("Equal", {"a": i64(1, 2, 3)}, {"b": i64(1, 0, 3)}, out=TensorProto.BOOL)
    yield "less float", case("Less", {"a": x, "b": f32(4)}, out=TensorProto.BOOL)
    yield "not", case("Not", {"a": RNG.random((5,)) > 0.5}, out=TensorProto.BOOL)
    yield "cast int to float", case("Cast", {"a": i64(1, -(1 << 40) - 3, 7)}, to=1)
    yield "cast float to int", case("Cast", {"a": x * 10}, to=7, out=TensorProto.INT64)
    yield "cast to float16", case("Cast", {"a": x}, to=10, out=TensorProto.FLOAT16)
    yield "softmax axis 1", case("Softmax", {"a": x}, axis=1)
    yield "softmax legacy", case("Softmax", {"a": x}, opset=11, axis=1)
    yield "logsoftmax", case("LogSoftmax", {"a": x}, axis=-1)
    yield "reducemean axes", case("ReduceMean", {"a": x}, axes=[0, 2], keepdims=0)
    yield "reducesum opset13", case("ReduceSum", {"a": x}, {"axes": i64(1)}, opset=13)
    yield "reducemax all", case("ReduceMax", {"a": x}, keepdims=1)
    yield "reducemin opset18", case("ReduceMin", {"a": x}, {"axes": i64(-1)}, opset=18)
    yield "layernorm axis 1", case("LayerNormalization", {"a": x}, {"s": f32(3, 4), "b": f32(3, 4)},
                                   axis=1, epsilon=1e-3)
    yield "matmul batched", case("MatMul", {"a": f32(2, 3, 5), "b": f32(2, 5, 4)})
    yield "matmul broadcast", case("MatMul", {"a": f32(2, 1, 3, 5), "b": f32(4, 5, 2)})
    yield "matmul vector", case("MatMul", {"a": f32(5), "b": f32(5, 3)})
    yield "matmul vector right", case("MatMul", {"a": f32(2, 5), "b": f32(5)})
    yield "gemm transA transB", case("Gemm", {"a": f32(5, 3), "b": f32(4, 5)}, {"c": f32(3, 4)},
                                     transA=1, transB=1)
    yield "gemm row bias", case("Gemm", {"a": f32(3, 5)}, {"b": f32(5, 4), "c": f32(1, 4)})
    # A scalar C with N = 1 (its one element is the row bias; it read shape[0] of a scalar).
    yield "gemm scalar bias", case("Gemm", {"a": f32(2, 3)},
                                   {"b": f32(3, 1), "c": np.array(0.25, np.float32)})
    yield "conv stride dilation", case("Conv", {"a": f32(2, 3, 9, 8)},
                                       {"w": f32(4, 3, 3, 2), "b": f32(4)},
                                       strides=[2, 1], dilations=[1, 2], pads=[1, 0, 2, 1])
    yield "maxpool pads", case("MaxPool", {"a": f32(1, 2, 7, 6)}, kernel_shape=[3, 2],
                               strides=[2, 2], pads=[1, 1, 1, 0])
    yield "global average pool", case("GlobalAveragePool", {"a": f32(2, 3, 5, 4)})
    yield "conv grouped", case("Conv", {"a": f32(2, 6, 7, 6)}, {"w": f32(4, 3, 3, 3), "b": f32(4)},
                               group=2, pads=[1, 0, 1, 2], strides=[1, 2])
    yield "conv depthwise", case("Conv", {"a": f32(1, 4, 6, 5)}, {"w": f32(8, 1, 3, 3)},
                                 group=4, pads=[1, 1, 1, 1], dilations=[2, 1])
    yield "average pool pads excluded", case("AveragePool", {"a": f32(2, 3, 7, 6)},
                                             kernel_shape=[3, 2], strides=[2, 1],
                                             pads=[1, 1, 1, 0])
    yield "average pool pads counted", case("AveragePool", {"a": f32(1, 2, 5, 5)},
                                            kernel_shape=[2, 3], pads=[1, 1, 0, 1],
                                            count_include_pad=1)
    yield "average pool dilated", case("AveragePool", {"a": f32(1, 2, 7, 7)}, opset=19,
                                       kernel_shape=[2, 2], dilations=[2, 3])
    bn = {"s": f32(3), "b": f32(3), "m": f32(3), "v": np.abs(f32(3)) + 0.5}
    yield "batch norm 4-D", case("BatchNormalization", {"a": f32(2, 3, 4, 5)}, bn, epsilon=1e-3)
    yield "batch norm 2-D", case("BatchNormalization", {"a": f32(4, 3)}, bn)
    yield "transpose", case("Transpose", {"a": x}, perm=[2, 0, 1])
    yield "gather axis 1 negative", case("Gather", {"a": x}, {"i": i64(-1, 0, 2)}, axis=1)
    yield "gather 2-D indices", case("Gather", {"a": f32(6, 3)}, {"i": np.array([[1, 5], [0, 0]])})
    yield "slice negative step", case("Slice", {"a": x}, {"s": i64(-1, 3), "e": i64(-4, 0),
                                                         "ax": i64(1, 2), "st": i64(-1, -2)})
    yield "slice clamped", case("Slice", {"a": x}, {"s": i64(1), "e": i64(1 << 40), "ax": i64(-1)})
    yield "concat", case("Concat", {"a": x, "b": f32(2, 1, 4)}, axis=-2)
    yield "unsqueeze", case("Unsqueeze", {"a": x}, {"ax": i64(0, -1)})
    yield "squeeze", case("Squeeze", {"a": f32(1, 3, 1)}, {"ax": i64(0)})
    yield "expand", case("Expand", {"a": f32(3, 1)}, {"s": i64(2, 1, 4)})
    yield "reshape", case("Reshape", {"a": x}, {"s": i64(0, -1)})
    yield "flatten", case("Flatten", {"a": x}, axis=2)
    yield "split", case("Split", {"a": x}, {"s": i64(1, 3)}, axis=2, outputs=2)
    yield "split num_outputs", case("Split", {"a": f32(7, 2)}, opset=18, num_outputs=3, outputs=3)
    yield "trilu lower", case("Trilu", {"a": x}, {"k": np.array(1, np.int64)}, upper=0)
    yield "shape slice", case("Shape", {"a": x}, opset=15, start=1, out=TensorProto.INT64)
    yield "range float", case("Range", {}, {"s": np.array(1.5, np.float32),
                                            "l": np.array(7.0, np.float32),
                                            "d": np.array(0.7, np.float32)})
    yield "constant of shape", case("ConstantOfShape", {}, {"s": i64(2, 3)},
                                    value=numpy_helper.from_array(np.array([3], np.int64)), out=TensorProto.INT64)


def main():
    launch, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    failures = 0
    for index, (name, (model, inputs)) in enumerate(cases()):
        path = os.path.join(work, f"op_{index}.onnx")
        with open(path, "wb") as f:
            f.write(model.SerializeToString())
        command = [launch, "compile", path, "--output-dir", os.path.join(work, f"op_{index}")]
        for n, array in inputs.items():
            input_path = os.path.join(work, f"op_{index}_{n}.npy")
            np.save(input_path, array)
            command += ["--run", input_path]
        want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, inputs)
        result = subprocess.run(command, capture_output=True, text=True, timeout=60)
        ok = result.returncode == 0
        worst = 0.0
        for i, expected in enumerate(want if ok else []):
            got = np.load(os.path.join(work, f"op_{index}", f"output_{i}.npy"))
            expected = np.asarray(expected)
            if expected.dtype in (np.float64, np.float16):
                expected = expected.astype(np.float32)
            if got.shape != expected.shape or got.dtype != expected.dtype.type(0).dtype and not (
                    got.dtype == np.int64 and expected.dtype in (np.int32, np.int64)):
                ok = False
                print(f"  {name}: output {i} {got.dtype}{got.shape} vs {expected.dtype}{expected.shape}")
                continue
            if got.dtype == np.float32:
                diff = np.abs(got - expected)
                worst = max(worst, float(diff.max()) if diff.size else 0.0)
                finite = np.isfinite(expected)
                ok = ok and bool((np.isnan(got) == np.isnan(expected)).all()) and bool(
                    (diff[finite] <= 1e-5 + 1e-5 * np.abs(expected[finite])).all())
            else:
                ok = ok and bool((got == expected).all())
        print(f"{'ok  ' if ok else 'FAIL'} {name}: max diff {worst:.3g} {result.stderr.strip()[:200]}")
        failures += 0 if ok else 1
    print(f"{failures} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
