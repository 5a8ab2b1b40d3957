#include "graph_passes.h"

#include "graph_fusion.h"
#include "ops.h"
#include "ree/core/text.h"
#include "shape_inference.h"
#include "tensor_util.h"

namespace ree::compiler {

namespace {

ValueType typeOf(const GraphTensor& tensor) {
  ValueType info;
  info.type = tensor.type;
  info.type_known = info.rank_known = true;
  for (int64_t d : tensor.shape)
    info.dims.push_back(Dim::of(d));
  return info;
}

bool allInputsConstant(const Graph& graph, const Node& node) {
  for (int id : node.inputs) {
    if (id >= 0 && !graph.isConstant(id)) return false;
  }
  return true;
}

bool staticShape(const ValueType& info) {
  if (!info.rank_known) return false;
  for (const Dim& d : info.dims)
    if (!d.known()) return false;
  return true;
}

Status foldNode(Graph* graph, const Node& node, const OpDef& def, OperationSet* ops) {
  OpContext context{node, ops, graph->opset, {}, {}};
  for (int id : node.inputs)
    context.inputs.push_back(id >= 0 ? &graph->constants.at(id) : nullptr);
  context.outputs.resize(node.outputs.size());
  REE_RETURN_IF_ERROR(runNode(def, context));
  REE_CHECK_ARG(!context.use_fallback, "%s: cannot be folded", node.label().c_str());
  for (size_t i = 0; i < node.outputs.size(); ++i) {
    if (node.outputs[i] < 0) continue;
    graph->values[node.outputs[i]].info = typeOf(context.outputs[i]);
    graph->constants[node.outputs[i]] = std::move(context.outputs[i]);
  }
  return Status::kSuccess;
}

// The inferred type of a declared graph output must agree with its declaration.
Status mergeType(const Node& node, const std::string& name, const ValueType& inferred,
                 ValueType* declared) {
  if (!declared->type_known && !declared->rank_known) {
    *declared = inferred;
    return Status::kSuccess;
  }
  if (declared->type_known && inferred.type_known) {
    REE_CHECK_ARG(declared->type == inferred.type, "%s: output '%s' is declared %s but computes %s",
                  node.label().c_str(), printableText(name, 80).c_str(),
                  elementTypeName(declared->type), elementTypeName(inferred.type));
  }
  if (declared->rank_known && inferred.rank_known) {
    REE_CHECK_ARG(declared->dims.size() == inferred.dims.size(),
                  "%s: output '%s' is declared with rank %zu but computes rank %zu",
                  node.label().c_str(), printableText(name, 80).c_str(), declared->dims.size(),
                  inferred.dims.size());
    for (size_t i = 0; i < inferred.dims.size(); ++i) {
      const Dim &d = declared->dims[i], &e = inferred.dims[i];
      REE_CHECK_ARG(!d.known() || !e.known() || d.value == e.value,
                    "%s: output '%s' dim %zu is declared %lld but computes %lld (shape mismatch)",
                    node.label().c_str(), printableText(name, 80).c_str(), i,
                    static_cast<long long>(d.value), static_cast<long long>(e.value));
    }
  }
  return Status::kSuccess;
}

// MatMul and Gemm with a constant 2-D float weight get it transposed once, now, to the [N, K]
// layout linear() reads (an exact copy), instead of at every run.
Status transposeConstantWeights(Graph* graph) {
  for (Node& node : graph->nodes) {
    const bool matmul = node.op_type == "MatMul";
    const bool gemm = node.op_type == "Gemm" && node.intAttribute("transB", 0) == 0;
    if ((!matmul && !gemm) || node.inputs.size() < 2 || !graph->isConstant(node.inputs[1])) {
      continue;
    }
    const GraphTensor& weight = graph->constants.at(node.inputs[1]);
    if (weight.type != ElementType::kFloat32 || weight.shape.size() != 2) continue;
    GraphTensor transposed;
    REE_RETURN_IF_ERROR(transposeTensor(weight, {1, 0}, &transposed));
    const std::string name = graph->values[node.inputs[1]].name + "#transposed";
    const int id = graph->valueId(name);
    if (!graph->isConstant(id)) {
      graph->values[id].info.type = ElementType::kFloat32;
      graph->values[id].info.type_known = graph->values[id].info.rank_known = true;
      graph->values[id].info.dims = {Dim::of(transposed.shape[0]), Dim::of(transposed.shape[1])};
      graph->constants[id] = std::move(transposed);
    }
    node.inputs[1] = id;
    Attribute flag;
    flag.kind = Attribute::Kind::kInt;
    flag.i = 1;
    node.attributes[matmul ? kWeightTransposedAttribute : "transB"] = flag;
  }
  return Status::kSuccess;
}

// Constants no node reads and no graph output names (folded intermediates, weights replaced by
// their transposes) are dropped: they would only fill memory and constants.bin.
void dropUnusedConstants(Graph* graph) {
  std::vector<bool> used(graph->values.size(), false);
  for (const Node& node : graph->nodes)
    for (int id : node.inputs)
      if (id >= 0) used[id] = true;
  for (int id : graph->outputs)
    used[id] = true;
  for (auto it = graph->constants.begin(); it != graph->constants.end();) {
    it = used[it->first] ? std::next(it) : graph->constants.erase(it);
  }
}

}  // namespace

Status runGraphPasses(Graph* graph, OperationSet* cpu_ops, bool fuse, PassStats* stats) {
  std::vector<Node> kept;
  for (Node& node : graph->nodes) {
    const OpDef* def = findOp(node.op_type, node.domain);
    if (def == nullptr) {
      return REE_FAIL(Status::kUnsupported,
                      "%s: operator '%s'%s%s is not supported (docs/compiler.md lists the "
                      "supported operators)",
                      node.label().c_str(), printableText(node.op_type, 60).c_str(),
                      node.domain.empty() ? "" : " of domain ",
                      printableText(node.domain, 60).c_str());
    }
    if (node.op_type == "Shape" && !node.inputs.empty() && node.inputs[0] >= 0 &&
        node.outputs.size() == 1 && node.outputs[0] >= 0 &&
        staticShape(graph->values[node.inputs[0]].info)) {
      // Only the dims matter: a stand-in of the same shape (no data) is enough.
      GraphTensor stand_in;
      stand_in.type = graph->values[node.inputs[0]].info.type;
      for (const Dim& d : graph->values[node.inputs[0]].info.dims)
        stand_in.shape.push_back(d.value);
      OpContext context{node, cpu_ops, graph->opset, {&stand_in}, {GraphTensor()}};
      REE_RETURN_IF_ERROR(runNode(*def, context));
      graph->values[node.outputs[0]].info = typeOf(context.outputs[0]);
      graph->constants[node.outputs[0]] = std::move(context.outputs[0]);
      ++stats->folded_nodes;
      continue;
    }
    if (allInputsConstant(*graph, node)) {
      REE_RETURN_IF_ERROR(foldNode(graph, node, *def, cpu_ops));
      ++stats->folded_nodes;
      continue;
    }
    std::vector<ValueType> inferred;
    REE_RETURN_IF_ERROR(inferNodeTypes(*graph, node, &inferred));
    for (size_t i = 0; i < node.outputs.size(); ++i) {
      if (node.outputs[i] < 0) continue;
      Value& value = graph->values[node.outputs[i]];
      REE_RETURN_IF_ERROR(mergeType(node, value.name, inferred[i], &value.info));
    }
    kept.push_back(std::move(node));
  }
  graph->nodes = std::move(kept);
  if (fuse) {
    FusionStats fused;
    REE_RETURN_IF_ERROR(fusePatterns(graph, &fused));
    stats->fused_rms_norms = fused.rms_norms;
    stats->fused_attentions = fused.attentions;
  }
  stats->remaining_nodes = static_cast<int>(graph->nodes.size());
  REE_RETURN_IF_ERROR(transposeConstantWeights(graph));
  dropUnusedConstants(graph);
  return Status::kSuccess;
}

}  // namespace ree::compiler
