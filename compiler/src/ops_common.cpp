#include "ops.h"

#include <algorithm>
#include <unordered_map>

namespace ree::compiler {

Status OpContext::required(size_t i, const GraphTensor** out) const {
  *out = input(i);
  REE_CHECK_ARG(*out != nullptr, "%s: input %zu is required", node.label().c_str(), i);
  return Status::kSuccess;
}

Status OpContext::floatInput(size_t i, const GraphTensor** out) const {
  REE_RETURN_IF_ERROR(required(i, out));
  REE_CHECK_ARG((*out)->type == ElementType::kFloat32, "%s: input %zu must be float, got %s",
                node.label().c_str(), i, (*out)->describe().c_str());
  return Status::kSuccess;
}

namespace {

// Every output a graph names must have been made: an operator fills only the outputs it has, and
// a model may name more (an empty tensor would reach the next node or the caller).
Status checkOutputsMade(const OpContext& context) {
  if (context.use_fallback) return Status::kSuccess;  // its original nodes make them
  const std::vector<int>& named = context.node.outputs;
  for (size_t i = 0; i < named.size(); ++i) {
    REE_CHECK_ARG(
        named[i] < 0 || (i < context.outputs.size() && context.outputs[i].storage.defined()),
        "%s: output %zu is not one this operator makes", context.node.label().c_str(), i);
  }
  return Status::kSuccess;
}

}  // namespace

Status runNode(const OpDef& def, OpContext& context) {
  const Status status = def.run(context);
  if (status == Status::kSuccess) return checkOutputsMade(context);
  const std::string message = lastErrorMessage(), label = context.node.label();
  if (message.compare(0, label.size(), label) == 0) return status;
  return setError(status, nullptr, 0, "%s: %s", label.c_str(), message.c_str());
}

namespace {

const std::vector<OpDef>& table() {
  static const std::vector<OpDef> ops = [] {
    std::vector<OpDef> all;
    registerElementwiseOps(&all);
    registerLinearOps(&all);
    registerRowOps(&all);
    registerLayoutOps(&all);
    registerSplitOps(&all);
    registerAttentionOps(&all);
    std::sort(all.begin(), all.end(),
              [](const OpDef& a, const OpDef& b) { return std::string(a.op_type) < b.op_type; });
    return all;
  }();
  return ops;
}

}  // namespace

const OpDef* findOp(const std::string& op_type, const std::string& domain) {
  // ONNX Runtime's contrib SimplifiedLayerNormalization may carry the com.microsoft domain.
  // The fused attention lives in REE's own domain (graph_fusion.h), and only there.
  const bool fused = op_type == kCausalAttentionOp;
  if (fused != (domain == kReeDomain)) return nullptr;
  if (!fused && !domain.empty() &&
      !(domain == "com.microsoft" && op_type == "SimplifiedLayerNormalization")) {
    return nullptr;
  }
  for (const OpDef& def : table()) {
    if (op_type == def.op_type) return &def;
  }
  return nullptr;
}

std::vector<const OpDef*> supportedOps() {
  std::vector<const OpDef*> result;
  for (const OpDef& def : table())
    result.push_back(&def);
  return result;
}

}  // namespace ree::compiler
