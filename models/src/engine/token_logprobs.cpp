#include "token_logprobs.h"

#include <algorithm>
#include <cmath>

#include "ree/kernels/rowops.h"

namespace ree::models {
namespace {

// Order of the top list: larger value first, NaN above every number, equal values by lower id.
bool ranksBefore(float a, int32_t a_id, float b, int32_t b_id) {
  const bool a_nan = std::isnan(a);
  const bool b_nan = std::isnan(b);
  if (a_nan != b_nan) return a_nan;
  if (!a_nan && a != b) return a > b;
  return a_id < b_id;
}

}  // namespace

Status computeTokenLogprobs(const float* row, int64_t vocab, int32_t token, int top_n,
                            std::vector<float>* scratch, TokenLogprobs* out) {
  REE_CHECK_ARG(row != nullptr && scratch != nullptr && out != nullptr,
                "computeTokenLogprobs: null argument");
  REE_CHECK_ARG(vocab > 0 && token >= 0 && token < vocab,
                "computeTokenLogprobs: token %d outside the vocabulary [0, %lld)", token,
                static_cast<long long>(vocab));
  REE_CHECK_ARG(top_n >= 0 && top_n <= kMaxTopLogprobs,
                "computeTokenLogprobs: top_logprobs must be in [0, %d], got %d", kMaxTopLogprobs,
                top_n);
  scratch->resize(static_cast<size_t>(vocab));
  repops::RowsIn in{row, ::ree::DType::kF32, vocab};
  repops::RowsOut values{scratch->data(), ::ree::DType::kF32, vocab};
  REE_RETURN_IF_ERROR(repops::cpu::logSoftmax(in, values, 1, vocab));
  const float* logprobs = scratch->data();
  out->logprob = logprobs[token];
  out->top.clear();
  if (top_n == 0) return Status::kSuccess;
  // One pass keeping the best top_n in order: vocab x top_n comparisons at most (top_n <= 20).
  std::vector<TokenLogprob>& top = out->top;
  top.reserve(static_cast<size_t>(top_n) + 1);
  for (int64_t id = 0; id < vocab; ++id) {
    const float value = logprobs[id];
    const int32_t id32 = static_cast<int32_t>(id);
    if (static_cast<int>(top.size()) == top_n &&
        !ranksBefore(value, id32, top.back().logprob, top.back().token))
      continue;
    auto at = std::find_if(top.begin(), top.end(), [&](const TokenLogprob& kept) {
      return ranksBefore(value, id32, kept.logprob, kept.token);
    });
    top.insert(at, TokenLogprob{id32, value});
    if (static_cast<int>(top.size()) > top_n) top.pop_back();
  }
  return Status::kSuccess;
}

}  // namespace ree::models
