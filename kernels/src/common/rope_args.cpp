#include "rope_args.h"

#include <cmath>

namespace ree::repops {

Status validateRopeInvFreqArgs(float base, int rotary_dim, const RopeLlama3Scaling* llama3,
                               const float* inv_freq) {
  REE_CHECK_ARG(rotary_dim > 0 && rotary_dim % 2 == 0,
                "rope: rotary_dim must be even and > 0, got %d", rotary_dim);
  REE_CHECK_ARG(std::isfinite(base) && base > 1.0f,
                "rope: base (rope_theta) must be finite and > 1, got %g",
                static_cast<double>(base));
  if (llama3 != nullptr) {
    REE_CHECK_ARG(llama3->factor > 0.0 && std::isfinite(llama3->factor),
                  "rope llama3: factor must be finite and > 0, got %g", llama3->factor);
    REE_CHECK_ARG(llama3->low_freq_factor > 0.0 &&
                      llama3->high_freq_factor > llama3->low_freq_factor &&
                      std::isfinite(llama3->high_freq_factor),
                  "rope llama3: need 0 < low_freq_factor (%g) < high_freq_factor (%g)",
                  llama3->low_freq_factor, llama3->high_freq_factor);
    REE_CHECK_ARG(llama3->original_max_position_embeddings > 0,
                  "rope llama3: original_max_position_embeddings must be > 0, got %lld",
                  static_cast<long long>(llama3->original_max_position_embeddings));
  }
  REE_CHECK_ARG(inv_freq != nullptr, "ropeInvFreq: inv_freq is null");
  return Status::kSuccess;
}

Status validateRopeArgs(const void* x, int64_t tokens, int heads, int head_dim,
                        int64_t token_stride, const int32_t* positions, const float* inv_freq,
                        int rotary_dim, RopeLayout layout) {
  REE_CHECK_ARG(tokens >= 0 && heads > 0 && head_dim > 0,
                "rope: bad shape tokens=%lld heads=%d head_dim=%d", static_cast<long long>(tokens),
                heads, head_dim);
  REE_CHECK_ARG(rotary_dim > 0 && rotary_dim % 2 == 0 && rotary_dim <= head_dim,
                "rope: rotary_dim must be even, > 0 and <= head_dim (%d), got %d", head_dim,
                rotary_dim);
  REE_CHECK_ARG(token_stride >= static_cast<int64_t>(heads) * head_dim,
                "rope: token_stride %lld < heads * head_dim %lld",
                static_cast<long long>(token_stride), static_cast<long long>(heads) * head_dim);
  REE_CHECK_ARG(layout == RopeLayout::kHalfSplit || layout == RopeLayout::kInterleaved,
                "rope: unknown layout %d", static_cast<int>(layout));
  if (tokens == 0) return Status::kSuccess;
  REE_CHECK_ARG(x && positions && inv_freq, "rope: null pointer (x=%p positions=%p inv_freq=%p)", x,
                static_cast<const void*>(positions), static_cast<const void*>(inv_freq));
  return Status::kSuccess;
}

}  // namespace ree::repops
