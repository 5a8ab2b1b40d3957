// The default and deterministic operation sets against transformers' own modules, bitwise, on the
// CPU: LlamaRMSNorm, LlamaRotaryEmbedding + apply_rotary_pos_emb (default and llama3 rope) and
// LlamaMLP's act(gate) * up, in bf16, fp16 and fp32, with -0 and 0 among the inputs.
// docs/operation-sets.md promises op-for-op transcription; the sets also rewrite some of those
// expressions to spare the host temporaries and launches, and this test holds every rewrite to
// transformers' bits. aten_transformers_reference.py computes the references in Python.
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ree/kernels/numeric.h"
#include "ree/runtime/operation_set.h"
#include "test_util.h"

namespace ree {
namespace {

namespace fs = std::filesystem;

const DType kDtypes[] = {DType::kBF16, DType::kF16, DType::kF32};

// Values in [-2, 2) from a fixed sequence, rounded to `dtype`; every 13th is -0 and every 17th 0.
Tensor inputTensor(DType dtype, std::vector<int64_t> shape, uint32_t seed) {
  Tensor t;
  EXPECT_EQ(Tensor::empty(Device::cpu(), dtype, std::move(shape), &t), Status::kSuccess);
  uint32_t state = seed * 2654435761u + 1u;
  for (int64_t i = 0; i < t.numel(); ++i) {
    state = state * 1664525u + 1013904223u;
    float v = static_cast<float>(state >> 8) / (1u << 24) * 4.0f - 2.0f;
    if (i % 13 == 5) v = -0.0f;
    if (i % 17 == 7) v = 0.0f;
    if (dtype == DType::kF32) t.as<float>()[i] = v;
    if (dtype == DType::kBF16) t.as<bf16_t>()[i] = toBF16(v);
    if (dtype == DType::kF16) t.as<f16_t>()[i] = toF16(v);
  }
  return t;
}

Tensor copyOf(const Tensor& t) {
  Tensor copy;
  EXPECT_EQ(Tensor::empty(Device::cpu(), t.dtype(), t.shape(), &copy), Status::kSuccess);
  std::memcpy(copy.data(), t.data(), t.nbytes());
  return copy;
}

// One case: its description for the Python side (op, dtype, sizes) and its inputs.
struct Case {
  nlohmann::json spec;
  std::map<std::string, Tensor> inputs;
  std::string name() const { return spec["name"].get<std::string>(); }
};

std::vector<Case> makeCases() {
  const std::vector<int32_t> positions = {0, 1, 7, 300, 5000};
  std::vector<Case> cases;
  for (DType dtype : kDtypes) {
    const std::string suffix = std::string("_") + dtypeName(dtype);
    auto add = [&](nlohmann::json spec, const std::string& name,
                   std::map<std::string, Tensor> inputs) {
      spec["name"] = name + suffix;
      spec["dtype"] = dtypeName(dtype);
      cases.push_back({std::move(spec), std::move(inputs)});
    };
    add({{"op", "rms_norm"}, {"tokens", 5}, {"hidden", 64}, {"eps", 1e-5}}, "rms_norm",
        {{"x", inputTensor(dtype, {5, 64}, 1)}, {"weight", inputTensor(dtype, {64}, 2)}});
    for (bool llama3 : {false, true}) {
      add({{"op", "rope"},
           {"tokens", 5},
           {"heads", 3},
           {"head_dim", 16},
           {"theta", 10000.0},
           {"llama3", llama3},
           {"positions", positions}},
          llama3 ? "rope_llama3" : "rope_default", {{"x", inputTensor(dtype, {5, 3, 16}, 3)}});
    }
    for (const char* act : {"silu", "gelu_pytorch_tanh"}) {
      add({{"op", "gated"}, {"tokens", 5}, {"inner", 96}, {"act", act}},
          std::string("gated_") + act,
          {{"gate", inputTensor(dtype, {5, 96}, 4)}, {"up", inputTensor(dtype, {5, 96}, 5)}});
    }
  }
  return cases;
}

RopeSpec ropeSpecOf(const nlohmann::json& spec) {
  RopeSpec rope;
  rope.rotary_dim = spec["head_dim"].get<int>();
  rope.theta = spec["theta"].get<float>();
  rope.llama3 = spec["llama3"].get<bool>();
  rope.llama3_factor = 8.0;
  rope.llama3_low_freq_factor = 1.0;
  rope.llama3_high_freq_factor = 4.0;
  rope.llama3_original_max_positions = 32;
  return rope;
}

// REE's output of a case on `set`.
Tensor runOurs(OperationSet& set, const Case& c) {
  const std::string op = c.spec["op"].get<std::string>();
  if (op == "rms_norm") {
    Tensor out = copyOf(c.inputs.at("x"));
    EXPECT_EQ(set.rmsNorm(c.inputs.at("x"), c.inputs.at("weight"), 1e-5f, out), Status::kSuccess);
    return out;
  }
  if (op == "rope") {
    Tensor x = copyOf(c.inputs.at("x"));
    const auto positions = c.spec["positions"].get<std::vector<int32_t>>();
    EXPECT_EQ(set.rope(x, positions, ropeSpecOf(c.spec)), Status::kSuccess);
    return x;
  }
  const bool silu = c.spec["act"].get<std::string>() == "silu";
  Tensor out = copyOf(c.inputs.at("up"));
  EXPECT_EQ(set.gatedActivation(silu ? ActivationKind::kSilu : ActivationKind::kGeluTanh,
                                c.inputs.at("gate"), c.inputs.at("up"), out),
            Status::kSuccess);
  return out;
}

// transformers' output bytes of every case by name, computed once per process; empty on failure.
const std::map<std::string, std::vector<char>>& references(const std::vector<Case>& cases) {
  static const std::map<std::string, std::vector<char>> outputs = [&] {
    const char* tmp = std::getenv("REE_TEST_TMP");
    const std::string dir = std::string(tmp ? tmp : "/tmp/ree_aten_transformers_bits");
    fs::remove_all(dir);
    fs::create_directories(dir);
    nlohmann::json specs = nlohmann::json::array();
    for (const Case& c : cases) {
      specs.push_back(c.spec);
      for (const auto& [name, tensor] : c.inputs) {
        std::ofstream(dir + "/" + c.name() + "." + name + ".bin", std::ios::binary)
            .write(static_cast<const char*>(tensor.data()),
                   static_cast<std::streamsize>(tensor.nbytes()));
      }
    }
    std::ofstream(dir + "/cases.json") << specs.dump();
    const char* python = std::getenv("REE_PYTHON");
    const char* source = std::getenv("REE_SOURCE_DIR");
    const std::string command =
        std::string(python ? python : "python3") + " " + (source ? source : ".") +
        "/tests/models/aten_transformers_reference.py " + dir + " > " + dir + "/reference.log 2>&1";
    std::map<std::string, std::vector<char>> read;
    if (std::system(command.c_str()) != 0) {
      ADD_FAILURE() << command << " failed; see " << dir << "/reference.log";
      return read;
    }
    for (const Case& c : cases) {
      std::ifstream file(dir + "/" + c.name() + ".out.bin", std::ios::binary);
      read[c.name()].assign(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
    }
    return read;
  }();
  return outputs;
}

class AtenTransformersBits : public ::testing::TestWithParam<OperationSetKind> {};

TEST_P(AtenTransformersBits, OperatorsGiveTransformersBits) {
  std::unique_ptr<OperationSet> set;
  Status status = createOperationSet(GetParam(), Device::cpu(), &set);
  if (status == Status::kUnsupported) GTEST_SKIP() << "built without LibTorch";
  ASSERT_EQ(status, Status::kSuccess) << lastErrorMessage();
  const std::vector<Case> cases = makeCases();
  const auto& theirs = references(cases);
  ASSERT_EQ(theirs.size(), cases.size());
  for (const Case& c : cases) {
    Tensor ours = runOurs(*set, c);
    const std::vector<char>& reference = theirs.at(c.name());
    size_t differing = 0;
    const char* bytes = static_cast<const char*>(ours.data());
    for (size_t i = 0; i < ours.nbytes() && i < reference.size(); ++i)
      differing += bytes[i] != reference[i];
    EXPECT_TRUE(ours.nbytes() == reference.size() && differing == 0)
        << c.name() << ": " << differing << " of " << ours.nbytes()
        << " bytes differ from transformers' " << reference.size() << "-byte output";
  }
}

INSTANTIATE_TEST_SUITE_P(Sets, AtenTransformersBits,
                         ::testing::Values(OperationSetKind::kDefault,
                                           OperationSetKind::kDeterministic),
                         [](const ::testing::TestParamInfo<OperationSetKind>& info) {
                           return std::string(operationSetName(info.param));
                         });

}  // namespace
}  // namespace ree
