#include "executor.h"

#include <map>

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
    REE_CHECK_ARG(given.storage.defined() && given.storage.device() == Device::cpu(),
                  "input '%s': no data, or not on the CPU", name.c_str());
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

Status Executor::run(const std::vector<GraphTensor>& inputs, std::vector<GraphTensor>* outputs) {
  REE_RETURN_IF_ERROR(checkInputs(inputs));
  ScopedTensorByteLimit limit(max_tensor_bytes_);
  std::vector<GraphTensor> values(graph_.values.size());
  for (const auto& [id, tensor] : graph_.constants)
    values[id] = tensor;
  for (size_t i = 0; i < inputs.size(); ++i)
    values[graph_.inputs[i]] = inputs[i];
  for (size_t n = 0; n < graph_.nodes.size(); ++n) {
    const Node& node = graph_.nodes[n];
    const OpDef* def = findOp(node.op_type, node.domain);
    REE_CHECK_ARG(def != nullptr, "%s: not supported", node.label().c_str());
    OpContext context{node, ops_.get(), graph_.opset, {}, {}};
    for (int id : node.inputs)
      context.inputs.push_back(id >= 0 ? &values[id] : nullptr);
    context.outputs.resize(node.outputs.size());
    REE_RETURN_IF_ERROR(runNode(*def, context));
    for (size_t i = 0; i < node.outputs.size(); ++i) {
      if (node.outputs[i] >= 0) values[node.outputs[i]] = std::move(context.outputs[i]);
    }
    for (int id : node.inputs) {
      if (id >= 0 && last_use_[id] == static_cast<int>(n) && !graph_.isConstant(id)) {
        values[id] = GraphTensor();
      }
    }
  }
  outputs->clear();
  for (int id : graph_.outputs)
    outputs->push_back(values[id]);
  return Status::kSuccess;
}

}  // namespace ree::compiler
