// Argmax, Philox4x32-10 and sampling (sampling.h): Random123 known answers, tie and NaN rules,
// greedy limits, the empirical distribution against an fp64 softmax (chi-square), determinism and
// golden pins of repops-1.
#include "ree/kernels/sampling.h"

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "ree/core/parallel.h"
#include "test_util.h"

namespace ree {
namespace {

namespace cpu = repops::cpu;
using repops::SamplingParams;

TEST(Philox, MatchesRandom123KnownAnswers) {
  // Random123 1.14 tests/kat_vectors, "philox4x32 10": counter[4], key[2] -> output[4].
  struct Kat {
    uint32_t counter[4];
    uint32_t key[2];
    uint32_t expected[4];
  };
  const Kat kats[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
       {0xffffffff, 0xffffffff},
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
       {0xa4093822, 0x299f31d0},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (const Kat& kat : kats) {
    Philox4x32 counter{{kat.counter[0], kat.counter[1], kat.counter[2], kat.counter[3]}};
    Philox4x32 out = philox4x32_10(counter, kat.key[0], kat.key[1]);
    for (int i = 0; i < 4; ++i)
      EXPECT_EQ(out.v[i], kat.expected[i]) << "word " << i;
  }
}

TEST(Philox, UniformBitConstruction) {
  // u = (word0 >> 8) * 2^-24 with key (seed lo, seed hi), counter (step lo, step hi, seq lo, seq
  // hi).
  const uint64_t seed = 0xa4093822299f31d0ull, sequence = 0x0370734413198a2eull,
                 step = 0x85a308d3243f6a88ull;
  // Counter/key words of the third known answer, rearranged: word0 = 0xd16cfe09.
  const float u =
      samplingUniform(0x299f31d0a4093822ull, 0x0370734413198a2eull, 0x85a308d3243f6a88ull);
  EXPECT_EQ(u, static_cast<float>(0xd16cfe09u >> 8) / 16777216.0f);
  (void)seed;
  (void)sequence;
  (void)step;
  float lowest = 1, highest = 0;
  for (uint64_t s = 0; s < 100000; ++s) {
    const float v = samplingUniform(42, 7, s);
    ASSERT_GE(v, 0.0f);
    ASSERT_LT(v, 1.0f);
    ASSERT_EQ(v * 16777216.0f, std::floor(v * 16777216.0f));  // a multiple of 2^-24
    lowest = std::min(lowest, v);
    highest = std::max(highest, v);
  }
  EXPECT_LT(lowest, 1e-4f);
  EXPECT_GT(highest, 1.0f - 1e-4f);
}

int32_t referenceArgmax(const std::vector<float>& row) {
  int32_t best = -1;
  for (size_t i = 0; i < row.size(); ++i) {
    if (std::isnan(row[i])) return static_cast<int32_t>(i);  // first NaN wins
    if (best < 0 || row[i] > row[best]) best = static_cast<int32_t>(i);
  }
  return best;
}

TEST(Argmax, TiesNanAndSignedZeros) {
  const float inf = INFINITY, nan = NAN;
  const std::vector<std::vector<float>> rows = {
      {1, 3, 3, 2},     {-0.0f, 0.0f}, {0.0f, -0.0f},   {-inf, -inf, -inf},
      {1, nan, 5, nan}, {inf, 2, inf}, {5, 4, 3, 2, 1}, {-1, -1, -0.5f, -0.5f}};
  const std::vector<int32_t> expected = {1, 0, 0, 0, 1, 0, 0, 2};
  for (size_t r = 0; r < rows.size(); ++r) {
    int32_t out = -1;
    ASSERT_EQ(cpu::argmax(rows[r].data(), 1, rows[r].size(), &out), Status::kSuccess);
    EXPECT_EQ(out, expected[r]) << "row " << r;
  }
}

TEST(Argmax, MatchesReferenceOnRandomRowsWithDuplicates) {
  std::mt19937_64 rng(5);
  const int64_t batch = 17, vocab = 1031;
  std::vector<float> logits(batch * vocab);
  for (auto& v : logits)
    v = static_cast<float>(static_cast<int>(rng() % 50)) * 0.25f;  // ties
  std::vector<int32_t> out(batch);
  ASSERT_EQ(cpu::argmax(logits.data(), batch, vocab, out.data()), Status::kSuccess);
  for (int64_t b = 0; b < batch; ++b) {
    std::vector<float> row(logits.begin() + b * vocab, logits.begin() + (b + 1) * vocab);
    EXPECT_EQ(out[b], referenceArgmax(row));
  }
}

TEST(Argmax, MatchesReferenceWithSpecialValuesAnywhere) {
  // Lengths around the CPU kernel's 8-wide blocks; NaN, infinities, signed zeros and ties at
  // random places, including the tail after the last full block.
  std::mt19937_64 rng(11);
  const float specials[] = {NAN, -NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 7.0f, -7.0f};
  for (int64_t vocab : {1, 2, 7, 8, 9, 15, 16, 17, 63, 129, 1000, 4099}) {
    for (int trial = 0; trial < 60; ++trial) {
      std::vector<float> row(vocab);
      for (auto& v : row)
        v = static_cast<float>(static_cast<int>(rng() % 9) - 4);  // ties in [-4, 4]
      const int n_special = static_cast<int>(rng() % 4);
      for (int s = 0; s < n_special; ++s)
        row[rng() % vocab] = specials[rng() % 8];
      if (trial % 7 == 0) std::fill(row.begin(), row.end(), -INFINITY);
      if (trial % 11 == 0) std::fill(row.begin(), row.end(), (trial & 1) ? -0.0f : 0.0f);
      int32_t out = -1;
      ASSERT_EQ(cpu::argmax(row.data(), 1, vocab, &out), Status::kSuccess);
      ASSERT_EQ(out, referenceArgmax(row)) << "vocab " << vocab << " trial " << trial;
    }
  }
}

std::vector<float> randomLogits(int64_t n, uint64_t seed, float scale) {
  return test::randomValues<float>(n, seed, scale);
}

TEST(Sample, GreedyLimitsEqualArgmax) {
  const int64_t batch = 9, vocab = 333;
  std::vector<float> logits = randomLogits(batch * vocab, 8, 3.0f);
  std::vector<int32_t> greedy(batch);
  ASSERT_EQ(cpu::argmax(logits.data(), batch, vocab, greedy.data()), Status::kSuccess);
  for (uint64_t step = 0; step < 20; ++step) {
    for (int mode = 0; mode < 3; ++mode) {
      std::vector<SamplingParams> params(batch);
      for (int64_t b = 0; b < batch; ++b) {
        params[b].seed = 1;
        params[b].sequence = b;
        params[b].step = step;
        if (mode == 0) params[b].temperature = 0.0f;                           // greedy
        if (mode == 1) params[b].top_k = 1;                                    // top-1
        if (mode == 2) params[b].temperature = 1e-4f, params[b].top_p = 0.9f;  // T -> 0
      }
      std::vector<int32_t> out(batch);
      ASSERT_EQ(cpu::sample(logits.data(), batch, vocab, params.data(), out.data()),
                Status::kSuccess);
      EXPECT_EQ(out, greedy) << "mode " << mode << " step " << step;
    }
  }
}

TEST(Sample, NonFiniteRowsReturnArgmax) {
  const float inf = INFINITY;
  const std::vector<std::vector<float>> rows = {
      {1, NAN, 2}, {1, inf, 2, inf}, {-inf, -inf}, {0.5f, 1.5f, NAN}};
  const std::vector<int32_t> expected = {1, 1, 0, 2};
  for (size_t r = 0; r < rows.size(); ++r) {
    SamplingParams params;
    params.seed = r;
    int32_t out = -1;
    ASSERT_EQ(cpu::sample(rows[r].data(), 1, rows[r].size(), &params, &out), Status::kSuccess);
    EXPECT_EQ(out, expected[r]) << "row " << r;
  }
}

// Draws `draws` tokens from one row (steps 0..draws-1) and returns the count per token.
std::vector<int64_t> drawCounts(const std::vector<float>& row, SamplingParams params,
                                int64_t draws) {
  std::vector<int64_t> counts(row.size(), 0);
  const int64_t batch = 1000;
  std::vector<float> logits(batch * row.size());
  for (int64_t b = 0; b < batch; ++b)
    std::copy(row.begin(), row.end(), logits.begin() + b * row.size());
  std::vector<SamplingParams> all(batch, params);
  std::vector<int32_t> out(batch);
  for (int64_t done = 0; done < draws; done += batch) {
    for (int64_t b = 0; b < batch; ++b)
      all[b].step = done + b;
    EXPECT_EQ(cpu::sample(logits.data(), batch, row.size(), all.data(), out.data()),
              Status::kSuccess);
    for (int32_t t : out)
      ++counts[t];
  }
  return counts;
}

// fp64 softmax of row / temperature over the kept token set.
std::vector<double> softmaxFp64(const std::vector<float>& row, double temperature,
                                const std::vector<bool>& kept) {
  double best = -INFINITY, total = 0;
  for (size_t i = 0; i < row.size(); ++i)
    if (kept[i]) best = std::max(best, (double)row[i]);
  std::vector<double> p(row.size(), 0.0);
  for (size_t i = 0; i < row.size(); ++i) {
    if (kept[i]) total += p[i] = std::exp((row[i] - best) / temperature);
  }
  for (auto& v : p)
    v /= total;
  return p;
}

// Pearson chi-square over tokens with expected probability > 0; a count on a token with
// probability 0 makes the statistic infinite.
double chiSquare(const std::vector<int64_t>& counts, const std::vector<double>& p, int64_t draws) {
  double chi2 = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] == 0) {
      if (counts[i] != 0) return INFINITY;
      continue;
    }
    const double expected = p[i] * draws;
    chi2 += (counts[i] - expected) * (counts[i] - expected) / expected;
  }
  return chi2;
}

TEST(Sample, EmpiricalDistributionMatchesSoftmax) {
  // Distinct logits; 200000 draws. Bounds are chi-square quantiles with p about 1e-5 for the
  // degrees of freedom of each case (7 -> 35, 4 -> 30, 2 -> 23); the test is deterministic, so
  // a pass is a fixed fact about repops-1 and these seeds.
  const std::vector<float> row = {1.0f, 2.5f, 0.3f, 2.0f, -1.0f, 1.7f, 0.9f, 2.2f};
  const int64_t draws = 200000;
  const std::vector<bool> all(8, true);
  struct Case {
    float temperature;
    int top_k;
    float top_p;
    std::vector<bool> kept;
    double bound;
  };
  // Sorted by value: 1 (2.5), 7 (2.2), 3 (2.0), 5 (1.7), 0 (1.0), 6 (0.9), 2 (0.3), 4 (-1.0).
  // top_p = 0.6 at T = 1: cumulative 0.311, 0.541, 0.714 -> tokens {1, 7, 3} (far from 0.6).
  const std::vector<Case> cases = {
      {1.0f, 0, 1.0f, all, 35.0},
      {0.7f, 0, 1.0f, all, 35.0},
      {1.0f, 5, 1.0f, {true, true, false, true, false, true, false, true}, 30.0},
      {1.0f, 0, 0.6f, {false, true, false, true, false, false, false, true}, 23.0},
  };
  for (const Case& c : cases) {
    SamplingParams params;
    params.temperature = c.temperature;
    params.top_k = c.top_k;
    params.top_p = c.top_p;
    params.seed = 2024;
    params.sequence = 3;
    std::vector<int64_t> counts = drawCounts(row, params, draws);
    std::vector<double> p = softmaxFp64(row, c.temperature, c.kept);
    const double chi2 = chiSquare(counts, p, draws);
    EXPECT_LT(chi2, c.bound) << "T " << c.temperature << " top_k " << c.top_k << " top_p "
                             << c.top_p;
    // The same counts are far from a wrong distribution (the test has power: T * 1.1 fails the
    // bound).
    std::vector<double> wrong = softmaxFp64(row, c.temperature * 1.1, c.kept);
    EXPECT_GT(chiSquare(counts, wrong, draws), c.bound);
  }
}

TEST(Sample, DeterministicAndIndependentOfThreadCount) {
  const int64_t batch = 33, vocab = 1000;
  std::vector<float> logits = randomLogits(batch * vocab, 77, 2.0f);
  std::vector<SamplingParams> params(batch);
  for (int64_t b = 0; b < batch; ++b) {
    params[b] = SamplingParams{
        0.8f, static_cast<int32_t>(b % 4 == 0 ? 0 : 50), 0.95f, 9, static_cast<uint64_t>(b), 4};
  }
  std::vector<int32_t> first(batch), second(batch), serial(batch);
  ASSERT_EQ(cpu::sample(logits.data(), batch, vocab, params.data(), first.data()),
            Status::kSuccess);
  ASSERT_EQ(cpu::sample(logits.data(), batch, vocab, params.data(), second.data()),
            Status::kSuccess);
  const int threads = cpuThreads();
  setCpuThreads(1);
  ASSERT_EQ(cpu::sample(logits.data(), batch, vocab, params.data(), serial.data()),
            Status::kSuccess);
  setCpuThreads(threads);
  EXPECT_EQ(first, second);
  EXPECT_EQ(first, serial);
  // A row's token depends on (seed, sequence, step) only, not on its batch position.
  int32_t alone = -1;
  ASSERT_EQ(cpu::sample(logits.data() + 5 * vocab, 1, vocab, &params[5], &alone), Status::kSuccess);
  EXPECT_EQ(alone, first[5]);
  // Different steps give different tokens somewhere (the draw is not constant).
  std::map<int32_t, int> seen;
  for (uint64_t step = 0; step < 50; ++step) {
    SamplingParams p = params[1];
    p.step = step;
    int32_t token = -1;
    ASSERT_EQ(cpu::sample(logits.data() + vocab, 1, vocab, &p, &token), Status::kSuccess);
    ++seen[token];
  }
  EXPECT_GT(seen.size(), 3u);
}

TEST(Sample, LongRowsCrossReductionChunks) {
  // 5000 equal logits: every candidate has weight 1, the canonical prefix sums are integers, so
  // the inverse CDF must pick index floor(u * 5000) exactly.
  const int64_t vocab = 5000;
  std::vector<float> logits(vocab, 0.25f);
  for (uint64_t step = 0; step < 200; ++step) {
    SamplingParams params;
    params.seed = 11;
    params.step = step;
    int32_t token = -1;
    ASSERT_EQ(cpu::sample(logits.data(), 1, vocab, &params, &token), Status::kSuccess);
    const float u = samplingUniform(11, 0, step);
    EXPECT_EQ(token, static_cast<int32_t>(std::floor(static_cast<double>(u * 5000.0f))));
  }
}

TEST(Sample, RejectsBadParameters) {
  std::vector<float> logits(10, 0.0f);
  int32_t out;
  SamplingParams params;
  params.temperature = -1.0f;
  EXPECT_EQ(cpu::sample(logits.data(), 1, 10, &params, &out), Status::kInvalidArgument);
  EXPECT_NE(std::string(lastErrorMessage()).find("params[0].temperature"), std::string::npos);
  // The one set of limits (validateSamplingParams): temperature in [0, 1e4], NaN refused.
  params.temperature = repops::kMaxSamplingTemperature;
  EXPECT_EQ(cpu::sample(logits.data(), 1, 10, &params, &out), Status::kSuccess);
  params.temperature = 1e5f;
  EXPECT_EQ(cpu::sample(logits.data(), 1, 10, &params, &out), Status::kInvalidArgument);
  EXPECT_NE(std::string(lastErrorMessage()).find("params[0].temperature"), std::string::npos);
  params.temperature = std::nanf("");
  EXPECT_EQ(repops::validateSamplingParams(params, "row"), Status::kInvalidArgument);
  params = SamplingParams{};
  params.top_p = 0.0f;
  EXPECT_EQ(cpu::sample(logits.data(), 1, 10, &params, &out), Status::kInvalidArgument);
  params = SamplingParams{};
  params.top_k = -3;
  EXPECT_EQ(cpu::sample(logits.data(), 1, 10, &params, &out), Status::kInvalidArgument);
  EXPECT_EQ(cpu::argmax(logits.data(), 1, 0, &out), Status::kInvalidArgument);
}

TEST(Sample, GoldenPins) {
  const int64_t batch = 64, vocab = 3001;
  std::vector<float> logits = randomLogits(batch * vocab, 123, 2.5f);
  std::vector<SamplingParams> params(batch);
  for (int64_t b = 0; b < batch; ++b) {
    params[b] = SamplingParams{b % 3 == 0 ? 1.0f : 0.6f, static_cast<int32_t>(b % 5 == 0 ? 0 : 40),
                               b % 2 == 0 ? 1.0f : 0.9f, 0x5eedull,
                               static_cast<uint64_t>(b), static_cast<uint64_t>(b * 3)};
  }
  std::vector<int32_t> tokens(batch), greedy(batch);
  ASSERT_EQ(cpu::sample(logits.data(), batch, vocab, params.data(), tokens.data()),
            Status::kSuccess);
  ASSERT_EQ(cpu::argmax(logits.data(), batch, vocab, greedy.data()), Status::kSuccess);
  std::vector<float> uniforms;
  for (uint64_t s = 0; s < 16; ++s)
    uniforms.push_back(samplingUniform(1, 2, s));
  EXPECT_EQ(test::hex64(test::hashOf(uniforms)), "dbcab295473e89c9");
  EXPECT_EQ(test::hex64(test::hashOf(greedy)), "6093cac473fd8bcf");
  EXPECT_EQ(test::hex64(test::hashOf(tokens)), "63f540d56dc5d0b6");
}

}  // namespace
}  // namespace ree
