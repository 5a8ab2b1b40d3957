// The paged KV cache on the GPU (reproducible set): every block size, a pool small enough to
// preempt, the prefix cache and chunked prefill give the CPU's bits (output ids and every step's
// logits hashes), and a pool sized from the GPU's free memory stays within it. The ATen sets get
// one block per sequence (their attention reads a sequence's rows in place). Skips without a GPU.
#include <random>

#include "ree/models/engine.h"
#include "test_util.h"

namespace ree {
namespace {

EngineOptions options(Device device, int max_batch, int block_size, int64_t blocks) {
  EngineOptions o;
  o.model = "builtin:tiny-llama";
  o.device = device;
  o.max_batch = max_batch;
  o.max_context = 256;
  o.kv_block_size = block_size;
  o.kv_blocks = blocks;
  return o;
}

std::vector<GenerationResult> generate(const EngineOptions& o,
                                       const std::vector<GenerationRequest>& requests,
                                       int64_t* preemptions = nullptr,
                                       int64_t* prefix_hits = nullptr) {
  std::unique_ptr<Engine> engine;
  EXPECT_EQ(Engine::create(o, &engine), Status::kSuccess) << lastErrorMessage();
  std::vector<GenerationResult> results;
  if (!engine) return results;
  EXPECT_EQ(engine->generate(requests, &results), Status::kSuccess) << lastErrorMessage();
  if (preemptions) *preemptions = engine->kvPreemptions();
  if (prefix_hits) *prefix_hits = engine->kvPrefixHitTokens();
  return results;
}

// Prompts of many lengths, a third of them starting with one shared 30-token prefix, some sampled.
std::vector<GenerationRequest> requests(int count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> shared;
  for (int i = 0; i < 30; ++i)
    shared.push_back(3 + static_cast<int32_t>(rng() % 250));
  std::vector<GenerationRequest> out;
  for (int r = 0; r < count; ++r) {
    GenerationRequest request;
    if (r % 3 == 0) request.prompt_ids = shared;
    const int length = 1 + static_cast<int>(rng() % 40);
    for (int i = 0; i < length; ++i)
      request.prompt_ids.push_back(3 + static_cast<int32_t>(rng() % 250));
    request.max_new_tokens = 1 + static_cast<int>(rng() % 24);
    if (r % 4 == 1) {
      request.sampling.temperature = 0.8f;
      request.sampling.seed = 50 + r;
    }
    out.push_back(request);
  }
  return out;
}

void expectSame(const std::vector<GenerationResult>& got, const std::vector<GenerationResult>& want,
                const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t r = 0; r < want.size(); ++r) {
    EXPECT_EQ(got[r].output_ids, want[r].output_ids) << what << ", request " << r;
    EXPECT_EQ(got[r].step_logits_sha256, want[r].step_logits_sha256) << what << ", request " << r;
  }
}

TEST(KvPagingGpu, EveryPoolGivesTheCpuSlotCachesBits) {
  REE_SKIP_WITHOUT_GPU();
  const std::vector<GenerationRequest> batch = requests(24, 1);
  // The CPU with one block of the whole context per sequence: the slot cache.
  const std::vector<GenerationResult> cpu = generate(options(Device::cpu(), 8, 256, 8), batch);
  for (int block_size : {1, 16, 256}) {
    expectSame(generate(options(Device::cuda(0), 8, block_size, 0), batch), cpu,
               "cuda block size " + std::to_string(block_size));
  }
  // 30 blocks of 4: preemption, prefix hits, chunks of 7 prompt tokens a step.
  EngineOptions small = options(Device::cuda(0), 8, 4, 30);
  small.prefill_chunk = 7;
  int64_t preemptions = 0, hits = 0;
  expectSame(generate(small, batch, &preemptions, &hits), cpu, "cuda 30 blocks of 4, chunks of 7");
  EXPECT_GT(preemptions, 0);
  EXPECT_GT(hits, 0);
  // Two stages on the GPU with micro-batches.
  small.n_partitions = 2;
  small.micro_batches = 2;
  expectSame(generate(small, batch), cpu, "cuda 2 stages, 30 blocks of 4");
}

TEST(KvPagingGpu, APoolFromTheFreeMemoryStaysWithinIt) {
  REE_SKIP_WITHOUT_GPU();
  EngineOptions o = options(Device::cuda(0), 1 << 20, 16, 0);
  o.max_context = 2048;  // 2^31 tokens asked for: far beyond any GPU
  o.kv_memory_fraction = 0.05;
  std::unique_ptr<Engine> engine;
  ASSERT_EQ(Engine::create(o, &engine), Status::kSuccess) << lastErrorMessage();
  EXPECT_GT(engine->kvCacheBlocks(), 0);
  EXPECT_LT(engine->kvCacheBlocks(), (1 << 20) * (2048 / 16));
  GenerationRequest request;
  request.prompt_ids = {1, 2, 3, 4};
  request.max_new_tokens = 5;
  std::vector<GenerationResult> results;
  ASSERT_EQ(engine->generate({request, request}, &results), Status::kSuccess) << lastErrorMessage();
  EXPECT_EQ(results[0].output_ids, results[1].output_ids);
}

TEST(KvPagingGpu, TheAtenSetsGetOneBlockPerSequence) {
  REE_SKIP_WITHOUT_GPU();
  EngineOptions o = options(Device::cuda(0), 4, 16, 0);
  o.operation_set = OperationSetKind::kDefault;
  std::unique_ptr<Engine> engine;
  const Status status = Engine::create(o, &engine);
  if (status == Status::kUnsupported) GTEST_SKIP() << "built without LibTorch";
  ASSERT_EQ(status, Status::kSuccess) << lastErrorMessage();
  EXPECT_EQ(engine->kvCacheBlockSize(), 256);
  EXPECT_EQ(engine->kvCacheBlocks(), 4);
  const std::vector<GenerationRequest> batch = requests(6, 2);
  std::vector<GenerationResult> results;
  ASSERT_EQ(engine->generate(batch, &results), Status::kSuccess) << lastErrorMessage();
  for (size_t r = 0; r < batch.size(); ++r)
    EXPECT_EQ(static_cast<int>(results[r].output_ids.size()) <= batch[r].max_new_tokens, true);
}

}  // namespace
}  // namespace ree
