// The ONNX compiler's C++ API (ree/compiler/compile.h) on models built here with the ONNX schema's
// protobuf classes: bitwise identity across CPU thread counts and batch compositions, symbolic
// dims, options; the element-wise RepOps the compiler lowers to; the .npy reader.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>

#include "onnx/onnx.pb.h"
#include "ree/compiler/compile.h"
#include "ree/compiler/npy.h"
#include "ree/core/device.h"
#include "ree/core/parallel.h"
#include "ree/kernels/elementwise.h"

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

void addValue(google::protobuf::RepeatedPtrField<onnx::ValueInfoProto>* list,
              const std::string& name, const std::vector<std::string>& dims) {
  onnx::ValueInfoProto* v = list->Add();
  v->set_name(name);
  auto* tensor = v->mutable_type()->mutable_tensor_type();
  tensor->set_elem_type(onnx::TensorProto::FLOAT);
  for (const std::string& d : dims) {
    auto* dim = tensor->mutable_shape()->add_dim();
    if (!d.empty() && std::isdigit(static_cast<unsigned char>(d[0]))) {
      dim->set_dim_value(std::stoll(d));
    } else {
      dim->set_dim_param(d);
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

// x [batch, 300] -> MatMul (K = 300 spans several 128-wide chunks) + bias -> Erf -> LayerNorm
// -> MatMul -> Softmax, and ReduceMean of the hidden layer as a second output.
std::string mlpModel() {
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.add_opset_import()->set_version(17);
  onnx::GraphProto* g = model.mutable_graph();
  addValue(g->mutable_input(), "x", {"batch", "300"});
  addInitializer(g, "w1", {300, 64}, 1);
  addInitializer(g, "b1", {64}, 2);
  addInitializer(g, "gamma", {64}, 3);
  addInitializer(g, "beta", {64}, 4);
  addInitializer(g, "w2", {64, 10}, 5);
  addNode(g, "MatMul", {"x", "w1"}, {"h0"});
  addNode(g, "Add", {"h0", "b1"}, {"h1"});
  addNode(g, "Erf", {"h1"}, {"h2"});
  addNode(g, "LayerNormalization", {"h2", "gamma", "beta"}, {"h3"});
  addNode(g, "MatMul", {"h3", "w2"}, {"logits"});
  addNode(g, "Softmax", {"logits"}, {"probs"});
  onnx::NodeProto* mean = addNode(g, "ReduceMean", {"h3"}, {"mean"});
  onnx::AttributeProto* axes = mean->add_attribute();
  axes->set_name("axes");
  axes->set_type(onnx::AttributeProto::INTS);
  axes->add_ints(-1);
  addValue(g->mutable_output(), "probs", {"batch", "10"});
  addValue(g->mutable_output(), "mean", {"batch", "1"});
  return model.SerializeAsString();
}

GraphTensor randomInput(int64_t rows, int64_t cols, uint64_t seed) {
  GraphTensor t;
  EXPECT_EQ(GraphTensor::empty(ElementType::kFloat32, {rows, cols}, &t), Status::kSuccess);
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.0f, 2.0f);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.as<float>()[i] = dist(rng);
  return t;
}

std::string bytesOf(const GraphTensor& t) {
  return std::string(static_cast<const char*>(t.data()), t.nbytes());
}

std::unique_ptr<CompiledModel> compileOrFail(const std::string& bytes,
                                             CompileOptions options = {}) {
  std::unique_ptr<CompiledModel> model;
  EXPECT_EQ(compileBytes(bytes, "", options, &model), Status::kSuccess) << lastErrorMessage();
  return model;
}

TEST(Compiler, SameBitsForEveryThreadCount) {
  auto model = compileOrFail(mlpModel());
  ASSERT_TRUE(model);
  GraphTensor x = randomInput(37, 300, 7);
  std::vector<std::string> reference;
  for (int threads : {1, 2, 3, 8}) {
    setCpuThreads(threads);
    std::vector<GraphTensor> outputs;
    ASSERT_EQ(model->run({x}, &outputs), Status::kSuccess) << lastErrorMessage();
    ASSERT_EQ(outputs.size(), 2u);
    EXPECT_EQ(outputs[0].shape, (std::vector<int64_t>{37, 10}));
    EXPECT_EQ(outputs[1].shape, (std::vector<int64_t>{37, 1}));
    if (reference.empty()) {
      reference = {bytesOf(outputs[0]), bytesOf(outputs[1])};
    } else {
      EXPECT_EQ(bytesOf(outputs[0]), reference[0]) << threads << " threads";
      EXPECT_EQ(bytesOf(outputs[1]), reference[1]) << threads << " threads";
    }
  }
  setCpuThreads(0);
}

TEST(Compiler, RowBitsIndependentOfBatchComposition) {
  auto model = compileOrFail(mlpModel());
  ASSERT_TRUE(model);
  GraphTensor batch = randomInput(9, 300, 11);
  std::vector<GraphTensor> whole;
  ASSERT_EQ(model->run({batch}, &whole), Status::kSuccess) << lastErrorMessage();
  for (int64_t begin : {0, 4, 8}) {
    const int64_t count = begin == 8 ? 1 : 3;
    GraphTensor part;
    ASSERT_EQ(GraphTensor::fromHost(ElementType::kFloat32, {count, 300},
                                    batch.as<float>() + begin * 300, &part),
              Status::kSuccess);
    std::vector<GraphTensor> outputs;
    ASSERT_EQ(model->run({part}, &outputs), Status::kSuccess) << lastErrorMessage();
    EXPECT_EQ(std::memcmp(outputs[0].data(), whole[0].as<float>() + begin * 10, count * 10 * 4), 0)
        << "rows " << begin << ".." << begin + count;
  }
}

TEST(Compiler, InputsAreChecked) {
  auto model = compileOrFail(mlpModel());
  ASSERT_TRUE(model);
  std::vector<GraphTensor> outputs;
  EXPECT_EQ(model->run({randomInput(2, 299, 1)}, &outputs), Status::kInvalidArgument);
  EXPECT_NE(std::string(lastErrorMessage()).find("input 'x': dim 1 is 299, expected 300"),
            std::string::npos)
      << lastErrorMessage();
  EXPECT_EQ(model->run({}, &outputs), Status::kInvalidArgument);
  GraphTensor ints;
  ASSERT_EQ(GraphTensor::empty(ElementType::kInt64, {2, 300}, &ints), Status::kSuccess);
  EXPECT_EQ(model->run({ints}, &outputs), Status::kInvalidArgument);
}

TEST(Compiler, SymbolicDimsMustAgree) {
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.add_opset_import()->set_version(17);
  onnx::GraphProto* g = model.mutable_graph();
  addValue(g->mutable_input(), "a", {"batch", "4"});
  addValue(g->mutable_input(), "b", {"batch", "4"});
  addNode(g, "Sub", {"a", "b"}, {"y"});
  addValue(g->mutable_output(), "y", {"batch", "4"});
  auto compiled = compileOrFail(model.SerializeAsString());
  ASSERT_TRUE(compiled);
  std::vector<GraphTensor> outputs;
  EXPECT_EQ(compiled->run({randomInput(3, 4, 1), randomInput(2, 4, 2)}, &outputs),
            Status::kInvalidArgument);
  EXPECT_NE(std::string(lastErrorMessage()).find("('batch') is 2 but another input has 3"),
            std::string::npos)
      << lastErrorMessage();
  ASSERT_EQ(compiled->run({randomInput(3, 4, 1), randomInput(3, 4, 2)}, &outputs),
            Status::kSuccess);
}

TEST(Compiler, ExternalDataNeedsADirectory) {
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.add_opset_import()->set_version(17);
  onnx::GraphProto* g = model.mutable_graph();
  onnx::TensorProto* w = g->add_initializer();
  w->set_name("w");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(2);
  w->set_data_location(onnx::TensorProto::EXTERNAL);
  auto* entry = w->add_external_data();
  entry->set_key("location");
  entry->set_value("w.bin");
  addNode(g, "Identity", {"w"}, {"y"});
  addValue(g->mutable_output(), "y", {"2"});
  std::unique_ptr<CompiledModel> compiled;
  EXPECT_EQ(compileBytes(model.SerializeAsString(), "", CompileOptions{}, &compiled),
            Status::kInvalidArgument);
  EXPECT_NE(std::string(lastErrorMessage()).find("initializer 'w': external data 'w.bin'"),
            std::string::npos)
      << lastErrorMessage();
}

TEST(Compiler, TemporaryArtifactsLeaveWithTheModel) {
  if (getenv("REE_DEBUG") != nullptr) GTEST_SKIP() << "REE_DEBUG keeps the artifacts";
  std::string dir;
  {
    auto model = compileOrFail(mlpModel());
    ASSERT_TRUE(model);
    dir = model->artifactsDir();
    EXPECT_TRUE(std::filesystem::exists(dir + "/plan.json"));
    EXPECT_TRUE(std::filesystem::exists(dir + "/constants.bin"));
  }
  EXPECT_FALSE(std::filesystem::exists(dir));
}

// requires_reproducibility = false: matrix products and norms on ATen's `default` set (skipped in a
// build without LibTorch); the results stay close to the reproducible ones.
TEST(Compiler, DefaultOperationSetRunsWhereLibTorchIs) {
  CompileOptions options;
  options.requires_reproducibility = false;
  std::unique_ptr<CompiledModel> fast;
  Status status = compileBytes(mlpModel(), "", options, &fast);
  if (status == Status::kUnsupported) GTEST_SKIP() << lastErrorMessage();
  ASSERT_EQ(status, Status::kSuccess) << lastErrorMessage();
  EXPECT_EQ(fast->operationSet(), OperationSetKind::kDefault);
  auto exact = compileOrFail(mlpModel());
  ASSERT_TRUE(exact);
  GraphTensor x = randomInput(5, 300, 3);
  std::vector<GraphTensor> a, b;
  ASSERT_EQ(fast->run({x}, &a), Status::kSuccess) << lastErrorMessage();
  ASSERT_EQ(exact->run({x}, &b), Status::kSuccess) << lastErrorMessage();
  for (int64_t i = 0; i < a[0].numel(); ++i)
    EXPECT_NEAR(a[0].as<float>()[i], b[0].as<float>()[i], 1e-5) << i;
}

TEST(Compiler, CudaDeviceWithoutAGpuIsRefusedClearly) {
  if (cudaDeviceCount() > 0) GTEST_SKIP() << "a GPU is visible: compiler_gpu_test covers it";
  CompileOptions options;
  options.device = Device::cuda(0);
  std::unique_ptr<CompiledModel> model;
  EXPECT_NE(compileBytes(mlpModel(), "", options, &model), Status::kSuccess);
  EXPECT_NE(std::string(lastErrorMessage()).find("cuda"), std::string::npos) << lastErrorMessage();
}

TEST(ElementwiseRepOps, ValuesAndCanonicalNaN) {
  const float nan = std::nanf(""), inf = INFINITY;
  std::vector<float> a = {1.0f, -0.0f, 3.0f, nan, -inf, 2.0f, 0.0f};
  std::vector<float> b = {3.0f, 0.0f, -0.0f, 1.0f, inf, 0.5f, 0.0f};
  std::vector<float> out(a.size());
  auto bits = [](float v) {
    uint32_t u;
    std::memcpy(&u, &v, 4);
    return u;
  };
  ASSERT_EQ(repops::cpu::binary(BinaryOp::kDiv, a.data(), b.data(), out.data(), 7),
            Status::kSuccess);
  EXPECT_EQ(out[0], 1.0f / 3.0f);
  EXPECT_EQ(bits(out[6]), 0x7fc00000u);  // 0 / 0: canonical NaN
  EXPECT_EQ(bits(out[3]), 0x7fc00000u);
  ASSERT_EQ(repops::cpu::binary(BinaryOp::kSub, a.data(), b.data(), out.data(), 7),
            Status::kSuccess);
  EXPECT_EQ(bits(out[4]), bits(-inf));
  ASSERT_EQ(repops::cpu::binary(BinaryOp::kMax, a.data(), b.data(), out.data(), 7),
            Status::kSuccess);
  EXPECT_EQ(bits(out[1]), 0u);  // max(-0, +0) = +0
  EXPECT_EQ(bits(out[2]), bits(3.0f));
  EXPECT_EQ(bits(out[3]), 0x7fc00000u);
  ASSERT_EQ(repops::cpu::binary(BinaryOp::kMin, a.data(), b.data(), out.data(), 7),
            Status::kSuccess);
  EXPECT_EQ(bits(out[1]), 0x80000000u);  // min(-0, +0) = -0
  ASSERT_EQ(repops::cpu::binary(BinaryOp::kPow, a.data(), b.data(), out.data(), 7),
            Status::kSuccess);
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[5], std::sqrt(2.0f));  // correctly rounded: pow(2, 0.5) == sqrt(2)
  ASSERT_EQ(repops::cpu::simpleUnary(SimpleUnaryOp::kRelu, a.data(), out.data(), 7),
            Status::kSuccess);
  EXPECT_EQ(bits(out[1]), 0u);
  EXPECT_EQ(bits(out[3]), 0x7fc00000u);
  EXPECT_EQ(out[4], 0.0f);
  ASSERT_EQ(repops::cpu::simpleUnary(SimpleUnaryOp::kSqrt, b.data(), out.data(), 7),
            Status::kSuccess);
  EXPECT_EQ(out[0], std::sqrt(3.0f));
  EXPECT_EQ(bits(out[2]), 0x80000000u);  // sqrt(-0) = -0
  std::vector<uint8_t> condition = {1, 0, 1, 0, 1, 0, 1};
  ASSERT_EQ(repops::cpu::where(condition.data(), a.data(), b.data(), out.data(), 7),
            Status::kSuccess);
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], 0.0f);
  EXPECT_EQ(repops::cpu::binary(static_cast<BinaryOp>(99), a.data(), b.data(), out.data(), 7),
            Status::kInvalidArgument);
}

TEST(Npy, RoundTripAndRefusals) {
  GraphTensor t = randomInput(3, 5, 3), back;
  ASSERT_EQ(parseNpy(formatNpy(t), "t", &back), Status::kSuccess) << lastErrorMessage();
  EXPECT_EQ(back.shape, t.shape);
  EXPECT_EQ(bytesOf(back), bytesOf(t));
  GraphTensor scalar, scalar_back;
  int64_t v = -42;
  ASSERT_EQ(GraphTensor::fromHost(ElementType::kInt64, {}, &v, &scalar), Status::kSuccess);
  ASSERT_EQ(parseNpy(formatNpy(scalar), "s", &scalar_back), Status::kSuccess);
  EXPECT_EQ(*scalar_back.as<int64_t>(), -42);
  const std::string good = formatNpy(t);
  for (const std::string& bad :
       {std::string(), std::string("\x93NUMPY"), good.substr(0, good.size() - 1),
        std::string(good).replace(good.find("<f4"), 3, "<c8"),
        std::string(good).replace(good.find("False"), 5, "True "),
        std::string(good).replace(good.find("(3, 5)"), 6, "(3,-5)")}) {
    GraphTensor out;
    EXPECT_EQ(parseNpy(bad, "bad", &out), Status::kInvalidArgument);
  }
}

}  // namespace
}  // namespace ree
