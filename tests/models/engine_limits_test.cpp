// The engine refuses sizes the machine cannot hold before allocating them: a KV cache (max_batch x
// max_context tokens) beyond the device's real memory, whatever --memory-budget-gib claims, gives
// one line naming the options, their values and the limit, not a crash. The names follow
// EngineOptions::names (verify takes the values from a receipt and says so).
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "ree/models/engine.h"

namespace ree {
namespace {

EngineOptions hugeKvCache() {
  EngineOptions options;
  options.model = "builtin:tiny-llama";
  options.device = Device::cpu();
  options.max_batch = 1 << 20;
  options.max_context = 2048;  // 2^31 tokens of KV cache: about 1 TiB for tiny-llama's 4 layers
  options.memory_budget_bytes = int64_t{1} << 60;  // the budget claims enough
  return options;
}

TEST(EngineLimits, KvCacheBeyondTheHostsMemoryIsRefusedBeforeAllocating) {
  std::unique_ptr<Engine> engine;
  EXPECT_EQ(Engine::create(hugeKvCache(), &engine), Status::kOutOfMemory);
  const std::string message = lastErrorMessage();
  EXPECT_NE(message.find("--max-batch 1048576 x --max-context 2048: the KV cache on cpu needs"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("of the host's physical memory"), std::string::npos) << message;
  EXPECT_EQ(engine, nullptr);

  // Split over stages on one device, the stages' caches add up.
  EngineOptions split = hugeKvCache();
  split.n_partitions = 4;
  EXPECT_EQ(Engine::create(split, &engine), Status::kOutOfMemory);
  EXPECT_NE(std::string(lastErrorMessage()).find("the KV cache on cpu needs"), std::string::npos)
      << lastErrorMessage();
}

TEST(EngineLimits, MessagesUseTheOptionNamesGiven) {
  EngineOptions options = hugeKvCache();
  options.names.max_batch = "the batch of X";
  options.names.max_context = "the context of Y";
  std::unique_ptr<Engine> engine;
  EXPECT_EQ(Engine::create(options, &engine), Status::kOutOfMemory);
  const std::string message = lastErrorMessage();
  EXPECT_NE(message.find("the batch of X 1048576 x the context of Y 2048"), std::string::npos)
      << message;
  EXPECT_EQ(message.find("--max-"), std::string::npos) << message;

  options = EngineOptions();
  options.model = "builtin:tiny-llama";
  options.device = Device::cpu();
  options.max_context = 4096;  // beyond tiny-llama's 2048 positions
  options.names.max_context = "the context of Y";
  EXPECT_EQ(Engine::create(options, &engine), Status::kInvalidArgument);
  EXPECT_NE(std::string(lastErrorMessage()).find("the context of Y 4096 exceeds"),
            std::string::npos)
      << lastErrorMessage();
}

TEST(EngineLimits, AnEngineThatFitsStillRuns) {
  EngineOptions options;
  options.model = "builtin:tiny-llama";
  options.device = Device::cpu();
  options.max_batch = 2;
  options.max_context = 64;
  options.n_partitions = 2;
  std::unique_ptr<Engine> engine;
  ASSERT_EQ(Engine::create(options, &engine), Status::kSuccess) << lastErrorMessage();
  GenerationRequest request;
  request.prompt_ids = {1, 2, 3};
  request.max_new_tokens = 4;
  std::vector<GenerationResult> results;
  ASSERT_EQ(engine->generate({request}, &results), Status::kSuccess) << lastErrorMessage();
  EXPECT_EQ(results[0].output_ids.size(), 4u);
}

}  // namespace
}  // namespace ree
