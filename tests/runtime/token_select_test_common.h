// Helpers shared by token_select_test.cpp and token_select_gpu_test.cpp.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "ree/kernels/sampling.h"

namespace ree::token_select_test {

// [rows, vocab] logits whose rows exercise the selection order: random values, a tie of the
// maximum (the lower index wins), -0 beside +0, infinities, NaN (the first NaN wins, as
// torch.argmax) and a row of one repeated value.
inline std::vector<float> trickyLogits(int64_t rows, int64_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 4.0f);
  std::vector<float> logits(static_cast<size_t>(rows * vocab));
  for (float& v : logits)
    v = normal(rng);
  auto at = [&](int64_t r, int64_t i) -> float& {
    return logits[static_cast<size_t>(r * vocab + i)];
  };
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (int64_t r = 0; r < rows; ++r) {
    switch (r % 6) {
      case 1:  // a tie of the maximum
        at(r, vocab / 3) = 100.0f;
        at(r, vocab - 1) = 100.0f;
        break;
      case 2:  // -0 and +0 as the maximum
        for (int64_t i = 0; i < vocab; ++i)
          at(r, i) = -std::fabs(at(r, i)) - 1.0f;
        at(r, vocab / 2) = -0.0f;
        at(r, vocab / 4) = 0.0f;
        break;
      case 3:  // infinities
        at(r, 1) = -inf;
        at(r, vocab - 2) = inf;
        break;
      case 4:  // NaN beats everything; the first one wins
        at(r, 0) = inf;
        at(r, vocab / 2) = nan;
        at(r, vocab - 1) = nan;
        break;
      case 5:  // one value everywhere
        for (int64_t i = 0; i < vocab; ++i)
          at(r, i) = 1.5f;
        break;
      default:
        break;
    }
  }
  return logits;
}

// Independent reference: torch.argmax's choice per row (the first NaN, else the first maximum).
inline std::vector<int32_t> referenceArgmax(const std::vector<float>& logits, int64_t rows,
                                            int64_t vocab) {
  std::vector<int32_t> out;
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = logits.data() + r * vocab;
    int64_t best = 0;
    for (int64_t i = 1; i < vocab && !std::isnan(row[best]); ++i) {
      if (std::isnan(row[i]) || row[i] > row[best]) best = i;
    }
    out.push_back(static_cast<int32_t>(best));
  }
  return out;
}

// Per-row sampler parameters: greedy rows (temperature 0), full-vocabulary draws, top-k, top-p
// and both, each with its own key.
inline std::vector<repops::SamplingParams> samplingParams(int64_t rows) {
  std::vector<repops::SamplingParams> params(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    repops::SamplingParams& p = params[static_cast<size_t>(r)];
    p.temperature = r % 5 == 0 ? 0.0f : 0.5f + 0.25f * static_cast<float>(r % 4);
    p.top_k = r % 3 == 1 ? 40 : 0;
    p.top_p = r % 4 == 2 ? 0.9f : 1.0f;
    p.seed = 1000 + static_cast<uint64_t>(r);
    p.sequence = static_cast<uint64_t>(r);
    p.step = 7;
  }
  return params;
}

}  // namespace ree::token_select_test
