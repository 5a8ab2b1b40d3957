// GenerationRequest::top_logprobs: every produced token's log-probability and top alternatives,
// computed by the CPU RepOps log_softmax from the very logits row the token was drawn from.
// Checked against an independent float64 log_softmax of that row (within 1e-6 relative; absolute
// below magnitude 1) (Engine::prefillLogits, whose
// rows hash to step_logits_sha256), bitwise run to run and alone vs in a batch, the top-N order
// and its tie rule (lower id first), and the refusals.
#include <cmath>
#include <cstring>
#include <limits>

#include "../../models/src/engine/token_logprobs.h"
#include "ree/models/engine.h"
#include "test_util.h"

namespace ree {
namespace {

std::unique_ptr<Engine> tinyEngine(int max_batch) {
  EngineOptions options;
  options.model = "builtin:tiny-llama";
  options.device = Device::cpu();
  options.max_batch = max_batch;
  options.max_context = 128;
  std::unique_ptr<Engine> engine;
  EXPECT_EQ(Engine::create(options, &engine), Status::kSuccess) << lastErrorMessage();
  return engine;
}

GenerationRequest request(std::vector<int32_t> prompt, int top, float temperature) {
  GenerationRequest r;
  r.prompt_ids = std::move(prompt);
  r.max_new_tokens = 10;
  r.top_logprobs = top;
  r.sampling.temperature = temperature;
  r.sampling.top_k = temperature > 0 ? 40 : 0;
  r.sampling.seed = 11;
  r.sampling_index = 0;
  return r;
}

uint32_t bits(float x) {
  uint32_t b;
  std::memcpy(&b, &x, sizeof(b));
  return b;
}

void expectSameBits(const std::vector<TokenLogprobs>& a, const std::vector<TokenLogprobs>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t t = 0; t < a.size(); ++t) {
    EXPECT_EQ(bits(a[t].logprob), bits(b[t].logprob)) << "token " << t;
    ASSERT_EQ(a[t].top.size(), b[t].top.size());
    for (size_t k = 0; k < a[t].top.size(); ++k) {
      EXPECT_EQ(a[t].top[k].token, b[t].top[k].token);
      EXPECT_EQ(bits(a[t].top[k].logprob), bits(b[t].top[k].logprob));
    }
  }
}

TEST(TokenLogprobs, EqualFloat64LogSoftmaxOfTheHashedRow) {
  std::unique_ptr<Engine> engine = tinyEngine(4);
  ASSERT_NE(engine, nullptr);
  for (float temperature : {0.0f, 0.8f}) {
    std::vector<GenerationResult> results;
    ASSERT_EQ(engine->generate({request({5, 17, 42, 9}, 5, temperature)}, &results),
              Status::kSuccess)
        << lastErrorMessage();
    const GenerationResult& res = results[0];
    ASSERT_EQ(res.token_logprobs.size(), res.output_ids.size());
    ASSERT_GE(res.output_ids.size(), 2u);
    std::vector<int32_t> ids = res.prompt_ids;
    ids.insert(ids.end(), res.output_ids.begin(), res.output_ids.end() - 1);
    std::vector<float> logits;
    ASSERT_EQ(engine->prefillLogits(ids, &logits), Status::kSuccess) << lastErrorMessage();
    const int64_t vocab = engine->config().vocab_size;
    for (size_t t = 0; t < res.output_ids.size(); ++t) {
      const float* row = logits.data() + (res.prompt_ids.size() - 1 + t) * vocab;
      // The row the token was drawn from: its hash is the step's.
      ASSERT_EQ(sha256Hex(row, vocab * sizeof(float)), res.step_logits_sha256[t]);
      double max = -std::numeric_limits<double>::infinity();
      for (int64_t i = 0; i < vocab; ++i)
        max = std::max(max, static_cast<double>(row[i]));
      double sum = 0.0;
      for (int64_t i = 0; i < vocab; ++i)
        sum += std::exp(static_cast<double>(row[i]) - max);
      auto reference = [&](int32_t id) { return (row[id] - max) - std::log(sum); };
      const TokenLogprobs& got = res.token_logprobs[t];
      const double want = reference(res.output_ids[t]);
      EXPECT_NEAR(got.logprob, want, 1e-6 * std::max(1.0, std::fabs(want))) << "token " << t;
      ASSERT_EQ(got.top.size(), 5u);
      for (size_t k = 0; k < got.top.size(); ++k) {
        const double top_want = reference(got.top[k].token);
        EXPECT_NEAR(got.top[k].logprob, top_want, 1e-6 * std::max(1.0, std::fabs(top_want)));
        if (k > 0) {
          EXPECT_GE(got.top[k - 1].logprob, got.top[k].logprob);
        }
      }
      // Nothing outside the top list ranks above its last entry.
      for (int64_t i = 0; i < vocab; ++i) {
        bool listed = false;
        for (const TokenLogprob& kept : got.top)
          listed |= kept.token == i;
        if (!listed) {
          EXPECT_LE(reference(static_cast<int32_t>(i)), reference(got.top.back().token));
        }
      }
      if (temperature == 0.0f) {
        EXPECT_EQ(got.top[0].token, res.output_ids[t]);
      }
    }
  }
}

TEST(TokenLogprobs, SameBitsRunToRunAndAloneOrInABatch) {
  std::unique_ptr<Engine> engine = tinyEngine(4);
  ASSERT_NE(engine, nullptr);
  const GenerationRequest probe = request({8, 3, 99, 120, 7}, 3, 0.7f);
  std::vector<GenerationResult> alone, again, batched;
  ASSERT_EQ(engine->generate({probe}, &alone), Status::kSuccess) << lastErrorMessage();
  ASSERT_EQ(engine->generate({probe}, &again), Status::kSuccess) << lastErrorMessage();
  GenerationRequest other = request({1, 2, 3}, -1, 0.0f);
  other.sampling_index = 1;
  GenerationRequest third = request({200, 201, 202, 203, 204, 205, 206}, 20, 0.5f);
  third.sampling_index = 2;
  ASSERT_EQ(engine->generate({other, probe, third}, &batched), Status::kSuccess)
      << lastErrorMessage();
  ASSERT_EQ(alone[0].output_ids, batched[1].output_ids);
  expectSameBits(alone[0].token_logprobs, again[0].token_logprobs);
  expectSameBits(alone[0].token_logprobs, batched[1].token_logprobs);
  EXPECT_TRUE(batched[0].token_logprobs.empty());  // off: nothing computed
  EXPECT_EQ(batched[2].token_logprobs.size(), batched[2].output_ids.size());
  for (const TokenLogprobs& step : batched[2].token_logprobs)
    EXPECT_EQ(step.top.size(), 20u);
}

TEST(TokenLogprobs, TopListOrderAndTieRule) {
  // Logits with ties: ids 2 and 5 share the largest value, 0, 3 and 6 the next.
  const std::vector<float> row = {1.0f, -2.0f, 3.0f, 1.0f, 0.5f, 3.0f, 1.0f, -7.0f};
  std::vector<float> scratch;
  TokenLogprobs out;
  ASSERT_EQ(models::computeTokenLogprobs(row.data(), 8, 4, 4, &scratch, &out), Status::kSuccess);
  ASSERT_EQ(out.top.size(), 4u);
  EXPECT_EQ(out.top[0].token, 2);
  EXPECT_EQ(out.top[1].token, 5);
  EXPECT_EQ(out.top[2].token, 0);
  EXPECT_EQ(out.top[3].token, 3);
  EXPECT_EQ(bits(out.top[0].logprob), bits(out.top[1].logprob));
  EXPECT_EQ(bits(out.logprob), bits(scratch[4]));
  ASSERT_EQ(models::computeTokenLogprobs(row.data(), 8, 4, 0, &scratch, &out), Status::kSuccess);
  EXPECT_TRUE(out.top.empty());
  EXPECT_NE(models::computeTokenLogprobs(row.data(), 8, 4, 21, &scratch, &out), Status::kSuccess);
  EXPECT_NE(models::computeTokenLogprobs(row.data(), 8, 8, 1, &scratch, &out), Status::kSuccess);
}

TEST(TokenLogprobs, OutOfRangeRequestIsRefused) {
  std::unique_ptr<Engine> engine = tinyEngine(2);
  ASSERT_NE(engine, nullptr);
  std::vector<GenerationResult> results;
  EXPECT_NE(engine->generate({request({5, 6}, 21, 0.0f)}, &results), Status::kSuccess);
  EXPECT_NE(std::string(lastErrorMessage()).find("top_logprobs"), std::string::npos);
  EXPECT_NE(engine->generate({request({5, 6}, -2, 0.0f)}, &results), Status::kSuccess);
}

}  // namespace
}  // namespace ree
