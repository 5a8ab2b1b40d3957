// Sampling parameters for generation: a request's parameters checked against the RepOps sampler's
// limits and keyed for its draws (kernels/sampling.h; the engine draws with
// runtime/token_select.h where the logits are), so sampled outputs are reproducible across
// hardware: the draw is keyed by (seed, request index, step) only.
#pragma once

#include <cstdint>
#include <cstdio>

#include "ree/kernels/sampling.h"
#include "ree/models/engine.h"

namespace ree::models {

// The request's parameters in the kernels' form, drawn for (sequence, step).
inline repops::SamplingParams toRepopsSampling(const SamplingParams& sampling, uint64_t sequence,
                                               uint64_t step) {
  repops::SamplingParams params;
  params.temperature = sampling.temperature;
  params.top_k = sampling.top_k;
  params.top_p = sampling.top_p;
  params.seed = sampling.seed;
  params.sequence = sequence;
  params.step = step;
  return params;
}

// The kernels' limits (repops::validateSamplingParams, the only set), named for request `request`:
// "requests[<request>].sampling.temperature must be in [0, 10000], got ...".
inline Status validateSampling(const SamplingParams& sampling, size_t request) {
  char who[64];
  std::snprintf(who, sizeof(who), "requests[%zu].sampling", request);
  return repops::validateSamplingParams(toRepopsSampling(sampling, 0, 0), who);
}

}  // namespace ree::models
