// Symbolic shape inference: the rules of the operators whose output shape follows from the input
// shapes alone. Other outputs keep an unknown rank (their shapes are known when the graph runs).
#include "shape_inference.h"

#include <algorithm>
#include <cstdint>
#include <set>

#include "tensor_util.h"

namespace ree::compiler {

namespace {

const std::set<std::string> kSameShape = {"Neg",
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
                                          "Softmax",
                                          "LogSoftmax",
                                          "Identity",
                                          "LayerNormalization",
                                          "SimplifiedLayerNormalization",
                                          "RMSNormalization",
                                          "Not"};
const std::set<std::string> kBroadcast = {"Add",  "Sub",     "Mul",         "Div",
                                          "Pow",  "Max",     "Min",         "Equal",
                                          "Less", "Greater", "LessOrEqual", "GreaterOrEqual",
                                          "And",  "Or",      "Xor",         "Where"};
const std::set<std::string> kBoolOut = {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual",
                                        "And",   "Or",   "Xor",     "Not"};

std::string dimText(const Dim& d) {
  return d.known() ? std::to_string(d.value) : d.symbol.empty() ? "?" : d.symbol;
}

// Two dims that must be equal: the known one wins; two different numbers, or two different
// symbols, conflict only when both are numbers.
Status unify(const Node& node, const Dim& a, const Dim& b, const char* what, Dim* out) {
  if (a.known() && b.known()) {
    REE_CHECK_ARG(a.value == b.value, "%s: %s: %lld vs %lld", node.label().c_str(), what,
                  static_cast<long long>(a.value), static_cast<long long>(b.value));
  }
  *out = a.known() ? a : b.known() ? b : a.symbol.empty() ? b : a;
  return Status::kSuccess;
}

Status broadcastDims(const Node& node, const std::vector<Dim>& a, const std::vector<Dim>& b,
                     std::vector<Dim>* out) {
  const size_t rank = std::max(a.size(), b.size());
  out->assign(rank, Dim{});
  for (size_t i = 0; i < rank; ++i) {
    Dim da = i < rank - a.size() ? Dim::of(1) : a[i - (rank - a.size())];
    Dim db = i < rank - b.size() ? Dim::of(1) : b[i - (rank - b.size())];
    if (da.known() && da.value == 1) {
      (*out)[i] = db;
    } else if (db.known() && db.value == 1) {
      (*out)[i] = da;
    } else if (da.known() && db.known()) {
      REE_CHECK_ARG(da.value == db.value, "%s: shapes do not broadcast at dim %zu (%s vs %s)",
                    node.label().c_str(), i, dimText(da).c_str(), dimText(db).c_str());
      (*out)[i] = da;
    } else {
      (*out)[i] = da.known() ? da : db.known() ? db : (da.symbol == db.symbol ? da : Dim{});
    }
  }
  return Status::kSuccess;
}

Status inferMatMul(const Node& node, const ValueType& a, const ValueType& b, ValueType* out) {
  if (!a.rank_known || !b.rank_known || a.dims.size() < 2 || b.dims.size() < 2) {
    return Status::kSuccess;
  }
  Dim k;
  REE_RETURN_IF_ERROR(unify(node, a.dims.back(), b.dims[b.dims.size() - 2],
                            "inner dims of the product differ", &k));
  std::vector<Dim> batch;
  REE_RETURN_IF_ERROR(broadcastDims(node, std::vector<Dim>(a.dims.begin(), a.dims.end() - 2),
                                    std::vector<Dim>(b.dims.begin(), b.dims.end() - 2), &batch));
  batch.push_back(a.dims[a.dims.size() - 2]);
  batch.push_back(b.dims.back());
  out->rank_known = true;
  out->dims = batch;
  return Status::kSuccess;
}

Status inferGemm(const Node& node, const ValueType& a, const ValueType& b, ValueType* out) {
  if (!a.rank_known || !b.rank_known) return Status::kSuccess;
  REE_CHECK_ARG(a.dims.size() == 2 && b.dims.size() == 2, "%s: operands must be 2-D",
                node.label().c_str());
  const bool ta = node.intAttribute("transA", 0) != 0, tb = node.intAttribute("transB", 0) != 0;
  Dim k;
  REE_RETURN_IF_ERROR(
      unify(node, a.dims[ta ? 0 : 1], b.dims[tb ? 1 : 0], "inner dims of the product differ", &k));
  out->rank_known = true;
  out->dims = {a.dims[ta ? 1 : 0], b.dims[tb ? 0 : 1]};
  return Status::kSuccess;
}

Status inferConcat(const Node& node, const Graph& graph, ValueType* out) {
  const ValueType& first = graph.values[node.inputs[0]].info;
  if (!first.rank_known) return Status::kSuccess;
  const int64_t rank = static_cast<int64_t>(first.dims.size());
  int64_t axis;
  REE_RETURN_IF_ERROR(normalizeAxis(node.intAttribute("axis", 0), rank, node.label(), &axis));
  std::vector<Dim> dims = first.dims;
  int64_t total = 0;
  bool total_known = true;
  for (int id : node.inputs) {
    const ValueType& t = graph.values[id].info;
    if (!t.rank_known) return Status::kSuccess;
    REE_CHECK_ARG(static_cast<int64_t>(t.dims.size()) == rank, "%s: inputs differ in rank",
                  node.label().c_str());
    for (int64_t i = 0; i < rank; ++i) {
      if (i != axis)
        REE_RETURN_IF_ERROR(unify(node, dims[i], t.dims[i], "concat dims differ", &dims[i]));
    }
    // Declared dims may be any int64: a sum that would overflow stays unknown (the run checks).
    const int64_t d = t.dims[axis].value;
    total_known = total_known && t.dims[axis].known() && d <= INT64_MAX - total;
    if (total_known) total += d;
  }
  dims[axis] = total_known ? Dim::of(total) : Dim{};
  out->rank_known = true;
  out->dims = dims;
  return Status::kSuccess;
}

Status inferTranspose(const Node& node, const ValueType& x, ValueType* out) {
  if (!x.rank_known) return Status::kSuccess;
  std::vector<int64_t> perm;
  if (const Attribute* a = node.attribute("perm")) perm = a->ints;
  if (perm.empty()) {
    for (size_t i = x.dims.size(); i-- > 0;)
      perm.push_back(static_cast<int64_t>(i));
  }
  REE_CHECK_ARG(perm.size() == x.dims.size(), "%s: perm has %zu entries for rank %zu",
                node.label().c_str(), perm.size(), x.dims.size());
  out->rank_known = true;
  for (int64_t p : perm) {
    REE_CHECK_ARG(p >= 0 && p < static_cast<int64_t>(x.dims.size()), "%s: perm entry %lld",
                  node.label().c_str(), static_cast<long long>(p));
    out->dims.push_back(x.dims[p]);
  }
  return Status::kSuccess;
}

// The int64 values of input `i` when it is a constant.
bool constantInts(const Graph& graph, const Node& node, size_t i, std::vector<int64_t>* out) {
  if (node.inputs.size() <= i || node.inputs[i] < 0 || !graph.isConstant(node.inputs[i])) {
    return false;
  }
  const GraphTensor& t = graph.constants.at(node.inputs[i]);
  if (t.type != ElementType::kInt64) return false;
  out->assign(t.as<int64_t>(), t.as<int64_t>() + t.numel());
  return true;
}

// Reshape to a constant shape, Unsqueeze by constant axes, Flatten, Gather by constant-shaped
// indices: dims follow from the input's. Anything unusual stays unknown (the run decides).
Status inferFromConstants(const Graph& graph, const Node& node, const ValueType& x,
                          ValueType* out) {
  out->type = x.type;
  out->type_known = x.type_known;
  if (!x.rank_known) return Status::kSuccess;
  const int64_t rank = static_cast<int64_t>(x.dims.size());
  std::vector<int64_t> values;
  if (node.op_type == "Reshape" && constantInts(graph, node, 1, &values)) {
    if (node.intAttribute("allowzero", 0) != 0) return Status::kSuccess;
    for (size_t i = 0; i < values.size(); ++i) {
      if (values[i] == 0 && static_cast<int64_t>(i) < rank) {
        out->dims.push_back(x.dims[i]);
      } else if (values[i] >= 1) {
        out->dims.push_back(Dim::of(values[i]));
      } else {
        out->dims.push_back(Dim{});  // -1 (or invalid: the run reports it)
      }
    }
    out->rank_known = true;
  } else if (node.op_type == "Unsqueeze") {
    // Axes come from a constant input (opset 13+) or the attribute (earlier opsets); with neither,
    // or an empty list, the run decides.
    if (!constantInts(graph, node, 1, &values) && node.attribute("axes") != nullptr) {
      values = node.attribute("axes")->ints;
    }
    if (values.empty()) return Status::kSuccess;
    const int64_t out_rank = rank + static_cast<int64_t>(values.size());
    std::vector<bool> inserted(out_rank, false);
    for (int64_t axis : values) {
      const int64_t a = axis < 0 ? axis + out_rank : axis;
      if (a < 0 || a >= out_rank || inserted[a]) return Status::kSuccess;
      inserted[a] = true;
    }
    size_t next = 0;
    for (int64_t i = 0; i < out_rank; ++i)
      out->dims.push_back(inserted[i] ? Dim::of(1) : x.dims[next++]);
    out->rank_known = true;
  } else if (node.op_type == "Flatten") {
    out->rank_known = true;
    out->dims = {Dim{}, Dim{}};
  } else if (node.op_type == "Gather" && node.inputs.size() >= 2 && node.inputs[1] >= 0) {
    const ValueType& indices = graph.values[node.inputs[1]].info;
    const int64_t axis = node.intAttribute("axis", 0) < 0 ? node.intAttribute("axis", 0) + rank
                                                          : node.intAttribute("axis", 0);
    if (!indices.rank_known || axis < 0 || axis >= rank) return Status::kSuccess;
    out->dims.assign(x.dims.begin(), x.dims.begin() + axis);
    out->dims.insert(out->dims.end(), indices.dims.begin(), indices.dims.end());
    out->dims.insert(out->dims.end(), x.dims.begin() + axis + 1, x.dims.end());
    out->rank_known = true;
  }
  return Status::kSuccess;
}

}  // namespace

Status inferNodeTypes(const Graph& graph, const Node& node, std::vector<ValueType>* outputs) {
  outputs->assign(node.outputs.size(), ValueType{});
  if (node.inputs.empty() || node.inputs[0] < 0 || outputs->empty()) return Status::kSuccess;
  const ValueType& x = graph.values[node.inputs[0]].info;
  ValueType& out = (*outputs)[0];
  const std::string& op = node.op_type;
  const bool binary = kBroadcast.count(op) && node.inputs.size() >= 2 && node.inputs[1] >= 0;
  if (op == "Where" && node.inputs.size() == 3 && node.inputs[1] >= 0 && node.inputs[2] >= 0) {
    const ValueType &a = graph.values[node.inputs[1]].info, &b = graph.values[node.inputs[2]].info;
    out.type = a.type;
    out.type_known = a.type_known;
    if (x.rank_known && a.rank_known && b.rank_known) {
      std::vector<Dim> ab;
      REE_RETURN_IF_ERROR(broadcastDims(node, a.dims, b.dims, &ab));
      REE_RETURN_IF_ERROR(broadcastDims(node, x.dims, ab, &out.dims));
      out.rank_known = true;
    }
    return Status::kSuccess;
  }
  out.type = kBoolOut.count(op) ? ElementType::kBool : x.type;
  out.type_known = x.type_known || kBoolOut.count(op);
  if (kSameShape.count(op)) {
    out.rank_known = x.rank_known;
    out.dims = x.dims;
  } else if (binary) {
    const ValueType& y = graph.values[node.inputs[1]].info;
    if (x.rank_known && y.rank_known) {
      REE_RETURN_IF_ERROR(broadcastDims(node, x.dims, y.dims, &out.dims));
      out.rank_known = true;
    }
  } else if (op == "MatMul" && node.inputs.size() >= 2 && node.inputs[1] >= 0) {
    return inferMatMul(node, x, graph.values[node.inputs[1]].info, &out);
  } else if (op == "Gemm" && node.inputs.size() >= 2 && node.inputs[1] >= 0) {
    return inferGemm(node, x, graph.values[node.inputs[1]].info, &out);
  } else if (op == "Concat") {
    for (int id : node.inputs)
      if (id < 0) return Status::kSuccess;
    return inferConcat(node, graph, &out);
  } else if (op == "Transpose") {
    return inferTranspose(node, x, &out);
  } else if (op == "Shape") {
    out.type = ElementType::kInt64;
    out.rank_known = true;
    out.dims = {x.rank_known && !node.attribute("start") && !node.attribute("end")
                    ? Dim::of(static_cast<int64_t>(x.dims.size()))
                    : Dim{}};
  } else if (op == "Cast") {
    const int64_t to = node.intAttribute("to", 0);
    out.type_known = to == 1 || to == 7 || to == 9;
    out.type = to == 7 ? ElementType::kInt64 : to == 9 ? ElementType::kBool : ElementType::kFloat32;
    out.rank_known = x.rank_known;
    out.dims = x.dims;
  } else if (op == "Reshape" || op == "Unsqueeze" || op == "Flatten" || op == "Gather") {
    return inferFromConstants(graph, node, x, &out);
  } else {
    out.type_known = false;  // the shape depends on values or rules not modelled here
  }
  return Status::kSuccess;
}

}  // namespace ree::compiler
