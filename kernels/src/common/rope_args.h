// Argument checks of RoPE (rope.h), shared by the CPU and CUDA entry points so that both accept
// the same calls and name a bad argument with the same words.
#pragma once

#include <cstdint>

#include "ree/core/status.h"
#include "ree/kernels/rope.h"

namespace ree::repops {

// ropeInvFreq: rotary_dim even and > 0, base finite and > 1, llama3 scaling (when given) sane,
// inv_freq not null.
Status validateRopeInvFreqArgs(float base, int rotary_dim, const RopeLlama3Scaling* llama3,
                               const float* inv_freq);

// rope: the shape, rotary_dim <= head_dim, the token stride, the layout and (for tokens > 0) the
// pointers. The dtype is checked where it is dispatched (dispatchStorageType).
Status validateRopeArgs(const void* x, int64_t tokens, int heads, int head_dim,
                        int64_t token_stride, const int32_t* positions, const float* inv_freq,
                        int rotary_dim, RopeLayout layout);

}  // namespace ree::repops
