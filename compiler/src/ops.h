// The operators the compiler lowers ONNX nodes to: one run function per ONNX operator, executed on
// concrete tensors (the shapes of a run are known). Float arithmetic goes through RepOps
// (kernels/) or, for matrix products and norms, through the operation set; integer and bool
// values (shapes, indices, masks) are computed exactly on the host; layout operators copy whole
// values. docs/compiler.md lists each operator's lowering.
#pragma once

#include <string>
#include <vector>

#include "graph.h"
#include "ree/runtime/operation_set.h"

namespace ree::compiler {

struct OpContext {
  const Node& node;
  OperationSet* ops = nullptr;
  int64_t opset = 0;
  std::vector<const GraphTensor*> inputs;  // nullptr for an omitted optional input
  std::vector<GraphTensor> outputs;        // one per node output
  // Where this node's float work runs (the executor moved its float inputs there).
  Device device = Device::cpu();
  // Set by a fused operator that leaves its work to the node's `fallback` nodes (graph_fusion.h).
  bool use_fallback = false;

  // Input i, or nullptr when omitted or beyond the node's inputs.
  const GraphTensor* input(size_t i) const { return i < inputs.size() ? inputs[i] : nullptr; }
  // Input i that must be present; fails naming the node otherwise.
  Status required(size_t i, const GraphTensor** out) const;
  // Input i as an fp32 tensor (present, float32).
  Status floatInput(size_t i, const GraphTensor** out) const;
};

using RunFn = Status (*)(OpContext& context);

// Set by the compiler on a MatMul whose constant right operand it stored transposed ([N, K]).
inline constexpr const char* kWeightTransposedAttribute = "ree.weight_transposed";

// The fused operators' domain and the fused attention (graph_fusion.h, ops_attention.cpp).
inline constexpr const char* kReeDomain = "ree";
inline constexpr const char* kCausalAttentionOp = "ReeCausalAttention";

struct OpDef {
  const char* op_type;
  RunFn run;
  const char* lowering;  // what it becomes, for plan.json and docs ("RepOp linear", ...)
};

// Runs `def` on `context`; a failure's message starts with the node's label (added when the
// operator's own message does not name it, e.g. a size limit).
Status runNode(const OpDef& def, OpContext& context);

// The definition of `op_type` in `domain` ("" is the default ONNX domain; "com.microsoft" serves
// SimplifiedLayerNormalization), or nullptr.
const OpDef* findOp(const std::string& op_type, const std::string& domain);
// Every supported operator, sorted by name (docs, --help).
std::vector<const OpDef*> supportedOps();

// The operator groups (one file each).
void registerElementwiseOps(std::vector<OpDef>* table);
void registerLinearOps(std::vector<OpDef>* table);
void registerRowOps(std::vector<OpDef>* table);
void registerLayoutOps(std::vector<OpDef>* table);
void registerSplitOps(std::vector<OpDef>* table);
void registerAttentionOps(std::vector<OpDef>* table);

}  // namespace ree::compiler
