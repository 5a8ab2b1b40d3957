// Argument checks of argmax and sample (sampling.h), shared by the CPU and CUDA entry points.
// The limits of one row's parameters are public: validateSamplingParams in sampling.h.
#pragma once

#include <cstdint>

#include "ree/core/status.h"
#include "ree/kernels/sampling.h"

namespace ree::repops {

// argmax and sample: batch >= 0, vocab in [1, 2^31), logits and out not null when batch > 0.
// `name` is the operator's name in the message.
Status validateLogitsArgs(const char* name, const float* logits, int64_t batch, int64_t vocab,
                          const int32_t* out);

// sample: validateLogitsArgs, then (batch > 0) params not null and every row's parameters within
// the limits (named "sample: params[b]").
Status validateSampleArgs(const float* logits, int64_t batch, int64_t vocab,
                          const SamplingParams* params, const int32_t* out);

}  // namespace ree::repops
