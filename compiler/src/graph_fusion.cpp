#include "graph_fusion.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "ops.h"

namespace ree::compiler {

namespace {

// Who produces and who reads each value, over the graph's current nodes.
class Uses {
 public:
  explicit Uses(const Graph& graph) : graph_(graph), readers_(graph.values.size(), 0) {
    for (size_t n = 0; n < graph.nodes.size(); ++n) {
      for (int id : graph.nodes[n].outputs)
        if (id >= 0) producer_[id] = static_cast<int>(n);
      for (int id : graph.nodes[n].inputs)
        if (id >= 0) ++readers_[id];
    }
    for (int id : graph.outputs)
      readers_[id] += 1000000;  // a graph output is never private to a pattern
  }
  // The node producing `id` when it has type `op_type` and `id` has exactly `max_readers` readers
  // or fewer (a private intermediate); nullptr otherwise.
  const Node* privateProducer(int id, const char* op_type, int max_readers = 1) const {
    if (id < 0 || readers_[id] > max_readers) return nullptr;
    auto it = producer_.find(id);
    if (it == producer_.end()) return nullptr;
    const Node& node = graph_.nodes[it->second];
    return node.op_type == op_type && node.domain.empty() ? &node : nullptr;
  }
  // Skips Casts to float of float values (torch's `.to(float32)`; exact no-ops), private ones only.
  int skipFloatCasts(int id, std::vector<const Node*>* skipped) const {
    while (const Node* cast = privateProducer(id, "Cast")) {
      const int from = cast->inputs.empty() ? -1 : cast->inputs[0];
      const ValueType& info = from >= 0 ? graph_.values[from].info : ValueType();
      if (cast->intAttribute("to", 0) != 1 || !info.type_known ||
          info.type != ElementType::kFloat32) {
        break;
      }
      skipped->push_back(cast);
      id = from;
    }
    return id;
  }
  int nodeIndex(const Node* node) const { return static_cast<int>(node - graph_.nodes.data()); }

 private:
  const Graph& graph_;
  std::unordered_map<int, int> producer_;
  std::vector<int> readers_;
};

// Input i of a matched node, or -1 when it has fewer inputs (hostile graphs).
int inputAt(const Node* node, size_t i) {
  return node != nullptr && i < node->inputs.size() ? node->inputs[i] : -1;
}

// The single float value of a constant (any shape with one element), or NaN.
float scalarConstant(const Graph& graph, int id) {
  if (id < 0 || !graph.isConstant(id)) return NAN;
  const GraphTensor& t = graph.constants.at(id);
  if (t.type != ElementType::kFloat32 || t.numel() != 1) return NAN;
  return t.as<float>()[0];
}

// The operand of a two-input node that is not `known`, or -1.
int otherInput(const Node& node, int known) {
  if (node.inputs.size() != 2) return -1;
  if (node.inputs[0] == known) return node.inputs[1];
  if (node.inputs[1] == known) return node.inputs[0];
  return -1;
}

// Whether a reduction over the last axis of a value of rank `rank` (unknown: -1), keepdims.
bool reducesLastAxis(const Graph& graph, const Node& reduce, int64_t rank) {
  if (reduce.intAttribute("keepdims", 1) != 1) return false;
  std::vector<int64_t> axes;
  if (const Attribute* a = reduce.attribute("axes")) axes = a->ints;
  if (reduce.inputs.size() > 1 && reduce.inputs[1] >= 0) {
    if (!graph.isConstant(reduce.inputs[1])) return false;
    const GraphTensor& t = graph.constants.at(reduce.inputs[1]);
    if (t.type != ElementType::kInt64) return false;
    axes.assign(t.as<int64_t>(), t.as<int64_t>() + t.numel());
  }
  return axes.size() == 1 && (axes[0] == -1 || (rank > 0 && axes[0] == rank - 1));
}

int64_t rankOf(const Graph& graph, int id) {
  const ValueType& info = graph.values[id].info;
  return info.rank_known ? static_cast<int64_t>(info.dims.size()) : -1;
}

Attribute floatAttribute(float value) {
  Attribute a;
  a.kind = Attribute::Kind::kFloat;
  a.f = value;
  return a;
}

Attribute intAttribute(int64_t value) {
  Attribute a;
  a.kind = Attribute::Kind::kInt;
  a.i = value;
  return a;
}

// Mul(weight, normalized) at `mul`: the RMSNorm chain behind it, or false.
bool matchRmsNorm(const Graph& graph, const Uses& uses, const Node& mul, Node* fused,
                  std::vector<int>* removed) {
  if (mul.op_type != "Mul" || !mul.domain.empty() || mul.inputs.size() != 2) return false;
  for (int w_side = 0; w_side < 2; ++w_side) {
    const int weight = mul.inputs[w_side];
    if (!graph.isConstant(weight) || graph.constants.at(weight).shape.size() != 1) continue;
    std::vector<const Node*> chain;
    const int normalized = uses.skipFloatCasts(mul.inputs[1 - w_side], &chain);
    const Node* scale_mul = uses.privateProducer(normalized, "Mul");
    if (scale_mul == nullptr || scale_mul->inputs.size() != 2) continue;
    for (int x_side = 0; x_side < 2; ++x_side) {
      const int x = scale_mul->inputs[x_side];
      const Node* div = uses.privateProducer(scale_mul->inputs[1 - x_side], "Div");
      if (div == nullptr || div->inputs.size() != 2 ||
          scalarConstant(graph, div->inputs[0]) != 1.0f)
        continue;
      const Node* sqrt = uses.privateProducer(div->inputs[1], "Sqrt");
      const Node* add = uses.privateProducer(inputAt(sqrt, 0), "Add");
      if (add == nullptr || add->inputs.size() != 2) continue;
      int eps_id = graph.isConstant(add->inputs[1]) ? add->inputs[1] : add->inputs[0];
      const float eps = scalarConstant(graph, eps_id);
      const Node* mean = uses.privateProducer(otherInput(*add, eps_id), "ReduceMean");
      const Node* pow = uses.privateProducer(inputAt(mean, 0), "Pow");
      if (!(eps >= 0.0f) || !std::isfinite(eps) || pow == nullptr || pow->inputs.size() != 2 ||
          pow->inputs[0] != x || scalarConstant(graph, pow->inputs[1]) != 2.0f ||
          !reducesLastAxis(graph, *mean, rankOf(graph, x))) {
        continue;
      }
      for (const Node* node : {scale_mul, div, sqrt, add, mean, pow})
        chain.push_back(node);
      for (const Node* node : chain)
        removed->push_back(uses.nodeIndex(node));
      fused->name = mul.name + "#rms_norm";
      fused->op_type = "SimplifiedLayerNormalization";
      fused->domain.clear();
      fused->inputs = {x, weight};
      fused->outputs = mul.outputs;
      fused->attributes = {{"axis", intAttribute(-1)}, {"epsilon", floatAttribute(eps)}};
      return true;
    }
  }
  return false;
}

// MatMul(P, V) at `pv`: P = Softmax(Mul(MatMul(Q, Transpose(K)), scale) + mask), or false.
bool matchAttention(const Graph& graph, const Uses& uses, const Node& pv, Node* fused,
                    std::vector<int>* removed) {
  if (pv.op_type != "MatMul" || !pv.domain.empty() || pv.inputs.size() != 2 || pv.inputs[1] < 0 ||
      graph.isConstant(pv.inputs[1])) {
    return false;
  }
  std::vector<const Node*> chain;
  const Node* softmax = uses.privateProducer(uses.skipFloatCasts(pv.inputs[0], &chain), "Softmax");
  if (softmax == nullptr || graph.opset < 13 || softmax->intAttribute("axis", -1) != -1) {
    return false;
  }
  const Node* add = uses.privateProducer(inputAt(softmax, 0), "Add");
  if (add == nullptr || add->inputs.size() != 2) return false;
  for (int mask_side = 0; mask_side < 2; ++mask_side) {
    const Node* scaled = uses.privateProducer(add->inputs[1 - mask_side], "Mul");
    if (scaled == nullptr || scaled->inputs.size() != 2) continue;
    const int scale_id =
        graph.isConstant(scaled->inputs[1]) ? scaled->inputs[1] : scaled->inputs[0];
    if (std::isnan(scalarConstant(graph, scale_id))) continue;
    const Node* qk = uses.privateProducer(otherInput(*scaled, scale_id), "MatMul");
    if (qk == nullptr || qk->inputs.size() != 2) continue;
    const Node* kt = uses.privateProducer(qk->inputs[1], "Transpose");
    const Attribute* perm = kt ? kt->attribute("perm") : nullptr;
    if (perm == nullptr || perm->ints != std::vector<int64_t>{0, 1, 3, 2} || inputAt(kt, 0) < 0) {
      continue;
    }
    for (const Node* node : {add, scaled, qk, kt, softmax})
      chain.push_back(node);
    fused->name = pv.name + "#attention";
    fused->op_type = kCausalAttentionOp;
    fused->domain = kReeDomain;
    fused->inputs = {qk->inputs[0], kt->inputs[0], pv.inputs[1], add->inputs[mask_side], scale_id};
    fused->outputs = pv.outputs;
    fused->attributes.clear();
    // The original nodes, in graph order, for the run-time fallback.
    std::vector<int> order;
    for (const Node* node : chain)
      order.push_back(uses.nodeIndex(node));
    std::sort(order.begin(), order.end());
    fused->fallback.clear();
    for (int index : order)
      fused->fallback.push_back(graph.nodes[index]);
    fused->fallback.push_back(pv);
    removed->insert(removed->end(), order.begin(), order.end());
    return true;
  }
  return false;
}

}  // namespace

Status fusePatterns(Graph* graph, FusionStats* stats) {
  const Uses uses(*graph);
  std::vector<bool> drop(graph->nodes.size(), false);
  std::vector<std::pair<size_t, Node>> replacements;
  for (size_t n = 0; n < graph->nodes.size(); ++n) {
    Node fused;
    std::vector<int> removed;
    const Node& node = graph->nodes[n];
    bool matched = false;
    if (matchRmsNorm(*graph, uses, node, &fused, &removed)) {
      ++stats->rms_norms;
      matched = true;
    } else if (matchAttention(*graph, uses, node, &fused, &removed)) {
      ++stats->attentions;
      matched = true;
    }
    if (!matched) continue;
    bool overlaps = false;  // a node already taken by another pattern (cannot happen: private)
    for (int index : removed)
      overlaps = overlaps || drop[index];
    if (overlaps) continue;
    for (int index : removed)
      drop[index] = true;
    replacements.emplace_back(n, std::move(fused));
  }
  for (auto& [index, fused] : replacements)
    graph->nodes[index] = std::move(fused);
  std::vector<Node> kept;
  for (size_t n = 0; n < graph->nodes.size(); ++n) {
    if (!drop[n]) kept.push_back(std::move(graph->nodes[n]));
  }
  graph->nodes = std::move(kept);
  return Status::kSuccess;
}

}  // namespace ree::compiler
