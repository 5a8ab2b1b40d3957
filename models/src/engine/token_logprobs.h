// Log-probabilities of generated tokens (GenerationRequest::top_logprobs), computed on the host
// from the exact fp32 logits row the token was drawn from (the row that is hashed), with REE's
// CPU RepOps log_softmax (kernels/rowops.h): the logits rows are bitwise identical across devices
// in reproducible mode, so these values are the same bits on every machine.
#pragma once

#include <cstdint>
#include <vector>

#include "ree/core/status.h"
#include "ree/models/engine.h"

namespace ree::models {

// The largest top_logprobs a request may ask for (OpenAI's limit).
inline constexpr int kMaxTopLogprobs = 20;

// `row` holds `vocab` fp32 logits; `token` is the id drawn from it. Fills out->logprob with the
// token's log_softmax value and out->top with the `top_n` (0..kMaxTopLogprobs) largest values,
// largest first, ties broken by the lower token id (NaN rows: NaN sorts first, as argmax does).
// `scratch` is reused between calls (vocab floats).
Status computeTokenLogprobs(const float* row, int64_t vocab, int32_t token, int top_n,
                            std::vector<float>* scratch, TokenLogprobs* out);

}  // namespace ree::models
