// The deterministic operation set end to end, shared by the CPU and GPU tests: the same requests
// on two fresh engines give identical output ids and per-step logits hashes. Skips, saying why,
// when REE was built without LibTorch.
#pragma once

#include "ree/models/engine.h"
#include "test_util.h"

namespace ree::test {

inline void expectRepeatedDeterministicRunsIdentical(Device device) {
  EngineOptions options;
  options.model = "builtin:tiny-llama";
  options.operation_set = OperationSetKind::kDeterministic;
  options.device = device;
  options.max_context = 128;
  std::unique_ptr<Engine> engine;
  Status status = Engine::create(options, &engine);
  if (status == Status::kUnsupported) GTEST_SKIP() << lastErrorMessage();
  ASSERT_EQ(status, Status::kSuccess) << lastErrorMessage();
  std::vector<GenerationRequest> requests(4);
  for (size_t i = 0; i < requests.size(); ++i) {
    requests[i].prompt_text = "Deterministic run " + std::string(i * 3 + 1, 'x');
    requests[i].max_new_tokens = 16;
  }
  requests[1].sampling.temperature = 0.9f;
  requests[1].sampling.seed = 7;
  std::vector<GenerationResult> first, second;
  ASSERT_EQ(engine->generate(requests, &first), Status::kSuccess) << lastErrorMessage();
  std::unique_ptr<Engine> again;
  ASSERT_EQ(Engine::create(options, &again), Status::kSuccess) << lastErrorMessage();
  ASSERT_EQ(again->generate(requests, &second), Status::kSuccess) << lastErrorMessage();
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(first[i].output_ids, second[i].output_ids) << "request " << i;
    EXPECT_EQ(first[i].step_logits_sha256, second[i].step_logits_sha256) << "request " << i;
  }
}

}  // namespace ree::test
