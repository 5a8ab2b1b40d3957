// The paged KV cache (EngineOptions::kv_block_size, kv_blocks) changes where a position's K/V
// rows live, never the bits (CPU, reproducible set, bitwise via the logits' SHA-256):
// - the operation set: a step over scattered, non-contiguous blocks (block sizes 1..17, so block
//   boundaries fall at every position mod the block size, and blocks freed by one sequence reused
//   by the next) gives the attention output of the slot layout [sequences, max_len] bit for bit;
// - the engine: every block size gives the ids and logits hashes of one block per sequence (the
//   slot cache), alone and in a batch;
// - a pool too small for all requests at once preempts and recomputes sequences, and every
//   request still gets exactly its solo result (200 random requests in random order, pipelines
//   and micro-batches, traced layer hashes); a pool too small for one request is refused, naming
//   the flag.
#include <algorithm>
#include <numeric>
#include <random>

#include "engine_test_util.h"
#include "ree/models/engine.h"
#include "ree/runtime/operation_set.h"
#include "test_util.h"

namespace ree {
namespace {

// ---- The operation set over a paged pool ---------------------------------------------------

constexpr int kKvHeads = 2, kHeads = 4, kHeadDim = 8;

Tensor randomTensor(std::mt19937& rng, std::vector<int64_t> shape) {
  Tensor t;
  EXPECT_EQ(Tensor::empty(Device::cpu(), DType::kF32, shape, &t), Status::kSuccess);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.as<float>()[i] = normal(rng);
  return t;
}

// The attention outputs of a sequence of steps (prefill chunks, then decodes), each step's
// sequences addressed through `tables` (nullptr: the slot layout, one block per sequence).
struct StepPlan {
  std::vector<int32_t> new_tokens;  // per sequence
};

std::vector<float> runSteps(OperationSet& ops, const std::vector<StepPlan>& steps,
                            const std::vector<std::vector<int32_t>>* tables, int block_size,
                            int num_blocks, int max_len, uint32_t seed) {
  const int sequences = static_cast<int>(steps[0].new_tokens.size());
  LayerKvCache cache;
  const int blocks = tables ? num_blocks : sequences;
  const int rows = tables ? block_size : max_len;
  EXPECT_EQ(
      Tensor::empty(Device::cpu(), DType::kBF16, {blocks, rows, kKvHeads, kHeadDim}, &cache.k),
      Status::kSuccess);
  EXPECT_EQ(
      Tensor::empty(Device::cpu(), DType::kBF16, {blocks, rows, kKvHeads, kHeadDim}, &cache.v),
      Status::kSuccess);
  std::mt19937 rng(seed);
  std::vector<int32_t> cached(sequences, 0);
  std::vector<float> outputs;
  for (const StepPlan& step : steps) {
    StepBatch batch;
    batch.query_offsets = {0};
    batch.cached_lens = cached;
    int per_seq = 1;
    for (int s = 0; s < sequences && tables; ++s)
      per_seq = std::max(per_seq, static_cast<int>((*tables)[s].size()));
    for (int s = 0; s < sequences; ++s) {
      batch.query_offsets.push_back(batch.query_offsets.back() + step.new_tokens[s]);
      if (!tables) {
        batch.cache_slots.push_back(s);
        continue;
      }
      const int needed = (cached[s] + step.new_tokens[s] + block_size - 1) / block_size;
      for (int b = 0; b < per_seq; ++b)
        batch.block_tables.push_back(b < needed ? (*tables)[s][b] : 0);
    }
    batch.blocks_per_seq = tables ? per_seq : 0;
    EXPECT_EQ(batch.finalize(), Status::kSuccess) << lastErrorMessage();
    const int64_t t = batch.tokens();
    Tensor q = randomTensor(rng, {t, kHeads, kHeadDim});
    Tensor k = randomTensor(rng, {t, kKvHeads, kHeadDim});
    Tensor v = randomTensor(rng, {t, kKvHeads, kHeadDim});
    Tensor out;
    EXPECT_EQ(Tensor::empty(Device::cpu(), DType::kF32, {t, kHeads, kHeadDim}, &out),
              Status::kSuccess);
    EXPECT_EQ(ops.attention(q, k, v, cache, batch, out), Status::kSuccess) << lastErrorMessage();
    outputs.insert(outputs.end(), out.as<float>(), out.as<float>() + out.numel());
    for (int s = 0; s < sequences; ++s)
      cached[s] += step.new_tokens[s];
  }
  return outputs;
}

// Block tables drawn from a shuffled free list, as a pool that sequences before them used and
// freed in another order would hand out: no sequence's blocks are contiguous or ordered.
std::vector<std::vector<int32_t>> scatteredTables(const std::vector<int>& lengths, int block_size,
                                                  int num_blocks, std::mt19937& rng) {
  std::vector<int32_t> free(num_blocks);
  std::iota(free.begin(), free.end(), 0);
  std::shuffle(free.begin(), free.end(), rng);
  std::vector<std::vector<int32_t>> tables(lengths.size());
  // Round-robin, one block at a time, as sequences growing together take them.
  for (size_t taken = 0, round = 0; taken < lengths.size(); ++round) {
    taken = 0;
    for (size_t s = 0; s < lengths.size(); ++s) {
      const size_t needed = (lengths[s] + block_size - 1) / block_size;
      if (tables[s].size() < needed) {
        tables[s].push_back(free.back());
        free.pop_back();
      } else {
        ++taken;
      }
    }
  }
  return tables;
}

TEST(KvPagingOps, ScatteredBlocksGiveTheSlotLayoutsBits) {
  std::unique_ptr<OperationSet> ops;
  ASSERT_EQ(createOperationSet(OperationSetKind::kReproducible, Device::cpu(), &ops),
            Status::kSuccess);
  // Three sequences: prefills of 37, 5 and 70 tokens (cut in two chunks for the first), then
  // decodes past the 64-position attention chunk, so chunks and blocks cross in every way.
  std::vector<StepPlan> steps = {{{20, 5, 70}}, {{17, 1, 1}}};
  for (int i = 0; i < 30; ++i)
    steps.push_back({{1, 1, 1}});
  std::vector<int> lengths(3, 0);
  for (const StepPlan& step : steps) {
    for (int s = 0; s < 3; ++s)
      lengths[s] += step.new_tokens[s];
  }
  const int max_len = *std::max_element(lengths.begin(), lengths.end());
  const std::vector<float> slots = runSteps(*ops, steps, nullptr, 0, 0, max_len, 7);
  std::mt19937 rng(11);
  for (int block_size = 1; block_size <= 17; ++block_size) {
    int needed = 0;
    for (int length : lengths)
      needed += (length + block_size - 1) / block_size;
    const int num_blocks = needed + 5;  // some never used
    auto tables = scatteredTables(lengths, block_size, num_blocks, rng);
    const std::vector<float> paged =
        runSteps(*ops, steps, &tables, block_size, num_blocks, max_len, 7);
    ASSERT_EQ(paged.size(), slots.size());
    EXPECT_EQ(std::memcmp(paged.data(), slots.data(), slots.size() * sizeof(float)), 0)
        << "block size " << block_size;
  }
}

// A block freed by one sequence and taken by the next holds the first one's rows until the next
// one appends its own: what it reads must be only its own.
TEST(KvPagingOps, ReusedBlocksReadOnlyTheirNewRows) {
  std::unique_ptr<OperationSet> ops;
  ASSERT_EQ(createOperationSet(OperationSetKind::kReproducible, Device::cpu(), &ops),
            Status::kSuccess);
  const std::vector<StepPlan> first = {{{40}}, {{1}}, {{1}}};
  const std::vector<StepPlan> second = {{{9}}, {{1}}, {{1}}, {{1}}};
  const int block_size = 4, num_blocks = 12;
  std::vector<std::vector<int32_t>> tables = {{11, 3, 7, 0, 5, 9, 1, 10, 2, 6, 4}};
  // The second sequence alone, on fresh memory, in the slot layout.
  const std::vector<float> alone = runSteps(*ops, second, nullptr, 0, 0, 16, 3);
  // The same pool memory, dirty from the first sequence: runSteps allocates anew, so write the
  // first sequence through a shared cache instead.
  LayerKvCache cache;
  ASSERT_EQ(Tensor::empty(Device::cpu(), DType::kBF16, {num_blocks, block_size, kKvHeads, kHeadDim},
                          &cache.k),
            Status::kSuccess);
  ASSERT_EQ(Tensor::empty(Device::cpu(), DType::kBF16, {num_blocks, block_size, kKvHeads, kHeadDim},
                          &cache.v),
            Status::kSuccess);
  std::mt19937 rng(5);
  auto step = [&](int cached, int fresh, const std::vector<int32_t>& table, std::mt19937& gen,
                  std::vector<float>* outputs) {
    StepBatch batch;
    batch.query_offsets = {0, fresh};
    batch.cached_lens = {cached};
    const int needed = (cached + fresh + block_size - 1) / block_size;
    batch.block_tables.assign(table.begin(), table.begin() + needed);
    batch.blocks_per_seq = needed;
    ASSERT_EQ(batch.finalize(), Status::kSuccess);
    Tensor q = randomTensor(gen, {fresh, kHeads, kHeadDim});
    Tensor k = randomTensor(gen, {fresh, kKvHeads, kHeadDim});
    Tensor v = randomTensor(gen, {fresh, kKvHeads, kHeadDim});
    Tensor out;
    ASSERT_EQ(Tensor::empty(Device::cpu(), DType::kF32, {fresh, kHeads, kHeadDim}, &out),
              Status::kSuccess);
    ASSERT_EQ(ops->attention(q, k, v, cache, batch, out), Status::kSuccess) << lastErrorMessage();
    if (outputs) outputs->insert(outputs->end(), out.as<float>(), out.as<float>() + out.numel());
  };
  int cached = 0;
  for (const StepPlan& plan : first) {
    step(cached, plan.new_tokens[0], tables[0], rng, nullptr);
    cached += plan.new_tokens[0];
  }
  // Freed; the second sequence takes blocks 9, 1, 10, 2 (dirty) in a new order.
  const std::vector<int32_t> reused = {10, 1, 9, 2};
  std::mt19937 second_rng(3);
  std::vector<float> paged;
  cached = 0;
  for (const StepPlan& plan : second) {
    step(cached, plan.new_tokens[0], reused, second_rng, &paged);
    cached += plan.new_tokens[0];
  }
  ASSERT_EQ(paged.size(), alone.size());
  EXPECT_EQ(std::memcmp(paged.data(), alone.data(), alone.size() * sizeof(float)), 0);
}

// ---- The engine ------------------------------------------------------------------------------

using test::makeEngine;

// The tiny Llama with room for 256 tokens per sequence.
EngineOptions tinyOptions(int max_batch, int block_size, int64_t blocks) {
  return test::tinyEngineOptions(max_batch, block_size, blocks, /*max_context=*/256);
}

// Prompts of many lengths (their ends fall at every residue of small block sizes), one sampled.
std::vector<GenerationRequest> variedRequests(int count, uint32_t seed, int max_new = 12) {
  std::mt19937 rng(seed);
  std::vector<GenerationRequest> requests;
  for (int r = 0; r < count; ++r) {
    GenerationRequest request;
    const int length = 1 + static_cast<int>(rng() % 40);
    for (int i = 0; i < length; ++i)
      request.prompt_ids.push_back(3 + static_cast<int32_t>(rng() % 250));
    request.max_new_tokens = 1 + static_cast<int>(rng() % max_new);
    if (r % 3 == 1) {
      request.sampling.temperature = 0.9f;
      request.sampling.top_k = 20;
      request.sampling.seed = 100 + r;
    }
    requests.push_back(request);
  }
  return requests;
}

// Each request alone (max_batch 1, a pool of one full sequence in one block: the slot cache),
// with its index as the sampler's key.
std::vector<GenerationResult> soloResults(const std::vector<GenerationRequest>& requests,
                                          bool trace = false) {
  EngineOptions options = tinyOptions(1, 256, 0);
  options.trace_layer_hashes = trace;
  std::vector<uint64_t> indices(requests.size());
  for (size_t r = 0; r < requests.size(); ++r)
    indices[r] = r;
  return test::soloResults(options, requests, indices);
}

void expectSameResults(const std::vector<GenerationResult>& got,
                       const std::vector<GenerationResult>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t r = 0; r < want.size(); ++r) {
    EXPECT_EQ(got[r].output_ids, want[r].output_ids) << what << ", request " << r;
    EXPECT_EQ(got[r].step_logits_sha256, want[r].step_logits_sha256) << what << ", request " << r;
    EXPECT_EQ(got[r].step_layer_sha256, want[r].step_layer_sha256) << what << ", request " << r;
    EXPECT_EQ(got[r].finish_reason, want[r].finish_reason) << what << ", request " << r;
  }
}

TEST(KvPagingEngine, EveryBlockSizeGivesTheSlotCachesBits) {
  const std::vector<GenerationRequest> requests = variedRequests(8, 1);
  std::vector<GenerationResult> slots;
  // One block of the whole context per sequence: the slot cache of earlier releases.
  ASSERT_EQ(makeEngine(tinyOptions(8, 256, 8))->generate(requests, &slots), Status::kSuccess)
      << lastErrorMessage();
  for (int block_size : {1, 3, 16, 64, 100}) {
    std::unique_ptr<Engine> engine = makeEngine(tinyOptions(8, block_size, 0));
    EXPECT_EQ(engine->kvCacheBlockSize(), block_size);
    EXPECT_EQ(engine->kvCacheBlocks(), 8 * ((256 + block_size - 1) / block_size));
    std::vector<GenerationResult> paged;
    ASSERT_EQ(engine->generate(requests, &paged), Status::kSuccess) << lastErrorMessage();
    expectSameResults(paged, slots, "block size " + std::to_string(block_size));
    EXPECT_EQ(engine->kvPreemptions(), 0);
  }
}

TEST(KvPagingEngine, ASmallPoolPreemptsAndEveryRequestGetsItsSoloResult) {
  const std::vector<GenerationRequest> requests = variedRequests(24, 2, 30);
  const std::vector<GenerationResult> solo = soloResults(requests);
  // 6 blocks of 8 tokens: at most 48 positions for up to 8 sequences of up to 69.
  std::unique_ptr<Engine> engine = makeEngine(tinyOptions(8, 8, 10));
  std::vector<GenerationResult> results;
  ASSERT_EQ(engine->generate(requests, &results), Status::kSuccess) << lastErrorMessage();
  expectSameResults(results, solo, "10 blocks of 8");
  EXPECT_GT(engine->kvPreemptions(), 0);
}

// The acceptance case of the scheduler: 200 requests of random lengths, in random order, through
// a pool that forces preemption, each exactly as alone.
TEST(KvPagingEngine, TwoHundredRandomRequestsThroughASmallPool) {
  std::vector<GenerationRequest> requests = variedRequests(200, 3, 24);
  const std::vector<GenerationResult> solo = soloResults(requests);
  std::vector<size_t> order(requests.size());
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937(4));
  std::vector<GenerationRequest> shuffled;
  std::vector<GenerationResult> expected;
  for (size_t i : order) {
    shuffled.push_back(requests[i]);
    shuffled.back().sampling_index = i;
    expected.push_back(solo[i]);
  }
  std::unique_ptr<Engine> engine = makeEngine(tinyOptions(16, 4, 24));
  std::vector<GenerationResult> results;
  ASSERT_EQ(engine->generate(shuffled, &results), Status::kSuccess) << lastErrorMessage();
  expectSameResults(results, expected, "200 requests, 24 blocks of 4");
  EXPECT_GT(engine->kvPreemptions(), 0);
}

TEST(KvPagingEngine, PreemptionInPipelinesWithMicroBatchesAndTracing) {
  const std::vector<GenerationRequest> requests = variedRequests(12, 5, 20);
  const std::vector<GenerationResult> solo = soloResults(requests, /*trace=*/true);
  for (int stages : {2, 3}) {
    EngineOptions options = tinyOptions(6, 5, 14);
    options.n_partitions = stages;
    options.micro_batches = stages;
    options.trace_layer_hashes = true;
    std::unique_ptr<Engine> engine = makeEngine(options);
    std::vector<GenerationResult> results;
    ASSERT_EQ(engine->generate(requests, &results), Status::kSuccess) << lastErrorMessage();
    expectSameResults(results, solo, std::to_string(stages) + " stages");
    EXPECT_GT(engine->kvPreemptions(), 0) << stages << " stages";
  }
}

TEST(KvPagingEngine, APoolTooSmallForOneRequestIsRefusedNamingTheFlag) {
  std::unique_ptr<Engine> engine = makeEngine(tinyOptions(4, 16, 2));
  GenerationRequest request;
  request.prompt_ids.assign(20, 7);
  request.max_new_tokens = 20;  // 39 positions: 3 blocks of 16
  std::vector<GenerationResult> results;
  EXPECT_EQ(engine->generate({request}, &results), Status::kOutOfMemory);
  EXPECT_NE(std::string(lastErrorMessage())
                .find("need 3 KV cache blocks of 16 tokens, the pool "
                      "holds 2; raise --kv-blocks"),
            std::string::npos)
      << lastErrorMessage();
  request.max_new_tokens = 13;  // 32 positions: fits
  EXPECT_EQ(engine->generate({request}, &results), Status::kSuccess) << lastErrorMessage();
  // Replay and prefillLogits need the whole sequence in the pool too.
  std::vector<float> logits;
  EXPECT_EQ(engine->prefillLogits(std::vector<int32_t>(40, 7), &logits), Status::kOutOfMemory);
  EXPECT_NE(std::string(lastErrorMessage()).find("40 tokens need 3 KV cache blocks"),
            std::string::npos)
      << lastErrorMessage();
}

TEST(KvPagingEngine, BadPoolOptionsAreRefused) {
  std::unique_ptr<Engine> engine;
  EngineOptions options = tinyOptions(2, 0, 0);
  EXPECT_EQ(Engine::create(options, &engine), Status::kInvalidArgument);
  EXPECT_NE(std::string(lastErrorMessage()).find("--kv-block-size must be in"), std::string::npos)
      << lastErrorMessage();
  options = tinyOptions(2, 16, -1);
  EXPECT_EQ(Engine::create(options, &engine), Status::kInvalidArgument);
  EXPECT_NE(std::string(lastErrorMessage()).find("--kv-blocks must be in"), std::string::npos)
      << lastErrorMessage();
  options = tinyOptions(2, 16, 0);
  options.kv_memory_fraction = 1.5;
  EXPECT_EQ(Engine::create(options, &engine), Status::kInvalidArgument);
  EXPECT_NE(std::string(lastErrorMessage()).find("--kv-memory-fraction must be in"),
            std::string::npos)
      << lastErrorMessage();
}

// ---- The prefix cache -----------------------------------------------------------------------

// Requests that share their first `shared` tokens (a system prompt), then differ.
std::vector<GenerationRequest> sharedPrefixRequests(int count, int shared, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> prefix;
  for (int i = 0; i < shared; ++i)
    prefix.push_back(3 + static_cast<int32_t>(rng() % 250));
  std::vector<GenerationRequest> requests;
  for (int r = 0; r < count; ++r) {
    GenerationRequest request;
    request.prompt_ids = prefix;
    const int suffix = static_cast<int>(rng() % 9);  // 0: the prefix alone
    for (int i = 0; i < suffix; ++i)
      request.prompt_ids.push_back(3 + static_cast<int32_t>(rng() % 250));
    request.max_new_tokens = 1 + static_cast<int>(rng() % 16);
    if (r % 2 == 1) {
      request.sampling.temperature = 0.7f;
      request.sampling.seed = 7 + r;
    }
    requests.push_back(request);
  }
  return requests;
}

// A cached prefix gives the bits of recomputing it: requests sharing 37 tokens, in one batch, in
// a small pool (preemption, and resumed sequences matching their own blocks), and again in a
// later generate() (the blocks of the first are still cached), each equal to its solo result.
TEST(KvPagingPrefixCache, ACachedPrefixGivesTheBitsOfRecomputingIt) {
  const std::vector<GenerationRequest> requests = sharedPrefixRequests(10, 37, 9);
  const std::vector<GenerationResult> solo = soloResults(requests);
  for (int block_size : {1, 4, 16}) {
    std::unique_ptr<Engine> engine = makeEngine(tinyOptions(4, block_size, 0));
    std::vector<GenerationResult> first, second;
    ASSERT_EQ(engine->generate(requests, &first), Status::kSuccess) << lastErrorMessage();
    const std::string what = "block size " + std::to_string(block_size);
    expectSameResults(first, solo, what + ", first call");
    const int64_t hits = engine->kvPrefixHitTokens();
    EXPECT_GE(hits, (37 / block_size) * block_size * 3) << what;  // later requests share
    ASSERT_EQ(engine->generate(requests, &second), Status::kSuccess) << lastErrorMessage();
    expectSameResults(second, solo, what + ", second call");
    EXPECT_GT(engine->kvPrefixHitTokens(), hits) << what;
  }
  std::unique_ptr<Engine> small = makeEngine(tinyOptions(4, 4, 18));
  std::vector<GenerationResult> results;
  ASSERT_EQ(small->generate(requests, &results), Status::kSuccess) << lastErrorMessage();
  expectSameResults(results, solo, "18 blocks of 4");
  EXPECT_GT(small->kvPrefixHitTokens(), 0);
  // Off, nothing is read from the cache and the bits are the same.
  EngineOptions off = tinyOptions(4, 4, 0);
  off.prefix_caching = false;
  std::unique_ptr<Engine> uncached = makeEngine(off);
  ASSERT_EQ(uncached->generate(requests, &results), Status::kSuccess) << lastErrorMessage();
  expectSameResults(results, solo, "prefix cache off");
  EXPECT_EQ(uncached->kvPrefixHitTokens(), 0);
}

// Replay and prefillLogits overwrite the pool's first blocks: the cache forgets them, and a later
// generate() recomputes instead of reading what they wrote.
TEST(KvPagingPrefixCache, ReplayInvalidatesTheCache) {
  const std::vector<GenerationRequest> requests = sharedPrefixRequests(3, 20, 10);
  const std::vector<GenerationResult> solo = soloResults(requests);
  std::unique_ptr<Engine> engine = makeEngine(tinyOptions(4, 4, 0));
  std::vector<GenerationResult> results;
  ASSERT_EQ(engine->generate(requests, &results), Status::kSuccess) << lastErrorMessage();
  std::vector<float> logits;
  ASSERT_EQ(engine->prefillLogits(std::vector<int32_t>(60, 9), &logits), Status::kSuccess)
      << lastErrorMessage();
  const int64_t hits = engine->kvPrefixHitTokens();
  ASSERT_EQ(engine->generate(requests, &results), Status::kSuccess) << lastErrorMessage();
  expectSameResults(results, solo, "after prefillLogits");
  // The three are admitted together, before any has cached a block: nothing is read.
  EXPECT_EQ(engine->kvPrefixHitTokens(), hits);
  // Without the prefillLogits, the third call reads the second's blocks.
  ASSERT_EQ(engine->generate(requests, &results), Status::kSuccess) << lastErrorMessage();
  expectSameResults(results, solo, "third call");
  EXPECT_GE(engine->kvPrefixHitTokens() - hits, 3 * 16);
}

// The pipeline's later stages hold the cached blocks' rows too (they wrote them): hits there give
// the same bits.
TEST(KvPagingPrefixCache, PipelinesShareCachedBlocksOnEveryStage) {
  const std::vector<GenerationRequest> requests = sharedPrefixRequests(8, 25, 11);
  const std::vector<GenerationResult> solo = soloResults(requests);
  EngineOptions options = tinyOptions(3, 5, 0);
  options.n_partitions = 3;
  options.micro_batches = 2;
  std::unique_ptr<Engine> engine = makeEngine(options);
  std::vector<GenerationResult> results;
  ASSERT_EQ(engine->generate(requests, &results), Status::kSuccess) << lastErrorMessage();
  expectSameResults(results, solo, "3 stages");
  EXPECT_GT(engine->kvPrefixHitTokens(), 0);
}

// ---- Chunked prefill ---------------------------------------------------------------------------

// Prompts cut into chunks of a step's budget, beside other sequences' decodes, with prefix hits
// and preemption, in one process and in pipelines: every request's solo bits.
TEST(KvPagingChunkedPrefill, ChunksGiveTheBitsOfAWholePrefill) {
  std::vector<GenerationRequest> requests = variedRequests(10, 12, 16);
  const std::vector<GenerationRequest> shared = sharedPrefixRequests(6, 30, 13);
  requests.insert(requests.end(), shared.begin(), shared.end());
  const std::vector<GenerationResult> solo = soloResults(requests);
  for (int chunk : {1, 7, 64}) {
    std::unique_ptr<Engine> engine = makeEngine([&] {
      EngineOptions options = tinyOptions(5, 4, 0);
      options.prefill_chunk = chunk;
      return options;
    }());
    std::vector<GenerationResult> results;
    ASSERT_EQ(engine->generate(requests, &results), Status::kSuccess) << lastErrorMessage();
    expectSameResults(results, solo, "chunk " + std::to_string(chunk));
  }
  EngineOptions small = tinyOptions(6, 4, 22);
  small.prefill_chunk = 5;
  small.n_partitions = 2;
  small.micro_batches = 2;
  std::unique_ptr<Engine> engine = makeEngine(small);
  std::vector<GenerationResult> results;
  ASSERT_EQ(engine->generate(requests, &results), Status::kSuccess) << lastErrorMessage();
  expectSameResults(results, solo, "chunk 5, 22 blocks, 2 stages");
  EXPECT_GT(engine->kvPreemptions(), 0);
}

}  // namespace
}  // namespace ree
