// The engine refuses sizes the machine cannot hold before allocating them: a KV cache (max_batch x
// max_context tokens) beyond the device's real memory, whatever --memory-budget-gib claims, gives
// one line naming the options, their values and the limit, not a crash. The names follow
// EngineOptions::names (verify takes the values from a receipt and says so).
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "ree/models/builtin.h"
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
  EXPECT_NE(message.find("of host memory available"), std::string::npos) << message;
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
