"""REE for Python: RepOps as PyTorch operators (ree.ops), the REE engine (ree.Engine) and
ree.reproducible(model) for PyTorch / transformers models. See docs/python.md.

Importing ree registers the operators as torch.ops.ree.*.
"""

import torch  # noqa: F401  (LibTorch is loaded before the native module, which may link it)

from . import _C
from . import ops
from .engine import Completion, Engine, Generation, VerifyReport
from .reproducible import reproducible

__version__ = "0.3.0"
runtime_version = _C.runtime_version  # the C++ runtime's version (receipts record it)
repops_spec_versions = _C.repops_spec_versions

__all__ = ["ops", "Engine", "Generation", "Completion", "VerifyReport", "reproducible",
           "runtime_version", "repops_spec_versions", "__version__"]
