// Reproducible-mode guarantees of the whole model, on the CPU (bitwise, via SHA-256 of logits),
// for every RepOps spec version (repops-1, repops-2 and repops-3):
// - a prompt gives identical output ids and per-step logits alone and inside a batch of 8
//   mixed-length prompts (and with fewer KV slots than prompts, so some wait and join later);
// - the results do not depend on the CPU thread count;
// - logits of position t are identical from decode and from one prefill over the sequence;
// - any two spec versions give different bits (the selection reaches the linear layers);
// - bad inputs give clear errors.
#include <cstdlib>

#include "ree/core/parallel.h"
#include "ree/models/engine.h"
#include "test_util.h"

namespace ree {
namespace {

std::unique_ptr<Engine> makeEngine(int max_batch, RepOpsSpec spec = kDefaultRepOpsSpec) {
  EngineOptions options;
  options.model = "builtin:tiny-llama";
  options.repops_spec = spec;
  options.device = Device::cpu();
  options.max_batch = max_batch;
  options.max_context = 256;
  std::unique_ptr<Engine> engine;
  Status status = Engine::create(options, &engine);
  EXPECT_EQ(status, Status::kSuccess) << lastErrorMessage();
  return engine;
}

std::vector<GenerationRequest> mixedRequests() {
  const char* prompts[] = {"Hello",
                           "The quick brown fox jumps over the lazy dog",
                           "a",
                           "Reproducible inference on any hardware, any batch.",
                           "0123456789",
                           "Once upon a time, in a land far away, there lived a model that",
                           "Zürich, 東京, emoji 🙂",
                           "Last one"};
  std::vector<GenerationRequest> requests;
  for (const char* prompt : prompts) {
    GenerationRequest request;
    request.prompt_text = prompt;
    request.max_new_tokens = 12;
    requests.push_back(request);
  }
  // One sampled request: Philox keyed by (seed, request index, step).
  requests[3].sampling.temperature = 0.8f;
  requests[3].sampling.top_p = 0.9f;
  requests[3].sampling.seed = 1234;
  return requests;
}

class Reproducible : public ::testing::TestWithParam<RepOpsSpec> {};

TEST_P(Reproducible, PromptAloneEqualsPromptInMixedBatch) {
  std::vector<GenerationRequest> requests = mixedRequests();
  std::unique_ptr<Engine> batched = makeEngine(8, GetParam());
  std::vector<GenerationResult> together;
  ASSERT_EQ(batched->generate(requests, &together), Status::kSuccess) << lastErrorMessage();
  // Fewer slots than prompts: later prompts are prefilled while others decode.
  std::unique_ptr<Engine> narrow = makeEngine(3, GetParam());
  std::vector<GenerationResult> staggered;
  ASSERT_EQ(narrow->generate(requests, &staggered), Status::kSuccess) << lastErrorMessage();
  std::unique_ptr<Engine> single = makeEngine(1, GetParam());
  for (size_t i = 0; i < requests.size(); ++i) {
    // Alone: the same request index keys the sampler, so pass the request at its index.
    std::vector<GenerationRequest> alone(i + 1, requests[i]);
    for (size_t j = 0; j < i; ++j)
      alone[j].max_new_tokens = 1;
    std::vector<GenerationResult> results;
    ASSERT_EQ(single->generate(alone, &results), Status::kSuccess) << lastErrorMessage();
    EXPECT_EQ(results[i].output_ids, together[i].output_ids) << "prompt " << i;
    EXPECT_EQ(results[i].step_logits_sha256, together[i].step_logits_sha256) << "prompt " << i;
    EXPECT_EQ(staggered[i].step_logits_sha256, together[i].step_logits_sha256) << "prompt " << i;
  }
}

TEST_P(Reproducible, ThreadCountDoesNotChangeBits) {
  std::vector<GenerationRequest> requests = mixedRequests();
  std::unique_ptr<Engine> engine = makeEngine(8, GetParam());
  std::vector<std::vector<std::string>> hashes;
  for (int threads : {1, 2, 5}) {
    setCpuThreads(threads);
    std::vector<GenerationResult> results;
    ASSERT_EQ(engine->generate(requests, &results), Status::kSuccess) << lastErrorMessage();
    std::vector<std::string> all;
    for (const auto& r : results)
      all.insert(all.end(), r.step_logits_sha256.begin(), r.step_logits_sha256.end());
    hashes.push_back(all);
  }
  setCpuThreads(0);
  EXPECT_EQ(hashes[0], hashes[1]);
  EXPECT_EQ(hashes[0], hashes[2]);
}

TEST_P(Reproducible, DecodeLogitsEqualPrefillLogits) {
  std::unique_ptr<Engine> engine = makeEngine(2, GetParam());
  GenerationRequest request;
  request.prompt_text = "Prefill and decode agree";
  request.max_new_tokens = 40;
  std::vector<GenerationResult> results;
  ASSERT_EQ(engine->generate({request}, &results), Status::kSuccess) << lastErrorMessage();
  std::vector<int32_t> sequence = results[0].prompt_ids;
  sequence.insert(sequence.end(), results[0].output_ids.begin(), results[0].output_ids.end());
  std::vector<float> logits;
  ASSERT_EQ(engine->prefillLogits(sequence, &logits), Status::kSuccess) << lastErrorMessage();
  int64_t vocab = engine->config().vocab_size;
  for (size_t step = 0; step < results[0].output_ids.size(); ++step) {
    size_t row = results[0].prompt_ids.size() - 1 + step;
    EXPECT_EQ(sha256Hex(logits.data() + row * vocab, vocab * sizeof(float)),
              results[0].step_logits_sha256[step])
        << "step " << step;
  }
}

INSTANTIATE_TEST_SUITE_P(Specs, Reproducible,
                         ::testing::Values(RepOpsSpec::kRepOps1, RepOpsSpec::kRepOps2,
                                           RepOpsSpec::kRepOps3),
                         [](const ::testing::TestParamInfo<RepOpsSpec>& info) {
                           std::string name = repOpsSpecName(info.param);  // "repops-N"
                           name.erase(name.find('-'), 1);
                           return name;
                         });

// The selection reaches the linear layers: any two versions differ in their logits' bits (the
// built-in model's weights are random, so no two arithmetics agree by accident).
TEST(ReproducibleSpecs, VersionsGiveDifferentLogitsBits) {
  std::vector<GenerationRequest> requests = mixedRequests();
  const RepOpsSpec specs[] = {RepOpsSpec::kRepOps1, RepOpsSpec::kRepOps2, RepOpsSpec::kRepOps3};
  std::vector<GenerationResult> results[3];
  for (int s = 0; s < 3; ++s) {
    ASSERT_EQ(makeEngine(8, specs[s])->generate(requests, &results[s]), Status::kSuccess)
        << repOpsSpecName(specs[s]) << ": " << lastErrorMessage();
  }
  for (int a = 0; a < 3; ++a) {
    for (int b = a + 1; b < 3; ++b) {
      for (size_t i = 0; i < requests.size(); ++i) {
        EXPECT_NE(results[a][i].step_logits_sha256[0], results[b][i].step_logits_sha256[0])
            << repOpsSpecName(specs[a]) << " vs " << repOpsSpecName(specs[b]) << ", prompt " << i;
      }
    }
  }
}

// A request's sampling index keys its draws wherever it sits: the sampled request 3 of the mixed
// batch, moved to the front of a batch and given sampling index 3, draws the same tokens; with
// index 0 it draws others (so the index does reach the sampler).
TEST(ReproducibleInputs, SamplingIndexKeysTheDrawsNotThePosition) {
  std::vector<GenerationRequest> requests = mixedRequests();
  std::vector<GenerationResult> reference;
  ASSERT_EQ(makeEngine(8)->generate(requests, &reference), Status::kSuccess) << lastErrorMessage();
  std::vector<GenerationRequest> moved = {requests[3], requests[0], requests[5]};
  moved[0].sampling_index = 3;
  std::vector<GenerationResult> results;
  ASSERT_EQ(makeEngine(8)->generate(moved, &results), Status::kSuccess) << lastErrorMessage();
  EXPECT_EQ(results[0].output_ids, reference[3].output_ids);
  EXPECT_EQ(results[0].step_logits_sha256, reference[3].step_logits_sha256);
  EXPECT_EQ(results[1].output_ids, reference[0].output_ids);  // greedy: no key used
  moved[0].sampling_index = 0;
  ASSERT_EQ(makeEngine(8)->generate(moved, &results), Status::kSuccess) << lastErrorMessage();
  EXPECT_NE(results[0].output_ids, reference[3].output_ids);
}

TEST(ReproducibleSpecs, ASpecOtherThanTheDefaultNeedsTheReproducibleSet) {
  EngineOptions options;
  options.model = "builtin:tiny-llama";
  options.operation_set = OperationSetKind::kDefault;
  options.repops_spec = RepOpsSpec::kRepOps2;
  std::unique_ptr<Engine> engine;
  EXPECT_EQ(Engine::create(options, &engine), Status::kInvalidArgument);
  EXPECT_NE(std::string(lastErrorMessage())
                .find("--repops-spec repops-2 applies to the "
                      "reproducible operation set only"),
            std::string::npos)
      << lastErrorMessage();
  options.repops_spec = RepOpsSpec::kRepOps3;
  EXPECT_EQ(Engine::create(options, &engine), Status::kInvalidArgument);
  EXPECT_NE(std::string(lastErrorMessage()).find("--repops-spec repops-3 applies to the"),
            std::string::npos)
      << lastErrorMessage();
  RepOpsSpec spec;
  for (const char* name : {"repops-1", "repops-2", "repops-3"}) {
    ASSERT_EQ(parseRepOpsSpec(name, "--repops-spec", &spec), Status::kSuccess) << name;
    EXPECT_STREQ(repOpsSpecName(spec), name);
  }
  EXPECT_EQ(parseRepOpsSpec("repops-4", "--repops-spec", &spec), Status::kInvalidArgument);
  EXPECT_NE(std::string(lastErrorMessage())
                .find("--repops-spec: 'repops-4' is not a RepOps spec this release implements "
                      "(repops-1, repops-2, repops-3)"),
            std::string::npos)
      << lastErrorMessage();
}

TEST(ReproducibleInputs, BadInputsAreReported) {
  std::unique_ptr<Engine> engine = makeEngine(1);
  GenerationRequest request;
  request.prompt_ids = {1, 2, 100000};
  std::vector<GenerationResult> results;
  EXPECT_EQ(engine->generate({request}, &results), Status::kInvalidArgument);
  EXPECT_NE(std::string(lastErrorMessage()).find("outside the vocabulary"), std::string::npos)
      << lastErrorMessage();
  request.prompt_ids.assign(300, 5);  // longer than the 256-token context
  EXPECT_EQ(engine->generate({request}, &results), Status::kInvalidArgument);
  EXPECT_NE(std::string(lastErrorMessage()).find("context"), std::string::npos)
      << lastErrorMessage();
  EngineOptions options;
  options.model = "/nonexistent/model";
  std::unique_ptr<Engine> missing;
  EXPECT_EQ(Engine::create(options, &missing), Status::kIoError);
  EXPECT_NE(std::string(lastErrorMessage()).find("/nonexistent/model"), std::string::npos);
  options.model = "builtin:nope";
  EXPECT_EQ(Engine::create(options, &missing), Status::kInvalidArgument);
}

}  // namespace
}  // namespace ree
