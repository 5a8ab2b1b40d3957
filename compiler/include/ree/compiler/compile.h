// The ONNX compiler (docs/compiler.md): an ONNX model -> a graph of REE operators that runs on an
// operation set. With requires_reproducibility every float operator is a RepOp (kernels/) in its
// fixed order, so the outputs' bits depend only on the inputs: not on the thread count, the batch
// composition (each output row of a matrix product, norm, softmax or reduction is computed from its
// own inputs alone) or the device. Without it, matrix products and norms run on the `default` (or
// `deterministic`) ATen operation set and the rest on the same element-wise RepOps.
//
//   std::unique_ptr<ree::CompiledModel> model;
//   REE_RETURN_IF_ERROR(ree::compile("model.onnx", ree::CompileOptions{}, &model));
//   std::vector<ree::GraphTensor> outputs;
//   REE_RETURN_IF_ERROR(model->run(inputs, &outputs));
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ree/core/status.h"
#include "ree/partitioner/graph_partition.h"
#include "ree/runtime/operation_set.h"
#include "ree/runtime/tensor.h"

namespace ree {

// Element types of graph values. Float tensors are fp32 (fp16/bf16/f64 initializers are widened
// or rounded to fp32 at import); int32/int64 values are int64; bool is one byte (0 or 1).
enum class ElementType : int { kFloat32 = 0, kInt64 = 1, kBool = 2 };

const char* elementTypeName(ElementType type);  // "float32", "int64", "bool"
int elementTypeSize(ElementType type);

// A graph value: dense row-major elements of one type. `storage` holds the bytes (a ree::Tensor of
// fp32 words, so any element type fits; views share it).
struct GraphTensor {
  ElementType type = ElementType::kFloat32;
  std::vector<int64_t> shape;
  Tensor storage;

  int64_t numel() const;
  size_t nbytes() const { return static_cast<size_t>(numel()) * elementTypeSize(type); }
  void* data() const { return storage.data(); }
  template <typename T>
  T* as() const {
    return static_cast<T*>(storage.data());
  }
  // "float32[2, 3]"
  std::string describe() const;

  // New uninitialised CPU storage of `type` and `shape` (kInvalidArgument for a negative dim or
  // a size beyond the limit: 2^40 bytes, or CompileOptions::max_tensor_bytes while compiling or
  // running).
  static Status empty(ElementType type, std::vector<int64_t> shape, GraphTensor* out);
  // A copy of `bytes` (numel * element size of them) as a new CPU tensor.
  static Status fromHost(ElementType type, std::vector<int64_t> shape, const void* bytes,
                         GraphTensor* out);
};

struct CompileOptions {
  // Where the compiler writes its artifacts (docs/compiler.md: plan.json, constants.bin,
  // external/). Empty: a new temporary directory, removed with the CompiledModel unless the
  // environment variable REE_DEBUG is set (then kept and logged).
  std::string artifacts_dir;
  // External tensor files are copied into artifacts_dir/external (true) or symlinked (false).
  bool colocate_tensors = false;
  // true: the `reproducible` operation set (RepOps only). false: `non_reproducible_set`.
  bool requires_reproducibility = true;
  OperationSetKind non_reproducible_set = OperationSetKind::kDefault;
  RepOpsSpec repops_spec = kDefaultRepOpsSpec;
  // The device the compiled graph's float operators run on (a CUDA device needs a CUDA build).
  // Integer and bool values (shapes, indices, masks) are always computed on the host.
  Device device = Device::cpu();
  // Bounds on untrusted input: the model file, and all external tensor data together.
  uint64_t max_model_bytes = uint64_t{2} << 30;
  uint64_t max_external_bytes = uint64_t{64} << 30;
  // The largest single tensor the graph may create while it is folded or run (a hostile
  // ConstantOfShape or Expand is refused before anything is allocated).
  uint64_t max_tensor_bytes = uint64_t{16} << 30;
};

// A graph input or output as declared in the model: its element type and dims (a dim is a number
// or, for a symbolic dim such as "batch", -1 with its name in `symbols`).
struct GraphValueInfo {
  std::string name;
  ElementType type = ElementType::kFloat32;
  std::vector<int64_t> dims;
  std::vector<std::string> symbols;
  bool has_shape = false;
};

class CompiledModel {
 public:
  virtual ~CompiledModel() = default;
  virtual const std::vector<GraphValueInfo>& inputs() const = 0;
  virtual const std::vector<GraphValueInfo>& outputs() const = 0;
  virtual const std::string& artifactsDir() const = 0;
  // The operation set the graph runs on.
  virtual OperationSetKind operationSet() const = 0;
  // Runs the graph: `inputs` in the order of inputs(), on the CPU or the graph's device (types,
  // ranks and fixed dims are checked; a symbolic dim takes the same value wherever it appears).
  // Outputs in the order of outputs(), each on the CPU or the graph's device (copyToCpu).
  // Not thread-safe: one run at a time per CompiledModel.
  virtual Status run(const std::vector<GraphTensor>& inputs, std::vector<GraphTensor>* outputs) = 0;

  // Pipeline stages (docs/compiler.md, "Pipelines"): the nodes, in the order they run, cut into
  // n contiguous stages by the graph partitioner (ree/partitioner/graph_partition.h) where at
  // most `max_cut_values` values cross; a node's cost is a fixed 4096 plus the bytes of the
  // constants it reads. Graph inputs and constants are on every stage.
  virtual Status planStages(int n, int max_cut_values,
                            std::vector<partitioner::GraphStage>* stages) const;
  // Runs the nodes of `stage` (of planStages) on the graph inputs and `incoming`, the values of
  // stage.incoming in that order. `outgoing` gets stage.outgoing's values, or for the last stage
  // the graph outputs (as run() returns them). Running every stage in turn, each on the previous
  // one's outgoing values, gives run()'s bits: the same operators on the same values.
  virtual Status runStage(const std::vector<GraphTensor>& inputs,
                          const partitioner::GraphStage& stage,
                          const std::vector<GraphTensor>& incoming,
                          std::vector<GraphTensor>* outgoing);
};

// `in` itself when it is on the CPU, else a copy there (for a run's outputs on a GPU).
Status copyToCpu(const GraphTensor& in, GraphTensor* out);

// Compiles the ONNX model at `path`; external data is looked up beside it (never outside its
// directory).
Status compile(const std::string& path, const CompileOptions& options,
               std::unique_ptr<CompiledModel>* out);
// Compiles a serialized ModelProto; external data, if any, is looked up in `base_dir` (empty:
// external data is refused).
Status compileBytes(const std::string& bytes, const std::string& base_dir,
                    const CompileOptions& options, std::unique_ptr<CompiledModel>* out);

}  // namespace ree
