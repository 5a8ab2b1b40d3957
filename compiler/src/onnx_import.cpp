// ModelProto -> Graph. The protobuf schema (onnx.proto) parses; this file checks what the schema
// cannot: the opset, names, the topological order, types and shapes of the declared values.
#include "onnx_import.h"

#include <algorithm>
#include <climits>
#include <unordered_set>

#include "onnx_tensor.h"
#include "ree/core/text.h"

namespace ree::compiler {

namespace {

constexpr int64_t kMinOpset = 7;
constexpr int64_t kMaxOpset = 23;
constexpr int kMaxNodes = 1 << 20;
constexpr int kMaxRank = 16;

std::string quoted(const std::string& name) {
  return "'" + printableText(name, 80) + "'";
}

Status readOpset(const onnx::ModelProto& model, int64_t* opset) {
  *opset = 0;
  for (const auto& entry : model.opset_import()) {
    if (entry.domain().empty() || entry.domain() == "ai.onnx") *opset = entry.version();
  }
  REE_CHECK_ARG(*opset >= kMinOpset && *opset <= kMaxOpset,
                "model: opset %lld of the default domain is outside the supported %lld..%lld",
                static_cast<long long>(*opset), static_cast<long long>(kMinOpset),
                static_cast<long long>(kMaxOpset));
  return Status::kSuccess;
}

Status valueTypeFromProto(const onnx::ValueInfoProto& info, ValueType* out) {
  if (!info.has_type() || !info.type().has_tensor_type()) {
    return REE_FAIL(Status::kUnsupported, "value %s: only tensor values are supported",
                    quoted(info.name()).c_str());
  }
  const auto& tensor_type = info.type().tensor_type();
  REE_RETURN_IF_ERROR(
      elementTypeFromOnnx(tensor_type.elem_type(), "value " + quoted(info.name()), &out->type));
  out->type_known = true;
  if (!tensor_type.has_shape()) return Status::kSuccess;
  REE_CHECK_ARG(tensor_type.shape().dim_size() <= kMaxRank,
                "value %s: rank %d exceeds the limit of %d", quoted(info.name()).c_str(),
                tensor_type.shape().dim_size(), kMaxRank);
  out->rank_known = true;
  for (const auto& dim : tensor_type.shape().dim()) {
    Dim d;
    if (dim.has_dim_value()) {
      REE_CHECK_ARG(dim.dim_value() >= 0, "value %s: dim %lld is negative",
                    quoted(info.name()).c_str(), static_cast<long long>(dim.dim_value()));
      d.value = dim.dim_value();
    } else if (dim.has_dim_param()) {
      d.symbol = dim.dim_param();
    }
    out->dims.push_back(d);
  }
  return Status::kSuccess;
}

Status importAttribute(const onnx::AttributeProto& proto, const std::string& what,
                       TensorImportContext* context, Attribute* out) {
  using A = onnx::AttributeProto;
  switch (proto.type()) {
    case A::INT:
      out->kind = Attribute::Kind::kInt;
      out->i = proto.i();
      break;
    case A::FLOAT:
      out->kind = Attribute::Kind::kFloat;
      out->f = proto.f();
      break;
    case A::STRING:
      out->kind = Attribute::Kind::kString;
      out->s = proto.s();
      break;
    case A::INTS:
      out->kind = Attribute::Kind::kInts;
      out->ints.assign(proto.ints().begin(), proto.ints().end());
      break;
    case A::FLOATS:
      out->kind = Attribute::Kind::kFloats;
      out->floats.assign(proto.floats().begin(), proto.floats().end());
      break;
    case A::TENSOR:
      out->kind = Attribute::Kind::kTensor;
      return tensorFromProto(proto.t(), what, context, &out->tensor);
    default:
      out->kind = Attribute::Kind::kOther;  // graphs, sparse tensors: refused by the op that reads
      break;
  }
  return Status::kSuccess;
}

Status importNode(const onnx::NodeProto& proto, int index, TensorImportContext* context,
                  Graph* graph, std::unordered_set<int>* defined) {
  Node node;
  node.name = proto.name().empty() ? "#" + std::to_string(index) : proto.name();
  node.op_type = proto.op_type();
  node.domain = proto.domain() == "ai.onnx" ? "" : proto.domain();
  for (const std::string& input : proto.input()) {
    if (input.empty()) {
      node.inputs.push_back(-1);
      continue;
    }
    int id = graph->valueId(input);
    if (defined->count(id) == 0) {
      return REE_FAIL(Status::kInvalidArgument,
                      "%s: input %s is not a graph input, an initializer or the output of an "
                      "earlier node (missing initializer, or the nodes form a cycle)",
                      node.label().c_str(), quoted(input).c_str());
    }
    node.inputs.push_back(id);
  }
  for (const std::string& output : proto.output()) {
    if (output.empty()) {
      node.outputs.push_back(-1);
      continue;
    }
    int id = graph->valueId(output);
    REE_CHECK_ARG(defined->insert(id).second, "%s: output %s is already defined",
                  node.label().c_str(), quoted(output).c_str());
    node.outputs.push_back(id);
  }
  // Every operator writes its first output; a node with none (or only omitted ones) computes
  // nothing a graph can read.
  REE_CHECK_ARG(
      std::any_of(node.outputs.begin(), node.outputs.end(), [](int id) { return id >= 0; }),
      "%s: has no output", node.label().c_str());
  for (const auto& attribute : proto.attribute()) {
    std::string what = node.label() + " attribute " + quoted(attribute.name());
    REE_RETURN_IF_ERROR(
        importAttribute(attribute, what, context, &node.attributes[attribute.name()]));
  }
  graph->nodes.push_back(std::move(node));
  return Status::kSuccess;
}

Status importInitializers(const onnx::GraphProto& proto, TensorImportContext* context, Graph* graph,
                          std::unordered_set<int>* defined) {
  for (const auto& initializer : proto.initializer()) {
    REE_CHECK_ARG(!initializer.name().empty(), "graph: an initializer has no name");
    int id = graph->valueId(initializer.name());
    REE_CHECK_ARG(defined->insert(id).second, "initializer %s is defined twice",
                  quoted(initializer.name()).c_str());
    GraphTensor tensor;
    REE_RETURN_IF_ERROR(tensorFromProto(initializer, "initializer " + quoted(initializer.name()),
                                        context, &tensor));
    ValueType& info = graph->values[id].info;
    info.type = tensor.type;
    info.type_known = info.rank_known = true;
    info.dims.clear();
    for (int64_t d : tensor.shape)
      info.dims.push_back(Dim::of(d));
    graph->constants[id] = std::move(tensor);
  }
  REE_CHECK_ARG(proto.sparse_initializer_size() == 0,
                "graph: sparse initializers are not "
                "supported");
  return Status::kSuccess;
}

Status importInputs(const onnx::GraphProto& proto, Graph* graph, std::unordered_set<int>* defined) {
  for (const auto& input : proto.input()) {
    REE_CHECK_ARG(!input.name().empty(), "graph: an input has no name");
    int id = graph->valueId(input.name());
    if (graph->isConstant(id)) continue;  // IR < 4 lists initializers as inputs too
    REE_CHECK_ARG(defined->insert(id).second, "graph input %s is defined twice",
                  quoted(input.name()).c_str());
    REE_RETURN_IF_ERROR(valueTypeFromProto(input, &graph->values[id].info));
    graph->inputs.push_back(id);
  }
  return Status::kSuccess;
}

Status importGraph(const onnx::GraphProto& proto, TensorImportContext* context, Graph* graph) {
  REE_CHECK_ARG(proto.node_size() <= kMaxNodes, "graph: %d nodes exceed the limit of %d",
                proto.node_size(), kMaxNodes);
  std::unordered_set<int> defined;
  REE_RETURN_IF_ERROR(importInitializers(proto, context, graph, &defined));
  REE_RETURN_IF_ERROR(importInputs(proto, graph, &defined));
  for (int i = 0; i < proto.node_size(); ++i) {
    REE_RETURN_IF_ERROR(importNode(proto.node(i), i, context, graph, &defined));
  }
  for (const auto& output : proto.output()) {
    auto it = graph->value_ids.find(output.name());
    REE_CHECK_ARG(it != graph->value_ids.end() && defined.count(it->second) != 0,
                  "graph output %s is produced by no node, input or initializer",
                  quoted(output.name()).c_str());
    ValueType declared;
    REE_RETURN_IF_ERROR(valueTypeFromProto(output, &declared));
    graph->values[it->second].info = declared;
    graph->outputs.push_back(it->second);
  }
  REE_CHECK_ARG(!graph->outputs.empty(), "graph: no outputs");
  return Status::kSuccess;
}

}  // namespace

Status importOnnx(const std::string& bytes, const ImportLimits& limits, ImportResult* out) {
  REE_CHECK_ARG(bytes.size() < static_cast<size_t>(INT_MAX),
                "model: %zu bytes exceed protobuf's limit of 2 GiB (use external data)",
                bytes.size());
  onnx::ModelProto model;
  if (!model.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return REE_FAIL(Status::kInvalidArgument,
                    "model: not a valid ONNX ModelProto (the protobuf does not parse: truncated "
                    "or not an ONNX file)");
  }
  REE_CHECK_ARG(model.has_graph(), "model: no graph");
  REE_CHECK_ARG(model.functions_size() == 0, "model: model-local functions are not supported");
  ImportResult result;
  REE_RETURN_IF_ERROR(readOpset(model, &result.graph.opset));
  TensorImportContext context;
  context.base_dir = limits.base_dir;
  context.max_external_bytes = limits.max_external_bytes;
  context.external_files = &result.external_files;
  REE_RETURN_IF_ERROR(importGraph(model.graph(), &context, &result.graph));
  *out = std::move(result);
  return Status::kSuccess;
}

}  // namespace ree::compiler
