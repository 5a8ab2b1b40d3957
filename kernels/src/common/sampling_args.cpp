#include "sampling_args.h"

#include <cstdio>

namespace ree::repops {

Status validateSamplingParams(const SamplingParams& params, const char* who) {
  // One comparison pair per bound, written so that NaN fails it.
  REE_CHECK_ARG(params.temperature >= 0.0f && params.temperature <= kMaxSamplingTemperature,
                "%s.temperature must be in [0, %g], got %g", who,
                static_cast<double>(kMaxSamplingTemperature),
                static_cast<double>(params.temperature));
  REE_CHECK_ARG(params.top_k >= 0, "%s.top_k must be >= 0, got %d", who, params.top_k);
  REE_CHECK_ARG(params.top_p > 0.0f && params.top_p <= 1.0f, "%s.top_p must be in (0, 1], got %g",
                who, static_cast<double>(params.top_p));
  return Status::kSuccess;
}

Status validateLogitsArgs(const char* name, const float* logits, int64_t batch, int64_t vocab,
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

Status validateSampleArgs(const float* logits, int64_t batch, int64_t vocab,
                          const SamplingParams* params, const int32_t* out) {
  REE_RETURN_IF_ERROR(validateLogitsArgs("sample", logits, batch, vocab, out));
  if (batch == 0) return Status::kSuccess;
  REE_CHECK_ARG(params != nullptr, "sample: params is null");
  for (int64_t b = 0; b < batch; ++b) {
    char who[48];
    std::snprintf(who, sizeof(who), "sample: params[%lld]", static_cast<long long>(b));
    REE_RETURN_IF_ERROR(validateSamplingParams(params[b], who));
  }
  return Status::kSuccess;
}

}  // namespace ree::repops
