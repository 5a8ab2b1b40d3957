// CUDA attention (docs/repops-spec/attention.md). Same operations as kernels/src/cpu/attention.cpp,
// organised for the GPU:
//   * decode-like sequences (few new rows per KV head): split-KV. One block per (sequence, KV head,
//     run of 1-8 consecutive chunks) computes the chunk states of all the rows of that KV group
//     (the G query heads share every K/V read) and stores them; a merge kernel then folds the
//     chunks of each row left to right.
//   * prefill-like sequences: one block per (sequence, KV head, tile of rows) loops over the
//     chunks in order and merges each chunk state into a running state kept in shared memory
//     (flash style): the tiled prefill kernel (attention_prefill_tiled.cuh, register-tiled like a
//     GEMM) when head_dim % 8 == 0, else the chunk kernel below in its flash mode (also selectable
//     for benchmarks, attention_variant.h).
// Every path computes each chunk state with the spec's operations in the spec's order and merges
// with the same functions, so a query gets the same bits in any path. All arithmetic is fp32
// FFMA/FADD/FMUL on CUDA cores plus crExp; no tensor cores (not IEEE). The pieces shared by the
// kernels (work descriptions, K/V staging, Q tile) are in attention_common.cuh.
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <tuple>
#include <utility>
#include <vector>

#include "attention_common.cuh"
#include "attention_prefill_tiled.cuh"
#include "attention_variant.h"
#include "chained_launch.cuh"
#include "common/dtype_dispatch.h"
#include "common/storage_element.h"
#include "ree/core/cuda_check.h"
#include "ree/kernels/attention.h"
#include "shared_memory.cuh"

namespace ree {
namespace repops {
namespace cuda {
namespace {

using namespace attention_detail;  // NOLINT(google-build-using-namespace): one TU

// dot[i] = the fma chain over d in [d_begin, d_end) of q[d][row i] * k_row[d], from +0. Parts
// start at multiples of kReduceChunk: 16-byte aligned in the K row.
template <typename T, int kRows>
__device__ __forceinline__ void scoreDotPart(const float* q_col, int rows_cap, const T* k_row,
                                             int d_begin, int d_end, float (&dot)[kRows]) {
  auto step = [&](int d, float k_value) {
#pragma unroll
    for (int i = 0; i < kRows; i += 4) {
      const float4 q4 = *reinterpret_cast<const float4*>(q_col + d * rows_cap + i);
      dot[i] = fmaF32(q4.x, k_value, dot[i]);
      dot[i + 1] = fmaF32(q4.y, k_value, dot[i + 1]);
      dot[i + 2] = fmaF32(q4.z, k_value, dot[i + 2]);
      dot[i + 3] = fmaF32(q4.w, k_value, dot[i + 3]);
    }
  };
#pragma unroll
  for (int i = 0; i < kRows; ++i)
    dot[i] = 0.0f;
  constexpr int kPerVec = 16 / sizeof(T);
  int d = d_begin;
#pragma unroll 1
  for (; d + kPerVec <= d_end; d += kPerVec) {
    float k_values[kPerVec];
    loadVector16(k_row + d, k_values);
#pragma unroll
    for (int e = 0; e < kPerVec; ++e)
      step(d + e, k_values[e]);
  }
  for (; d < d_end; ++d)
    step(d, loadFloat(k_row[d]));
}

// Scores: unit = (position, group of kRows rows); each is the canonical dot product over
// head_dim (fma chain per 128-wide part, parts added left to right), times the scale. K rows are
// read 16 bytes at a time (rows are 16-byte aligned, kvStrideElements).
template <typename T, int kRows>
__device__ __forceinline__ void computeScores(const KernelParams& p, const ChunkTiles<T>& t,
                                              int n_loaded, int rows, int head_dim) {
  const int rows_cap = p.rows_cap;
  const int row_groups = (rows + kRows - 1) / kRows;
  for (int u = threadIdx.x; u < n_loaded * row_groups; u += blockDim.x) {
    const int pos = u % n_loaded;
    const int group_row = (u / n_loaded) * kRows;
    const T* k_row = t.k_chunk + pos * p.kv_stride;
    const float* q_col = t.q_tile + group_row;
    float dot[kRows];
    scoreDotPart<T, kRows>(q_col, rows_cap, k_row, 0,
                           head_dim < kReduceChunk ? head_dim : kReduceChunk, dot);
    if (head_dim > kReduceChunk) {
      float first[kRows];
#pragma unroll
      for (int i = 0; i < kRows; ++i)
        first[i] = dot[i];
      scoreDotPart<T, kRows>(q_col, rows_cap, k_row, kReduceChunk, head_dim, dot);
#pragma unroll
      for (int i = 0; i < kRows; ++i)
        dot[i] = first[i] + dot[i];
    }
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
      t.weights[pos * rows_cap + group_row + i] = attn::scaledScore(dot[i], p.scale);
    }
  }
}

// Workspace index of the chunk state (row r of the block, chunk) on the split path.
__device__ __forceinline__ long long splitState(const WorkItem& item, int r, int chunk) {
  return item.state_base + static_cast<long long>(item.row_begin + r) * item.n_chunks + chunk;
}

// Per row (one warp each): the chunk maximum over the valid positions, the weights in place of
// the scores, and (flash) the merge factors of the running state; the split path stores the
// maximum to the workspace.
template <typename T, bool kFlash>
__device__ __forceinline__ void chunkSoftmaxRows(const KernelParams& p, const WorkItem& item,
                                                 const ChunkTiles<T>& t, int chunk) {
  const int rows_cap = p.rows_cap;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, n_warps = blockDim.x / 32;
  for (int r = warp; r < item.row_count; r += n_warps) {
    const int valid = t.row_valid[r];
    if (valid <= 0) continue;
    const float s0 = lane < valid ? t.weights[lane * rows_cap + r] : 0.0f;
    const float s1 = lane + 32 < valid ? t.weights[(lane + 32) * rows_cap + r] : 0.0f;
    float m = -__int_as_float(0x7f800000);
    if (lane < valid) m = attn::maxStep(m, s0);
    if (lane + 32 < valid) m = attn::maxStep(m, s1);
#pragma unroll
    for (int offset = 16; offset >= 1; offset /= 2) {
      m = attn::maxStep(m, __shfl_xor_sync(0xffffffffu, m, offset));
    }
    m = attn::canonicalMax(m);
    // Positions past `valid` take the maximum itself (weight 1, discarded): a defined input.
    const float scores[2] = {lane < valid ? s0 : m, lane + 32 < valid ? s1 : m};
    float w[2];
    attn::chunkWeights(scores, m, w);
    if (lane < valid) t.weights[lane * rows_cap + r] = w[0];
    if (lane + 32 < valid) t.weights[(lane + 32) * rows_cap + r] = w[1];
    if (lane == 0) {
      t.chunk_max[r] = m;
      if (kFlash) {
        if (chunk == 0) {
          t.running_max[r] = m;
        } else {
          const float old_max = t.running_max[r];
          const float new_max = attn::maxStep(old_max, m);
          t.running_max[r] = new_max;
          t.running_factor[r] = attn::rescaleFactor(old_max, new_max);
          t.chunk_factor[r] = attn::rescaleFactor(m, new_max);
        }
      } else {
        p.ws_max[splitState(item, r, chunk)] = m;
      }
    }
  }
}

// Chunk sums: canonicalSum (kChunk <= kReduceChunk, so one chain from +0 over the positions in
// order). Lane r of the last warp runs row r's chain, so one warp instruction serves up to 32
// rows (a warp per row would issue the same chain once per row); the other warps go on to P.V.
template <typename T, bool kFlash>
__device__ __forceinline__ void sumChunkWeights(const KernelParams& p, const WorkItem& item,
                                                const ChunkTiles<T>& t, int chunk) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, n_warps = blockDim.x / 32;
  if (warp != n_warps - 1) return;
  for (int r = lane; r < item.row_count; r += 32) {
    const int valid = t.row_valid[r];
    if (valid <= 0) continue;
    float sum = 0.0f;
    for (int i = 0; i < valid; ++i)
      sum = sum + t.weights[i * p.rows_cap + r];
    if (kFlash) {
      t.running_sum[r] = chunk == 0 ? sum
                                    : attn::mergeValue(t.running_sum[r], t.running_factor[r], sum,
                                                       t.chunk_factor[r]);
    } else {
      p.ws_sum[splitState(item, r, chunk)] = sum;
    }
  }
}

// acc[i] = the fma chain over the chunk's positions of weight(row i) * v[d], from +0, stopping
// at each row's own count of valid positions (valid[i]; positions past it are skipped, not
// multiplied by 0).
template <typename T, int kRows>
__device__ __forceinline__ void valueChains(const KernelParams& p, const ChunkTiles<T>& t, int d,
                                            const float* w_col, const int (&valid)[kRows],
                                            int valid_min, int valid_max, float (&acc)[kRows]) {
  const int rows_cap = p.rows_cap;
#pragma unroll
  for (int i = 0; i < kRows; ++i)
    acc[i] = 0.0f;
  if (valid_min == valid_max) {
    // Every participating row has the same positions; the others' lanes are never stored.
#pragma unroll 4
    for (int i = 0; i < valid_max; ++i) {
      const float v_value = loadFloat(t.v_chunk[i * p.kv_stride + d]);
#pragma unroll
      for (int j = 0; j < kRows; j += 4) {
        const float4 w4 = *reinterpret_cast<const float4*>(w_col + i * rows_cap + j);
        acc[j] = fmaF32(w4.x, v_value, acc[j]);
        acc[j + 1] = fmaF32(w4.y, v_value, acc[j + 1]);
        acc[j + 2] = fmaF32(w4.z, v_value, acc[j + 2]);
        acc[j + 3] = fmaF32(w4.w, v_value, acc[j + 3]);
      }
    }
  } else {
    // Diagonal chunk: a row's chain stops at its own position.
    for (int i = 0; i < valid_max; ++i) {
      const float v_value = loadFloat(t.v_chunk[i * p.kv_stride + d]);
#pragma unroll
      for (int j = 0; j < kRows; j += 4) {
        const float4 w4 = *reinterpret_cast<const float4*>(w_col + i * rows_cap + j);
        const float w[4] = {w4.x, w4.y, w4.z, w4.w};
#pragma unroll
        for (int s = 0; s < 4; ++s) {
          if (i < valid[j + s]) acc[j + s] = fmaF32(w[s], v_value, acc[j + s]);
        }
      }
    }
  }
}

// P.V: unit = (d, group of kRows rows). Flash merges each row's chain into the running
// accumulator; the split path stores it to the workspace.
template <typename T, bool kFlash, int kRows>
__device__ __forceinline__ void accumulateValues(const KernelParams& p, const WorkItem& item,
                                                 const ChunkTiles<T>& t, int chunk, int head_dim) {
  const int rows = item.row_count;
  const int row_groups = (rows + kRows - 1) / kRows;
  for (int u = threadIdx.x; u < head_dim * row_groups; u += blockDim.x) {
    const int d = u % head_dim;
    const int group_row = (u / head_dim) * kRows;
    int valid[kRows];
    int valid_min = kChunk, valid_max = 0;
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
      valid[i] = group_row + i < rows ? t.row_valid[group_row + i] : 0;
      if (valid[i] > 0) {
        valid_min = valid[i] < valid_min ? valid[i] : valid_min;
        valid_max = valid[i] > valid_max ? valid[i] : valid_max;
      }
    }
    if (valid_max == 0) continue;
    float acc[kRows];
    valueChains<T, kRows>(p, t, d, t.weights + group_row, valid, valid_min, valid_max, acc);
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
      const int r = group_row + i;
      if (valid[i] <= 0) continue;
      if (kFlash) {
        float* slot = t.running_acc + r * head_dim + d;
        *slot = chunk == 0
                    ? acc[i]
                    : attn::mergeValue(*slot, t.running_factor[r], acc[i], t.chunk_factor[r]);
      } else {
        p.ws_acc[splitState(item, r, chunk) * head_dim + d] = acc[i];
      }
    }
  }
}

// Flash: out = the running accumulator divided by the running sum, in the output dtype.
template <typename T>
__device__ __forceinline__ void storeFlashOutput(const KernelParams& p, const WorkItem& item,
                                                 const ChunkTiles<T>& t, int head_dim) {
  for (int u = threadIdx.x; u < item.row_count * head_dim; u += blockDim.x) {
    const int r = u / head_dim;
    const int d = u - r * head_dim;
    const int row = item.row_begin + r;
    const long long token = item.token_begin + row / p.group;
    const int head = item.kv_head * p.group + row % p.group;
    storeStorageElement(p.out, p.out_dtype, (token * p.n_heads + head) * head_dim + d,
                        attn::finalOutput(t.running_acc[r * head_dim + d], t.running_sum[r]));
  }
}

// The work of one block. kFlash: loop over all chunks of the tile and merge in shared memory;
// otherwise compute chunks [item.chunk, item.chunk + p.split_chunks_per_block) (those that exist)
// one after another and store each chunk's states to the workspace: the Q tile and the setup are
// paid once for several chunks. Which block computes a chunk never changes its bits.
//
// kRows: decode of a model with G <= 4 query heads per KV head uses 4, so no lane works on
// padding.
//
// The split path reads its work description and the chunk's block-table entries before
// waitForPredecessor(): they are uploaded by copies, never written by a kernel, so they are
// complete before this kernel can start, and their latency overlaps the previous kernel's tail.
template <typename T, bool kFlash, int kRows, int kHeadDim>
__global__ void attentionChunkKernel(KernelParams p, const WorkItem* __restrict__ items,
                                     const SplitSeq* __restrict__ split_seqs) {
  static_assert(kRows % 4 == 0, "rows per thread are read as float4");
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const int head_dim = kHeadDim > 0 ? kHeadDim : p.head_dim;
  const ChunkTiles<T> t = chunkTiles<T>(
      smem_raw, smemLayout(head_dim, p.rows_cap, p.kv_stride, static_cast<int>(sizeof(T)), kFlash),
      p.rows_cap, p.kv_stride);
  WorkItem item;
  if constexpr (kFlash) {
    waitForPredecessor();
    allowSuccessorLaunch();
    item = items[blockIdx.x];
  } else {
    if (!splitWorkItem(p, split_seqs, &item)) return;
  }
  const int32_t* table_row =
      p.block_table + static_cast<long long>(item.seq) * p.max_blocks_per_seq;
  if constexpr (!kFlash) {
    const int last_position = item.cached + (item.row_count - 1) / p.group;
    const int pos_begin = item.chunk * kChunk;
    fillSlots(p, t.slots, table_row, pos_begin, min(kChunk, last_position + 1 - pos_begin));
    waitForPredecessor();
    allowSuccessorLaunch();
  }
  loadQueryTile(p, item, head_dim, t.q_tile);
  const int max_position = setRowPositions(p, item, t.row_position);

  const int chunk_first = kFlash ? 0 : item.chunk;
  const int chunk_last = kFlash ? max_position / kChunk
                                : min(item.chunk + p.split_chunks_per_block, item.n_chunks) - 1;
  for (int chunk = chunk_first; chunk <= chunk_last; ++chunk) {
    __syncthreads();  // previous chunk's readers of k/v/weights are done; Q/positions visible
    const ChunkSpan s = chunkSpan(t.slots, chunk, chunk_first, chunk_last, max_position);
    setRowValid(p.rows_cap, t.row_position, s.pos_begin, t.row_valid);
    stageKvChunk<T, kFlash, kHeadDim>(p, item, t, table_row, s, chunk == chunk_first);
    __syncthreads();
    computeScores<T, kRows>(p, t, s.n_loaded, item.row_count, head_dim);
    __syncthreads();
    if (p.vec16 && s.has_next) {  // the K buffer is free: fetch the next chunk's K
      copyChunkAsync<T, kHeadDim>(p, static_cast<const T*>(p.k), t.k_chunk, s.next_slots,
                                  item.kv_head, s.n_next);
    }
    chunkSoftmaxRows<T, kFlash>(p, item, t, chunk);
    if (p.vec16 && s.has_next) {
      cpAsyncWait<1>();  // V of this chunk has landed (the next chunk's K may be in flight)
    } else {
      cpAsyncWait<0>();
    }
    __syncthreads();
    sumChunkWeights<T, kFlash>(p, item, t, chunk);
    accumulateValues<T, kFlash, kRows>(p, item, t, chunk, head_dim);
  }
  if (kFlash) {
    __syncthreads();
    storeFlashOutput(p, item, t, head_dim);
  }
}

constexpr int kMergeMaxD = (kAttentionMaxHeadDim + kMergeThreads - 1) / kMergeThreads;
constexpr int kMergeTile = 32;  // chunk states per load tile of a merge thread (registers per d)
static_assert(kMergeThreads % (2 * kMergeTile) == 0, "factor tiles hold whole pairs of load tiles");

// Loads the accumulators of chunks j0 .. j0 + kMergeTile - 1 (those < n) for this thread's d's.
// kHeadDim > 0 makes the chunk stride a constant, so the addresses are immediate offsets.
template <int kHeadDim, int kD>
__device__ __forceinline__ void loadMergeTile(const float* acc_row, int head_dim, int j0, int n,
                                              float (&v)[kMergeTile][kD]) {
  const int stride = kHeadDim > 0 ? kHeadDim : head_dim;
  const float* src = acc_row + static_cast<long long>(j0) * stride;
#pragma unroll
  for (int i = 0; i < kMergeTile; ++i) {
#pragma unroll
    for (int k = 0; k < kD; ++k) {
      const int d = static_cast<int>(threadIdx.x) + k * kMergeThreads;
      v[i][k] = (j0 + i < n && d < head_dim) ? src[i * stride + k * kMergeThreads] : 0.0f;
    }
  }
}

// Folds chunks j0 .. j0 + kMergeTile - 1 (those < n) into the running state, in chunk order.
// factors[j - tile] = (running factor, chunk factor, chunk sum * chunk factor) of chunk j.
template <int kD>
__device__ __forceinline__ void foldMergeTile(const float4* factors, int tile, int j0, int n,
                                              const float (&v)[kMergeTile][kD], float& sum,
                                              float (&acc)[kD]) {
  auto step = [&](int i) {
    const float4 f = factors[j0 + i - tile];
    sum = sum * f.x + f.z;  // mergeValue: two rounded products (f.z is l_j * b), one rounded sum
#pragma unroll
    for (int k = 0; k < kD; ++k)
      acc[k] = attn::mergeValue(acc[k], f.x, v[i][k], f.y);
  };
  if (j0 + kMergeTile <= n) {
#pragma unroll
    for (int i = 0; i < kMergeTile; ++i)
      step(i);
  } else {
#pragma unroll
    for (int i = 0; i < kMergeTile; ++i) {
      if (j0 + i < n) step(i);
    }
  }
}

// Merges the chunk states of one row left to right (split path); one thread per d (two for
// head_dim > 128). The running maxima are a prefix maximum (exact, so computed as a parallel
// scan), and the factors a = crExp(M_{j-1} - M_j) and b = crExp(m_j - M_j) of a tile of
// kMergeThreads chunks are computed in parallel, a chunk per thread; then each thread folds its
// d's. Chunk 0 takes a = +0 and b = 1 against a running state of -0: (-0 * +0) + x * 1 = x for
// every x (also -0, inf and NaN), which is the spec's "chunk 0 initialises", without a branch per
// chunk. A thread's accumulator loads are issued a tile of kMergeTile chunks ahead of its fold
// (the first tile before the scan), so the states arrive in about one memory latency per tile
// while the fold, a dependent chain, runs. (The previous fold, with a branch and 64-bit index
// arithmetic per chunk and one round trip per 8 chunks, made a batch-1 decode call 3 us slower on
// an H100: docs/benchmarks-history.md.)
//
// The work description is read before waitForPredecessor() (uploaded by a copy, never written by
// a kernel); the chunk states only after it.
template <int kHeadDim, int kD>
__global__ void __launch_bounds__(kMergeThreads)
    attentionMergeKernel(KernelParams p, const SplitSeq* __restrict__ split_seqs) {
  __shared__ float4 factors[kMergeThreads];
  __shared__ float prefix_max[kMergeThreads];
  __shared__ float warp_max[kMergeThreads / 32];
  const SplitSeq ss = split_seqs[blockIdx.y];
  const int local = static_cast<int>(blockIdx.x);
  if (local >= p.n_kv_heads * ss.rows) return;  // uniform over the block
  const int kv_head = local / ss.rows;
  const int row = local - kv_head * ss.rows;
  const long long state_row =
      ss.state_base + (static_cast<long long>(kv_head) * ss.rows + row) * ss.n_chunks;
  const int n = static_cast<int>(attn::chunkCount(ss.cached + row / p.group));
  const long long token = ss.token_begin + row / p.group;
  const int head = kv_head * p.group + row % p.group;
  const int head_dim = kHeadDim > 0 ? kHeadDim : p.head_dim;
  const float* acc_row = p.ws_acc + state_row * head_dim + threadIdx.x;
  waitForPredecessor();
  allowSuccessorLaunch();
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  float acc[kD];
#pragma unroll
  for (int k = 0; k < kD; ++k)
    acc[k] = -0.0f;
  float sum = -0.0f;
  float carry = -__int_as_float(0x7f800000);  // M of the chunk before this factor tile
  float tile_a[kMergeTile][kD], tile_b[kMergeTile][kD];
  loadMergeTile<kHeadDim, kD>(acc_row, head_dim, 0, n, tile_a);
  for (int tile = 0; tile < n; tile += kMergeThreads) {
    const int j = tile + static_cast<int>(threadIdx.x);
    const float m = j < n ? p.ws_max[state_row + j] : -__int_as_float(0x7f800000);
    const float l = j < n ? p.ws_sum[state_row + j] : 0.0f;
    float running = m;
#pragma unroll
    for (int offset = 1; offset < 32; offset *= 2) {
      const float other = __shfl_up_sync(0xffffffffu, running, offset);
      if (lane >= offset) running = attn::maxStep(running, other);
    }
    if (lane == 31) warp_max[warp] = running;
    __syncthreads();
    for (int w = 0; w < warp; ++w)
      running = attn::maxStep(running, warp_max[w]);
    running = attn::maxStep(running, carry);
    prefix_max[threadIdx.x] = running;
    __syncthreads();
    if (j < n) {
      float4 f;
      if (j == 0) {
        f = make_float4(0.0f, 1.0f, l, 0.0f);
      } else {
        const float before = threadIdx.x == 0 ? carry : prefix_max[threadIdx.x - 1];
        const float scores[2] = {before, m};
        float ab[2];
        attn::chunkWeights(scores, running, ab);  // = rescaleFactor(before / m, running)
        f = make_float4(ab[0], ab[1], l * ab[1], 0.0f);
      }
      factors[threadIdx.x] = f;
    }
    const int tile_end = min(tile + kMergeThreads, n);
    carry = prefix_max[tile_end - tile - 1];
    __syncthreads();
    // Load tiles alternate between tile_a and tile_b (a factor tile holds an even number of them,
    // so each factor tile starts in tile_a).
    for (int j0 = tile; j0 < tile_end; j0 += 2 * kMergeTile) {
      if (j0 + kMergeTile < n)
        loadMergeTile<kHeadDim, kD>(acc_row, head_dim, j0 + kMergeTile, n, tile_b);
      foldMergeTile<kD>(factors, tile, j0, n, tile_a, sum, acc);
      if (j0 + kMergeTile < n) {
        if (j0 + 2 * kMergeTile < n) {
          loadMergeTile<kHeadDim, kD>(acc_row, head_dim, j0 + 2 * kMergeTile, n, tile_a);
        }
        foldMergeTile<kD>(factors, tile, j0 + kMergeTile, n, tile_b, sum, acc);
      }
    }
    __syncthreads();  // the next factor tile overwrites the shared arrays
  }
#pragma unroll
  for (int k = 0; k < kD; ++k) {
    const int d = static_cast<int>(threadIdx.x) + k * kMergeThreads;
    if (d < head_dim) {
      storeStorageElement(p.out, p.out_dtype, (token * p.n_heads + head) * head_dim + d,
                          attn::finalOutput(acc[k], sum));
    }
  }
}

// Writes one token's K/V rows; dst_slot[token] is the cache row (block * block_size + offset).
template <typename TIn, typename TCache>
__global__ void appendKvKernel(const TIn* __restrict__ k_new, const TIn* __restrict__ v_new,
                               TCache* k_cache, TCache* v_cache,
                               const long long* __restrict__ dst_slot, int row_elems) {
  waitForPredecessor();
  allowSuccessorLaunch();
  const long long token = blockIdx.x;
  const long long dst = dst_slot[token] * row_elems;
  for (int e = threadIdx.x; e < row_elems; e += blockDim.x) {
    k_cache[dst + e] = storeAs<TCache>(loadFloat(k_new[token * row_elems + e]));
    v_cache[dst + e] = storeAs<TCache>(loadFloat(v_new[token * row_elems + e]));
  }
}

template <typename TIn>
Status launchAppend(const KvAppendArgs& a, const long long* dst, int tokens, int row_elems,
                    cudaStream_t stream) {
  const int threads = row_elems < 256 ? ((row_elems + 31) / 32) * 32 : 256;
  const auto* k_new = static_cast<const TIn*>(a.k_new);
  const auto* v_new = static_cast<const TIn*>(a.v_new);
  REE_RETURN_IF_ERROR(dispatchStorageType(a.cache_dtype, "appendKv", [&](auto cache_tag) {
    using TCache = decltype(cache_tag);
    launchChained(appendKvKernel<TIn, TCache>, tokens, threads, 0, stream, k_new, v_new,
                  static_cast<TCache*>(a.k_cache), static_cast<TCache*>(a.v_cache), dst, row_elems);
  }));
  REE_CUDA_CHECK_LAUNCH();
  return Status::kSuccess;
}

// Chunks per split block: the shortest run whose blocks all fit on the GPU at once (one wave: the
// most parallelism without a tail wave); when even runs of 8 do not fit, a run of
// kSplitManyWavesRun. Longer runs share a block's setup (Q tile, work description) among more
// chunks. Never changes the bits.
int chooseChunksPerBlock(const SplitWork& work, long long resident_blocks) {
  for (int i = 0; i < kSplitRunChoices; ++i) {
    if (work.blocks[i] <= resident_blocks) return 1 << i;
  }
  return kSplitManyWavesRun;
}

// Blocks of `kernel` (threads, shared bytes) resident on the whole current device at once.
// Cached per (kernel, bytes, device): the split path asks once per attention call, i.e. once per
// layer and step.
template <typename Kernel>
Status residentBlocks(Kernel kernel, int threads, size_t bytes, long long* blocks) {
  int device = 0;
  REE_CUDA_CHECK(cudaGetDevice(&device));
  static std::mutex mutex;
  static std::map<std::tuple<const void*, size_t, int>, long long> cache;
  const auto key = std::make_tuple(reinterpret_cast<const void*>(kernel), bytes, device);
  std::lock_guard<std::mutex> lock(mutex);
  auto found = cache.find(key);
  if (found == cache.end()) {
    int sm_count = 0, per_sm = 0;
    REE_CUDA_CHECK(cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, device));
    REE_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, bytes));
    found = cache.emplace(key, static_cast<long long>(std::max(per_sm, 1)) * sm_count).first;
  }
  *blocks = found->second;
  return Status::kSuccess;
}

template <typename T, int kRows, int kHeadDim>
Status launchSplit(KernelParams p, const SplitSeq* split_seqs, int n_split_seqs,
                   const SplitWork& work, size_t bytes, cudaStream_t stream) {
  auto kernel = attentionChunkKernel<T, false, kRows, kHeadDim>;
  REE_RETURN_IF_ERROR(allowFullSharedMemory(kernel));
  long long resident = 0;
  REE_RETURN_IF_ERROR(residentBlocks(kernel, kSplitThreads, bytes, &resident));
  p.split_chunks_per_block = chooseChunksPerBlock(work, resident);
  const int split_blocks =
      p.n_kv_heads * ((work.max_chunks + p.split_chunks_per_block - 1) / p.split_chunks_per_block);
  launchChained(kernel, dim3(split_blocks, n_split_seqs), kSplitThreads, bytes, stream, p,
                static_cast<const WorkItem*>(nullptr), split_seqs);
  REE_CUDA_CHECK_LAUNCH();
  return Status::kSuccess;
}

// Decode models almost all have head_dim 128; that case gets its own instantiation.
template <typename T, int kRows>
Status launchSplitHeadDim(const KernelParams& p, const SplitSeq* split_seqs, int n_split_seqs,
                          const SplitWork& work, size_t bytes, cudaStream_t stream) {
  if (p.head_dim == 128) {
    return launchSplit<T, kRows, 128>(p, split_seqs, n_split_seqs, work, bytes, stream);
  }
  return launchSplit<T, kRows, 0>(p, split_seqs, n_split_seqs, work, bytes, stream);
}

// The merge kernel: head_dim 128 with constant strides; otherwise one or two d's per thread.
Status launchMerge(const KernelParams& p, const SplitSeq* split_seqs, int n_split_seqs,
                   int merge_blocks, cudaStream_t stream) {
  const dim3 grid(merge_blocks, n_split_seqs);
  if (p.head_dim == 128) {
    launchChained(attentionMergeKernel<128, 1>, grid, kMergeThreads, 0, stream, p, split_seqs);
  } else if (p.head_dim <= kMergeThreads) {
    launchChained(attentionMergeKernel<0, 1>, grid, kMergeThreads, 0, stream, p, split_seqs);
  } else {
    launchChained(attentionMergeKernel<0, kMergeMaxD>, grid, kMergeThreads, 0, stream, p,
                  split_seqs);
  }
  REE_CUDA_CHECK_LAUNCH();
  return Status::kSuccess;
}

template <typename T, int kR, int kHeadDim>
Status launchTiled(const KernelParams& p, const WorkItem* flash_items, int n_flash,
                   cudaStream_t stream) {
  auto kernel = attentionTiledPrefillKernel<T, kR, kHeadDim>;
  const size_t bytes = tiledLayout(p.head_dim, p.rows_cap, p.kv_stride, sizeof(T)).bytes;
  REE_RETURN_IF_ERROR(allowFullSharedMemory(kernel));
  launchChained(kernel, n_flash, kTiledThreads, bytes, stream, p, flash_items);
  REE_CUDA_CHECK_LAUNCH();
  return Status::kSuccess;
}

// The tiled prefill kernel with kR rows per thread; head_dim 128 has its own instantiation.
template <typename T, int kR>
Status launchTiledHeadDim(const KernelParams& p, const WorkItem* flash_items, int n_flash,
                          cudaStream_t stream) {
  constexpr int kFixedHeadDim = kR >= 4 ? 128 : 0;  // 2 rows per thread: head_dim > 128 only
  if (kFixedHeadDim > 0 && p.head_dim == kFixedHeadDim) {
    return launchTiled<T, kR, kFixedHeadDim>(p, flash_items, n_flash, stream);
  }
  return launchTiled<T, kR, 0>(p, flash_items, n_flash, stream);
}

template <typename T>
Status launchTiledRows(const KernelParams& p, int rows_per_thread, const WorkItem* flash_items,
                       int n_flash, cudaStream_t stream) {
  switch (rows_per_thread) {
    case 8:
      return launchTiledHeadDim<T, 8>(p, flash_items, n_flash, stream);
    case 4:
      return launchTiledHeadDim<T, 4>(p, flash_items, n_flash, stream);
    default:
      return launchTiledHeadDim<T, 2>(p, flash_items, n_flash, stream);
  }
}

template <typename T>
Status launchChunkKernels(const KernelParams& base, const SplitSeq* split_seqs, int n_split_seqs,
                          const SplitWork& split_work, int split_rows_cap, int merge_blocks,
                          const WorkItem* flash_items, int n_flash, int flash_rows_cap,
                          int flash_tiled_rows, cudaStream_t stream) {
  if (n_split_seqs > 0) {
    KernelParams p = base;
    p.rows_cap = split_rows_cap;
    const size_t bytes = smemLayout(p.head_dim, p.rows_cap, p.kv_stride, sizeof(T), false).bytes;
    if (split_rows_cap % kRowGroup != 0) {  // every sequence has <= kSmallRowGroup rows
      REE_RETURN_IF_ERROR((launchSplitHeadDim<T, kSmallRowGroup>(p, split_seqs, n_split_seqs,
                                                                 split_work, bytes, stream)));
    } else {
      REE_RETURN_IF_ERROR((launchSplitHeadDim<T, kRowGroup>(p, split_seqs, n_split_seqs, split_work,
                                                            bytes, stream)));
    }
    REE_RETURN_IF_ERROR(launchMerge(p, split_seqs, n_split_seqs, merge_blocks, stream));
  }
  if (n_flash > 0 && flash_tiled_rows > 0) {
    KernelParams p = base;
    p.rows_cap = flash_rows_cap;
    REE_RETURN_IF_ERROR(launchTiledRows<T>(p, flash_tiled_rows, flash_items, n_flash, stream));
  } else if (n_flash > 0) {
    KernelParams p = base;
    p.rows_cap = flash_rows_cap;
    const size_t bytes = smemLayout(p.head_dim, p.rows_cap, p.kv_stride, sizeof(T), true).bytes;
    REE_RETURN_IF_ERROR((allowFullSharedMemory(attentionChunkKernel<T, true, kRowGroup, 0>)));
    launchChained(attentionChunkKernel<T, true, kRowGroup, 0>, n_flash, kFlashThreads, bytes,
                  stream, p, flash_items, static_cast<const SplitSeq*>(nullptr));
    REE_CUDA_CHECK_LAUNCH();
  }
  return Status::kSuccess;
}

int roundUp(int x, int m) {
  return (x + m - 1) / m * m;
}

// Uploads the per-call host tables through pinned memory: a cudaMemcpyAsync from pageable memory
// synchronises the stream, which would serialise the host with every attention call. A small ring
// of pinned buffers per host thread; a slot is reused once the copy that last read it has run.
class PinnedUploader {
 public:
  Status upload(void* device_dst, const void* host_src, size_t bytes, cudaStream_t stream) {
    Slot& slot = slots_[next_++ % kSlots];
    if (slot.event == nullptr) {
      REE_CUDA_CHECK(cudaEventCreateWithFlags(&slot.event, cudaEventDisableTiming));
    } else {
      REE_CUDA_CHECK(cudaEventSynchronize(slot.event));
    }
    if (slot.capacity < bytes) {
      if (slot.host != nullptr) REE_CUDA_CHECK(cudaFreeHost(slot.host));
      slot.host = nullptr;
      slot.capacity = 0;
      const size_t capacity = std::max<size_t>(bytes * 2, 64 * 1024);
      REE_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&slot.host), capacity));
      slot.capacity = capacity;
    }
    std::memcpy(slot.host, host_src, bytes);
    REE_CUDA_CHECK(cudaMemcpyAsync(device_dst, slot.host, bytes, cudaMemcpyHostToDevice, stream));
    REE_CUDA_CHECK(cudaEventRecord(slot.event, stream));
    return Status::kSuccess;
  }

 private:
  static constexpr int kSlots = 32;  // two uploads per layer: the host may run 16 layers ahead
  struct Slot {
    unsigned char* host = nullptr;
    size_t capacity = 0;
    cudaEvent_t event = nullptr;
  };
  Slot slots_[kSlots];
  unsigned next_ = 0;
};

// One ring per device: a slot's event is recorded on the stream it served, and an event may only
// be recorded on streams of the device it was created on.
Status uploadTables(void* device_dst, const void* host_src, size_t bytes, cudaStream_t stream) {
  thread_local std::map<int, PinnedUploader> uploaders;
  int device = 0;
  REE_CUDA_CHECK(cudaGetDevice(&device));
  return uploaders[device].upload(device_dst, host_src, bytes, stream);
}

// Device copies of the small host tables that repeat from call to call: a decode step runs the
// same attention work lists and KV slots in every layer, so without this every layer would queue
// two host-to-device copies between its kernels. A table whose bytes equal one of the last few
// uploaded on the same device and stream is reused; an evicted copy is freed in stream order
// after the work that read it (on the caller's stream, which is the cache's key and alive during
// the call: a stream that an operation set created may be destroyed before the thread ends). The
// copies are read-only for the kernels.
class TableCache {
 public:
  TableCache() = default;
  TableCache(const TableCache&) = delete;
  TableCache& operator=(const TableCache&) = delete;
  ~TableCache() {  // thread exit: no stream of ours is known to be alive, so a synchronous free
    for (Entry& e : entries_)
      cudaFree(e.device);  // errors ignored: nothing to report them to
  }

  Status get(const void* host, size_t bytes, cudaStream_t stream, const unsigned char** device) {
    ++clock_;
    for (Entry& e : entries_) {
      if (e.bytes.size() == bytes && std::memcmp(e.bytes.data(), host, bytes) == 0) {
        e.used = clock_;
        *device = e.device;
        return Status::kSuccess;
      }
    }
    if (entries_.size() == kEntries) {
      auto oldest =
          std::min_element(entries_.begin(), entries_.end(),
                           [](const Entry& a, const Entry& b) { return a.used < b.used; });
      REE_CUDA_CHECK(cudaFreeAsync(oldest->device, stream));
      entries_.erase(oldest);
    }
    Entry e;
    e.bytes.assign(static_cast<const unsigned char*>(host),
                   static_cast<const unsigned char*>(host) + bytes);
    e.used = clock_;
    REE_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&e.device), bytes, stream));
    Status status = uploadTables(e.device, host, bytes, stream);
    if (status != Status::kSuccess) {
      cudaFreeAsync(e.device, stream);
      return status;
    }
    *device = e.device;
    entries_.push_back(std::move(e));
    return Status::kSuccess;
  }

 private:
  static constexpr size_t kEntries = 4;  // micro-batches in flight on one stage each have tables
  struct Entry {
    std::vector<unsigned char> bytes;
    unsigned char* device = nullptr;
    uint64_t used = 0;
  };
  std::vector<Entry> entries_;
  uint64_t clock_ = 0;
};

enum class TableKind : int { kAttention = 0, kKvSlots = 1 };

// The calling thread's cache for (kind, current device, stream).
Status cachedTables(TableKind kind, const void* host, size_t bytes, cudaStream_t stream,
                    const unsigned char** device) {
  thread_local std::map<std::tuple<int, int, cudaStream_t>, TableCache> caches;
  int current = 0;
  REE_CUDA_CHECK(cudaGetDevice(&current));
  return caches[std::make_tuple(static_cast<int>(kind), current, stream)].get(host, bytes, stream,
                                                                              device);
}

// ---- One attention call on the host: plan, upload, launch ---------------------------------------

// Whether a block of `rows_cap` rows fits the device's opt-in shared memory.
struct SmemFit {
  int head_dim;
  int kv_stride;
  int kv_bytes;
  int smem_optin;
  bool operator()(int rows_cap, bool flash) const {
    return smemLayout(head_dim, rows_cap, kv_stride, kv_bytes, flash).bytes <=
           static_cast<size_t>(smem_optin);
  }
  // The tiled prefill kernel with kR rows per thread.
  bool tiled(int rows_per_thread) const {
    return tiledLayout(head_dim, tiledRows(rows_per_thread), kv_stride, kv_bytes).bytes <=
           static_cast<size_t>(smem_optin);
  }
};

std::atomic<int> g_prefill_kernel{static_cast<int>(PrefillKernel::kTiled)};

// The work of one call: one entry per split-path (decode-like) sequence, one item per flash tile.
struct AttentionPlan {
  std::vector<SplitSeq> split_seqs;
  std::vector<WorkItem> flash_items;
  long long states = 0;  // split-path chunk states in the workspace
  SplitWork split_work;
  int merge_blocks = 0;  // grid x of the merge kernel: the maximum
  int split_max_rows = 0;
  int split_rows_cap = 0;
  int flash_rows_cap = 0;
  int flash_tiled_rows = 0;  // > 0: the tiled prefill kernel with this many rows per thread
};

// Rows per thread of the tiled prefill kernel (a tile has 16 times as many): the most whose block
// fits (8, 4, 2), fewer while half a tile still holds the longest flash sequence's rows; 0 when
// the tiled kernel does not apply (head_dim not a multiple of 8, switched off, nothing fits).
int chooseTiledRows(const SmemFit& fits, int max_rows) {
  const int kernel = g_prefill_kernel.load(std::memory_order_relaxed);
  if (fits.head_dim % kTiledGroupD != 0 || kernel == static_cast<int>(PrefillKernel::kChunk)) {
    return 0;
  }
  int rows_per_thread = kernel == static_cast<int>(PrefillKernel::kTiledRows64) ? 4 : 8;
  while (rows_per_thread > 2 && !fits.tiled(rows_per_thread))
    rows_per_thread /= 2;
  if (!fits.tiled(rows_per_thread)) return 0;
  while (rows_per_thread > 2 && tiledRows(rows_per_thread / 2) >= max_rows)
    rows_per_thread /= 2;
  return rows_per_thread;
}

// The flash path's rows per tile: 64 (32 past head_dim 128), halved until a block fits.
Status chooseFlashRowsCap(const SmemFit& fits, DType kv_dtype, int* rows_cap) {
  int cap = fits.head_dim <= 128 ? 64 : 32;
  while (cap > kRowGroup && !fits(cap, true))
    cap /= 2;
  if (!fits(cap, true)) {
    return REE_FAIL(Status::kUnsupported,
                    "attention: head_dim %d with %s cache needs more shared memory than the "
                    "device's %d bytes",
                    fits.head_dim, dtypeName(kv_dtype), fits.smem_optin);
  }
  *rows_cap = cap;
  return Status::kSuccess;
}

// Adds sequence s (n_new new tokens, `rows` rows per KV head) to the split path.
Status addSplitSeq(const AttentionArgs& args, int s, int rows, int n_chunks, AttentionPlan* plan) {
  plan->split_max_rows = std::max(plan->split_max_rows, rows);
  SplitSeq ss{};
  ss.seq = s;
  ss.token_begin = args.query_offsets[s];
  ss.cached = args.cached_lens[s];
  ss.rows = rows;
  ss.n_chunks = n_chunks;
  ss.state_base = plan->states;
  plan->split_seqs.push_back(ss);
  const long long blocks = static_cast<long long>(args.n_kv_heads) * n_chunks;
  if (blocks > INT32_MAX || plan->split_seqs.size() > 65535) {
    return REE_FAIL(Status::kInvalidArgument,
                    "attention: sequence %d needs %lld split-KV blocks, or the batch has more "
                    "than 65535 decode-like sequences: beyond one CUDA grid",
                    s, blocks);
  }
  for (int i = 0; i < kSplitRunChoices; ++i) {
    plan->split_work.blocks[i] +=
        static_cast<long long>(args.n_kv_heads) * ((n_chunks + (1 << i) - 1) >> i);
  }
  plan->split_work.max_chunks = std::max(plan->split_work.max_chunks, n_chunks);
  plan->merge_blocks = std::max(plan->merge_blocks, args.n_kv_heads * rows);
  plan->states += static_cast<long long>(args.n_kv_heads) * rows * n_chunks;
  return Status::kSuccess;
}

// Sequences with few rows per KV head whose block fits take the split path, the others flash
// tiles of flash_rows_cap rows.
Status planAttention(const AttentionArgs& args, const SmemFit& fits, AttentionPlan* plan) {
  const int group = args.n_heads / args.n_kv_heads;
  int flash_max_rows = 0;
  for (int s = 0; s < args.batch; ++s) {
    const int rows = (args.query_offsets[s + 1] - args.query_offsets[s]) * group;
    if (rows > kSplitMaxRows) flash_max_rows = std::max(flash_max_rows, rows);
  }
  plan->flash_tiled_rows = chooseTiledRows(fits, flash_max_rows);
  if (plan->flash_tiled_rows > 0) {
    plan->flash_rows_cap = tiledRows(plan->flash_tiled_rows);
  } else {
    REE_RETURN_IF_ERROR(chooseFlashRowsCap(fits, args.cache.dtype, &plan->flash_rows_cap));
  }
  for (int s = 0; s < args.batch; ++s) {
    const int n_new = args.query_offsets[s + 1] - args.query_offsets[s];
    if (n_new == 0) continue;
    const int rows = n_new * group;
    const int cached = args.cached_lens[s];
    const int n_chunks = static_cast<int>(attn::chunkCount(cached + n_new - 1));
    if (rows <= kSplitMaxRows && fits(roundUp(rows, kRowGroup), false)) {
      REE_RETURN_IF_ERROR(addSplitSeq(args, s, rows, n_chunks, plan));
      continue;
    }
    for (int h = 0; h < args.n_kv_heads; ++h) {
      for (int r0 = 0; r0 < rows; r0 += plan->flash_rows_cap) {
        const int count = std::min(plan->flash_rows_cap, rows - r0);
        plan->flash_items.push_back(
            WorkItem{s, h, r0, count, 0, 0, args.query_offsets[s], cached, 0});
      }
    }
  }
  // kSmallRowGroup rows per thread when every split sequence has that few (decode with G <= 4).
  plan->split_rows_cap = roundUp(
      plan->split_max_rows, plan->split_max_rows <= kSmallRowGroup ? kSmallRowGroup : kRowGroup);
  // Longest tiles first: better tail balance (the order never changes the bits).
  std::stable_sort(plan->flash_items.begin(), plan->flash_items.end(),
                   [&](const WorkItem& x, const WorkItem& y) {
                     return x.cached + (x.row_begin + x.row_count - 1) / group >
                            y.cached + (y.row_begin + y.row_count - 1) / group;
                   });
  return Status::kSuccess;
}

size_t align256(size_t x) {
  return (x + 255) & ~size_t{255};
}

// The device copies of the block table (always explicit) and the work descriptions, one upload.
struct DeviceTables {
  const int32_t* block_table = nullptr;
  const SplitSeq* split_seqs = nullptr;
  const WorkItem* flash_items = nullptr;
};

Status uploadTables(const AttentionArgs& args, const AttentionPlan& plan, cudaStream_t stream,
                    DeviceTables* out) {
  const size_t table_count = static_cast<size_t>(args.batch) * args.cache.max_blocks_per_seq;
  std::vector<int32_t> table(table_count);
  for (size_t i = 0; i < table_count; ++i) {
    table[i] = args.cache.block_table ? args.cache.block_table[i] : static_cast<int32_t>(i);
  }
  const size_t split_off = align256(table.size() * sizeof(int32_t));
  const size_t flash_off = align256(split_off + plan.split_seqs.size() * sizeof(SplitSeq));
  const size_t upload_bytes = align256(flash_off + plan.flash_items.size() * sizeof(WorkItem));
  std::vector<unsigned char> staging(upload_bytes, 0);
  std::memcpy(staging.data(), table.data(), table.size() * sizeof(int32_t));
  if (!plan.split_seqs.empty()) {
    std::memcpy(staging.data() + split_off, plan.split_seqs.data(),
                plan.split_seqs.size() * sizeof(SplitSeq));
  }
  if (!plan.flash_items.empty()) {
    std::memcpy(staging.data() + flash_off, plan.flash_items.data(),
                plan.flash_items.size() * sizeof(WorkItem));
  }
  const unsigned char* tables = nullptr;
  REE_RETURN_IF_ERROR(
      cachedTables(TableKind::kAttention, staging.data(), upload_bytes, stream, &tables));
  out->block_table = reinterpret_cast<const int32_t*>(tables);
  out->split_seqs = reinterpret_cast<const SplitSeq*>(tables + split_off);
  out->flash_items = reinterpret_cast<const WorkItem*>(tables + flash_off);
  return Status::kSuccess;
}

// The split path's workspace, a separate per-call buffer: states maxima, sums, accumulators.
struct Workspace {
  size_t sum_off = 0, acc_off = 0, bytes = 0;
  Workspace(long long states, int head_dim) {
    sum_off = align256(states * sizeof(float));
    acc_off = align256(sum_off + states * sizeof(float));
    bytes = align256(acc_off + states * head_dim * sizeof(float));
  }
};

KernelParams chunkKernelParams(const AttentionArgs& args, const SmemFit& fits,
                               const int32_t* block_table, unsigned char* workspace,
                               const Workspace& layout) {
  const PagedKvCache& cache = args.cache;
  KernelParams p{};
  p.q = args.q;
  p.q_dtype = args.q_dtype;
  p.out = args.out;
  p.out_dtype = args.out_dtype;
  p.k = cache.k;
  p.v = cache.v;
  p.block_table = block_table;
  p.max_blocks_per_seq = cache.max_blocks_per_seq;
  p.block_size = cache.block_size;
  p.n_heads = args.n_heads;
  p.n_kv_heads = args.n_kv_heads;
  p.group = args.n_heads / args.n_kv_heads;
  p.head_dim = args.head_dim;
  p.scale = args.scale == 0.0f ? attn::defaultScale(args.head_dim) : args.scale;
  p.kv_stride = fits.kv_stride;
  p.split_chunks_per_block = 1;  // chosen by the launcher (launchSplit)
  p.vec16 = (args.head_dim * fits.kv_bytes) % 16 == 0 &&
            reinterpret_cast<uintptr_t>(cache.k) % 16 == 0 &&
            reinterpret_cast<uintptr_t>(cache.v) % 16 == 0;
  p.ws_max = reinterpret_cast<float*>(workspace);
  p.ws_sum = reinterpret_cast<float*>(workspace + layout.sum_off);
  p.ws_acc = reinterpret_cast<float*>(workspace + layout.acc_off);
  return p;
}

}  // namespace

void setPrefillKernelForBenchmark(PrefillKernel kernel) {
  g_prefill_kernel.store(static_cast<int>(kernel), std::memory_order_relaxed);
}

Status attention(const AttentionArgs& args, cudaStream_t stream) {
  REE_RETURN_IF_ERROR(validateAttentionArgs(args));
#if !REE_ATTENTION_HAVE_CRMATH
  return REE_FAIL(Status::kUnsupported, "attention: built without crmath.h (crExp/crRsqrt)");
#else
  if (args.batch == 0 || args.query_offsets[args.batch] == 0) return Status::kSuccess;
  int device = 0, smem_optin = 0;
  REE_CUDA_CHECK(cudaGetDevice(&device));
  REE_CUDA_CHECK(
      cudaDeviceGetAttribute(&smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  const SmemFit fits{args.head_dim, kvStrideElements(args.head_dim, args.cache.dtype),
                     dtypeSize(args.cache.dtype), smem_optin};
  AttentionPlan plan;
  REE_RETURN_IF_ERROR(planAttention(args, fits, &plan));
  DeviceTables tables;
  REE_RETURN_IF_ERROR(uploadTables(args, plan, stream, &tables));
  const Workspace layout(plan.states, args.head_dim);
  unsigned char* workspace = nullptr;
  if (plan.states > 0) {
    REE_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&workspace), layout.bytes, stream));
  }
  const KernelParams p = chunkKernelParams(args, fits, tables.block_table, workspace, layout);
  const Status status = dispatchStorageType(args.cache.dtype, "attention", [&](auto kv_tag) {
    return launchChunkKernels<decltype(kv_tag)>(
        p, tables.split_seqs, static_cast<int>(plan.split_seqs.size()), plan.split_work,
        plan.split_rows_cap, plan.merge_blocks, tables.flash_items,
        static_cast<int>(plan.flash_items.size()), plan.flash_rows_cap, plan.flash_tiled_rows,
        stream);
  });
  cudaError_t free_status = workspace ? cudaFreeAsync(workspace, stream) : cudaSuccess;
  REE_RETURN_IF_ERROR(status);
  REE_CUDA_CHECK(free_status);
  return Status::kSuccess;
#endif
}

Status appendKv(const KvAppendArgs& args, cudaStream_t stream) {
  REE_RETURN_IF_ERROR(validateKvAppendArgs(args));
  if (args.batch == 0 || args.query_offsets[args.batch] == 0) return Status::kSuccess;
  const int tokens = args.query_offsets[args.batch];
  std::vector<long long> dst(tokens);
  for (int s = 0; s < args.batch; ++s) {
    for (int token = args.query_offsets[s]; token < args.query_offsets[s + 1]; ++token) {
      const int64_t pos = args.cached_lens[s] + (token - args.query_offsets[s]);
      const int64_t block =
          kvBlockOf(args.block_table, args.max_blocks_per_seq, s, pos, args.block_size);
      dst[token] = block * args.block_size + pos % args.block_size;
    }
  }
  const unsigned char* slots = nullptr;
  Status status =
      cachedTables(TableKind::kKvSlots, dst.data(), dst.size() * sizeof(long long), stream, &slots);
  const auto* dst_dev = reinterpret_cast<const long long*>(slots);
  if (status == Status::kSuccess) {
    const int row_elems = args.n_kv_heads * args.head_dim;
    status = dispatchStorageType(args.new_dtype, "appendKv", [&](auto new_tag) {
      return launchAppend<decltype(new_tag)>(args, dst_dev, tokens, row_elems, stream);
    });
  }
  return status;
}

}  // namespace cuda
}  // namespace repops
}  // namespace ree
