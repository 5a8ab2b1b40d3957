// The ONNX compiler on a GPU (label gpu; skips without one): a graph compiled for cuda:0 gives the
// CPU's bits for every output (matrix products, convolution, norms, softmax, reductions,
// element-wise and layout operators all run as RepOps whose CUDA and CPU versions agree bitwise),
// and it does so for any batch composition.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "onnx/onnx.pb.h"
#include "ree/compiler/compile.h"
#include "test_util.h"

namespace ree {
namespace {

void addInitializer(onnx::GraphProto* graph, const std::string& name, std::vector<int64_t> dims,
                    uint64_t seed) {
  onnx::TensorProto* t = graph->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  int64_t n = 1;
  for (int64_t d : dims) {
    t->add_dims(d);
    n *= d;
  }
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (int64_t i = 0; i < n; ++i)
    t->add_float_data(dist(rng));
}

void addInt64(onnx::GraphProto* graph, const std::string& name, std::vector<int64_t> values) {
  onnx::TensorProto* t = graph->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::INT64);
  t->add_dims(static_cast<int64_t>(values.size()));
  for (int64_t v : values)
    t->add_int64_data(v);
}

void addValue(google::protobuf::RepeatedPtrField<onnx::ValueInfoProto>* list,
              const std::string& name, const std::vector<int64_t>& dims, const char* batch) {
  onnx::ValueInfoProto* v = list->Add();
  v->set_name(name);
  auto* tensor = v->mutable_type()->mutable_tensor_type();
  tensor->set_elem_type(onnx::TensorProto::FLOAT);
  for (size_t i = 0; i < dims.size(); ++i) {
    auto* dim = tensor->mutable_shape()->add_dim();
    if (i == 0) {
      dim->set_dim_param(batch);
    } else {
      dim->set_dim_value(dims[i]);
    }
  }
}

onnx::NodeProto* addNode(onnx::GraphProto* graph, const std::string& op,
                         std::vector<std::string> inputs, std::vector<std::string> outputs) {
  onnx::NodeProto* node = graph->add_node();
  node->set_op_type(op);
  node->set_name(op + "_" + std::to_string(graph->node_size()));
  for (auto& i : inputs)
    node->add_input(i);
  for (auto& o : outputs)
    node->add_output(o);
  return node;
}

void intsAttribute(onnx::NodeProto* node, const char* name, std::vector<int64_t> values) {
  onnx::AttributeProto* a = node->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t v : values)
    a->add_ints(v);
}

// image [batch, 3, 10, 10] -> Conv(pad 1) -> Relu -> MaxPool 2x2 -> Transpose/Reshape to tokens
// [batch, 25, 8] -> self-attention scores (MatMul with its transpose) -> Softmax -> MatMul ->
// LayerNorm -> ReduceMean, plus Sqrt(Abs) / Div / Where(Greater) element-wise.
std::string convAttentionModel() {
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.add_opset_import()->set_version(17);
  onnx::GraphProto* g = model.mutable_graph();
  addValue(g->mutable_input(), "image", {0, 3, 10, 10}, "batch");
  addInitializer(g, "w", {8, 3, 3, 3}, 1);
  addInitializer(g, "b", {8}, 2);
  addInitializer(g, "gamma", {8}, 3);
  addInitializer(g, "beta", {8}, 4);
  addInt64(g, "tokens", {0, 8, 25});
  intsAttribute(addNode(g, "Conv", {"image", "w", "b"}, {"c"}), "pads", {1, 1, 1, 1});
  addNode(g, "Relu", {"c"}, {"r"});
  onnx::NodeProto* pool = addNode(g, "MaxPool", {"r"}, {"p"});
  intsAttribute(pool, "kernel_shape", {2, 2});
  intsAttribute(pool, "strides", {2, 2});
  addNode(g, "Reshape", {"p", "tokens"}, {"t0"});
  intsAttribute(addNode(g, "Transpose", {"t0"}, {"t"}), "perm", {0, 2, 1});
  intsAttribute(addNode(g, "Transpose", {"t"}, {"tt"}), "perm", {0, 2, 1});
  addNode(g, "MatMul", {"t", "tt"}, {"scores"});
  addNode(g, "Softmax", {"scores"}, {"attn"});
  addNode(g, "MatMul", {"attn", "t"}, {"mixed"});
  addNode(g, "LayerNormalization", {"mixed", "gamma", "beta"}, {"normed"});
  addNode(g, "Abs", {"normed"}, {"a"});
  addNode(g, "Sqrt", {"a"}, {"s"});
  addNode(g, "Div", {"normed", "s"}, {"q"});
  addNode(g, "Greater", {"normed", "beta"}, {"mask"});
  addNode(g, "Where", {"mask", "q", "s"}, {"y"});
  intsAttribute(addNode(g, "ReduceMean", {"y"}, {"mean"}), "axes", {1, 2});
  addValue(g->mutable_output(), "y", {0, 25, 8}, "batch");
  addValue(g->mutable_output(), "mean", {0, 1, 1}, "batch");
  return model.SerializeAsString();
}

GraphTensor randomImages(int64_t batch, uint64_t seed) {
  GraphTensor t;
  EXPECT_EQ(GraphTensor::empty(ElementType::kFloat32, {batch, 3, 10, 10}, &t), Status::kSuccess);
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.as<float>()[i] = dist(rng);
  return t;
}

std::vector<std::string> runOn(Device device, const GraphTensor& input) {
  CompileOptions options;
  options.device = device;
  std::unique_ptr<CompiledModel> model;
  EXPECT_EQ(compileBytes(convAttentionModel(), "", options, &model), Status::kSuccess)
      << lastErrorMessage();
  if (!model) return {};
  std::vector<GraphTensor> outputs;
  EXPECT_EQ(model->run({input}, &outputs), Status::kSuccess) << lastErrorMessage();
  std::vector<std::string> bytes;
  for (const GraphTensor& output : outputs) {
    GraphTensor host;
    EXPECT_EQ(copyToCpu(output, &host), Status::kSuccess) << lastErrorMessage();
    bytes.emplace_back(static_cast<const char*>(host.data()), host.nbytes());
  }
  return bytes;
}

TEST(CompilerGpu, SameBitsAsTheCpu) {
  REE_SKIP_WITHOUT_GPU();
  GraphTensor images = randomImages(5, 9);
  std::vector<std::string> cpu = runOn(Device::cpu(), images);
  std::vector<std::string> gpu = runOn(Device::cuda(0), images);
  ASSERT_EQ(cpu.size(), 2u);
  ASSERT_EQ(gpu.size(), 2u);
  EXPECT_EQ(cpu[0], gpu[0]) << "output y";
  EXPECT_EQ(cpu[1], gpu[1]) << "output mean";
}

TEST(CompilerGpu, RowsAloneGiveTheBatchBits) {
  REE_SKIP_WITHOUT_GPU();
  GraphTensor images = randomImages(4, 10);
  std::vector<std::string> whole = runOn(Device::cuda(0), images);
  ASSERT_EQ(whole.size(), 2u);
  const size_t row_bytes = whole[0].size() / 4;
  for (int64_t row = 0; row < 4; ++row) {
    GraphTensor one;
    ASSERT_EQ(GraphTensor::fromHost(ElementType::kFloat32, {1, 3, 10, 10},
                                    images.as<float>() + row * 300, &one),
              Status::kSuccess);
    std::vector<std::string> alone = runOn(Device::cuda(0), one);
    ASSERT_EQ(alone.size(), 2u);
    EXPECT_EQ(alone[0], whole[0].substr(row * row_bytes, row_bytes)) << "row " << row;
  }
}

}  // namespace
}  // namespace ree
