// CPU argmax and sampling (docs/repops-spec/sampling.md); shared pieces live in sampling.h.
#include "ree/kernels/sampling.h"

#include <algorithm>
#include <cmath>
#include <vector>

#if defined(__SSE2__)
#include <immintrin.h>
#endif

#include "common/sampling_args.h"
#include "ree/core/parallel.h"

namespace ree::repops::cpu {
namespace {

// The argmaxBetter order in two passes: the largest number (and whether a NaN occurs), then the
// first index holding a NaN or that value. Equal values, -0 and +0 included, compare equal, so
// the second pass returns the lowest index among them, as argmaxBetter does. On x86 both passes
// run four lanes at a time: MAXPS computes exactly `v > m ? v : m` per lane (a compiler may not
// vectorise that ternary without fast-math flags). The scalar single pass over a 128k vocabulary
// cost as much per token as a GPU decode step's small kernels together.
int32_t argmaxRow(const float* row, int64_t vocab) {
  int64_t i = 0;
  float best = -INFINITY;
  bool nan = false;
#if defined(__SSE2__)
  __m128 max0 = _mm_set1_ps(-INFINITY), max1 = max0;
  __m128 nan0 = _mm_setzero_ps(), nan1 = nan0;
  for (; i + 8 <= vocab; i += 8) {
    const __m128 a = _mm_loadu_ps(row + i), b = _mm_loadu_ps(row + i + 4);
    max0 = _mm_max_ps(a, max0);  // a > max0 ? a : max0, per lane
    max1 = _mm_max_ps(b, max1);
    nan0 = _mm_or_ps(nan0, _mm_cmpunord_ps(a, a));
    nan1 = _mm_or_ps(nan1, _mm_cmpunord_ps(b, b));
  }
  alignas(16) float lanes[8];
  _mm_store_ps(lanes, max0);
  _mm_store_ps(lanes + 4, max1);
  for (float v : lanes)
    best = v > best ? v : best;
  nan = _mm_movemask_ps(_mm_or_ps(nan0, nan1)) != 0;
#endif
  for (; i < vocab; ++i) {
    nan |= row[i] != row[i];
    best = row[i] > best ? row[i] : best;
  }
  int64_t k = 0;
#if defined(__SSE2__)
  const __m128 target = _mm_set1_ps(best);
  for (; k + 4 <= vocab; k += 4) {
    const __m128 v = _mm_loadu_ps(row + k);
    const int hits = _mm_movemask_ps(nan ? _mm_cmpunord_ps(v, v) : _mm_cmpeq_ps(v, target));
    if (hits != 0) return static_cast<int32_t>(k + __builtin_ctz(static_cast<unsigned>(hits)));
  }
#endif
  for (; k < vocab; ++k) {
    if (nan ? row[k] != row[k] : row[k] == best) return static_cast<int32_t>(k);
  }
  return 0;  // unreachable: best is one of the values (all -inf: the first)
}

int32_t sampleRow(const float* row, int64_t vocab, const SamplingParams& params,
                  std::vector<uint64_t>& keys, std::vector<float>& weights) {
  const int32_t best = argmaxRow(row, vocab);
  if (!std::isfinite(row[best]) || params.temperature == 0.0f || params.top_k == 1) return best;

  // Candidates: the first `kept` of the order (value descending, index ascending).
  const int64_t kept = (params.top_k <= 0 || params.top_k >= vocab) ? vocab : params.top_k;
  keys.resize(vocab);
  for (int64_t i = 0; i < vocab; ++i)
    keys[i] = samplingSortKey(row[i], static_cast<uint32_t>(i));
  if (kept < vocab) {
    std::nth_element(keys.begin(), keys.begin() + kept, keys.end());
  }
  std::sort(keys.begin(), keys.begin() + kept);
  auto candidate = [&](int64_t j) { return static_cast<uint32_t>(keys[j]); };

  const float best_value = row[best];
  weights.resize(kept);
  for (int64_t j = 0; j < kept; ++j) {
    weights[j] = samplingWeight(row[candidate(j)], best_value, params.temperature);
  }

  // Top-p: keep the shortest prefix whose canonical prefix sum reaches top_p * total.
  int64_t nucleus = kept;
  if (params.top_p < 1.0f) {
    const float total = canonicalSum(static_cast<int>(kept), [&](int j) { return weights[j]; });
    const float threshold = params.top_p * total;
    CanonicalPrefix prefix;
    for (int64_t j = 0; j < kept; ++j) {
      if (prefix.add(weights[j]) >= threshold) {
        nucleus = j + 1;
        break;
      }
    }
  }

  // Inverse CDF: the first candidate whose canonical prefix sum exceeds u * total.
  const float total = canonicalSum(static_cast<int>(nucleus), [&](int j) { return weights[j]; });
  const float target = samplingUniform(params.seed, params.sequence, params.step) * total;
  CanonicalPrefix prefix;
  for (int64_t j = 0; j < nucleus; ++j) {
    if (prefix.add(weights[j]) > target) return static_cast<int32_t>(candidate(j));
  }
  return static_cast<int32_t>(
      candidate(nucleus - 1));  // unreachable: prefix(last) = total > target
}

}  // namespace

Status argmax(const float* logits, int64_t batch, int64_t vocab, int32_t* out) {
  REE_RETURN_IF_ERROR(validateLogitsArgs("argmax", logits, batch, vocab, out));
  parallelFor(batch, 1, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b)
      out[b] = argmaxRow(logits + b * vocab, vocab);
  });
  return Status::kSuccess;
}

Status sample(const float* logits, int64_t batch, int64_t vocab, const SamplingParams* params,
              int32_t* out) {
  REE_RETURN_IF_ERROR(validateSampleArgs(logits, batch, vocab, params, out));
  if (batch == 0) return Status::kSuccess;
  parallelFor(batch, 1, [&](int64_t begin, int64_t end) {
    std::vector<uint64_t> keys;
    std::vector<float> weights;
    for (int64_t b = begin; b < end; ++b) {
      out[b] = sampleRow(logits + b * vocab, vocab, params[b], keys, weights);
    }
  });
  return Status::kSuccess;
}

}  // namespace ree::repops::cpu
