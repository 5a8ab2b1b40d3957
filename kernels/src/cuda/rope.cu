// CUDA RoPE (docs/repops-spec/pointwise.md, "RoPE"). Same arithmetic as the CPU: rope.h, pair by
// pair; only the thread organisation and the width of the memory accesses are CUDA's own.
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>

#include "chained_launch.cuh"
#include "common/dtype_dispatch.h"
#include "common/rope_args.h"
#include "grid.cuh"
#include "ree/core/cuda_check.h"
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

// ---- rotation -----------------------------------------------------------------------------------
//
// Work unit: an "item", the pairs one thread rotates together. kCount is the number of elements
// per 16-byte access (16 / sizeof(T)), or 1 for the scalar path:
//   scalar (kCount 1)        one pair, at ropePairOffsets (any layout, alignment and stride);
//   half-split, 16 bytes     pairs i .. i + kCount - 1: their first members are one 16-byte word
//                            at i, their second members another at i + rotary_dim / 2;
//   interleaved, 16 bytes    kCount / 2 pairs (x[2i], x[2i + 1]) packed in one 16-byte word.
// A head holds items_per_head items.
//
// Block (x: a group of tokens, y: a range of items of each head, z: a range of heads). Its threads
// first load their items (up to kItems each), then evaluate the cos/sin of the block's pairs
// (one value per thread and pass, all threads sharing the work) into shared memory while those
// loads are in flight, then rotate and store their items.
constexpr int kMaxThreads = 512;
// Fewer tokens than this (decode): a token's pairs are split over blocks of kDecodeThreads
// threads, each block about kDecodePairsPerBlock pairs of a few heads, one pair per thread (the
// scalar items: a thread's rotation is one pair long, and its cos/sin one value). A decode
// step's RoPE is then a dozen short blocks on separate SMs; measured on H100, this beat 16-byte
// items (8 pairs rotated in sequence per thread) and larger blocks in GPU time per call.
constexpr int64_t kDecodeTokens = 64;
constexpr int kDecodePairsPerBlock = 32;
constexpr int kDecodeThreads = 128;
// More tokens (prefill): blocks of whole tokens (each token's cos/sin evaluated once), about
// kPrefillThreads threads and kPrefillItems 16-byte items per thread, so that every thread of a
// Llama-shaped block (64 pairs: 128 cos/sin values, 256 items) evaluates one value and rotates
// two items, no warp idling at the barrier. Measured on H100: faster than one item per thread
// in 256-thread blocks and than 2 items in 256-thread blocks.
constexpr int kPrefillThreads = 128;
constexpr int kPrefillItems = 2;
// A block holds the cos/sin of at most this many pairs per token in shared memory (32 KB, under
// the 48 KB a launch gets without opting in); longer heads are split over blocks (grid y).
constexpr int kMaxBlockPairs = 4096;

template <RopeLayout kLayout, int kCount>
constexpr int kPairsPerItem = kCount == 1
                                  ? 1
                                  : (kLayout == RopeLayout::kHalfSplit ? kCount : kCount / 2);

struct RopeGeometry {
  int64_t tokens;
  int heads;
  int head_dim;
  int64_t token_stride;
  int rotary_dim;
  int items_per_head;
  int tokens_per_block;
  int items_per_part;  // of each head, per block
  int items_shift;     // log2(items_per_part) when it is a power of two, else -1
  int heads_per_part;
  int item_parts;  // ceil(items_per_head / items_per_part), along grid y
  int head_parts;  // ceil(heads / heads_per_part), along grid z
};

template <int kCount, typename T>
__device__ __forceinline__ void loadElements(const T* p, T (&v)[kCount]) {
  static_assert(kCount * sizeof(T) == 16, "16-byte accesses only");
  const uint4 raw = *reinterpret_cast<const uint4*>(p);
  memcpy(v, &raw, sizeof(raw));
}

template <int kCount, typename T>
__device__ __forceinline__ void storeElements(T* p, const T (&v)[kCount]) {
  static_assert(kCount * sizeof(T) == 16, "16-byte accesses only");
  uint4 raw;
  memcpy(&raw, v, sizeof(raw));
  *reinterpret_cast<uint4*>(p) = raw;
}

// The first and second members of the pairs of `item` of the head vector at `head`.
template <RopeLayout kLayout, int kCount, typename T, int kPairs>
__device__ __forceinline__ void loadItem(const T* head, int item, int rotary_dim,
                                         T (&first)[kPairs], T (&second)[kPairs]) {
  if constexpr (kCount == 1) {
    int a, b;
    ropePairOffsets(kLayout, item, rotary_dim, &a, &b);
    first[0] = head[a];
    second[0] = head[b];
  } else if constexpr (kLayout == RopeLayout::kHalfSplit) {
    loadElements<kCount>(head + item * kCount, first);
    loadElements<kCount>(head + item * kCount + rotary_dim / 2, second);
  } else {
    T packed[kCount];
    loadElements<kCount>(head + item * kCount, packed);
#pragma unroll
    for (int j = 0; j < kPairs; ++j) {
      first[j] = packed[2 * j];
      second[j] = packed[2 * j + 1];
    }
  }
}

template <RopeLayout kLayout, int kCount, typename T, int kPairs>
__device__ __forceinline__ void storeItem(T* head, int item, int rotary_dim,
                                          const T (&first)[kPairs], const T (&second)[kPairs]) {
  if constexpr (kCount == 1) {
    int a, b;
    ropePairOffsets(kLayout, item, rotary_dim, &a, &b);
    head[a] = first[0];
    head[b] = second[0];
  } else if constexpr (kLayout == RopeLayout::kHalfSplit) {
    storeElements<kCount>(head + item * kCount, first);
    storeElements<kCount>(head + item * kCount + rotary_dim / 2, second);
  } else {
    T packed[kCount];
#pragma unroll
    for (int j = 0; j < kPairs; ++j) {
      packed[2 * j] = first[j];
      packed[2 * j + 1] = second[j];
    }
    storeElements<kCount>(head + item * kCount, packed);
  }
}

template <typename T, RopeLayout kLayout, int kCount, int kItems>
__global__ void __launch_bounds__(kMaxThreads)
    ropeKernel(T* x, const int32_t* positions, const float* inv_freq, RopeGeometry g) {
  waitForPredecessor();
  allowSuccessorLaunch();
  constexpr int kPairs = kPairsPerItem<kLayout, kCount>;
  extern __shared__ float cos_sin[];  // per token: [pairs] cos, then [pairs] sin
  const int64_t token0 = static_cast<int64_t>(blockIdx.x) * g.tokens_per_block;
  const int64_t tokens_left = g.tokens - token0;
  const int tokens =
      tokens_left < g.tokens_per_block ? static_cast<int>(tokens_left) : g.tokens_per_block;
  const int tid = threadIdx.x;
  for (int head_part = blockIdx.z; head_part < g.head_parts; head_part += gridDim.z) {
    for (int item_part = blockIdx.y; item_part < g.item_parts; item_part += gridDim.y) {
      const int item0 = item_part * g.items_per_part;
      const int items = min(g.items_per_part, g.items_per_head - item0);
      const int head0 = head_part * g.heads_per_part;
      const int heads = min(g.heads_per_part, g.heads - head0);
      const int pairs = items * kPairs;  // pairs of each head (and token) this block rotates
      const int pair0 = item0 * kPairs;
      const int token_items = heads * items;
      const int work = tokens * token_items;
      // A full part's item count is a power of two in the usual shapes: a shift then finds the
      // item's head (a partial last part has fewer items and divides).
      const int shift = items == g.items_per_part ? g.items_shift : -1;

      // Where item w of the block lies: its token and, within it, its head vector and item.
      // (Recomputed after the cos/sin rather than kept: fewer registers live across them.)
      auto locate = [&](int w, int* token, int* item) {
        *token = tokens == 1 ? 0 : w / token_items;
        const int rest = w - *token * token_items;
        const int h = shift >= 0 ? rest >> shift : rest / items;
        *item = rest - h * items;
        return x + (token0 + *token) * g.token_stride +
               static_cast<int64_t>(head0 + h) * g.head_dim;
      };

      // The thread's items (w = tid, tid + blockDim.x, ...; token-major, then head, then item:
      // neighbouring threads touch neighbouring memory), loaded before the cos/sin so that
      // their latency overlaps the evaluation.
      T first[kItems][kPairs], second[kItems][kPairs];
#pragma unroll
      for (int k = 0; k < kItems; ++k) {
        const int w = tid + k * static_cast<int>(blockDim.x);
        if (w < work) {
          int token, item;
          const T* head = locate(w, &token, &item);
          loadItem<kLayout, kCount>(head, item0 + item, g.rotary_dim, first[k], second[k]);
        }
      }

      // cos/sin of `pairs` pairs for each token, one value per slot. Slots come in groups of 64:
      // 32 cos then the same 32 pairs' sin, so each warp evaluates one function (no divergence).
      const int values = tokens * pairs;
      const int slots = 2 * ((values + 31) / 32 * 32);
      for (int slot = tid; slot < slots; slot += blockDim.x) {
        const int v = (slot >> 6) * 32 + (slot & 31);
        if (v < values) {
          const bool sine = (slot & 32) != 0;
          const int t = tokens == 1 ? 0 : v / pairs;
          const int p = v - t * pairs;
          cos_sin[(2 * t + (sine ? 1 : 0)) * pairs + p] =
              ropeCosOrSin<T>(positions[token0 + t], inv_freq[pair0 + p], sine);
        }
      }
      __syncthreads();

#pragma unroll
      for (int k = 0; k < kItems; ++k) {
        const int w = tid + k * static_cast<int>(blockDim.x);
        if (w < work) {
          int token, item;
          T* head = locate(w, &token, &item);
          const float* cos_values = cos_sin + 2 * token * pairs + item * kPairs;
          const float* sin_values = cos_values + pairs;
#pragma unroll
          for (int j = 0; j < kPairs; ++j)
            ropeRotatePair(first[k][j], second[k][j], cos_values[j], sin_values[j]);
          storeItem<kLayout, kCount>(head, item0 + item, g.rotary_dim, first[k], second[k]);
        }
      }
      // cos_sin is refilled when this block has another part (only past the grid's limits).
      if (item_part + gridDim.y < g.item_parts || head_part + gridDim.z < g.head_parts) {
        __syncthreads();
      }
    }
  }
}

int roundUp32(int64_t n) {
  return static_cast<int>((n + 31) / 32 * 32);
}

int ceilDiv(int a, int b) {
  return (a + b - 1) / b;
}

// Launch geometry: `items` of each of `block_heads` heads of `block_tokens` tokens per block,
// `threads` threads of up to kItems items each (and at least one cos/sin slot each, up to
// kMaxThreads).
template <typename T, RopeLayout kLayout, int kCount, int kItems>
Status launchRopeKernel(void* x, int64_t tokens, int heads, int head_dim, int64_t token_stride,
                        const int32_t* positions, const float* inv_freq, int rotary_dim, int items,
                        int block_heads, int block_tokens, cudaStream_t stream) {
  constexpr int kPairs = kPairsPerItem<kLayout, kCount>;
  RopeGeometry g{};
  g.tokens = tokens;
  g.heads = heads;
  g.head_dim = head_dim;
  g.token_stride = token_stride;
  g.rotary_dim = rotary_dim;
  g.items_per_head = rotary_dim / 2 / kPairs;  // exact: the host checked the vector conditions
  g.tokens_per_block = block_tokens;
  g.items_per_part = items;
  g.items_shift = -1;
  for (int shift = 0; shift < 31; ++shift) {
    if ((1 << shift) == items) g.items_shift = shift;
  }
  g.heads_per_part = block_heads;
  g.item_parts = ceilDiv(g.items_per_head, items);
  g.head_parts = ceilDiv(heads, block_heads);
  const int block_items = block_tokens * block_heads * items;
  const int block_slots = 2 * roundUp32(static_cast<int64_t>(block_tokens) * items * kPairs);
  const int threads =
      roundUp32(std::max(ceilDiv(block_items, kItems), std::min(block_slots, kMaxThreads)));
  const size_t shared = 2 * sizeof(float) * static_cast<size_t>(block_tokens) * items * kPairs;
  const dim3 grid(static_cast<unsigned>((tokens + block_tokens - 1) / block_tokens),
                  static_cast<unsigned>(std::min(g.item_parts, 65535)),
                  static_cast<unsigned>(std::min(g.head_parts, 65535)));
  launchChained(ropeKernel<T, kLayout, kCount, kItems>, grid, threads, shared, stream,
                static_cast<T*>(x), positions, inv_freq, g);
  REE_CUDA_CHECK_LAUNCH();
  return Status::kSuccess;
}

// Decode: about kDecodePairsPerBlock pairs of each of a few heads per block, kDecodeThreads
// threads, one item per thread.
template <typename T, RopeLayout kLayout, int kCount>
Status launchRopeDecode(void* x, int64_t tokens, int heads, int head_dim, int64_t token_stride,
                        const int32_t* positions, const float* inv_freq, int rotary_dim,
                        cudaStream_t stream) {
  constexpr int kPairs = kPairsPerItem<kLayout, kCount>;
  const int items_per_head = rotary_dim / 2 / kPairs;
  const int items = std::min(items_per_head, std::max(1, kDecodePairsPerBlock / kPairs));
  const int block_heads = std::min(heads, std::max(1, kDecodeThreads / items));
  return launchRopeKernel<T, kLayout, kCount, 1>(x, tokens, heads, head_dim, token_stride,
                                                 positions, inv_freq, rotary_dim, items,
                                                 block_heads, 1, stream);
}

// Prefill: whole heads' items per block (a token's cos/sin evaluated once), kPrefillItems items
// per thread, tokens grouped until a block has about kPrefillThreads threads.
template <typename T, RopeLayout kLayout, int kCount>
Status launchRopePrefill(void* x, int64_t tokens, int heads, int head_dim, int64_t token_stride,
                         const int32_t* positions, const float* inv_freq, int rotary_dim,
                         cudaStream_t stream) {
  constexpr int kPairs = kPairsPerItem<kLayout, kCount>;
  constexpr int kItems = kCount == 1 ? 1 : kPrefillItems;
  constexpr int kMaxItems = kItems * kMaxThreads;
  const int items_per_head = rotary_dim / 2 / kPairs;
  const int items = std::min({items_per_head, kMaxItems, kMaxBlockPairs / kPairs});
  const int block_heads = std::min(heads, std::max(1, kMaxItems / items));
  const int per_token = std::max(ceilDiv(block_heads * items, kItems),
                                 2 * roundUp32(static_cast<int64_t>(items) * kPairs));
  const int block_tokens =
      static_cast<int>(std::min<int64_t>(std::max(1, kPrefillThreads / per_token), tokens));
  return launchRopeKernel<T, kLayout, kCount, kItems>(x, tokens, heads, head_dim, token_stride,
                                                      positions, inv_freq, rotary_dim, items,
                                                      block_heads, block_tokens, stream);
}

template <typename T, RopeLayout kLayout>
Status launchRope(void* x, int64_t tokens, int heads, int head_dim, int64_t token_stride,
                  const int32_t* positions, const float* inv_freq, int rotary_dim,
                  cudaStream_t stream) {
  constexpr int kVector = 16 / static_cast<int>(sizeof(T));
  // 16-byte items need every head vector 16-byte aligned and the items not to straddle the
  // rotated part's boundaries (half-split: the second half starts on a 16-byte boundary).
  const int rotated_unit = kLayout == RopeLayout::kHalfSplit ? rotary_dim / 2 : rotary_dim;
  const bool vector = reinterpret_cast<uintptr_t>(x) % 16 == 0 && token_stride % kVector == 0 &&
                      head_dim % kVector == 0 && rotated_unit % kVector == 0;
  if (tokens < kDecodeTokens) {
    return launchRopeDecode<T, kLayout, 1>(x, tokens, heads, head_dim, token_stride, positions,
                                           inv_freq, rotary_dim, stream);
  }
  if (vector) {
    return launchRopePrefill<T, kLayout, kVector>(x, tokens, heads, head_dim, token_stride,
                                                  positions, inv_freq, rotary_dim, stream);
  }
  return launchRopePrefill<T, kLayout, 1>(x, tokens, heads, head_dim, token_stride, positions,
                                          inv_freq, rotary_dim, stream);
}

template <typename T>
Status launchRope(void* x, int64_t tokens, int heads, int head_dim, int64_t token_stride,
                  const int32_t* positions, const float* inv_freq, int rotary_dim,
                  RopeLayout layout, cudaStream_t stream) {
  if (layout == RopeLayout::kHalfSplit) {
    return launchRope<T, RopeLayout::kHalfSplit>(x, tokens, heads, head_dim, token_stride,
                                                 positions, inv_freq, rotary_dim, stream);
  }
  return launchRope<T, RopeLayout::kInterleaved>(x, tokens, heads, head_dim, token_stride,
                                                 positions, inv_freq, rotary_dim, stream);
}

}  // namespace

Status ropeInvFreq(float base, int rotary_dim, const RopeLlama3Scaling* llama3, float* inv_freq,
                   cudaStream_t stream) {
  REE_RETURN_IF_ERROR(validateRopeInvFreqArgs(base, rotary_dim, llama3, inv_freq));
  RopeLlama3Scaling scaling = llama3 ? *llama3 : RopeLlama3Scaling{};
  ropeInvFreqKernel<<<divUp(rotary_dim / 2, 128), 128, 0, stream>>>(
      base, rotary_dim, llama3 != nullptr, scaling, inv_freq);
  REE_CUDA_CHECK_LAUNCH();
  return Status::kSuccess;
}

Status rope(DType dtype, void* x, int64_t tokens, int heads, int head_dim, int64_t token_stride,
            const int32_t* positions, const float* inv_freq, int rotary_dim, RopeLayout layout,
            cudaStream_t stream) {
  REE_RETURN_IF_ERROR(validateRopeArgs(x, tokens, heads, head_dim, token_stride, positions,
                                       inv_freq, rotary_dim, layout));
  REE_CHECK_ARG(tokens <= INT32_MAX, "rope: tokens=%lld exceeds 2^31 - 1 (CUDA grid)",
                static_cast<long long>(tokens));
  if (tokens == 0) return Status::kSuccess;
  return dispatchStorageType(dtype, "rope", [&](auto tag) {
    using T = decltype(tag);
    return launchRope<T>(x, tokens, heads, head_dim, token_stride, positions, inv_freq, rotary_dim,
                         layout, stream);
  });
}

}  // namespace ree::repops::cuda
