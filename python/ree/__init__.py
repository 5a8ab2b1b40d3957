"""REE for Python: RepOps as PyTorch operators (ree.ops), the REE engine (ree.Engine),
ree.reproducible(model) for PyTorch / transformers models and ree.compile(onnx_model) for ONNX
models. See docs/python.md.

Importing ree registers the operators as torch.ops.ree.*.
"""

import torch  # noqa: F401  (LibTorch is loaded before the native module, which may link it)

from . import _C
from . import ops
from .engine import (Completion, Engine, Generation, GenerationStream, StopFlag, TokenEvent,
                     TokenLogprobs, VerifyReport)
from .onnx_compiler import CompiledModule, CompileOptions, compile
from .reproducible import reproducible

__version__ = "0.3.0"
runtime_version = _C.runtime_version  # the C++ runtime's version (receipts record it)
repops_spec_versions = _C.repops_spec_versions

has_compiler = _C.has_compiler  # whether ree.compile is available (REE_COMPILER in the build)

__all__ = ["ops", "Engine", "Generation", "GenerationStream", "Completion", "StopFlag", "TokenEvent",
           "TokenLogprobs", "VerifyReport", "reproducible",
           "compile", "CompileOptions", "CompiledModule", "has_compiler", "runtime_version",
           "repops_spec_versions", "__version__"]
