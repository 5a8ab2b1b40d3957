// The tiled prefill kernel of CUDA attention (docs/repops-spec/attention.md, "CUDA organisation").
// Same arithmetic, same order, same bits as the CPU reference and the chunk kernel; organised like
// a register-tiled GEMM so that each shared-memory load feeds many independent FMA chains:
//   * scores: the 256 threads form a 16 x 16 grid over (rows, positions) of the chunk; thread
//     (ty, tx) owns rows ty*kR .. ty*kR+kR-1 and positions tx, tx+16, tx+32, tx+48, i.e. kR x 4
//     independent dot-product chains, each walking d ascending (one fma chain per 128-wide part,
//     parts added left to right), then times the scale;
//   * chunk max: the 16 threads of a row (one half warp) combine by shuffles (a max is exact in any
//     order, spec); weights crExp(s - m) in registers (crExpN overlaps them);
//   * sums: thread r (< rows) runs row r's chain over the positions in order;
//   * P.V: unit = (kR rows, 8 consecutive d); each unit walks the chunk's positions in order with
//     kR x 8 independent fma chains, then merges into the running accumulator in shared memory.
// A tile has 16 * kR rows (kR = 8, 4 or 2 by shared memory). Requires head_dim % 8 == 0 (whole
// 8-element groups of d); other head_dims take the chunk kernel.
// Internal: included by attention.cu only (after attention_common.cuh).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "attention_common.cuh"
#include "chained_launch.cuh"
#include "common/storage_element.h"
#include "ree/kernels/attention.h"
#include "ree/kernels/reduce.h"
#include "shared_memory.cuh"

namespace ree {
namespace repops {
namespace cuda {
namespace attention_detail {

constexpr int kTiledThreads = 256;
constexpr int kTiledSide = 16;                        // the thread grid is kTiledSide x kTiledSide
constexpr int kTiledPositions = kChunk / kTiledSide;  // positions per thread in the score phase
constexpr int kTiledGroupD = 8;                       // d's per P.V unit (and per K read)
static_assert(kTiledSide * kTiledSide == kTiledThreads, "square thread grid");
static_assert(kTiledPositions * kTiledSide == kChunk, "a chunk spans the grid's columns");

// Rows of a tile for kR rows per thread.
__host__ __device__ constexpr int tiledRows(int rows_per_thread) {
  return kTiledSide * rows_per_thread;
}

// Row stride (floats) of the weights tile [pos][row]: padded by one 16-byte vector so that the 8
// positions a quarter warp stores land in distinct bank groups (rows / 4 + 1 is odd).
__host__ __device__ inline int tiledWeightStride(int rows_cap) {
  return rows_cap + 4;
}

struct TiledLayout {
  size_t q_off, w_off, stat_off, acc_off, slot_off, kv_off, bytes;
};

// Q tile [d][row] f32, weights [pos][row] (padded rows), 6 per-row arrays (running max, running
// sum, the two merge factors, position, valid count), the running accumulator [row][d] f32, the
// cache rows of two chunks' positions, then the K and V chunks in the cache dtype.
__host__ __device__ inline TiledLayout tiledLayout(int head_dim, int rows_cap, int kv_stride,
                                                   int kv_elem_bytes) {
  auto align16 = [](size_t x) { return (x + 15) & ~size_t{15}; };
  TiledLayout layout{};
  layout.q_off = 0;
  layout.w_off = align16(layout.q_off + sizeof(float) * head_dim * rows_cap);
  layout.stat_off = align16(layout.w_off + sizeof(float) * kChunk * tiledWeightStride(rows_cap));
  layout.acc_off = align16(layout.stat_off + sizeof(float) * 6 * rows_cap);
  layout.slot_off = align16(layout.acc_off + sizeof(float) * rows_cap * head_dim);
  layout.kv_off = align16(layout.slot_off + sizeof(long long) * 2 * kChunk);
  layout.bytes = align16(layout.kv_off + 2 * size_t(kChunk) * kv_stride * kv_elem_bytes);
  return layout;
}

template <typename T>
struct TiledTiles {
  float* q_tile;   // [d][row]
  float* weights;  // [pos][row], stride tiledWeightStride(rows_cap)
  float* running_max;
  float* running_sum;
  float* running_factor;
  float* chunk_factor;
  int* row_position;   // absolute position of each row (-1: padding row)
  int* row_valid;      // positions of the current chunk the row attends to (<= 0: none)
  float* running_acc;  // [row][d]
  long long* slots;
  ChunkTiles<T> kv;  // only k_chunk and v_chunk are used (stageKvChunk, copyChunkAsync)
};

template <typename T>
__device__ __forceinline__ TiledTiles<T> tiledTiles(unsigned char* smem_raw,
                                                    const TiledLayout& layout, int rows_cap,
                                                    int kv_stride) {
  TiledTiles<T> t{};
  t.q_tile = reinterpret_cast<float*>(smem_raw + layout.q_off);
  t.weights = reinterpret_cast<float*>(smem_raw + layout.w_off);
  float* stats = reinterpret_cast<float*>(smem_raw + layout.stat_off);
  t.running_max = stats;
  t.running_sum = stats + rows_cap;
  t.running_factor = stats + 2 * rows_cap;
  t.chunk_factor = stats + 3 * rows_cap;
  t.row_position = reinterpret_cast<int*>(stats + 4 * rows_cap);
  t.row_valid = reinterpret_cast<int*>(stats + 5 * rows_cap);
  t.running_acc = reinterpret_cast<float*>(smem_raw + layout.acc_off);
  t.slots = reinterpret_cast<long long*>(smem_raw + layout.slot_off);
  t.kv.k_chunk = reinterpret_cast<T*>(smem_raw + layout.kv_off);
  t.kv.v_chunk = t.kv.k_chunk + kChunk * kv_stride;
  return t;
}

// Eight consecutive elements of a shared-memory K/V row as fp32 (exact), 16-byte aligned.
template <typename T>
__device__ __forceinline__ void loadGroup8(const T* p, float (&out)[8]) {
  loadVector16(p, out);
}
template <>
__device__ __forceinline__ void loadGroup8<float>(const float* p, float (&out)[8]) {
  const float4 a = *reinterpret_cast<const float4*>(p);
  const float4 b = *reinterpret_cast<const float4*>(p + 4);
  out[0] = a.x, out[1] = a.y, out[2] = a.z, out[3] = a.w;
  out[4] = b.x, out[5] = b.y, out[6] = b.z, out[7] = b.w;
}

// kN consecutive floats of shared memory (kN = 2, 4 or 8; aligned to their size, up to 16 bytes).
template <int kN>
__device__ __forceinline__ void loadFloats(const float* p, float (&out)[kN]) {
  if constexpr (kN == 2) {
    const float2 a = *reinterpret_cast<const float2*>(p);
    out[0] = a.x, out[1] = a.y;
  } else {
    static_assert(kN % 4 == 0, "2 or a multiple of 4 floats");
#pragma unroll
    for (int i = 0; i < kN; i += 4) {
      const float4 a = *reinterpret_cast<const float4*>(p + i);
      out[i] = a.x, out[i + 1] = a.y, out[i + 2] = a.z, out[i + 3] = a.w;
    }
  }
}
template <int kN>
__device__ __forceinline__ void storeFloats(float* p, const float (&in)[kN]) {
  if constexpr (kN == 2) {
    *reinterpret_cast<float2*>(p) = make_float2(in[0], in[1]);
  } else {
    static_assert(kN % 4 == 0, "2 or a multiple of 4 floats");
#pragma unroll
    for (int i = 0; i < kN; i += 4)
      *reinterpret_cast<float4*>(p + i) = make_float4(in[i], in[i + 1], in[i + 2], in[i + 3]);
  }
}

// The raw bits of 8 consecutive K or V elements (one 16-byte vector, two for f32), so that the
// next step's K or V is loaded before the current step's FMAs and its latency overlaps them.
template <typename T>
struct KGroupBits {
  uint4 part[sizeof(T) == 4 ? 2 : 1];
};
template <typename T>
__device__ __forceinline__ void loadKGroupBits(const T* p, KGroupBits<T>& bits) {
#pragma unroll
  for (int j = 0; j < int(sizeof(bits.part) / sizeof(uint4)); ++j)
    bits.part[j] = reinterpret_cast<const uint4*>(p)[j];
}
// The 8 elements as fp32 (exact; the conversions of loadVector16).
__device__ __forceinline__ void unpackKGroup(const KGroupBits<bf16_t>& bits, float (&out)[8]) {
  const uint32_t words[4] = {bits.part[0].x, bits.part[0].y, bits.part[0].z, bits.part[0].w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {  // little endian: element 2i is the low half
    out[2 * i] = bitsFloat(words[i] << 16);
    out[2 * i + 1] = bitsFloat(words[i] & 0xffff0000u);
  }
}
__device__ __forceinline__ void unpackKGroup(const KGroupBits<f16_t>& bits, float (&out)[8]) {
  const uint32_t words[4] = {bits.part[0].x, bits.part[0].y, bits.part[0].z, bits.part[0].w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    out[2 * i] = toFloat(f16_t{static_cast<uint16_t>(words[i] & 0xffffu)});
    out[2 * i + 1] = toFloat(f16_t{static_cast<uint16_t>(words[i] >> 16)});
  }
}
__device__ __forceinline__ void unpackKGroup(const KGroupBits<float>& bits, float (&out)[8]) {
  const uint32_t words[8] = {bits.part[0].x, bits.part[0].y, bits.part[0].z, bits.part[0].w,
                             bits.part[1].x, bits.part[1].y, bits.part[1].z, bits.part[1].w};
#pragma unroll
  for (int i = 0; i < 8; ++i)
    out[i] = bitsFloat(words[i]);
}

// dot[i][c] = fma chain over d in [d_begin, d_end) (multiples of 8) of q[d][row i] * k[pos c][d],
// from +0: kR x 4 independent chains, each in d order.
template <typename T, int kR>
__device__ __forceinline__ void tiledDotPart(const float* q_col, int rows_cap,
                                             const T* const (&k_rows)[kTiledPositions], int d_begin,
                                             int d_end, float (&dot)[kR][kTiledPositions]) {
#pragma unroll
  for (int i = 0; i < kR; ++i) {
#pragma unroll
    for (int c = 0; c < kTiledPositions; ++c)
      dot[i][c] = 0.0f;
  }
  if (d_begin >= d_end) return;
  KGroupBits<T> next[kTiledPositions];
#pragma unroll
  for (int c = 0; c < kTiledPositions; ++c)
    loadKGroupBits<T>(k_rows[c] + d_begin, next[c]);
#pragma unroll 1
  for (int d = d_begin; d < d_end; d += kTiledGroupD) {
    float k_values[kTiledPositions][kTiledGroupD];
#pragma unroll
    for (int c = 0; c < kTiledPositions; ++c)
      unpackKGroup(next[c], k_values[c]);
    if (d + kTiledGroupD < d_end) {
#pragma unroll
      for (int c = 0; c < kTiledPositions; ++c)
        loadKGroupBits<T>(k_rows[c] + d + kTiledGroupD, next[c]);
    }
#pragma unroll
    for (int e = 0; e < kTiledGroupD; ++e) {
      float q[kR];
      loadFloats<kR>(q_col + (d + e) * rows_cap, q);
#pragma unroll
      for (int i = 0; i < kR; ++i) {
#pragma unroll
        for (int c = 0; c < kTiledPositions; ++c)
          dot[i][c] = fmaF32(q[i], k_values[c][e], dot[i][c]);
      }
    }
  }
}

// The thread's kR x 4 scores: canonicalDot (parts of kReduceChunk added left to right) * scale.
template <typename T, int kR, int kHeadDim>
__device__ __forceinline__ void tiledScores(const KernelParams& p, const TiledTiles<T>& t,
                                            int head_dim, float (&score)[kR][kTiledPositions]) {
  const int ty = threadIdx.x / kTiledSide, tx = threadIdx.x % kTiledSide;
  const float* q_col = t.q_tile + ty * kR;
  const T* k_rows[kTiledPositions];
#pragma unroll
  for (int c = 0; c < kTiledPositions; ++c)
    k_rows[c] = t.kv.k_chunk + (tx + c * kTiledSide) * p.kv_stride;
  const int first_end = head_dim < kReduceChunk ? head_dim : kReduceChunk;
  tiledDotPart<T, kR>(q_col, p.rows_cap, k_rows, 0, first_end, score);
  if (kHeadDim == 0 || kHeadDim > kReduceChunk) {
    if (head_dim > kReduceChunk) {
      float rest[kR][kTiledPositions];
      tiledDotPart<T, kR>(q_col, p.rows_cap, k_rows, kReduceChunk, head_dim, rest);
#pragma unroll
      for (int i = 0; i < kR; ++i) {
#pragma unroll
        for (int c = 0; c < kTiledPositions; ++c)
          score[i][c] = score[i][c] + rest[i][c];
      }
    }
  }
#pragma unroll
  for (int i = 0; i < kR; ++i) {
#pragma unroll
    for (int c = 0; c < kTiledPositions; ++c)
      score[i][c] = attn::scaledScore(score[i][c], p.scale);
  }
}

// From the scores in registers: each row's chunk maximum (the half warp of the row combines its
// 16 partial maxima by shuffles), the weights crExp(s - m) into the weights tile (positions past a
// row's valid count get a discarded value), and the running maximum and the merge factors of the
// rows that reach this chunk.
template <typename T, int kR>
__device__ __forceinline__ void tiledSoftmax(const TiledTiles<T>& t, int rows_cap, int chunk,
                                             const float (&score)[kR][kTiledPositions]) {
  const int ty = threadIdx.x / kTiledSide, tx = threadIdx.x % kTiledSide;
  int valid[kR];
  float row_max[kR];
#pragma unroll
  for (int i = 0; i < kR; ++i) {
    valid[i] = t.row_valid[ty * kR + i];
    float m = -__int_as_float(0x7f800000);
#pragma unroll
    for (int c = 0; c < kTiledPositions; ++c) {
      if (tx + c * kTiledSide < valid[i]) m = attn::maxStep(m, score[i][c]);
    }
#pragma unroll
    for (int offset = kTiledSide / 2; offset >= 1; offset /= 2)
      m = attn::maxStep(m, __shfl_xor_sync(0xffffffffu, m, offset));
    row_max[i] = attn::canonicalMax(m);
  }
  float shifted[kR * kTiledPositions];
  float weight[kR * kTiledPositions];
#pragma unroll
  for (int i = 0; i < kR; ++i) {
#pragma unroll
    for (int c = 0; c < kTiledPositions; ++c) {
      // A position the row does not attend gets 0 (weight 1, never read).
      shifted[i * kTiledPositions + c] =
          tx + c * kTiledSide < valid[i] ? score[i][c] - row_max[i] : 0.0f;
    }
  }
  crExpN(shifted, weight);  // = attn::chunkWeight(score, max) for each valid position
  const int w_stride = tiledWeightStride(rows_cap);
#pragma unroll
  for (int c = 0; c < kTiledPositions; ++c) {
    float column[kR];
#pragma unroll
    for (int i = 0; i < kR; ++i)
      column[i] = weight[i * kTiledPositions + c];
    storeFloats<kR>(t.weights + (tx + c * kTiledSide) * w_stride + ty * kR, column);
  }
  // Lane tx < kR updates row ty * kR + tx's running maximum and merge factors (every lane of the
  // half warp holds every row's maximum after the shuffles), so the exps run side by side.
  float my_max = 0.0f;
  int my_valid = 0;
#pragma unroll
  for (int i = 0; i < kR; ++i) {
    if (tx == i) {
      my_max = row_max[i];
      my_valid = valid[i];
    }
  }
  if (tx < kR && my_valid > 0) {
    const int r = ty * kR + tx;
    if (chunk == 0) {
      t.running_max[r] = my_max;
    } else {
      const float old_max = t.running_max[r];
      const float new_max = attn::maxStep(old_max, my_max);
      const float maxima[2] = {old_max, my_max};
      float factors[2];
      attn::chunkWeights(maxima, new_max, factors);  // = rescaleFactor(old / chunk max, new)
      t.running_max[r] = new_max;
      t.running_factor[r] = factors[0];
      t.chunk_factor[r] = factors[1];
    }
  }
}

// Row r's chunk sum (canonicalSum: one chain from +0 over the valid positions in order), merged
// into the running sum. One thread per row (threads 0 .. rows_cap - 1: whole warps).
template <typename T>
__device__ __forceinline__ void tiledSum(const TiledTiles<T>& t, int rows_cap, int chunk) {
  const int r = threadIdx.x;
  if (r >= rows_cap) return;
  const int valid = t.row_valid[r];
  if (valid <= 0) return;
  const int w_stride = tiledWeightStride(rows_cap);
  float sum = 0.0f;
#pragma unroll 8
  for (int i = 0; i < valid; ++i)
    sum = sum + t.weights[i * w_stride + r];
  t.running_sum[r] =
      chunk == 0 ? sum
                 : attn::mergeValue(t.running_sum[r], t.running_factor[r], sum, t.chunk_factor[r]);
}

// acc[i][e] = fma chain over the chunk's positions (in order) of weight(row i) * v[d0 + e], from
// +0, each row stopping at its own valid count (later positions are skipped, not multiplied by 0).
template <typename T, int kR>
__device__ __forceinline__ void tiledValueChains(const TiledTiles<T>& t, int rows_cap,
                                                 int kv_stride, int row0, int d0,
                                                 const int (&valid)[kR], int valid_min,
                                                 int valid_max, float (&acc)[kR][kTiledGroupD]) {
  const int w_stride = tiledWeightStride(rows_cap);
  const float* w_col = t.weights + row0;
  const T* v_col = t.kv.v_chunk + d0;
#pragma unroll
  for (int i = 0; i < kR; ++i) {
#pragma unroll
    for (int e = 0; e < kTiledGroupD; ++e)
      acc[i][e] = 0.0f;
  }
  // Positions every row of the unit attends to, then (diagonal chunk) the rest, where a row's
  // chains stop at its own position.
  // (valid_min >= 1.) The next position's V and weights are loaded before the current one's FMAs.
  KGroupBits<T> v_next;
  float w_next[kR];
  loadKGroupBits<T>(v_col, v_next);
  loadFloats<kR>(w_col, w_next);
#pragma unroll 2
  for (int pos = 0; pos < valid_min; ++pos) {
    float v[kTiledGroupD], w[kR];
    unpackKGroup(v_next, v);
#pragma unroll
    for (int i = 0; i < kR; ++i)
      w[i] = w_next[i];
    if (pos + 1 < valid_min) {
      loadKGroupBits<T>(v_col + (pos + 1) * kv_stride, v_next);
      loadFloats<kR>(w_col + (pos + 1) * w_stride, w_next);
    }
#pragma unroll
    for (int i = 0; i < kR; ++i) {
#pragma unroll
      for (int e = 0; e < kTiledGroupD; ++e)
        acc[i][e] = fmaF32(w[i], v[e], acc[i][e]);
    }
  }
#pragma unroll 1
  for (int pos = valid_min; pos < valid_max; ++pos) {
    float v[kTiledGroupD], w[kR];
    loadGroup8<T>(v_col + pos * kv_stride, v);
    loadFloats<kR>(w_col + pos * w_stride, w);
#pragma unroll
    for (int i = 0; i < kR; ++i) {
      if (pos < valid[i]) {
#pragma unroll
        for (int e = 0; e < kTiledGroupD; ++e)
          acc[i][e] = fmaF32(w[i], v[e], acc[i][e]);
      }
    }
  }
}

// P.V of the chunk, unit = (kR rows, 8 d's), merged into the running accumulator.
template <typename T, int kR>
__device__ __forceinline__ void tiledValues(const KernelParams& p, const TiledTiles<T>& t,
                                            int chunk, int head_dim) {
  const int rows_cap = p.rows_cap;
  const int d_groups = head_dim / kTiledGroupD;
  const int units = (rows_cap / kR) * d_groups;
  for (int u = threadIdx.x; u < units; u += blockDim.x) {
    const int row0 = (u / d_groups) * kR;
    const int d0 = (u % d_groups) * kTiledGroupD;
    int valid[kR];
    int valid_min = kChunk, valid_max = 0;
#pragma unroll
    for (int i = 0; i < kR; ++i) {
      valid[i] = t.row_valid[row0 + i];  // padding rows: <= 0
      if (valid[i] > 0) {
        valid_min = valid[i] < valid_min ? valid[i] : valid_min;
        valid_max = valid[i] > valid_max ? valid[i] : valid_max;
      }
    }
    if (valid_max == 0) continue;
    float acc[kR][kTiledGroupD];
    tiledValueChains<T, kR>(t, rows_cap, p.kv_stride, row0, d0, valid, valid_min, valid_max, acc);
#pragma unroll
    for (int i = 0; i < kR; ++i) {
      const int r = row0 + i;
      if (valid[i] <= 0) continue;
      float* slot = t.running_acc + r * head_dim + d0;
      if (chunk == 0) {
        storeFloats<kTiledGroupD>(slot, acc[i]);
      } else {
        const float a = t.running_factor[r], b = t.chunk_factor[r];
        float merged[kTiledGroupD];
        loadFloats<kTiledGroupD>(slot, merged);
#pragma unroll
        for (int e = 0; e < kTiledGroupD; ++e)
          merged[e] = attn::mergeValue(merged[e], a, acc[i][e], b);
        storeFloats<kTiledGroupD>(slot, merged);
      }
    }
  }
}

// Q tile [d][row] (zero rows past the item's rows). Thread u fills row u % rows_cap, d's
// 8 (u / rows_cap) .. + 7: the 32 lanes of a warp store 32 consecutive rows of one d (distinct
// banks; a lane per d would put a whole warp's stores in one bank), and the loads of the 8 d's
// are issued before the stores.
__device__ __forceinline__ void tiledLoadQuery(const KernelParams& p, const WorkItem& item,
                                               int head_dim, float* q_tile) {
  const int rows_cap = p.rows_cap;
  const int units = rows_cap * (head_dim / kTiledGroupD);
  for (int u = threadIdx.x; u < units; u += blockDim.x) {
    const int r = u % rows_cap;
    const int d0 = (u / rows_cap) * kTiledGroupD;
    float values[kTiledGroupD];
    if (r < item.row_count) {
      const int row = item.row_begin + r;
      const long long token = item.token_begin + row / p.group;
      const int head = item.kv_head * p.group + row % p.group;
      const long long base = (token * p.n_heads + head) * head_dim + d0;
#pragma unroll
      for (int j = 0; j < kTiledGroupD; ++j)
        values[j] = loadStorageElement(p.q, p.q_dtype, base + j);
    } else {
#pragma unroll
      for (int j = 0; j < kTiledGroupD; ++j)
        values[j] = 0.0f;
    }
#pragma unroll
    for (int j = 0; j < kTiledGroupD; ++j)
      q_tile[(d0 + j) * rows_cap + r] = values[j];
  }
}

// out = running accumulator / running sum, in the output dtype.
template <typename T>
__device__ __forceinline__ void tiledStoreOutput(const KernelParams& p, const WorkItem& item,
                                                 const TiledTiles<T>& t, int head_dim) {
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

// One block per work item (sequence, KV head, tile of 16 * kR rows): the chunks in order, K/V
// staged as in the chunk kernel (K of chunk c + 1 copied while chunk c's sums and P.V run, V of
// chunk c while its scores run), the running state merged chunk after chunk. Three barriers per
// chunk.
template <typename T, int kR, int kHeadDim>
__global__ void __launch_bounds__(kTiledThreads, 1)
    attentionTiledPrefillKernel(KernelParams p, const WorkItem* __restrict__ items) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const int head_dim = kHeadDim > 0 ? kHeadDim : p.head_dim;
  const TiledTiles<T> t = tiledTiles<T>(
      smem_raw, tiledLayout(head_dim, p.rows_cap, p.kv_stride, static_cast<int>(sizeof(T))),
      p.rows_cap, p.kv_stride);
  waitForPredecessor();
  allowSuccessorLaunch();
  const WorkItem item = items[blockIdx.x];
  const int32_t* table_row =
      p.block_table + static_cast<long long>(item.seq) * p.max_blocks_per_seq;
  tiledLoadQuery(p, item, head_dim, t.q_tile);
  const int max_position = setRowPositions(p, item, t.row_position);
  const int chunk_last = max_position / kChunk;
  for (int chunk = 0; chunk <= chunk_last; ++chunk) {
    __syncthreads();  // the previous chunk's readers of K/V/weights are done
    const ChunkSpan s = chunkSpan(t.slots, chunk, 0, chunk_last, max_position);
    setRowValid(p.rows_cap, t.row_position, s.pos_begin, t.row_valid);
    stageKvChunk<T, true, kHeadDim>(p, item, t.kv, table_row, s, chunk == 0);
    __syncthreads();
    {
      float score[kR][kTiledPositions];
      tiledScores<T, kR, kHeadDim>(p, t, head_dim, score);
      tiledSoftmax<T, kR>(t, p.rows_cap, chunk, score);
    }
    cpAsyncWait<0>();  // V of this chunk has landed (the only copies in flight)
    __syncthreads();
    if (p.vec16 && s.has_next) {  // the K buffer is free: fetch the next chunk's K during P.V
      copyChunkAsync<T, kHeadDim>(p, static_cast<const T*>(p.k), t.kv.k_chunk, s.next_slots,
                                  item.kv_head, s.n_next);
    }
    tiledSum(t, p.rows_cap, chunk);
    tiledValues<T, kR>(p, t, chunk, head_dim);
  }
  __syncthreads();
  tiledStoreOutput(p, item, t, head_dim);
}

}  // namespace attention_detail
}  // namespace cuda
}  // namespace repops
}  // namespace ree
