// Fuzz target: a whole ONNX ModelProto, as `ree-launch compile` reads it (docs/compiler.md):
// compileBytes (protobuf parse, import, constant folding, shape inference, artifacts) with small
// limits, then, when every graph input has fixed dims and few elements, one run on zero-filled
// inputs. Refusals must be one-line errors; an accepted model's outputs have the shapes' sizes.
#include <cstring>
#include <string>

#include "fuzz_util.h"
#include "ree/compiler/compile.h"

using namespace ree;

namespace {

constexpr int64_t kMaxInputElements = 1 << 12;

// Zero-filled inputs for the declared shapes, or false when a dim is symbolic or they are large.
bool zeroInputs(const CompiledModel& model, std::vector<GraphTensor>* inputs) {
  for (const GraphValueInfo& info : model.inputs()) {
    if (!info.has_shape) return false;
    int64_t n = 1;
    for (int64_t d : info.dims) {
      if (d < 0 || d > kMaxInputElements) return false;
      n *= d;
      if (n > kMaxInputElements) return false;
    }
    GraphTensor tensor;
    if (GraphTensor::empty(info.type, info.dims, &tensor) != Status::kSuccess) return false;
    std::memset(tensor.data(), 0, tensor.nbytes());
    inputs->push_back(std::move(tensor));
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::quietLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::beginInput();
  CompileOptions options;
  options.artifacts_dir = fuzz::scratchDirectory() + "/onnx-artifacts";
  options.max_model_bytes = 1 << 20;
  options.max_tensor_bytes = 16 << 20;
  std::unique_ptr<CompiledModel> model;
  Status status =
      compileBytes(std::string(reinterpret_cast<const char*>(data), size), "", options, &model);
  fuzz::checkStatus(status, "compileBytes");
  if (status != Status::kSuccess) return 0;
  std::vector<GraphTensor> inputs, outputs;
  if (!zeroInputs(*model, &inputs)) return 0;
  fuzz::beginInput();
  status = model->run(inputs, &outputs);
  fuzz::checkStatus(status, "CompiledModel::run");
  if (status != Status::kSuccess) return 0;
  fuzz::require(outputs.size() == model->outputs().size(), "a run gave the wrong output count");
  for (const GraphTensor& output : outputs) {
    fuzz::require(output.storage.nbytes() >= output.nbytes(), "an output larger than its storage",
                  output.describe());
  }
  return 0;
}
