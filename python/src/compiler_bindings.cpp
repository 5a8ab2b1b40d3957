// ONNX compiler bindings (docs/compiler.md): ree::compile / compileBytes and CompiledModel::run
// over raw tensor pointers. ree/onnx_compiler.py is the Python face (ree.compile, the
// torch.nn.Module); this file converts arguments and results only. Without the compiler in the
// build (REE_COMPILER off) only `has_compiler = False` is bound and ree.compile raises.
#include <nanobind/nanobind.h>

#include "binding_util.h"

#if REE_WITH_COMPILER
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "ree/compiler/compile.h"
#endif

namespace nb = nanobind;

namespace ree::python {

#if REE_WITH_COMPILER
namespace {

// A graph value's description: (name, element type name, dims (-1: symbolic or unknown),
// symbol names, whether the rank is known).
using ValueTuple =
    std::tuple<std::string, std::string, std::vector<int64_t>, std::vector<std::string>, bool>;
// One input from Python: (data_ptr, element type code (ElementType), shape, on the graph's
// CUDA device (else the CPU)).
using InputTuple = std::tuple<uint64_t, int, std::vector<int64_t>, bool>;

std::vector<ValueTuple> describe(const std::vector<GraphValueInfo>& infos) {
  std::vector<ValueTuple> result;
  for (const GraphValueInfo& info : infos) {
    result.emplace_back(info.name, elementTypeName(info.type), info.dims, info.symbols,
                        info.has_shape);
  }
  return result;
}

ElementType elementTypeFromCode(int code) {
  if (code < 0 || code > 2)
    throw nb::value_error("ree._C: element type code must be 0 (float32), 1 (int64) or 2 (bool)");
  return static_cast<ElementType>(code);
}

// The outputs of one run, kept alive until Python has copied them into torch tensors.
class RunOutputs {
 public:
  explicit RunOutputs(std::vector<GraphTensor> outputs) : outputs_(std::move(outputs)) {}

  size_t size() const { return outputs_.size(); }
  // (element type code, shape, on a CUDA device) of output i.
  std::tuple<int, std::vector<int64_t>, bool> info(size_t i) const {
    const GraphTensor& out = at(i);
    return {static_cast<int>(out.type), out.shape, out.storage.device().isCuda()};
  }
  // Copies output i into `address`: numel * element size bytes on the output's own device
  // (info's third field), so the copy never crosses devices. CUDA copies are ordered on the
  // legacy default stream; the caller synchronizes before it reads them.
  void copyTo(size_t i, uint64_t address) const {
    const GraphTensor& out = at(i);
    const size_t bytes = out.nbytes();
    if (bytes == 0) return;
    const Device device = out.storage.device();
    if (!device.isCuda()) {
      std::memcpy(pointer(address), out.data(), bytes);
      return;
    }
    // Device values are float32 (integers and bools stay on the host): whole 4-byte words.
    if (bytes % 4 != 0) throw std::runtime_error("ree._C: a CUDA output of a partial word");
    const int64_t words = static_cast<int64_t>(bytes / 4);
    Tensor src = Tensor::wrap(out.data(), device, DType::kF32, {words});
    Tensor dst = Tensor::wrap(pointer(address), device, DType::kF32, {words});
    Status status;
    {
      nb::gil_scoped_release release;
      status = copyTensor(src, dst);
    }
    check(status);
  }

 private:
  const GraphTensor& at(size_t i) const {
    if (i >= outputs_.size()) throw nb::index_error("ree._C: output index out of range");
    return outputs_[i];
  }
  std::vector<GraphTensor> outputs_;
};

// One input as a GraphTensor: a view of the caller's memory (zero-copy) when it holds whole
// 4-byte words, else (bool tensors of odd sizes, empty tensors) a host copy.
GraphTensor inputTensor(const InputTuple& tuple, Device graph_device) {
  const auto& [address, code, shape, on_cuda] = tuple;
  GraphTensor tensor;
  tensor.type = elementTypeFromCode(code);
  tensor.shape = shape;
  const size_t bytes = tensor.nbytes();
  if (bytes % 4 == 0 && bytes > 0 && address != 0) {
    const Device device = on_cuda ? graph_device : Device::cpu();
    tensor.storage =
        Tensor::wrap(pointer(address), device, DType::kF32, {static_cast<int64_t>(bytes / 4)});
    return tensor;
  }
  if (on_cuda) throw nb::value_error("ree._C: a CUDA input must hold whole 4-byte words");
  check(GraphTensor::fromHost(tensor.type, shape, pointer(address), &tensor));
  return tensor;
}

class CompiledHandle {
 public:
  // `path` non-empty: compile that file; else the serialized ModelProto `bytes`, external data
  // looked up in `base_dir` (empty: refused).
  CompiledHandle(const std::string& path, const nb::bytes& bytes, const std::string& base_dir,
                 const std::string& artifacts_dir, bool colocate_tensors,
                 bool requires_reproducibility, const std::string& non_reproducible_set,
                 const std::string& repops_spec, const std::string& device) {
    CompileOptions options;
    options.artifacts_dir = artifacts_dir;
    options.colocate_tensors = colocate_tensors;
    options.requires_reproducibility = requires_reproducibility;
    check(parseOperationSet(non_reproducible_set, &options.non_reproducible_set));
    check(parseRepOpsSpec(repops_spec, "repops_spec", &options.repops_spec));
    check(parseDevice(device, &options.device));
    device_ = options.device;
    std::string model_bytes;
    if (path.empty()) model_bytes.assign(bytes.c_str(), bytes.size());
    Status status;
    {
      nb::gil_scoped_release release;
      status = path.empty() ? compileBytes(model_bytes, base_dir, options, &model_)
                            : compile(path, options, &model_);
    }
    check(status);
  }

  std::unique_ptr<RunOutputs> run(const std::vector<InputTuple>& tuples) {
    std::vector<GraphTensor> inputs;
    for (const InputTuple& tuple : tuples)
      inputs.push_back(inputTensor(tuple, device_));
    std::vector<GraphTensor> outputs;
    Status status;
    {
      nb::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(mutex_);  // CompiledModel::run: one at a time
      status = model_->run(inputs, &outputs);
    }
    check(status);
    return std::make_unique<RunOutputs>(std::move(outputs));
  }

  std::vector<ValueTuple> inputs() const { return describe(model_->inputs()); }
  std::vector<ValueTuple> outputs() const { return describe(model_->outputs()); }
  const std::string& artifactsDir() const { return model_->artifactsDir(); }
  std::string operationSet() const { return operationSetName(model_->operationSet()); }
  std::string device() const { return device_.str(); }

 private:
  std::unique_ptr<CompiledModel> model_;
  Device device_;
  std::mutex mutex_;
};

}  // namespace
#endif  // REE_WITH_COMPILER

void bindCompiler(nb::module_& module) {
#if REE_WITH_COMPILER
  using namespace nb::literals;
  module.attr("has_compiler") = true;
  nb::class_<RunOutputs>(module, "CompiledRunOutputs")
      .def("__len__", &RunOutputs::size)
      .def("info", &RunOutputs::info, "index"_a)
      .def("copy_to", &RunOutputs::copyTo, "index"_a, "address"_a);
  nb::class_<CompiledHandle>(module, "CompiledGraph")
      .def(nb::init<const std::string&, const nb::bytes&, const std::string&, const std::string&,
                    bool, bool, const std::string&, const std::string&, const std::string&>(),
           "path"_a, "model_bytes"_a, "base_dir"_a, "artifacts_dir"_a, "colocate_tensors"_a,
           "requires_reproducibility"_a, "non_reproducible_set"_a, "repops_spec"_a, "device"_a)
      .def("run", &CompiledHandle::run, "inputs"_a)
      .def_prop_ro("inputs", &CompiledHandle::inputs)
      .def_prop_ro("outputs", &CompiledHandle::outputs)
      .def_prop_ro("artifacts_dir", &CompiledHandle::artifactsDir)
      .def_prop_ro("operation_set", &CompiledHandle::operationSet)
      .def_prop_ro("device", &CompiledHandle::device);
#else
  module.attr("has_compiler") = false;
#endif
}

}  // namespace ree::python
