#include "executor.h"

#include <map>
#include <set>

#include "device_ops.h"

#include "ops.h"
#include "ree/core/text.h"
#include "tensor_limit.h"
#include "tensor_util.h"

namespace ree::compiler {

Executor::Executor(Graph graph, std::unique_ptr<OperationSet> ops, uint64_t max_tensor_bytes)
    : graph_(std::move(graph)),
      ops_(std::move(ops)),
      max_tensor_bytes_(max_tensor_bytes),
      last_use_(graph_.values.size(), -1) {
  for (size_t n = 0; n < graph_.nodes.size(); ++n) {
    for (int id : graph_.nodes[n].inputs)
      if (id >= 0) last_use_[id] = static_cast<int>(n);
  }
  for (int id : graph_.outputs)
    last_use_[id] = static_cast<int>(graph_.nodes.size());
}

Status Executor::checkInputs(const std::vector<GraphTensor>& inputs) const {
  REE_CHECK_ARG(inputs.size() == graph_.inputs.size(), "run: %zu inputs given, the graph has %zu",
                inputs.size(), graph_.inputs.size());
  std::map<std::string, int64_t> symbols;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Value& value = graph_.values[graph_.inputs[i]];
    const std::string name = printableText(value.name, 80);
    const GraphTensor& given = inputs[i];
    REE_CHECK_ARG(given.storage.defined() && (given.storage.device() == Device::cpu() ||
                                              given.storage.device() == ops_->device()),
                  "input '%s': no data, or on another device than the CPU or %s", name.c_str(),
                  ops_->device().str().c_str());
    REE_CHECK_ARG(given.type == value.info.type, "input '%s': expected %s, got %s", name.c_str(),
                  elementTypeName(value.info.type), given.describe().c_str());
    REE_CHECK_ARG(given.storage.nbytes() >= given.nbytes(),
                  "input '%s': storage of %zu bytes for %s", name.c_str(), given.storage.nbytes(),
                  given.describe().c_str());
    if (!value.info.rank_known) continue;
    REE_CHECK_ARG(given.shape.size() == value.info.dims.size(),
                  "input '%s': rank %zu, expected %zu", name.c_str(), given.shape.size(),
                  value.info.dims.size());
    for (size_t d = 0; d < given.shape.size(); ++d) {
      const Dim& dim = value.info.dims[d];
      if (dim.known()) {
        REE_CHECK_ARG(given.shape[d] == dim.value, "input '%s': dim %zu is %lld, expected %lld",
                      name.c_str(), d, static_cast<long long>(given.shape[d]),
                      static_cast<long long>(dim.value));
      } else if (!dim.symbol.empty()) {
        auto [it, fresh] = symbols.emplace(dim.symbol, given.shape[d]);
        REE_CHECK_ARG(fresh || it->second == given.shape[d],
                      "input '%s': dim %zu ('%s') is %lld but another input has %lld", name.c_str(),
                      d, printableText(dim.symbol, 40).c_str(),
                      static_cast<long long>(given.shape[d]), static_cast<long long>(it->second));
      }
    }
  }
  return Status::kSuccess;
}

namespace {

// Operators whose float work runs on the graph's device (a GPU when it has one); the others run
// on the host (integer and bool values, comparisons, casts, concatenation, constants), and views
// run wherever their input is.
const std::set<std::string> kDeviceOps = {"Add",
                                          "Sub",
                                          "Mul",
                                          "Div",
                                          "Pow",
                                          "Max",
                                          "Min",
                                          "Where",
                                          "Neg",
                                          "Abs",
                                          "Sqrt",
                                          "Reciprocal",
                                          "Relu",
                                          "Exp",
                                          "Log",
                                          "Tanh",
                                          "Erf",
                                          "Sigmoid",
                                          "Sin",
                                          "Cos",
                                          "Softplus",
                                          "Gelu",
                                          "MatMul",
                                          "Gemm",
                                          "Conv",
                                          "Softmax",
                                          "LogSoftmax",
                                          "ReduceMean",
                                          "ReduceSum",
                                          "ReduceMax",
                                          "ReduceMin",
                                          "LayerNormalization",
                                          "SimplifiedLayerNormalization",
                                          "RMSNormalization",
                                          "GlobalAveragePool",
                                          "MaxPool",
                                          "Transpose",
                                          "Gather",
                                          "Slice",
                                          "Expand",
                                          "ReeCausalAttention"};
const std::set<std::string> kViewOps = {"Reshape",  "Flatten", "Squeeze", "Unsqueeze",
                                        "Identity", "Shape",   "Size"};

enum class Placement { kHost, kDevice, kAnywhere };

Placement placementOf(const Node& node, const std::vector<GraphTensor>& values) {
  if (kViewOps.count(node.op_type)) return Placement::kAnywhere;
  if (!kDeviceOps.count(node.op_type)) return Placement::kHost;
  // The data operand decides: Where's is input 1, everyone else's input 0.
  const size_t data = node.op_type == "Where" ? 1 : 0;
  if (node.inputs.size() <= data || node.inputs[data] < 0) return Placement::kHost;
  return values[node.inputs[data]].type == ElementType::kFloat32 ? Placement::kDevice
                                                                 : Placement::kHost;
}

}  // namespace

Status Executor::uploadConstants() {
  if (!ops_->device().isCuda() || !device_constants_.empty()) return Status::kSuccess;
  for (const auto& [id, tensor] : graph_.constants) {
    if (tensor.type != ElementType::kFloat32) continue;
    REE_RETURN_IF_ERROR(moveTo(tensor, ops_->device(), &device_constants_[id]));
  }
  return Status::kSuccess;
}

Status Executor::runNodeAt(size_t n, std::vector<GraphTensor>& values) {
  return runOne(graph_.nodes[n], values);
}

Status Executor::runOne(const Node& node, std::vector<GraphTensor>& values) {
  const OpDef* def = findOp(node.op_type, node.domain);
  REE_CHECK_ARG(def != nullptr, "%s: not supported", node.label().c_str());
  const Placement placement = placementOf(node, values);
  const Device device = ops_->device();
  OpContext context{node, ops_.get(), graph_.opset, {}, {}};
  context.device = placement == Placement::kDevice ? device : Device::cpu();
  std::vector<GraphTensor> moved(node.inputs.size());
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    const int id = node.inputs[i];
    if (id < 0) {
      context.inputs.push_back(nullptr);
      continue;
    }
    const GraphTensor& value = values[id];
    // Float values follow the node; integers and bools stay on the host.
    const bool move = placement != Placement::kAnywhere && value.type == ElementType::kFloat32 &&
                      value.storage.device() != context.device;
    if (move) REE_RETURN_IF_ERROR(moveTo(value, context.device, &moved[i]));
    context.inputs.push_back(move ? &moved[i] : &value);
  }
  context.outputs.resize(node.outputs.size());
  REE_RETURN_IF_ERROR(runNode(*def, context));
  if (context.use_fallback) {
    // A fused node whose inputs are not its case: its original nodes compute the outputs (their
    // intermediates live until the end of the run).
    for (const Node& original : node.fallback)
      REE_RETURN_IF_ERROR(runOne(original, values));
    return Status::kSuccess;
  }
  for (size_t i = 0; i < node.outputs.size(); ++i) {
    if (node.outputs[i] >= 0) values[node.outputs[i]] = std::move(context.outputs[i]);
  }
  return Status::kSuccess;
}

Status Executor::run(const std::vector<GraphTensor>& inputs, std::vector<GraphTensor>* outputs) {
  return runRange(inputs, 0, graph_.nodes.size(), {}, {}, nullptr, outputs);
}

Status Executor::runRange(const std::vector<GraphTensor>& inputs, size_t begin, size_t end,
                          const std::vector<int>& incoming_ids,
                          const std::vector<GraphTensor>& incoming,
                          const std::vector<int>* outgoing, std::vector<GraphTensor>* result) {
  REE_CHECK_ARG(
      begin <= end && end <= graph_.nodes.size() && incoming.size() == incoming_ids.size(),
      "run: nodes [%zu, %zu) of %zu with %zu incoming value(s) for %zu", begin, end,
      graph_.nodes.size(), incoming.size(), incoming_ids.size());
  REE_RETURN_IF_ERROR(checkInputs(inputs));
  ScopedTensorByteLimit limit(max_tensor_bytes_);
  REE_RETURN_IF_ERROR(setCurrentDevice(ops_->device()));
  REE_RETURN_IF_ERROR(uploadConstants());
  std::vector<GraphTensor> values(graph_.values.size());
  for (const auto& [id, tensor] : graph_.constants) {
    auto on_device = device_constants_.find(id);
    values[id] = on_device != device_constants_.end() ? on_device->second : tensor;
  }
  for (size_t i = 0; i < inputs.size(); ++i)
    values[graph_.inputs[i]] = inputs[i];
  for (size_t i = 0; i < incoming.size(); ++i) {
    const int id = incoming_ids[i];
    REE_CHECK_ARG(id >= 0 && static_cast<size_t>(id) < values.size(),
                  "run: incoming value %zu has no id in the graph (%d)", i, id);
    values[id] = incoming[i];
  }
  for (size_t n = begin; n < end; ++n) {
    REE_RETURN_IF_ERROR(runNodeAt(n, values));
    for (int id : graph_.nodes[n].inputs) {
      if (id >= 0 && last_use_[id] == static_cast<int>(n) && !graph_.isConstant(id)) {
        values[id] = GraphTensor();
      }
    }
  }
  result->clear();
  for (int id : outgoing != nullptr ? *outgoing : graph_.outputs) {
    REE_CHECK_ARG(id >= 0 && static_cast<size_t>(id) < values.size(),
                  "run: outgoing value id %d is not in the graph", id);
    result->push_back(values[id]);
  }
  return ops_->synchronize();
}

}  // namespace ree::compiler
