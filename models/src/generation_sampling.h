// Token selection for generation: validates sampling parameters and draws the next token from a
// logits row with the RepOps sampler (kernels/sampling.h), so sampled outputs are reproducible
// across hardware: the draw is keyed by (seed, request index, step) only.
#pragma once

#include <cstdint>

#include "ree/kernels/sampling.h"
#include "ree/models/engine.h"

namespace ree::models {

inline Status validateSampling(const SamplingParams& sampling, size_t request) {
  if (!(sampling.temperature >= 0.0f) || sampling.temperature > 1e4f) {
    return REE_FAIL(Status::kInvalidArgument, "request %zu: temperature %g is not in [0, 1e4]",
                    request, static_cast<double>(sampling.temperature));
  }
  if (sampling.top_k < 0) {
    return REE_FAIL(Status::kInvalidArgument, "request %zu: top_k %d is negative", request,
                    sampling.top_k);
  }
  if (!(sampling.top_p > 0.0f && sampling.top_p <= 1.0f)) {
    return REE_FAIL(Status::kInvalidArgument, "request %zu: top_p %g is not in (0, 1]", request,
                    static_cast<double>(sampling.top_p));
  }
  return Status::kSuccess;
}

// Host logits row of `vocab` floats -> token id. Greedy (temperature 0) is argmax with the lowest
// id winning ties.
inline Status sampleNextToken(const float* logits, int64_t vocab, const SamplingParams& sampling,
                              uint64_t sequence, uint64_t step, int32_t* token) {
  if (sampling.temperature == 0.0f) return repops::cpu::argmax(logits, 1, vocab, token);
  repops::SamplingParams params;
  params.temperature = sampling.temperature;
  params.top_k = sampling.top_k;
  params.top_p = sampling.top_p;
  params.seed = sampling.seed;
  params.sequence = sequence;
  params.step = step;
  return repops::cpu::sample(logits, 1, vocab, &params, token);
}

}  // namespace ree::models
