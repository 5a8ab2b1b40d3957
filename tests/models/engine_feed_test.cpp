// Engine::generateFromFeed (continuous batching): requests that arrive at random step boundaries
// while others run join them, through a KV pool small enough to preempt, with micro-batches,
// chunked prefill and the prefix cache; each gets exactly (bitwise: ids, every step's logits
// SHA-256, text, finish reason, log-probabilities) what generate() gives it alone. Stop flags end
// a request with a prefix of its solo run; a prompt the engine refuses is reported with its error
// and leaves the others alone; each request is reported exactly once; the pool ends empty.
// CPU, tiny random model, reproducible set.
#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <random>
#include <thread>

#include "engine_test_util.h"
#include "ree/models/engine.h"
#include "test_util.h"

namespace ree {
namespace {

using test::makeEngine;
using test::tinyEngineOptions;

// Random prompt and output lengths (some prompts share a first part: prefix cache hits), greedy
// and sampled, some with log-probabilities; request r has id 100 + r and no sampling_index, so
// its sampler key is its id.
std::vector<GenerationRequest> randomRequests(int count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> shared;
  for (int i = 0; i < 10; ++i)
    shared.push_back(3 + static_cast<int32_t>(rng() % 250));
  std::vector<GenerationRequest> requests;
  for (int r = 0; r < count; ++r) {
    GenerationRequest request;
    if (rng() % 3 == 0) request.prompt_ids = shared;
    const int length = 1 + static_cast<int>(rng() % 30);
    for (int i = 0; i < length; ++i)
      request.prompt_ids.push_back(3 + static_cast<int32_t>(rng() % 250));
    request.max_new_tokens = 1 + static_cast<int>(rng() % 24);
    if (rng() % 2 == 0) {
      request.sampling.temperature = 0.7f + 0.1f * static_cast<float>(rng() % 8);
      request.sampling.top_k = rng() % 2 ? 0 : 30;
      request.sampling.top_p = rng() % 2 ? 1.0f : 0.9f;
      request.sampling.seed = rng();
    }
    if (rng() % 4 == 0) request.top_logprobs = static_cast<int>(rng() % 4);
    requests.push_back(request);
  }
  return requests;
}

uint64_t idOf(size_t r) {
  return 100 + r;
}

// Each request alone (its sampler key, its id, given explicitly), on a roomy engine.
std::vector<GenerationResult> soloResults(const std::vector<GenerationRequest>& requests) {
  std::vector<uint64_t> ids;
  for (size_t r = 0; r < requests.size(); ++r)
    ids.push_back(idOf(r));
  return test::soloResults(tinyEngineOptions(1, 128, 0), requests, ids);
}

bool sameLogprobs(const std::vector<TokenLogprobs>& a, const std::vector<TokenLogprobs>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::memcmp(&a[i].logprob, &b[i].logprob, sizeof(float)) != 0) return false;
    if (a[i].top.size() != b[i].top.size()) return false;
    for (size_t k = 0; k < a[i].top.size(); ++k) {
      if (a[i].top[k].token != b[i].top[k].token ||
          std::memcmp(&a[i].top[k].logprob, &b[i].top[k].logprob, sizeof(float)) != 0) {
        return false;
      }
    }
  }
  return true;
}

// Equal to the solo run; or, for a request whose stop flag was set and that stopped, its prefix.
void expectSoloBits(const GenerationResult& got, const GenerationResult& solo, bool may_stop,
                    const std::string& where) {
  if (!may_stop || got.finish_reason != "stop") {
    EXPECT_EQ(got.output_ids, solo.output_ids) << where;
    EXPECT_EQ(got.step_logits_sha256, solo.step_logits_sha256) << where;
    EXPECT_EQ(got.output_ids_sha256, solo.output_ids_sha256) << where;
    EXPECT_EQ(got.text, solo.text) << where;
    EXPECT_EQ(got.finish_reason, solo.finish_reason) << where;
    EXPECT_TRUE(sameLogprobs(got.token_logprobs, solo.token_logprobs)) << where;
    return;
  }
  const size_t n = got.output_ids.size();
  ASSERT_LT(n, solo.output_ids.size()) << where << ": a stopped request ran to its end";
  ASSERT_EQ(got.step_logits_sha256.size(), n) << where;
  for (size_t i = 0; i < n; ++i) {
    EXPECT_EQ(got.output_ids[i], solo.output_ids[i]) << where << " token " << i;
    EXPECT_EQ(got.step_logits_sha256[i], solo.step_logits_sha256[i]) << where << " token " << i;
  }
}

// The feed of a test: requests pushed from the engine's own callbacks (so they arrive at step
// boundaries chosen by `rng`), the rest when nothing is outstanding, then closed.
struct ArrivalPlan {
  ArrivalPlan(const std::vector<GenerationRequest>& all, uint32_t seed)
      : requests(all), rng(seed) {}
  void pushSome(size_t count) {
    for (size_t i = 0; i < count && next < requests.size(); ++i, ++next) {
      ASSERT_TRUE(queue.push(idOf(next), requests[next]));
      outstanding += 1;
    }
    if (next == requests.size()) queue.close();
  }
  const std::vector<GenerationRequest>& requests;
  std::mt19937 rng;
  RequestQueue queue;
  size_t next = 0;
  size_t outstanding = 0;
};

struct FeedRun {
  std::map<uint64_t, GenerationResult> results;
  std::map<uint64_t, int> reports;
  std::map<uint64_t, std::string> errors;
  std::map<uint64_t, int> streamed;  // tokens seen by on_token
};

// Runs `requests` through generateFromFeed, arriving at random step boundaries; the requests in
// `stop_at` get a stop flag that their own callback sets at that token.
FeedRun runFed(Engine& engine, const std::vector<GenerationRequest>& requests, uint32_t seed,
               const std::map<size_t, int>& stop_at = {}) {
  std::vector<GenerationRequest> fed = requests;
  std::map<uint64_t, std::shared_ptr<std::atomic<bool>>> flags;
  for (const auto& [r, when] : stop_at) {
    flags[idOf(r)] = std::make_shared<std::atomic<bool>>(false);
    fed[r].stop = flags[idOf(r)];
  }
  ArrivalPlan plan(fed, seed);
  FeedRun run;
  auto on_token = [&](uint64_t id, int32_t token, const std::string&,
                      const GenerationResult& so_far) {
    run.streamed[id] += 1;
    EXPECT_EQ(so_far.output_ids.back(), token);
    const size_t r = static_cast<size_t>(id - idOf(0));
    auto stop = stop_at.find(r);
    if (stop != stop_at.end() && stop->second == run.streamed[id]) *flags[id] = true;
    if (plan.rng() % 3 == 0) plan.pushSome(plan.rng() % 4);  // arrive at the next boundary
  };
  auto on_finished = [&](uint64_t id, Status status, const std::string& error,
                         GenerationResult result) {
    run.reports[id] += 1;
    if (status != Status::kSuccess) run.errors[id] = error;
    run.results[id] = std::move(result);
    plan.outstanding -= 1;
    if (plan.outstanding == 0) plan.pushSome(1 + plan.rng() % 3);  // never leave the engine idle
  };
  plan.pushSome(3);
  EXPECT_EQ(engine.generateFromFeed(plan.queue, on_token, on_finished), Status::kSuccess)
      << lastErrorMessage();
  EXPECT_EQ(plan.next, requests.size());
  return run;
}

void expectEveryReportedOnce(const FeedRun& run, size_t count) {
  ASSERT_EQ(run.reports.size(), count);
  for (const auto& [id, times] : run.reports)
    EXPECT_EQ(times, 1) << "request id " << id << " reported " << times << " times";
}

TEST(EngineFeed, RequestsArrivingAtRandomStepBoundariesGetTheirSoloBits) {
  const std::vector<GenerationRequest> requests = randomRequests(60, 26);
  const std::vector<GenerationResult> solo = soloResults(requests);
  struct Layout {
    const char* name;
    int max_batch, block_size, blocks, micro_batches, prefill_chunk;
    bool lookahead;
  };
  // Pools of 16 and 20 blocks of 4: the longest request (a 40-token prompt and 24 new tokens)
  // needs 16, so several sequences together must preempt.
  for (const Layout& layout : {Layout{"one group", 6, 4, 16, 0, 0, false},
                               Layout{"2 micro-batches, chunks of 7", 8, 4, 20, 2, 7, false},
                               Layout{"2 micro-batches, decode lookahead", 8, 4, 20, 2, 0, true}}) {
    EngineOptions options = tinyEngineOptions(layout.max_batch, layout.block_size, layout.blocks);
    options.micro_batches = layout.micro_batches;
    options.prefill_chunk = layout.prefill_chunk;
    options.decode_lookahead = layout.lookahead;
    std::unique_ptr<Engine> engine = makeEngine(options);
    ASSERT_NE(engine, nullptr);
    const FeedRun run = runFed(*engine, requests, 7);
    expectEveryReportedOnce(run, requests.size());
    for (const auto& [id, error] : run.errors)
      ADD_FAILURE() << layout.name << ": request id " << id << " refused: " << error;
    for (size_t r = 0; r < requests.size(); ++r) {
      const std::string where = std::string(layout.name) + ", request " + std::to_string(r);
      ASSERT_EQ(run.results.count(idOf(r)), 1u) << where;
      const GenerationResult& got = run.results.at(idOf(r));
      expectSoloBits(got, solo[r], false, where);
      EXPECT_EQ(run.streamed.count(idOf(r)) ? run.streamed.at(idOf(r)) : 0,
                static_cast<int>(got.output_ids.size()))
          << where;
    }
    EXPECT_GT(engine->kvPreemptions(), 0) << layout.name << ": the pool never forced a preemption";
    EXPECT_EQ(engine->kvCacheBlocksUsed(), 0) << layout.name;
    if (layout.lookahead) {
      EXPECT_GT(engine->lookaheadSteps(), 0) << layout.name;
    }
  }
}

TEST(EngineFeed, StopFlagsEndARequestWithAPrefixAndLeaveTheOthers) {
  const std::vector<GenerationRequest> requests = randomRequests(24, 5);
  const std::vector<GenerationResult> solo = soloResults(requests);
  for (bool lookahead : {false, true}) {
    EngineOptions options = tinyEngineOptions(5, 4, 16);
    options.decode_lookahead = lookahead;
    std::unique_ptr<Engine> engine = makeEngine(options);
    std::map<size_t, int> stop_at;
    for (size_t r = 0; r < requests.size(); r += 3)
      stop_at[r] = 1 + static_cast<int>(r % 4);
    const FeedRun run = runFed(*engine, requests, 11, stop_at);
    expectEveryReportedOnce(run, requests.size());
    int stopped = 0;
    for (size_t r = 0; r < requests.size(); ++r) {
      const GenerationResult& got = run.results.at(idOf(r));
      expectSoloBits(got, solo[r], stop_at.count(r) > 0,
                     "request " + std::to_string(r) + (lookahead ? ", lookahead" : ""));
      stopped += got.finish_reason == "stop" ? 1 : 0;
    }
    EXPECT_GT(stopped, 0);
    EXPECT_EQ(engine->kvCacheBlocksUsed(), 0);
  }
}

TEST(EngineFeed, ARefusedRequestIsReportedWithItsErrorAndTheOthersRun) {
  std::vector<GenerationRequest> requests = randomRequests(8, 9);
  const std::vector<GenerationResult> solo = soloResults(requests);
  std::vector<GenerationRequest> fed = requests;
  GenerationRequest too_long;
  too_long.prompt_ids.assign(200, 5);  // the context holds 128
  fed.push_back(too_long);
  GenerationRequest bad_token;
  bad_token.prompt_ids = {1, -4};
  fed.push_back(bad_token);
  std::unique_ptr<Engine> engine = makeEngine(tinyEngineOptions(4, 4, 32));
  const FeedRun run = runFed(*engine, fed, 3);
  expectEveryReportedOnce(run, fed.size());
  ASSERT_EQ(run.errors.size(), 2u);
  EXPECT_NE(run.errors.at(idOf(8)).find("context holds 128"), std::string::npos)
      << run.errors.at(idOf(8));
  EXPECT_NE(run.errors.at(idOf(9)).find("outside the vocabulary"), std::string::npos)
      << run.errors.at(idOf(9));
  for (size_t r = 0; r < requests.size(); ++r)
    expectSoloBits(run.results.at(idOf(r)), solo[r], false, "request " + std::to_string(r));
}

TEST(EngineFeed, AClosedEmptyFeedReturnsAndAClosedQueueRefusesPushes) {
  std::unique_ptr<Engine> engine = makeEngine(tinyEngineOptions(2, 16, 0));
  RequestQueue queue;
  queue.close();
  EXPECT_FALSE(queue.push(1, GenerationRequest()));
  EXPECT_EQ(queue.queued(), 0u);
  int reports = 0;
  EXPECT_EQ(
      engine->generateFromFeed(
          queue, {}, [&](uint64_t, Status, const std::string&, GenerationResult) { ++reports; }),
      Status::kSuccess);
  EXPECT_EQ(reports, 0);
  // And the engine still generates afterwards.
  GenerationRequest request;
  request.prompt_ids = {5, 6, 7};
  request.max_new_tokens = 3;
  std::vector<GenerationResult> results;
  EXPECT_EQ(engine->generate({request}, &results), Status::kSuccess) << lastErrorMessage();
  EXPECT_EQ(results.at(0).output_ids.size(), 3u);
}

// A feed whose requests come from another thread, the engine blocking on it while idle.
TEST(EngineFeed, AnIdleEngineWaitsForRequestsFromAnotherThread) {
  const std::vector<GenerationRequest> requests = randomRequests(6, 13);
  const std::vector<GenerationResult> solo = soloResults(requests);
  std::unique_ptr<Engine> engine = makeEngine(tinyEngineOptions(4, 16, 0));
  RequestQueue queue;
  std::map<uint64_t, GenerationResult> results;
  std::thread pusher([&] {
    for (size_t r = 0; r < requests.size(); ++r) {
      std::this_thread::sleep_for(std::chrono::milliseconds(r % 2 ? 0 : 30));
      queue.push(idOf(r), requests[r]);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    queue.close();
  });
  const Status status = engine->generateFromFeed(
      queue, {}, [&](uint64_t id, Status, const std::string&, GenerationResult result) {
        results[id] = std::move(result);
      });
  pusher.join();
  ASSERT_EQ(status, Status::kSuccess) << lastErrorMessage();
  ASSERT_EQ(results.size(), requests.size());
  for (size_t r = 0; r < requests.size(); ++r)
    expectSoloBits(results.at(idOf(r)), solo[r], false, "request " + std::to_string(r));
}

}  // namespace
}  // namespace ree
