// CUDA RoPE (docs/repops-spec/pointwise.md, "RoPE"). Same arithmetic as the CPU: rope.h.
#include <cmath>

#include "chained_launch.cuh"
#include "cuda_check.cuh"
#include "ree/kernels/rope.h"

namespace ree::repops::cuda {
namespace {

__global__ void ropeInvFreqKernel(float base, int rotary_dim, bool use_llama3,
                                  RopeLlama3Scaling llama3, float* inv_freq) {
  int pair = blockIdx.x * blockDim.x + threadIdx.x;
  if (pair >= rotary_dim / 2) return;
  float value = ropeInvFreqDefault(pair, rotary_dim, base);
  inv_freq[pair] = use_llama3 ? ropeInvFreqLlama3(value, llama3) : value;
}

// Block (token, part): the block's threads compute the token's cos/sin once (shared memory),
// then rotate (head, pair) items part * per_block .. + per_block of the token. Decode steps have
// one token: splitting its items over several blocks turns a dozen dependent load-rotate-store
// round trips per thread into one.
template <typename T>
__global__ void ropeKernel(T* x, int heads, int head_dim, int64_t token_stride,
                           const int32_t* positions, const float* inv_freq, int rotary_dim,
                           RopeLayout layout, int per_block) {
  waitForPredecessor();
  allowSuccessorLaunch();
  extern __shared__ float cos_sin[];  // [pairs] cos, then [pairs] sin
  const int pairs = rotary_dim / 2;
  const int64_t token = blockIdx.x;
  const int32_t position = positions[token];
  for (int i = threadIdx.x; i < pairs; i += blockDim.x) {
    ropeCosSin<T>(position, inv_freq[i], &cos_sin[i], &cos_sin[pairs + i]);
  }
  __syncthreads();
  T* row = x + token * token_stride;
  const int begin = blockIdx.y * per_block;
  const int end = min(begin + per_block, heads * pairs);
  for (int work = begin + threadIdx.x; work < end; work += blockDim.x) {
    const int head = work / pairs;
    const int i = work - head * pairs;
    int first, second;
    ropePairOffsets(layout, i, rotary_dim, &first, &second);
    T* vec = row + static_cast<int64_t>(head) * head_dim;
    ropeRotatePair(vec[first], vec[second], cos_sin[i], cos_sin[pairs + i]);
  }
}

template <typename T>
Status launchRope(void* x, int64_t tokens, int heads, int head_dim, int64_t token_stride,
                  const int32_t* positions, const float* inv_freq, int rotary_dim,
                  RopeLayout layout, cudaStream_t stream) {
  const int pairs = rotary_dim / 2;
  const int items = heads * pairs;
  int threads = items < 256 ? ((items + 31) / 32) * 32 : 256;
  // Few tokens (decode): one item per thread over several blocks. Many tokens fill the GPU with
  // one block per token, which computes the token's cos/sin only once.
  const int parts = tokens >= 64 ? 1 : static_cast<int>(divUp(items, threads));
  const int per_block = static_cast<int>(divUp(items, parts));
  size_t shared = 2 * sizeof(float) * static_cast<size_t>(pairs);
  dim3 grid(static_cast<unsigned>(tokens), static_cast<unsigned>(parts));
  launchChained(ropeKernel<T>, grid, threads, shared, stream, static_cast<T*>(x), heads, head_dim,
                token_stride, positions, inv_freq, rotary_dim, layout, per_block);
  REE_CUDA_CHECK_LAUNCH();
  return Status::kSuccess;
}

}  // namespace

Status ropeInvFreq(float base, int rotary_dim, const RopeLlama3Scaling* llama3, float* inv_freq,
                   cudaStream_t stream) {
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
  RopeLlama3Scaling scaling = llama3 ? *llama3 : RopeLlama3Scaling{};
  ropeInvFreqKernel<<<divUp(rotary_dim / 2, 128), 128, 0, stream>>>(
      base, rotary_dim, llama3 != nullptr, scaling, inv_freq);
  REE_CUDA_CHECK_LAUNCH();
  return Status::kSuccess;
}

Status rope(DType dtype, void* x, int64_t tokens, int heads, int head_dim, int64_t token_stride,
            const int32_t* positions, const float* inv_freq, int rotary_dim, RopeLayout layout,
            cudaStream_t stream) {
  REE_CHECK_ARG(tokens >= 0 && tokens <= INT32_MAX && heads > 0 && head_dim > 0,
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
      return launchRope<float>(x, tokens, heads, head_dim, token_stride, positions, inv_freq,
                               rotary_dim, layout, stream);
    case DType::kBF16:
      return launchRope<bf16_t>(x, tokens, heads, head_dim, token_stride, positions, inv_freq,
                                rotary_dim, layout, stream);
    case DType::kF16:
      return launchRope<f16_t>(x, tokens, heads, head_dim, token_stride, positions, inv_freq,
                               rotary_dim, layout, stream);
  }
  return REE_FAIL(Status::kInvalidArgument, "rope: unknown dtype %d", static_cast<int>(dtype));
}

}  // namespace ree::repops::cuda
