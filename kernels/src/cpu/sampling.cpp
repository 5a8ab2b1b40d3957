// CPU argmax and sampling (docs/repops-spec/sampling.md); shared pieces live in sampling.h.
#include "ree/kernels/sampling.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "ree/kernels/cpu_parallel.h"

namespace ree::repops::cpu {
namespace {

int32_t argmaxRow(const float* row, int64_t vocab) {
  int64_t best = 0;
  for (int64_t i = 1; i < vocab; ++i) {
    if (argmaxBetter(row[i], i, row[best], best)) best = i;
  }
  return static_cast<int32_t>(best);
}

Status checkLogits(const char* name, const float* logits, int64_t batch, int64_t vocab,
                   const int32_t* out) {
  REE_CHECK_ARG(batch >= 0 && vocab > 0 && vocab <= INT32_MAX,
                "%s: bad shape batch=%lld vocab=%lld (vocab must be in [1, 2^31))", name,
                static_cast<long long>(batch), static_cast<long long>(vocab));
  if (batch > 0) {
    REE_CHECK_ARG(logits && out, "%s: null pointer (logits=%p out=%p)", name,
                  static_cast<const void*>(logits), static_cast<const void*>(out));
  }
  return Status::kSuccess;
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
  REE_RETURN_IF_ERROR(checkLogits("argmax", logits, batch, vocab, out));
  parallelFor(batch, 1, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b)
      out[b] = argmaxRow(logits + b * vocab, vocab);
  });
  return Status::kSuccess;
}

Status sample(const float* logits, int64_t batch, int64_t vocab, const SamplingParams* params,
              int32_t* out) {
  REE_RETURN_IF_ERROR(checkLogits("sample", logits, batch, vocab, out));
  if (batch == 0) return Status::kSuccess;
  REE_CHECK_ARG(params != nullptr, "sample: params is null");
  for (int64_t b = 0; b < batch; ++b) {
    const SamplingParams& p = params[b];
    REE_CHECK_ARG(std::isfinite(p.temperature) && p.temperature >= 0.0f,
                  "sample: params[%lld].temperature must be finite and >= 0, got %g",
                  static_cast<long long>(b), static_cast<double>(p.temperature));
    REE_CHECK_ARG(p.top_k >= 0, "sample: params[%lld].top_k must be >= 0, got %d",
                  static_cast<long long>(b), p.top_k);
    REE_CHECK_ARG(p.top_p > 0.0f && p.top_p <= 1.0f,
                  "sample: params[%lld].top_p must be in (0, 1], got %g", static_cast<long long>(b),
                  static_cast<double>(p.top_p));
  }
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
