// The engine sizes its KV cache pool from the memory the weights leave, so a large --max-batch x
// --max-context is never refused for memory: the pool is smaller and sequences wait or are
// preempted. What the machine cannot hold is refused before allocating it: a --kv-blocks beyond
// the device's real memory, whatever --memory-budget-gib claims, gives one line naming the
// option, its value and the limit, not a crash. The names follow EngineOptions::names (verify
// takes the values from a receipt and says so).
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "ree/core/device.h"
#include "ree/models/builtin.h"
#include "ree/models/engine.h"

namespace ree {
namespace {

EngineOptions hugeKvCache() {
  EngineOptions options;
  options.model = "builtin:tiny-llama";
  options.device = Device::cpu();
  options.max_batch = 8;
  options.max_context = 2048;
  options.kv_block_size = 16;
  options.kv_blocks = 1 << 27;  // 2^31 tokens of KV cache: about 1 TiB for tiny-llama's 4 layers
  options.memory_budget_bytes = int64_t{1} << 60;  // the budget claims enough
  return options;
}

TEST(EngineLimits, KvBlocksBeyondTheHostsMemoryAreRefusedBeforeAllocating) {
  std::unique_ptr<Engine> engine;
  EXPECT_EQ(Engine::create(hugeKvCache(), &engine), Status::kOutOfMemory);
  const std::string message = lastErrorMessage();
  EXPECT_NE(message.find("--kv-blocks 134217728: the KV cache on cpu needs"), std::string::npos)
      << message;
  EXPECT_NE(message.find("of host memory available"), std::string::npos) << message;
  EXPECT_EQ(engine, nullptr);

  // Split over stages on one device, the stages' pools add up.
  EngineOptions split = hugeKvCache();
  split.kv_blocks = 1 << 25;
  split.n_partitions = 4;
  EXPECT_EQ(Engine::create(split, &engine), Status::kOutOfMemory);
  EXPECT_NE(std::string(lastErrorMessage()).find("the KV cache on cpu needs"), std::string::npos)
      << lastErrorMessage();
}

// A batch x context far beyond the host's memory (about 1 TiB) runs: the pool takes its share of
// the available memory, at most what max_batch sequences of max_context tokens need.
TEST(EngineLimits, AHugeBatchGetsAPoolSizedFromMemory) {
  EngineOptions options = hugeKvCache();
  options.kv_blocks = 0;
  options.memory_budget_bytes = 0;
  options.max_batch = 1 << 20;
  options.kv_memory_fraction = 0.01;
  std::unique_ptr<Engine> engine;
  ASSERT_EQ(Engine::create(options, &engine), Status::kSuccess) << lastErrorMessage();
  // 4 layers, K and V, 16 positions, at least 2 bytes each; the available memory moves a little.
  const int64_t block_bytes =
      4 * 2 * 16 * int64_t{engine->config().num_kv_heads} * engine->config().head_dim * 2;
  EXPECT_GT(engine->kvCacheBlocks(), 0);
  EXPECT_LE(engine->kvCacheBlocks() * block_bytes, hostAvailableMemoryBytes() / 50);
  GenerationRequest request;
  request.prompt_ids = {1, 2, 3};
  request.max_new_tokens = 4;
  std::vector<GenerationResult> results;
  ASSERT_EQ(engine->generate({request, request}, &results), Status::kSuccess) << lastErrorMessage();
  EXPECT_EQ(results[1].output_ids, results[0].output_ids);
}

TEST(EngineLimits, MessagesUseTheOptionNamesGiven) {
  EngineOptions options = hugeKvCache();
  options.names.kv_blocks = "the pool of X";
  std::unique_ptr<Engine> engine;
  EXPECT_EQ(Engine::create(options, &engine), Status::kOutOfMemory);
  const std::string message = lastErrorMessage();
  EXPECT_NE(message.find("the pool of X 134217728"), std::string::npos) << message;
  EXPECT_EQ(message.find("--kv-"), std::string::npos) << message;

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

// A tokenizer whose ids run past the model's embedding table belongs to another model: refused at
// load, naming both files' numbers, instead of indexing past the table on the first such token.
TEST(EngineLimits, TokenizerIdsBeyondTheVocabularyAreRefused) {
  std::string builtin;
  ASSERT_EQ(models::materializeBuiltinModel("builtin:tiny-llama", &builtin), Status::kSuccess)
      << lastErrorMessage();
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("ree_vocab_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::copy(builtin, dir, std::filesystem::copy_options::recursive);
  std::ifstream in(dir / "tokenizer.json");
  nlohmann::json tokenizer = nlohmann::json::parse(in);
  in.close();
  std::ifstream config_in(dir / "config.json");
  const int64_t vocab = nlohmann::json::parse(config_in)["vocab_size"].get<int64_t>();
  // One more added token: numbered after the last one, it lands on id vocab_size.
  nlohmann::json extra = tokenizer["added_tokens"].back();
  extra["id"] = vocab;
  extra["content"] = "<|beyond the embedding|>";
  tokenizer["added_tokens"].push_back(extra);
  std::ofstream(dir / "tokenizer.json") << tokenizer.dump();

  EngineOptions options;
  options.model = dir.string();
  options.device = Device::cpu();
  std::unique_ptr<Engine> engine;
  EXPECT_EQ(Engine::create(options, &engine), Status::kInvalidArgument);
  const std::string message = lastErrorMessage();
  EXPECT_NE(message.find("tokenizer.json"), std::string::npos) << message;
  EXPECT_NE(message.find("reach " + std::to_string(vocab) + ", beyond config.json's vocab_size " +
                         std::to_string(vocab)),
            std::string::npos)
      << message;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ree
