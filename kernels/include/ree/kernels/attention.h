// Causal grouped-query attention over a paged KV cache (docs/repops-spec/attention.md).
//
// The reproducibility rule: the key/value positions of a query at absolute position t are split
// into FIXED chunks of kAttentionChunk positions, [0,64), [64,128), ..., the last one cut at t.
// Each chunk yields a state (m, l, acc[head_dim]) computed by a fixed sequence of IEEE operations,
// and the states are merged left to right. The bits of a query therefore depend only on its
// position and the data: never on how many queries are processed together (prefill or decode, batch
// composition), on the split-KV parallelism, on the CPU thread count or on the hardware.
//
// The per-step arithmetic lives in the REE_HD functions below, shared by the CPU and CUDA code.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ree/core/status.h"
#include "ree/kernels/numeric.h"
#include "ree/kernels/reduce.h"

// The correctly rounded math library is built alongside; until it is in the tree, attention reports
// kUnsupported instead of breaking the build.
#if __has_include("ree/kernels/crmath.h")
#include "ree/kernels/crmath.h"
#define REE_ATTENTION_HAVE_CRMATH 1
#else
#define REE_ATTENTION_HAVE_CRMATH 0
#endif

namespace ree {
namespace repops {

// Positions per KV chunk (part of the spec: changing it changes the bits).
constexpr int kAttentionChunk = 64;
constexpr int kAttentionMaxHeadDim = 256;

// Paged KV cache. K and V each have the layout [num_blocks, block_size, n_kv_heads, head_dim]
// (head_dim fastest) in `dtype`. Position p of sequence s lives in physical block
// block_table[s * max_blocks_per_seq + p / block_size], row p % block_size. With block_table ==
// nullptr, sequence s owns blocks s * max_blocks_per_seq + j: that is the contiguous layout
// [batch, max_len, n_kv_heads, head_dim] with max_len = block_size * max_blocks_per_seq.
// block_table is a HOST array on both the CPU and the CUDA side (the CUDA entry points upload it).
struct PagedKvCache {
  const void* k = nullptr;
  const void* v = nullptr;
  DType dtype = DType::kBF16;
  int num_blocks = 0;
  int block_size = 0;
  const int32_t* block_table = nullptr;
  int max_blocks_per_seq = 0;
};

// One call attends the new tokens of `batch` sequences. Sequence s has
// n_new = query_offsets[s + 1] - query_offsets[s] new tokens (rows query_offsets[s].. of q/out) and
// cached_lens[s] tokens cached before them; new token i sits at absolute position
// t = cached_lens[s] + i and attends positions 0..t, whose K/V must already be in the cache (append
// the new tokens first, see appendKv). Prefill: many new tokens; decode: one.
// query_offsets and cached_lens are HOST arrays on both sides.
struct AttentionArgs {
  int batch = 0;
  const int32_t* query_offsets = nullptr;  // [batch + 1], query_offsets[0] == 0, non-decreasing
  const int32_t* cached_lens = nullptr;    // [batch]
  int n_heads = 0;
  int n_kv_heads = 0;  // divides n_heads; query head h reads KV head h / (n_heads / n_kv_heads)
  int head_dim = 0;    // 1..kAttentionMaxHeadDim
  const void* q = nullptr;  // [total_new_tokens, n_heads, head_dim]
  DType q_dtype = DType::kF32;
  void* out = nullptr;  // [total_new_tokens, n_heads, head_dim]; must not overlap q or the cache
  DType out_dtype = DType::kF32;
  PagedKvCache cache;
  // Score scale; 0 selects the default crRsqrt((float)head_dim). Otherwise finite and non-zero.
  float scale = 0.0f;
};

// Writes the new tokens' K and V rows ([total_new_tokens, n_kv_heads, head_dim] in new_dtype) into
// the cache at positions cached_lens[s] + i, converted to the cache dtype with storeAs (RNE).
struct KvAppendArgs {
  int batch = 0;
  const int32_t* query_offsets = nullptr;  // host, as in AttentionArgs
  const int32_t* cached_lens = nullptr;    // host, as in AttentionArgs
  int n_kv_heads = 0;
  int head_dim = 0;
  const void* k_new = nullptr;
  const void* v_new = nullptr;
  DType new_dtype = DType::kF32;
  void* k_cache = nullptr;
  void* v_cache = nullptr;
  DType cache_dtype = DType::kBF16;
  int num_blocks = 0;
  int block_size = 0;
  const int32_t* block_table = nullptr;  // host, nullptr = contiguous (see PagedKvCache)
  int max_blocks_per_seq = 0;
};

// Argument checks shared by the CPU and CUDA entry points (named errors, kInvalidArgument).
Status validateAttentionArgs(const AttentionArgs& args);
Status validateKvAppendArgs(const KvAppendArgs& args);

// Physical block of position `pos` of sequence `seq` (arguments already validated).
inline int64_t kvBlockOf(const int32_t* block_table, int max_blocks_per_seq, int seq, int64_t pos,
                         int block_size) {
  int64_t logical = static_cast<int64_t>(seq) * max_blocks_per_seq + pos / block_size;
  return block_table ? static_cast<int64_t>(block_table[logical]) : logical;
}

namespace cpu {
Status attention(const AttentionArgs& args);
Status appendKv(const KvAppendArgs& args);
}  // namespace cpu

namespace cuda {
// Pointers q, out, cache.k, cache.v (and k_new, v_new, k_cache, v_cache) are device pointers; the
// metadata arrays are host arrays. Temporary device memory comes from cudaMallocAsync on `stream`.
Status attention(const AttentionArgs& args, cudaStream_t stream);
Status appendKv(const KvAppendArgs& args, cudaStream_t stream);
}  // namespace cuda

// ---- The arithmetic of repops-1 attention (shared by CPU and CUDA)
// -------------------------------
namespace attn {

// Running maximum step: NaN scores never win, so max(-inf, s_0, s_1, ...) is the largest non-NaN
// score whatever the evaluation order (a tree of these steps gives the same value).
REE_HD float maxStep(float running, float value) {
  return value > running ? value : running;
}

// +0.0f turns a -0 maximum into +0, so the maximum's bits do not depend on which of +-0 won.
REE_HD float canonicalMax(float max_value) {
  return max_value + 0.0f;
}

// Score of one position: the canonical dot product (reduce.h) times the scale, one rounding.
REE_HD float scaledScore(float dot, float scale) {
  return dot * scale;
}

// Softmax numerator of a score inside its chunk.
REE_HD float chunkWeight(float score, float chunk_max) {
#if REE_ATTENTION_HAVE_CRMATH
  return crExp(score - chunk_max);
#else
  (void)score;
  (void)chunk_max;
  return 0.0f;  // unreachable: the entry points return kUnsupported without crmath
#endif
}

// chunkWeight of N scores of one chunk (the same bits): the exps overlap.
template <int N>
REE_HD void chunkWeights(const float (&score)[N], float chunk_max, float (&weight)[N]) {
#if REE_ATTENTION_HAVE_CRMATH
  float d[N];
  for (int i = 0; i < N; ++i)
    d[i] = score[i] - chunk_max;
  crExpN(d, weight);
#else
  (void)score;
  (void)chunk_max;
  for (int i = 0; i < N; ++i)
    weight[i] = 0.0f;  // unreachable: the entry points return kUnsupported without crmath
#endif
}

// Factor that rescales a quantity relative to `old_max` to the new running maximum.
REE_HD float rescaleFactor(float old_max, float new_max) {
  return chunkWeight(old_max, new_max);
}

// Merge of a running value with a chunk's value: running * a + chunk * b, three roundings (no fma).
REE_HD float mergeValue(float running, float running_factor, float chunk, float chunk_factor) {
  float scaled_running = running * running_factor;
  float scaled_chunk = chunk * chunk_factor;
  return scaled_running + scaled_chunk;
}

// Output value: one IEEE division; a NaN result is written as the canonical quiet NaN 0x7fc00000
// (NaN payloads differ between CPU and GPU arithmetic).
REE_HD float finalOutput(float acc, float sum) {
  float value = acc / sum;
  return value != value ? bitsFloat(0x7fc00000u) : value;
}

REE_HD float defaultScale(int head_dim) {
#if REE_ATTENTION_HAVE_CRMATH
  return crRsqrt(static_cast<float>(head_dim));
#else
  (void)head_dim;
  return 0.0f;
#endif
}

// Number of chunks that a query at absolute position t reads.
REE_HD int64_t chunkCount(int64_t position) {
  return position / kAttentionChunk + 1;
}

}  // namespace attn
}  // namespace repops
}  // namespace ree
