"""Malformed and hostile ONNX files given to `ree-launch compile`: each must be refused with exit
status 2 and ONE line on stderr that names the culprit (the expected text below), never a signal
(crash, sanitizer abort) or a hang.

Usage: hostile_onnx_test.py REE_LAUNCH WORK_DIR
"""
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
import onnx
from onnx import TensorProto, helper, numpy_helper

failures = []


def make_model(nodes, inputs, outputs, initializers=(), opset=17):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def value(name, dims, elem=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, dims)


def relu_model(**kwargs):
    return make_model([helper.make_node("Relu", ["x"], ["y"], name="relu")], [value("x", [2, 3])],
                      [value("y", [2, 3])], **kwargs)


def external_model(work, name, location, length=None, offset=None, make_file=True):
    directory = os.path.join(work, name)
    os.makedirs(directory, exist_ok=True)
    if make_file:
        with open(os.path.join(directory, "w.bin"), "wb") as f:
            f.write(np.arange(6, dtype=np.float32).tobytes())
    tensor = TensorProto()
    tensor.name = "w"
    tensor.data_type = TensorProto.FLOAT
    tensor.dims.extend([2, 3])
    tensor.data_location = TensorProto.EXTERNAL
    entries = [("location", location)]
    if offset is not None:
        entries.append(("offset", str(offset)))
    if length is not None:
        entries.append(("length", str(length)))
    for key, val in entries:
        entry = tensor.external_data.add()
        entry.key, entry.value = key, val
    model = make_model([helper.make_node("Add", ["x", "w"], ["y"], name="add")],
                       [value("x", [2, 3])], [value("y", [2, 3])], [tensor])
    path = os.path.join(directory, "model.onnx")
    with open(path, "wb") as f:
        f.write(model.SerializeToString())
    return path


def cases(work):
    """(name, model bytes or path, expected text, extra args)"""
    good = relu_model().SerializeToString()
    yield "empty file", b"", "no graph", []
    yield "truncated protobuf", good[: len(good) // 2], "does not parse", []
    yield "random bytes", bytes(range(256)) * 4, "does not parse", []
    yield "opset too old", relu_model(opset=3).SerializeToString(), "opset 3", []
    unknown = make_model([helper.make_node("FrobnicateAll", ["x"], ["y"], name="frob")],
                         [value("x", [2])], [value("y", [2])])
    yield "unknown operator", unknown.SerializeToString(), "'frob' (FrobnicateAll)", []
    custom = make_model([helper.make_node("Relu", ["x"], ["y"], name="r", domain="com.example")],
                        [value("x", [2])], [value("y", [2])])
    yield "custom domain", custom.SerializeToString(), "domain com.example", []
    missing = make_model([helper.make_node("Add", ["x", "bias"], ["y"], name="add")],
                         [value("x", [2])], [value("y", [2])])
    yield "missing initializer", missing.SerializeToString(), "input 'bias' is not", []
    cycle = make_model([helper.make_node("Relu", ["b"], ["a"], name="first"),
                        helper.make_node("Relu", ["a"], ["b"], name="second")],
                       [value("x", [2])], [value("b", [2])])
    yield "cycle", cycle.SerializeToString(), "node 'first' (Relu): input 'b'", []
    twice = make_model([helper.make_node("Relu", ["x"], ["y"], name="one"),
                        helper.make_node("Relu", ["x"], ["y"], name="two")],
                       [value("x", [2])], [value("y", [2])])
    yield "output defined twice", twice.SerializeToString(), "output 'y' is already defined", []
    orphan = make_model([helper.make_node("Relu", ["x"], ["y"], name="r")], [value("x", [2])],
                        [value("z", [2])])
    yield "output produced by no node", orphan.SerializeToString(), "'z' is produced by no", []
    matmul = make_model([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")],
                        [value("x", [2, 3]), value("w", [4, 5])], [value("y", [2, 5])])
    yield "matmul shape mismatch", matmul.SerializeToString(), "'mm' (MatMul): inner dims", []
    declared = make_model([helper.make_node("Relu", ["x"], ["y"], name="r")], [value("x", [2, 3])],
                          [value("y", [2, 4])])
    yield "declared output shape conflict", declared.SerializeToString(), "shape mismatch", []
    broadcast = make_model([helper.make_node("Add", ["x", "w"], ["y"], name="plus")],
                           [value("x", [2, 3]), value("w", [4])], [value("y", [2, 3])])
    yield "broadcast conflict", broadcast.SerializeToString(), "'plus' (Add): shapes do not", []
    yield "external data ../", external_model(work, "parent", "../w.bin"), "must be a relative", []
    yield "external data absolute", external_model(work, "absolute", "/etc/passwd"), \
        "must be a relative", []
    link_dir = os.path.join(work, "link")
    os.makedirs(link_dir, exist_ok=True)
    link = os.path.join(link_dir, "outside.bin")
    if not os.path.lexists(link):
        os.symlink("/etc/hostname", link)
    yield "external data symlink out", external_model(work, "link", "outside.bin"), \
        "resolves outside the model directory", []
    yield "external data missing", external_model(work, "missing", "nothing.bin"), \
        "does not exist", []
    yield "external data wrong length", external_model(work, "length", "w.bin", length=8), \
        "length 8 does not match", []
    yield "external data beyond end", external_model(work, "offset", "w.bin", offset=16), \
        "does not match", []
    yield "external data length beyond end", \
        external_model(work, "offset2", "w.bin", offset=8, length=24), "lies beyond the end", []
    bad_raw = numpy_helper.from_array(np.zeros((2, 3), np.float32), "w")
    bad_raw.raw_data = b"\0" * 5
    short = make_model([helper.make_node("Add", ["x", "w"], ["y"], name="add")],
                       [value("x", [2, 3])], [value("y", [2, 3])], [bad_raw])
    yield "initializer raw data size", short.SerializeToString(), "initializer 'w': 5 bytes", []
    huge = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[1 << 30, 1 << 20])
    big = make_model([helper.make_node("Add", ["x", "w"], ["y"], name="add")],
                     [value("x", [2, 3])], [value("y", [2, 3])], [huge])
    yield "initializer beyond size limit", big.SerializeToString(), "limit of 2^40 bytes", []
    negative = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[-2, 3])
    neg = make_model([helper.make_node("Add", ["x", "w"], ["y"], name="add")],
                     [value("x", [2, 3])], [value("y", [2, 3])], [negative])
    yield "initializer negative dim", neg.SerializeToString(), "is negative", []
    strings = helper.make_tensor("w", TensorProto.STRING, [1], [b"a"])
    text = make_model([helper.make_node("Identity", ["w"], ["y"], name="id")], [], [value("y", [1])],
                      [strings])
    yield "string initializer", text.SerializeToString(), "element type 8 is not supported", []
    index = numpy_helper.from_array(np.array([5], np.int64), "i")
    data = numpy_helper.from_array(np.zeros((3, 2), np.float32), "d")
    gather = make_model([helper.make_node("Gather", ["d", "i"], ["y"], name="take")], [],
                        [value("y", [1, 2])], [data, index])
    yield "gather index out of range", gather.SerializeToString(), "'take' (Gather): index 5", []
    shape = numpy_helper.from_array(np.array([4, 4], np.int64), "s")
    reshape = make_model([helper.make_node("Reshape", ["x", "s"], ["y"], name="rs")],
                         [value("x", [2, 3])], [value("y", [4, 4])], [shape])
    yield "impossible reshape (at run)", reshape.SerializeToString(), "cannot reshape", \
        ["--run", "INPUT_2x3"]
    conv_w = numpy_helper.from_array(np.zeros((4, 1, 3, 3), np.float32), "w")
    conv = make_model([helper.make_node("Conv", ["x", "w"], ["y"], name="grouped", group=3)],
                      [value("x", [1, 2, 5, 5])], [value("y", [1, 4, 3, 3])], [conv_w])
    yield "conv group not dividing channels", conv.SerializeToString(), \
        "'grouped' (Conv): group 3 must divide", ["--run", "INPUT_1x2x5x5"]
    subgraph = helper.make_graph([helper.make_node("Relu", ["x"], ["z"])], "b", [],
                                 [value("z", [2])])
    branch = make_model([helper.make_node("If", ["c"], ["y"], name="branch", then_branch=subgraph,
                                          else_branch=subgraph)],
                        [value("c", [], TensorProto.BOOL)], [value("y", [2])])
    yield "control flow", branch.SerializeToString(), "'branch' (If)", []
    huge_shape = numpy_helper.from_array(np.array([1 << 17, 1 << 17], np.int64), "s")
    fill = make_model([helper.make_node("ConstantOfShape", ["s"], ["y"], name="fill")], [],
                      [value("y", [1 << 17, 1 << 17])], [huge_shape])
    yield "huge folded tensor", fill.SerializeToString(), "node 'fill' (ConstantOfShape): a float32 tensor", []
    big_shape = numpy_helper.from_array(np.array([1 << 35, 1 << 35, -1], np.int64), "s")
    overflow = make_model([helper.make_node("Reshape", ["x", "s"], ["y"], name="rs")],
                          [value("x", [2, 3])], [value("y", None)], [big_shape])
    yield "reshape dims overflow", overflow.SerializeToString(), "'rs' (Reshape): output shape", \
        ["--run", "INPUT_2x3"]
    limits = [numpy_helper.from_array(np.array(v, np.int64), n)
              for v, n in [(-(1 << 62), "start"), (1 << 62, "limit"), (1, "delta")]]
    endless = make_model([helper.make_node("Range", ["start", "limit", "delta"], ["y"], name="r")],
                         [], [value("y", [2], TensorProto.INT64)], limits)
    yield "range too long", endless.SerializeToString(), "'r' (Range)", []
    sizes = numpy_helper.from_array(np.array([1 << 62, 1 << 62, 4], np.int64), "sizes")
    split = make_model([helper.make_node("Split", ["x", "sizes"], ["a", "b", "c"], name="cut")],
                       [value("x", [4, 2])], [value("a", [1, 2])], [sizes])
    yield "split sizes overflow", split.SerializeToString(), "'cut' (Split): split sizes", \
        ["--run", "INPUT_4x2"]
    attention_inputs = [numpy_helper.from_array(np.ones(shape, np.float32), n) for n, shape in
                        [("q", (1, 1, 2, 4)), ("k", (1, 1, 2, 4)), ("v", (1, 1, 2, 4)),
                         ("mask", (1, 1, 2, 2)), ("scale", ())]]
    fused = make_model([helper.make_node("ReeCausalAttention", ["q", "k", "v", "mask", "scale"],
                                         ["y"], name="fused", domain="ree")],
                       [], [value("y", None)], attention_inputs)
    yield "REE's fused attention, not causal", fused.SerializeToString(), \
        "'fused' (ReeCausalAttention): the inputs are not a causal attention", []
    # Ops with an axis given scalars (found by fuzz_onnx: an axis 0 of a rank-0 shape was used
    # as an index), in shape inference and in constant folding.
    cat = make_model([helper.make_node("Concat", ["a", "b"], ["y"], name="cat", axis=0)],
                     [value("a", []), value("b", [])], [value("y", None)])
    yield "concat of scalars", cat.SerializeToString(), \
        "'cat' (Concat): axis 0 is out of range for rank 0", []
    scalars = [numpy_helper.from_array(np.array(1.5, np.float32), n) for n in ("a", "b")]
    cat_folded = make_model([helper.make_node("Concat", ["a", "b"], ["y"], name="cat", axis=0)],
                            [], [value("y", None)], scalars)
    yield "concat of scalar constants", cat_folded.SerializeToString(), \
        "'cat' (Concat): axis 0 is out of range for rank 0", []
    axes = numpy_helper.from_array(np.array([0], np.int64), "axes")
    for op, name, extra, more in [
            ("Split", "cut", {"axis": 0, "num_outputs": 1}, []),
            ("Squeeze", "sq", {}, [axes]),
            ("Slice", "sl", {}, [numpy_helper.from_array(np.array([0], np.int64), "starts"),
                                 numpy_helper.from_array(np.array([1], np.int64), "ends"), axes])]:
        inputs = ["a"] + [t.name for t in more]
        folded = make_model([helper.make_node(op, inputs, ["y"], name=name, **extra)], [],
                            [value("y", None)], scalars[:1] + more, opset=18)
        yield f"{op.lower()} of a scalar constant", folded.SerializeToString(), \
            f"'{name}' ({op}): axis 0 is out of range for rank 0", []
    # Outputs a model names that no operator makes, and zero dims hiding huge ones (a read-only
    # audit's findings: null writes, empty tensors read downstream, overflowing partial products).
    none = make_model([helper.make_node("Constant", [], [], name="c", value_float=1.0),
                       helper.make_node("Relu", ["x"], ["y"], name="relu")],
                      [value("x", [2, 3])], [value("y", [2, 3])])
    yield "node without outputs", none.SerializeToString(), "'c' (Constant): has no output", []
    unnamed = make_model([helper.make_node("Shape", ["x"], [""], name="s")], [value("x", [2, 3])],
                         [value("x", [2, 3])])
    yield "shape with its output omitted", unnamed.SerializeToString(), \
        "'s' (Shape): has no output", []
    extra = make_model([helper.make_node("Relu", ["w"], ["y", "z"], name="two")], [],
                       [value("z", None)],
                       [numpy_helper.from_array(np.ones((2, 2), np.float32), "w")])
    yield "an output the operator does not make", extra.SerializeToString(), \
        "'two' (Relu): output 1 is not one this operator makes", []
    hidden = TensorProto()
    hidden.name, hidden.data_type = "w", TensorProto.FLOAT
    hidden.dims.extend([4, 0, 1 << 62])
    zero_dim = make_model([helper.make_node("Relu", ["w"], ["y"], name="r0")], [],
                          [value("y", None)], [hidden])
    yield "zero dim beside a huge one", zero_dim.SerializeToString(), \
        "shape beyond the limit of 2^40 bytes", []
    big_empty = numpy_helper.from_array(np.array([0, 1 << 40], np.int64), "s")
    fill_empty = make_model([helper.make_node("ConstantOfShape", ["s"], ["y"], name="fill0")], [],
                            [value("y", None)], [big_empty])
    yield "empty ConstantOfShape of a huge dim", fill_empty.SerializeToString(), \
        "'fill0' (ConstantOfShape): shape [0, 1099511627776] is negative or beyond 2^36", []
    yield "wrong input rank", relu_model().SerializeToString(), "input 'x': rank 1, expected 2", \
        ["--run", "INPUT_6"]
    yield "input not npy", relu_model().SerializeToString(), "not an .npy file", \
        ["--run", "NOT_NPY"]
    yield "model is a directory", work, "not a regular file", []


def materialize(work, index, model, args):
    if isinstance(model, bytes):
        path = os.path.join(work, f"case_{index}.onnx")
        with open(path, "wb") as f:
            f.write(model)
        model = path
    resolved = []
    for arg in args:
        if arg.startswith("INPUT_"):
            dims = [int(d) for d in arg[len("INPUT_"):].split("x")]
            arg = os.path.join(work, f"case_{index}_input.npy")
            np.save(arg, np.ones(dims, np.float32))
        elif arg == "NOT_NPY":
            arg = os.path.join(work, f"case_{index}_input.npy")
            with open(arg, "wb") as f:
                f.write(b"not numpy at all")
        resolved.append(arg)
    return model, resolved


def main():
    launch, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    count = 0
    for index, (name, model, expected, args) in enumerate(cases(work)):
        count += 1
        path, extra = materialize(work, index, model, args)
        try:
            result = subprocess.run([launch, "compile", path, *extra], capture_output=True,
                                    text=True, timeout=60)
        except subprocess.TimeoutExpired:
            failures.append(f"{name}: hangs")
            continue
        lines = result.stderr.strip().splitlines()
        ok = (result.returncode == 2 and len(lines) == 1 and expected in lines[0])
        print(f"{'ok  ' if ok else 'FAIL'} {name}: exit {result.returncode}: "
              f"{result.stderr.strip()[:300]}")
        if not ok:
            failures.append(f"{name}: expected exit 2 and one line containing {expected!r}")
    print(f"{count} cases, {len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
