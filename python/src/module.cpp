// ree._C: the native part of the Python package (docs/python.md). ree/ops.py registers the RepOps
// bound here as torch operators; ree/engine.py wraps the engine bindings, ree/onnx_compiler.py
// the compiler's.
#include <nanobind/nanobind.h>

namespace ree::python {
void bindOps(nanobind::module_& module);
void bindEngine(nanobind::module_& module);
void bindCompiler(nanobind::module_& module);
}  // namespace ree::python

NB_MODULE(_C, module) {
  module.doc() = "REE native bindings (RepOps kernels, engine, receipts, ONNX compiler)";
  ree::python::bindOps(module);
  ree::python::bindEngine(module);
  ree::python::bindCompiler(module);
}
