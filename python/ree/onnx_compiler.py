"""ree.compile: an ONNX model -> a torch.nn.Module that runs REE's ONNX compiler (docs/compiler.md).

The C++ ``ree::compile`` / ``CompiledModel::run`` (compiler/include/ree/compiler/compile.h) do all
the work; this module converts torch tensors to the graph's inputs and its outputs back. With
``requires_reproducibility`` (the default) every float operator is a RepOp, so the outputs' bits
depend only on the inputs: the same on every CPU and GPU, any thread count, any batch composition,
and the same as ``ree-launch compile --run``.
"""

import os
from dataclasses import dataclass
from typing import Optional, Tuple, Union

import torch

from . import _C

# The compiler's element types (ree::ElementType) and their torch dtypes.
_TYPE_CODES = {"float32": 0, "int64": 1, "bool": 2}
_TORCH_DTYPES = {0: torch.float32, 1: torch.int64, 2: torch.bool}
_INTEGER_DTYPES = {torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8}


@dataclass
class CompileOptions:
    """How ree.compile compiles (the fields of Gensyn's CompileOptions, plus REE's device).

    artifacts_dir: where plan.json, constants.bin and external/ go. None: a new temporary
        directory, removed with the module unless the environment variable REE_DEBUG is set.
    colocate_tensors: copy the model's external tensor files into the artifacts (True) or
        symlink them (False).
    requires_reproducibility: True: every float operator a RepOp (the same bits everywhere).
        False: matrix products and norms on `non_reproducible_set` ("default" or
        "deterministic", LibTorch ATen), the rest on the same RepOps.
    device: "cpu", "cuda" or "cuda:N" (a torch.device too): where the float operators run and
        where forward's outputs are returned.
    repops_spec: the reproducible set's arithmetic ("repops-1", "repops-2" or "repops-3").
    """
    artifacts_dir: Optional[Union[str, os.PathLike]] = None
    colocate_tensors: bool = False
    requires_reproducibility: bool = True
    device: Union[str, torch.device] = "cpu"
    non_reproducible_set: str = "default"
    repops_spec: str = "repops-1"


class CompiledModule(torch.nn.Module):
    """A compiled ONNX graph as a torch module (forward only, no parameters).

    forward takes the graph's inputs in the order of the ONNX graph's inputs (or by name as
    keyword arguments) and returns its outputs in the graph's order: one tensor, or a tuple.
    Float inputs may be float32/float16/bfloat16/float64 (converted to float32, the compiler's
    float type), integer inputs any integer dtype (widened to int64), on any device (moved to
    the options' device). Outputs are float32, int64 or bool tensors on the options' device.
    """

    def __init__(self, graph, options: CompileOptions):
        super().__init__()
        self._graph = graph
        self.options = options
        self.device = torch.device(graph.device)
        self._inputs = graph.inputs
        self._outputs = graph.outputs
        self.input_names = [value[0] for value in self._inputs]
        self.output_names = [value[0] for value in self._outputs]

    @property
    def artifacts_dir(self) -> str:
        return self._graph.artifacts_dir

    @property
    def operation_set(self) -> str:
        return self._graph.operation_set

    def extra_repr(self) -> str:
        return (f"inputs={self.input_names}, outputs={self.output_names}, "
                f"operation_set={self.operation_set}, device={self.device}")

    def forward(self, *args, **kwargs) -> Union[torch.Tensor, Tuple[torch.Tensor, ...]]:
        values = self._arguments(args, kwargs)
        prepared = [self._prepare(i, value) for i, value in enumerate(values)]
        if self.device.type == "cuda":
            # The graph runs on the legacy default stream of its device (made current for the
            # call, then restored): torch's queued work comes first, the copies before return.
            with torch.cuda.device(self.device):
                torch.cuda.synchronize()
                outputs = self._run(prepared)
                torch.cuda.synchronize()
        else:
            outputs = self._run(prepared)
        # Integer and bool values live on the host in the compiler; bring them to the device.
        outputs = [out.to(self.device) for out in outputs]
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    def _run(self, prepared):
        """Runs the graph; each output copied once into a new tensor where the graph left it."""
        result = self._graph.run([entry for _, entry in prepared])
        outputs = []
        for i in range(len(result)):
            code, shape, on_cuda = result.info(i)
            out = torch.empty(shape, dtype=_TORCH_DTYPES[code],
                              device=self.device if on_cuda else "cpu")
            result.copy_to(i, out.data_ptr())
            outputs.append(out)
        return outputs

    def _arguments(self, args, kwargs):
        names = self.input_names
        if len(args) > len(names):
            raise TypeError(f"forward takes {len(names)} inputs {names}, got {len(args)}")
        values = dict(zip(names, args))
        for name, value in kwargs.items():
            if name not in names:
                raise TypeError(f"forward: no graph input named {name!r} (inputs: {names})")
            if name in values:
                raise TypeError(f"forward: input {name!r} given twice")
            values[name] = value
        missing = [name for name in names if name not in values]
        if missing:
            raise TypeError(f"forward: missing inputs {missing} (inputs, in order: {names})")
        return [values[name] for name in names]

    def _prepare(self, i, value):
        """The tensor handed to the graph (kept alive during the run) and its description."""
        name, type_name = self._inputs[i][0], self._inputs[i][1]
        code = _TYPE_CODES[type_name]
        want = _TORCH_DTYPES[code]
        if not isinstance(value, torch.Tensor):
            value = torch.as_tensor(value)
        if want is torch.float32:
            ok = value.is_floating_point()
        elif want is torch.int64:
            ok = value.dtype in _INTEGER_DTYPES
        else:
            ok = value.dtype == torch.bool
        if not ok:
            raise TypeError(f"input '{name}' (#{i}): the graph expects {type_name}, got a tensor "
                            f"of {value.dtype}")
        # Float values run on the graph's device; integers and bools are computed on the host.
        on_device = want is torch.float32 and self.device.type == "cuda" and value.numel() > 0
        target = self.device if on_device else torch.device("cpu")
        # Zero-copy when the tensor already has the dtype, device and layout; else one copy.
        tensor = value.detach().to(device=target, dtype=want).contiguous()
        return tensor, (tensor.data_ptr(), code, list(tensor.shape), tensor.is_cuda)


def compile(onnx_model_or_path, options: Optional[CompileOptions] = None) -> CompiledModule:
    """Compiles an ONNX model (a path, an onnx.ModelProto or its serialized bytes) with REE's
    compiler and returns it as a torch.nn.Module (CompiledModule). A path's external data is
    looked up beside it; a ModelProto must hold its tensors (onnx.load loads external data by
    default). Compilation errors raise ValueError/RuntimeError with the compiler's one-line
    message (naming the node, operator, tensor or file)."""
    if not _C.has_compiler:
        raise RuntimeError(
            "ree.compile: this build of the ree package has no ONNX compiler (built without "
            "protobuf or onnx.proto: apt-get install libprotobuf-dev protobuf-compiler, pip "
            "install onnx, then reinstall ree; see docs/python.md)")
    options = CompileOptions() if options is None else options
    if not isinstance(options, CompileOptions):
        raise TypeError(f"options must be a ree.CompileOptions, got {type(options).__name__}")
    path, model_bytes = "", b""
    if isinstance(onnx_model_or_path, (str, os.PathLike)):
        path = os.fspath(onnx_model_or_path)
        if not path:
            raise ValueError("ree.compile: the model path is empty")
    elif isinstance(onnx_model_or_path, (bytes, bytearray)):
        model_bytes = bytes(onnx_model_or_path)
    elif hasattr(onnx_model_or_path, "SerializeToString"):
        model_bytes = onnx_model_or_path.SerializeToString()
    else:
        raise TypeError("ree.compile: expected a path, an onnx.ModelProto or serialized bytes, "
                        f"got {type(onnx_model_or_path).__name__}")
    artifacts = "" if options.artifacts_dir is None else os.fspath(options.artifacts_dir)
    graph = _C.CompiledGraph(path, model_bytes, "", artifacts, bool(options.colocate_tensors),
                             bool(options.requires_reproducibility), options.non_reproducible_set,
                             options.repops_spec, str(options.device))
    return CompiledModule(graph, options)
