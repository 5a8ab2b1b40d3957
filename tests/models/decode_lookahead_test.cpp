// EngineOptions::decode_lookahead on the CPU: a greedy decode step's next step is queued with the
// tokens selected where the logits are, before the host reads them. Every request still gets
// exactly its solo bits (output ids, logits hashes, finish reason), with micro-batches, a pool
// that preempts, pipeline stages in one process, sampled and log-probability requests beside
// greedy ones; requests stopped from token callbacks (their own, or another's, so that a
// sequence ends while the step after it is queued) end exactly as without lookahead; and the
// pool is whole afterwards.
#include <atomic>
#include <random>

#include "engine_test_util.h"
#include "ree/models/engine.h"
#include "test_util.h"

namespace ree {
namespace {

using test::makeEngine;
using test::tinyEngineOptions;

std::vector<GenerationRequest> greedyRequests(int count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<GenerationRequest> requests;
  for (int r = 0; r < count; ++r) {
    GenerationRequest request;
    const int length = 1 + static_cast<int>(rng() % 15);
    for (int i = 0; i < length; ++i)
      request.prompt_ids.push_back(3 + static_cast<int32_t>(rng() % 250));
    request.max_new_tokens = 2 + static_cast<int>(rng() % 25);
    request.sampling_index = r;
    requests.push_back(request);
  }
  return requests;
}

EngineOptions withLookahead(EngineOptions options) {
  options.decode_lookahead = true;
  return options;
}

void expectSameResults(const std::vector<GenerationResult>& got,
                       const std::vector<GenerationResult>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t r = 0; r < want.size(); ++r) {
    const std::string where = what + ", request " + std::to_string(r);
    EXPECT_EQ(got[r].output_ids, want[r].output_ids) << where;
    EXPECT_EQ(got[r].step_logits_sha256, want[r].step_logits_sha256) << where;
    EXPECT_EQ(got[r].finish_reason, want[r].finish_reason) << where;
    EXPECT_EQ(got[r].output_ids_sha256, want[r].output_ids_sha256) << where;
    EXPECT_EQ(got[r].token_logprobs.size(), want[r].token_logprobs.size()) << where;
  }
}

std::vector<GenerationResult> run(Engine& engine, const std::vector<GenerationRequest>& requests,
                                  const TokenCallback& on_token = {}) {
  std::vector<GenerationResult> results;
  EXPECT_EQ(engine.generate(requests, &results, on_token), Status::kSuccess) << lastErrorMessage();
  return results;
}

TEST(DecodeLookahead, GreedyBatchesGetTheirSoloBits) {
  const std::vector<GenerationRequest> requests = greedyRequests(9, 1);
  const std::vector<GenerationResult> solo =
      test::soloResults(tinyEngineOptions(1, 16, 0), requests);
  for (int micro_batches : {1, 2, 3}) {
    EngineOptions options = withLookahead(tinyEngineOptions(4, 16, 0));  // 5 requests wait first
    options.micro_batches = micro_batches;
    std::unique_ptr<Engine> engine = makeEngine(options);
    ASSERT_NE(engine, nullptr);
    const std::string what = std::to_string(micro_batches) + " micro-batches";
    expectSameResults(run(*engine, requests), solo, what);
    EXPECT_GT(engine->lookaheadSteps(), 10) << what << ": no step was queued ahead";
    EXPECT_EQ(engine->kvCacheBlocksUsed(), 0) << what;
  }
}

TEST(DecodeLookahead, IsOffUnlessAskedFor) {
  std::unique_ptr<Engine> engine = makeEngine(tinyEngineOptions(4, 16, 0));
  ASSERT_NE(engine, nullptr);
  run(*engine, greedyRequests(3, 2));
  EXPECT_EQ(engine->lookaheadSteps(), 0);
}

TEST(DecodeLookahead, SmallPoolStagesAndMixedRequestsKeepTheirSoloBits) {
  std::vector<GenerationRequest> requests = greedyRequests(12, 3);
  for (size_t r = 0; r < requests.size(); r += 4) {  // sampled, and log-probabilities, beside
    requests[r].sampling.temperature = 0.8f;
    requests[r].sampling.seed = 11 + r;
  }
  requests[1].top_logprobs = 2;
  const std::vector<GenerationResult> solo =
      test::soloResults(tinyEngineOptions(1, 16, 0), requests);
  EngineOptions small = withLookahead(tinyEngineOptions(6, 4, 14));  // preempts
  small.micro_batches = 2;
  std::unique_ptr<Engine> engine = makeEngine(small);
  ASSERT_NE(engine, nullptr);
  expectSameResults(run(*engine, requests), solo, "small pool");
  EXPECT_GT(engine->kvPreemptions(), 0) << "the pool should have been short";
  EXPECT_EQ(engine->kvCacheBlocksUsed(), 0);
  EngineOptions staged = withLookahead(tinyEngineOptions(4, 16, 0));
  staged.n_partitions = 2;  // both stages in this process, on the CPU
  engine = makeEngine(staged);
  ASSERT_NE(engine, nullptr);
  expectSameResults(run(*engine, requests), solo, "two stages");
  EXPECT_GT(engine->lookaheadSteps(), 0) << "two stages: no step was queued ahead";
}

// Stops set from token callbacks: a request's own (it ends at the next boundary, while the step
// after it is already queued) and another's (the stopped one ends with its token of this step;
// its row of the queued step is dropped). The results are those of the same run without
// lookahead, exactly, and the pool is whole.
TEST(DecodeLookahead, StopsEndAsWithoutLookahead) {
  const std::vector<GenerationRequest> requests = greedyRequests(6, 4);
  std::mt19937 rng(9);
  for (int round = 0; round < 6; ++round) {
    struct Trigger {
      size_t by, target;
      int when;
    };
    std::vector<Trigger> triggers;
    for (int t = 0; t < 3; ++t) {
      triggers.push_back(
          {rng() % requests.size(), rng() % requests.size(), 1 + static_cast<int>(rng() % 8)});
    }
    std::vector<std::vector<GenerationResult>> results;
    for (bool lookahead : {false, true}) {
      EngineOptions options = tinyEngineOptions(6, 16, 0);
      options.decode_lookahead = lookahead;
      std::unique_ptr<Engine> engine = makeEngine(options);
      ASSERT_NE(engine, nullptr);
      std::vector<GenerationRequest> batch = requests;
      std::vector<std::shared_ptr<std::atomic<bool>>> flags;
      for (GenerationRequest& request : batch) {
        flags.push_back(std::make_shared<std::atomic<bool>>(false));
        request.stop = flags.back();
      }
      std::vector<int> produced(batch.size(), 0);
      auto on_token = [&](size_t r, int32_t, const std::string&) {
        ++produced[r];
        for (const Trigger& trigger : triggers) {
          if (trigger.by == r && trigger.when == produced[r]) *flags[trigger.target] = true;
        }
      };
      results.push_back(run(*engine, batch, on_token));
      EXPECT_EQ(engine->kvCacheBlocksUsed(), 0);
      if (lookahead) {
        EXPECT_GT(engine->lookaheadSteps(), 0);
      }
    }
    expectSameResults(results[1], results[0], "round " + std::to_string(round));
  }
}

}  // namespace
}  // namespace ree
