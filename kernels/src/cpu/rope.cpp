// CPU RoPE (docs/repops-spec/pointwise.md, "RoPE"); the arithmetic lives in rope.h.
#include "ree/kernels/rope.h"

#include <cmath>
#include <vector>

#include "ree/core/parallel.h"

namespace ree::repops::cpu {
namespace {

Status checkRopeConfig(float base, int rotary_dim, const RopeLlama3Scaling* llama3) {
  REE_CHECK_ARG(rotary_dim > 0 && rotary_dim % 2 == 0,
                "rope: rotary_dim must be even and > 0, got %d", rotary_dim);
  REE_CHECK_ARG(std::isfinite(base) && base > 1.0f,
                "rope: base (rope_theta) must be finite and "
                "> 1, got %g",
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
  return Status::kSuccess;
}

template <typename T>
void ropeRows(T* x, int64_t tokens, int heads, int head_dim, int64_t token_stride,
              const int32_t* positions, const float* inv_freq, int rotary_dim, RopeLayout layout) {
  const int pairs = rotary_dim / 2;
  parallelFor(tokens, 16, [&](int64_t begin, int64_t end) {
    std::vector<float> cos_values(pairs), sin_values(pairs);
    for (int64_t t = begin; t < end; ++t) {
      for (int i = 0; i < pairs; ++i) {
        ropeCosSin<T>(positions[t], inv_freq[i], &cos_values[i], &sin_values[i]);
      }
      T* row = x + t * token_stride;
      for (int h = 0; h < heads; ++h) {
        T* head = row + static_cast<int64_t>(h) * head_dim;
        for (int i = 0; i < pairs; ++i) {
          int first, second;
          ropePairOffsets(layout, i, rotary_dim, &first, &second);
          ropeRotatePair(head[first], head[second], cos_values[i], sin_values[i]);
        }
      }
    }
  });
}

}  // namespace

Status ropeInvFreq(float base, int rotary_dim, const RopeLlama3Scaling* llama3, float* inv_freq) {
  REE_RETURN_IF_ERROR(checkRopeConfig(base, rotary_dim, llama3));
  REE_CHECK_ARG(inv_freq != nullptr, "ropeInvFreq: inv_freq is null");
  for (int i = 0; i < rotary_dim / 2; ++i) {
    float value = ropeInvFreqDefault(i, rotary_dim, base);
    inv_freq[i] = llama3 ? ropeInvFreqLlama3(value, *llama3) : value;
  }
  return Status::kSuccess;
}

Status rope(DType dtype, void* x, int64_t tokens, int heads, int head_dim, int64_t token_stride,
            const int32_t* positions, const float* inv_freq, int rotary_dim, RopeLayout layout) {
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
  switch (dtype) {
    case DType::kF32:
      ropeRows(static_cast<float*>(x), tokens, heads, head_dim, token_stride, positions, inv_freq,
               rotary_dim, layout);
      break;
    case DType::kBF16:
      ropeRows(static_cast<bf16_t*>(x), tokens, heads, head_dim, token_stride, positions, inv_freq,
               rotary_dim, layout);
      break;
    case DType::kF16:
      ropeRows(static_cast<f16_t*>(x), tokens, heads, head_dim, token_stride, positions, inv_freq,
               rotary_dim, layout);
      break;
    default:
      return REE_FAIL(Status::kInvalidArgument, "rope: unknown dtype %d", static_cast<int>(dtype));
  }
  return Status::kSuccess;
}

}  // namespace ree::repops::cpu
