// GenerationRequest::stop: a request whose stop flag is set finishes at the next step boundary
// with finish_reason "stop", the tokens (and logits hashes) it has, which are a prefix of its solo
// run, and its KV blocks back in the pool; the other requests of the batch get exactly their solo
// results (CPU, reproducible set, bitwise via the logits' SHA-256): stopped from the token
// callback, before the run, from another request's callback (in flight or not), with a small pool
// that preempts, over micro-batches, with chunked prefill and the prefix cache.
#include <atomic>
#include <random>

#include "engine_test_util.h"
#include "ree/models/engine.h"
#include "ree/models/tokenizer.h"
#include "test_util.h"

namespace ree {
namespace {

using test::makeEngine;
using test::tinyEngineOptions;

// Prompts of several lengths sharing a first part (prefix cache hits), every other one sampled.
std::vector<GenerationRequest> someRequests(int count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> shared;
  for (int i = 0; i < 9; ++i)
    shared.push_back(3 + static_cast<int32_t>(rng() % 250));
  std::vector<GenerationRequest> requests;
  for (int r = 0; r < count; ++r) {
    GenerationRequest request;
    if (r % 2 == 0) request.prompt_ids = shared;
    const int length = 1 + static_cast<int>(rng() % 20);
    for (int i = 0; i < length; ++i)
      request.prompt_ids.push_back(3 + static_cast<int32_t>(rng() % 250));
    request.max_new_tokens = 8 + static_cast<int>(rng() % 12);
    if (r % 2 == 1) {
      request.sampling.temperature = 0.9f;
      request.sampling.top_k = 20;
      request.sampling.seed = 7 + r;
    }
    request.sampling_index = r;
    requests.push_back(request);
  }
  return requests;
}

// Each request alone, on a roomy engine.
std::vector<GenerationResult> soloResults(const std::vector<GenerationRequest>& requests) {
  return test::soloResults(tinyEngineOptions(1, 128, 0), requests);
}

using StopFlag = std::shared_ptr<std::atomic<bool>>;

// `stopped` holds the requests that may have been stopped: each has a prefix of its solo run
// (the whole of it only if it finished anyway), the others exactly their solo results.
void expectSoloOrPrefix(const std::vector<GenerationResult>& got,
                        const std::vector<GenerationResult>& solo, const std::vector<bool>& stopped,
                        const std::string& what) {
  ASSERT_EQ(got.size(), solo.size()) << what;
  for (size_t r = 0; r < solo.size(); ++r) {
    const std::string where = what + ", request " + std::to_string(r);
    if (!stopped[r] || got[r].finish_reason != "stop") {
      EXPECT_EQ(got[r].output_ids, solo[r].output_ids) << where;
      EXPECT_EQ(got[r].step_logits_sha256, solo[r].step_logits_sha256) << where;
      EXPECT_EQ(got[r].finish_reason, solo[r].finish_reason) << where;
      continue;
    }
    const size_t n = got[r].output_ids.size();
    ASSERT_LT(n, solo[r].output_ids.size()) << where << ": a stopped request ran to its end";
    EXPECT_TRUE(
        std::equal(got[r].output_ids.begin(), got[r].output_ids.end(), solo[r].output_ids.begin()))
        << where;
    ASSERT_EQ(got[r].step_logits_sha256.size(), n) << where;
    EXPECT_TRUE(std::equal(got[r].step_logits_sha256.begin(), got[r].step_logits_sha256.end(),
                           solo[r].step_logits_sha256.begin()))
        << where;
    EXPECT_EQ(got[r].output_ids_sha256, sha256Hex(got[r].output_ids.data(), n * sizeof(int32_t)))
        << where;
  }
}

// The pool is whole again: no block held, and one request may take all of it.
void expectPoolFree(Engine& engine, const std::string& what) {
  EXPECT_EQ(engine.kvCacheBlocksUsed(), 0) << what;
  GenerationRequest whole;
  whole.prompt_ids.assign(
      static_cast<size_t>(engine.kvCacheBlocks()) * engine.kvCacheBlockSize() - 1, 5);
  if (whole.prompt_ids.size() >= static_cast<size_t>(engine.maxContext())) {
    whole.prompt_ids.resize(static_cast<size_t>(engine.maxContext()) - 1);
  }
  whole.max_new_tokens = 1;
  std::vector<GenerationResult> results;
  EXPECT_EQ(engine.generate({whole}, &results), Status::kSuccess) << what << lastErrorMessage();
  EXPECT_EQ(engine.kvCacheBlocksUsed(), 0) << what;
}

TEST(GenerationStop, StoppedFromTheCallbackKeepsItsTokensAndTheOthersTheirSoloBits) {
  std::vector<GenerationRequest> requests = someRequests(5, 1);
  const std::vector<GenerationResult> solo = soloResults(requests);
  std::unique_ptr<Engine> engine = makeEngine(tinyEngineOptions(8, 4, 0));
  StopFlag flag = std::make_shared<std::atomic<bool>>(false);
  requests[2].stop = flag;
  std::vector<int> produced(requests.size(), 0);
  auto on_token = [&](size_t r, int32_t, const std::string&) {
    if (++produced[r] == 3 && r == 2) *flag = true;
  };
  std::vector<GenerationResult> results;
  ASSERT_EQ(engine->generate(requests, &results, on_token), Status::kSuccess) << lastErrorMessage();
  EXPECT_EQ(results[2].finish_reason, "stop");
  EXPECT_EQ(results[2].output_ids.size(), 3u) << "the token after the flag was produced";
  expectSoloOrPrefix(results, solo, {false, false, true, false, false}, "callback stop");
  std::string text;
  ASSERT_NE(engine->tokenizer(), nullptr);
  ASSERT_EQ(engine->tokenizer()->decode(results[2].output_ids, true, &text), Status::kSuccess);
  EXPECT_EQ(results[2].text, text);
  expectPoolFree(*engine, "callback stop");
}

TEST(GenerationStop, AFlagSetBeforeTheRunStopsAtOnceWithNoTokens) {
  std::vector<GenerationRequest> requests = someRequests(3, 2);
  const std::vector<GenerationResult> solo = soloResults(requests);
  std::unique_ptr<Engine> engine = makeEngine(tinyEngineOptions(2, 4, 0));  // request 2 waits
  for (size_t stopped : {size_t{0}, size_t{2}}) {
    std::vector<GenerationRequest> batch = requests;
    batch[stopped].stop = std::make_shared<std::atomic<bool>>(true);
    std::vector<GenerationResult> results;
    ASSERT_EQ(engine->generate(batch, &results), Status::kSuccess) << lastErrorMessage();
    EXPECT_EQ(results[stopped].finish_reason, "stop");
    EXPECT_TRUE(results[stopped].output_ids.empty());
    EXPECT_TRUE(results[stopped].step_logits_sha256.empty());
    EXPECT_EQ(results[stopped].output_ids_sha256, sha256Hex(nullptr, 0));
    std::vector<bool> may_stop(requests.size(), false);
    may_stop[stopped] = true;
    expectSoloOrPrefix(results, solo, may_stop, "stopped before the run");
    expectPoolFree(*engine, "stopped before the run");
  }
}

// Flags set from other requests' callbacks, so the stopped one may be in flight, waiting,
// preempted or mid-prompt; a pool small enough to preempt, micro-batches, chunked prefill.
TEST(GenerationStop, StopsAnywhereLeaveTheOthersAndThePoolIntact) {
  std::vector<GenerationRequest> requests = someRequests(10, 3);
  const std::vector<GenerationResult> solo = soloResults(requests);
  EngineOptions options = tinyEngineOptions(6, 4, 16);
  options.micro_batches = 2;
  options.prefill_chunk = 7;
  std::unique_ptr<Engine> engine = makeEngine(options);
  std::mt19937 rng(5);
  int stopped_results = 0, stopped_unstarted = 0;
  for (int round = 0; round < 5; ++round) {
    std::vector<GenerationRequest> batch = requests;
    std::vector<StopFlag> flags;
    for (GenerationRequest& request : batch) {
      flags.push_back(std::make_shared<std::atomic<bool>>(false));
      request.stop = flags.back();
    }
    // Request `by` stops request `target` at its `when`-th token.
    struct Trigger {
      size_t by, target;
      int when;
    };
    std::vector<Trigger> triggers;
    std::vector<bool> may_stop(batch.size(), false);
    for (int t = 0; t < 3; ++t) {
      Trigger trigger{rng() % batch.size(), rng() % batch.size(), 1 + static_cast<int>(rng() % 6)};
      triggers.push_back(trigger);
      may_stop[trigger.target] = true;
    }
    std::vector<int> produced(batch.size(), 0);
    auto on_token = [&](size_t r, int32_t, const std::string&) {
      ++produced[r];
      for (const Trigger& trigger : triggers) {
        if (trigger.by == r && trigger.when == produced[r]) *flags[trigger.target] = true;
      }
    };
    std::vector<GenerationResult> results;
    ASSERT_EQ(engine->generate(batch, &results, on_token), Status::kSuccess) << lastErrorMessage();
    const std::string what = "round " + std::to_string(round);
    expectSoloOrPrefix(results, solo, may_stop, what);
    EXPECT_EQ(engine->kvCacheBlocksUsed(), 0) << what;
    for (const GenerationResult& result : results) {
      stopped_results += result.finish_reason == "stop" ? 1 : 0;
      stopped_unstarted += result.finish_reason == "stop" && result.output_ids.empty() ? 1 : 0;
    }
  }
  EXPECT_GE(stopped_results, 5);
  EXPECT_GE(stopped_unstarted, 1);
  EXPECT_GT(engine->kvPreemptions(), 0) << "the pool should have been short";
  expectPoolFree(*engine, "after the rounds");
}

}  // namespace
}  // namespace ree
