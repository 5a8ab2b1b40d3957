// The chunk kernel of CUDA attention (docs/repops-spec/attention.md): one block computes the chunk
// states (scores, chunk softmax, sums, P.V) of the rows of one (sequence, KV head) with the spec's
// operations in the spec's order. Split mode (decode-like sequences) stores a run of 1-8 chunks'
// states to the workspace for attention_merge.cuh; flash mode (legacy prefill, head_dim % 8 != 0)
// merges every chunk into a running state in shared memory and stores the output. Launched by
// attention_launch.cuh. Internal: included by attention.cu only (after attention_common.cuh); not
// a header of its own.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "attention_common.cuh"
#include "chained_launch.cuh"
#include "common/storage_element.h"
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

}  // namespace
}  // namespace cuda
}  // namespace repops
}  // namespace ree
