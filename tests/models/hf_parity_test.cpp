// Our models against Hugging Face transformers (an implementation we did not write).
//
// scripts/reference/hf_reference.py builds small random models of every supported architecture
// with transformers (Llama 3 with llama3 rope scaling, Llama 2 with tied embeddings, Mistral, Qwen2
// with q/k/v biases, Qwen3 with q/k norms, GPT-2) and records, in float32, transformers' logits for
// every position of prompt + its greedy continuation, and that continuation.
//
// Checked here, for the reproducible and the default operation sets on the CPU:
// - logits of every position within a stated tolerance of transformers' (fp32 model):
//   |ours - theirs| <= 2e-4 * max|theirs| + 2e-5 for every element;
// - greedy generation gives transformers' 32 tokens exactly;
// - reproducible mode only: the logits of position t are bitwise identical whether produced by one
//   prefill over the whole sequence or by decode steps (hashes of generate's per-step logits).
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "architectures.h"
#include "ree/models/architecture.h"
#include "ree/models/engine.h"
#include "ree/models/model_config.h"
#include "test_util.h"

namespace ree {
namespace {

namespace fs = std::filesystem;

std::string referenceDir() {
  static std::string dir = [] {
    const char* tmp = std::getenv("REE_TEST_TMP");
    std::string out = std::string(tmp ? tmp : "/tmp/ree_hf_parity") + "/hf";
    const char* python = std::getenv("REE_PYTHON");
    const char* source = std::getenv("REE_SOURCE_DIR");
    if (!fs::exists(out + "/gpt2/reference.json")) {
      std::string cmd = std::string(python ? python : "python3") + " " + (source ? source : ".") +
                        "/scripts/reference/hf_reference.py " + out + " > " + out + ".log 2>&1";
      fs::create_directories(out);
      int rc = std::system(cmd.c_str());
      if (rc != 0) {
        std::fprintf(stderr, "reference generation failed (%s); see %s.log\n", cmd.c_str(),
                     out.c_str());
      }
    }
    return out;
  }();
  return dir;
}

struct Reference {
  std::vector<int32_t> prompt, greedy;
  std::vector<float> logits;
  int64_t rows = 0, vocab = 0;
};

Reference loadReference(const std::string& name) {
  std::ifstream file(referenceDir() + "/" + name + "/reference.json");
  EXPECT_TRUE(file.good()) << "missing reference for " << name
                           << " (is transformers installed in REE_PYTHON?)";
  Reference ref;
  if (!file) return ref;
  nlohmann::json j = nlohmann::json::parse(file);
  ref.prompt = j["prompt_ids"].get<std::vector<int32_t>>();
  ref.greedy = j["greedy_ids"].get<std::vector<int32_t>>();
  ref.logits = j["logits"].get<std::vector<float>>();
  ref.rows = j["logits_shape"][0];
  ref.vocab = j["logits_shape"][1];
  return ref;
}

class HfParity : public ::testing::TestWithParam<std::tuple<std::string, OperationSetKind>> {};

TEST_P(HfParity, LogitsAndGreedyTokensMatchTransformers) {
  auto [name, kind] = GetParam();
  Reference ref = loadReference(name);
  ASSERT_FALSE(ref.logits.empty());
  EngineOptions options;
  options.model = referenceDir() + "/" + name;
  options.operation_set = kind;
  options.device = Device::cpu();
  options.max_batch = 2;
  options.max_context = 128;
  std::unique_ptr<Engine> engine;
  Status status = Engine::create(options, &engine);
  if (status == Status::kUnsupported && kind != OperationSetKind::kReproducible) {
    GTEST_SKIP() << lastErrorMessage();
  }
  ASSERT_EQ(status, Status::kSuccess) << lastErrorMessage();

  std::vector<int32_t> sequence = ref.prompt;
  sequence.insert(sequence.end(), ref.greedy.begin(), ref.greedy.end());
  std::vector<float> logits;
  ASSERT_EQ(engine->prefillLogits(sequence, &logits), Status::kSuccess) << lastErrorMessage();
  ASSERT_EQ(static_cast<int64_t>(logits.size()), ref.rows * ref.vocab);
  float max_ref = 0.0f;
  for (float v : ref.logits)
    max_ref = std::max(max_ref, std::fabs(v));
  float tolerance = 2e-4f * max_ref + 2e-5f;
  double worst = 0.0;
  for (size_t i = 0; i < logits.size(); ++i) {
    worst = std::max(worst, static_cast<double>(std::fabs(logits[i] - ref.logits[i])));
  }
  EXPECT_LE(worst, tolerance) << name << ": max |ours - transformers| over all logits";

  GenerationRequest request;
  request.prompt_ids = ref.prompt;
  request.max_new_tokens = static_cast<int>(ref.greedy.size());
  std::vector<GenerationResult> results;
  ASSERT_EQ(engine->generate({request}, &results), Status::kSuccess) << lastErrorMessage();
  // transformers' generate may stop at EOS; compare what both produced.
  std::vector<int32_t> ours = results[0].output_ids;
  EXPECT_EQ(
      std::vector<int32_t>(ours.begin(), ours.begin() + std::min(ours.size(), ref.greedy.size())),
      std::vector<int32_t>(ref.greedy.begin(),
                           ref.greedy.begin() + std::min(ours.size(), ref.greedy.size())))
      << name << ": greedy tokens differ from transformers";
  EXPECT_GE(ours.size(), std::min<size_t>(ref.greedy.size(), 1));

  if (kind == OperationSetKind::kReproducible) {
    // Decode-step logits (from generate) == rows of the single prefill, bitwise.
    std::vector<int32_t> produced = ref.prompt;
    produced.insert(produced.end(), ours.begin(), ours.end());
    std::vector<float> prefill;
    ASSERT_EQ(engine->prefillLogits(produced, &prefill), Status::kSuccess) << lastErrorMessage();
    for (size_t step = 0; step < ours.size(); ++step) {
      size_t row = ref.prompt.size() - 1 + step;
      std::string hash = sha256Hex(prefill.data() + row * ref.vocab, ref.vocab * sizeof(float));
      EXPECT_EQ(hash, results[0].step_logits_sha256[step])
          << name << ": step " << step << " logits differ between decode and prefill";
    }
  }
}

// The shared list (architectures.h) must cover the architecture table: a row without a
// reference model would go untested against transformers.
TEST(HfParityCoverage, EveryArchitectureHasAReferenceModel) {
  std::set<std::string> covered;
  for (const std::string& name : test::referenceModelNames()) {
    models::ModelConfig config;
    ASSERT_EQ(models::loadModelConfig(referenceDir() + "/" + name + "/config.json", &config),
              Status::kSuccess)
        << lastErrorMessage();
    covered.insert(models::architectureName(config.architecture));
  }
  for (int i = 0; i < models::architectureCount(); ++i) {
    const char* model_type = models::architectureTable()[i].model_type;
    EXPECT_EQ(covered.count(model_type), 1u)
        << model_type << " has no reference model in tests/models/architectures.h";
  }
}

INSTANTIATE_TEST_SUITE_P(AllArchitectures, HfParity,
                         ::testing::Combine(::testing::ValuesIn(test::referenceModelNames()),
                                            ::testing::Values(OperationSetKind::kReproducible,
                                                              OperationSetKind::kDefault)),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_" +
                                  operationSetName(std::get<1>(info.param));
                         });

}  // namespace
}  // namespace ree
