// CPU RoPE (docs/repops-spec/pointwise.md, "RoPE"); the arithmetic lives in rope.h.
#include "ree/kernels/rope.h"

#include <cmath>
#include <vector>

#include "common/dtype_dispatch.h"
#include "common/rope_args.h"
#include "ree/core/parallel.h"
#include "vector_math.h"

namespace ree::repops::cpu {
namespace {

template <typename T>
void ropeRows(T* x, int64_t tokens, int heads, int head_dim, int64_t token_stride,
              const int32_t* positions, const float* inv_freq, int rotary_dim, RopeLayout layout) {
  const int pairs = rotary_dim / 2;
  parallelForVectorMath(tokens, 16, [&](int64_t begin, int64_t end) REE_VECTOR_MATH_INLINE {
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
  REE_RETURN_IF_ERROR(validateRopeInvFreqArgs(base, rotary_dim, llama3, inv_freq));
  for (int i = 0; i < rotary_dim / 2; ++i) {
    float value = ropeInvFreqDefault(i, rotary_dim, base);
    inv_freq[i] = llama3 ? ropeInvFreqLlama3(value, *llama3) : value;
  }
  return Status::kSuccess;
}

Status rope(DType dtype, void* x, int64_t tokens, int heads, int head_dim, int64_t token_stride,
            const int32_t* positions, const float* inv_freq, int rotary_dim, RopeLayout layout) {
  REE_RETURN_IF_ERROR(validateRopeArgs(x, tokens, heads, head_dim, token_stride, positions,
                                       inv_freq, rotary_dim, layout));
  if (tokens == 0) return Status::kSuccess;
  return dispatchStorageType(dtype, "rope", [&](auto tag) {
    using T = decltype(tag);
    ropeRows(static_cast<T*>(x), tokens, heads, head_dim, token_stride, positions, inv_freq,
             rotary_dim, layout);
  });
}

}  // namespace ree::repops::cpu
