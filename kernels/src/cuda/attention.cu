// CUDA attention (docs/repops-spec/attention.md). Same operations as kernels/src/cpu/attention.cpp,
// organised for the GPU:
//   * decode-like sequences (few new rows per KV head): split-KV. One block per (sequence, KV head,
//     chunk) computes the chunk states of all the rows of that KV group (the G query heads share
//     every K/V read) and stores them; a merge kernel then folds the chunks of each row left to
//     right.
//   * prefill-like sequences: one block per (sequence, KV head, tile of rows) loops over the chunks
//   in
//     order and merges each chunk state into a running state kept in shared memory (flash style).
// Both paths compute a chunk state with the same device code and merge with the same functions, so
// a query gets the same bits in either path. All arithmetic is fp32 FFMA/FADD/FMUL on CUDA cores
// plus crExp; no tensor cores (not IEEE).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <tuple>
#include <utility>
#include <vector>

#include "chained_launch.cuh"
#include "cuda_check.cuh"
#include "ree/kernels/attention.h"
#include "shared_memory.cuh"

namespace ree {
namespace repops {
namespace cuda {
namespace {

constexpr int kChunk = kAttentionChunk;
constexpr int kRowGroup = 8;        // rows per thread in the score and P.V loops
constexpr int kSplitThreads = 128;  // split-KV chunk blocks
constexpr int kFlashThreads = 256;  // prefill blocks
constexpr int kMergeThreads = 128;  // merge blocks (also the chunks per factor tile)
constexpr int kSplitMaxRows = 32;   // a (sequence, KV head) with more rows takes the flash path

// One block's work. Rows of a (sequence, KV head) are numbered token-major: row r is new token
// r / group, query head kv_head * group + r % group.
struct WorkItem {
  int seq;
  int kv_head;
  int row_begin;
  int row_count;
  int chunk;             // split path: the chunk this block computes
  int n_chunks;          // split path: chunk slots per row in the workspace
  int token_begin;       // global index of the sequence's first new token
  int cached;            // positions cached before the first new token
  long long state_base;  // split path: workspace state index of (row 0, chunk 0)
};

// One merged output row of the split path.
struct MergeItem {
  long long state_row;  // workspace state index of (this row, chunk 0)
  int n_chunks;         // chunks this row reads
  int token;            // global token index
  int head;             // query head
  int unused = 0;       // explicit padding: the tables are compared byte for byte (TableCache)
};

struct KernelParams {
  const void* q;
  DType q_dtype;
  void* out;
  DType out_dtype;
  const void* k;
  const void* v;
  const int32_t* block_table;  // device, [batch, max_blocks_per_seq], always explicit
  int max_blocks_per_seq;
  int block_size;
  int n_heads;
  int n_kv_heads;
  int group;
  int head_dim;
  float scale;
  int rows_cap;   // row capacity of the shared-memory tiles (multiple of kRowGroup)
  int kv_stride;  // shared-memory row stride of the K/V chunk in elements
  bool vec16;     // K/V rows can be read as 16-byte vectors
  float* ws_max;  // split path: chunk states
  float* ws_sum;
  float* ws_acc;
};

__device__ __forceinline__ float loadAny(const void* base, DType dtype, long long index) {
  switch (dtype) {
    case DType::kF32:
      return static_cast<const float*>(base)[index];
    case DType::kBF16:
      return toFloat(static_cast<const bf16_t*>(base)[index]);
    default:
      return toFloat(static_cast<const f16_t*>(base)[index]);
  }
}

__device__ __forceinline__ void storeAny(void* base, DType dtype, long long index, float value) {
  switch (dtype) {
    case DType::kF32:
      static_cast<float*>(base)[index] = value;
      break;
    case DType::kBF16:
      static_cast<bf16_t*>(base)[index] = toBF16(value);
      break;
    default:
      static_cast<f16_t*>(base)[index] = toF16(value);
      break;
  }
}

// Shared-memory row stride (elements) of a K/V chunk: an odd number of 32-bit words, so threads
// that each walk their own position's row hit distinct banks; even in 16-bit elements so rows stay
// word aligned.
int kvStrideElements(int head_dim, DType dtype) {
  if (dtype == DType::kF32) return (head_dim % 2 == 0) ? head_dim + 1 : head_dim;
  int words = (head_dim + 1) / 2;
  if (words % 2 == 0) ++words;
  return 2 * words;
}

struct SmemLayout {
  size_t q_off, e_off, stat_off, acc_off, kv_off, bytes;
};

// Q tile [head_dim][rows_cap] f32, scores/weights [kChunk][rows_cap] f32, per-row stats (7 arrays
// of rows_cap), running acc [rows_cap][head_dim] f32 (flash only), then K and V chunks.
__host__ __device__ SmemLayout smemLayout(int head_dim, int rows_cap, int kv_stride,
                                          int kv_elem_bytes, bool flash) {
  auto align16 = [](size_t x) { return (x + 15) & ~size_t{15}; };
  SmemLayout layout{};
  layout.q_off = 0;
  layout.e_off = align16(layout.q_off + sizeof(float) * head_dim * rows_cap);
  layout.stat_off = align16(layout.e_off + sizeof(float) * kChunk * rows_cap);
  layout.acc_off = align16(layout.stat_off + sizeof(float) * 7 * rows_cap);
  layout.kv_off =
      align16(layout.acc_off + (flash ? sizeof(float) * rows_cap * head_dim : size_t{0}));
  layout.bytes = align16(layout.kv_off + 2 * size_t(kChunk) * kv_stride * kv_elem_bytes);
  return layout;
}

// Copies positions [pos_begin, pos_begin + n_pos) of one KV head of both caches into shared
// memory. 16-byte path: each thread issues kBatch loads of K and kBatch of V before storing any,
// so a chunk arrives in as few memory latencies as possible.
template <typename T>
__device__ void loadKvChunks(const KernelParams& p, T* k_smem, T* v_smem, const int32_t* table_row,
                             int kv_head, int pos_begin, int n_pos) {
  const int head_dim = p.head_dim;
  const T* k_cache = static_cast<const T*>(p.k);
  const T* v_cache = static_cast<const T*>(p.v);
  if (p.vec16) {
    constexpr int kPerVec = 16 / sizeof(T);
    const int vecs_per_row = head_dim / kPerVec;
    const int total = n_pos * vecs_per_row;
    constexpr int kBatch = 4;
    for (int base = threadIdx.x; base < total; base += kBatch * blockDim.x) {
      uint4 k_values[kBatch], v_values[kBatch];
#pragma unroll
      for (int b = 0; b < kBatch; ++b) {
        const int u = base + b * blockDim.x;
        if (u < total) {
          const int row = u / vecs_per_row;
          const int vec = u - row * vecs_per_row;
          const int pos = pos_begin + row;
          const long long block = table_row[pos / p.block_size];
          const long long slot = block * p.block_size + pos % p.block_size;
          const long long offset = (slot * p.n_kv_heads + kv_head) * head_dim;
          k_values[b] = __ldg(reinterpret_cast<const uint4*>(k_cache + offset) + vec);
          v_values[b] = __ldg(reinterpret_cast<const uint4*>(v_cache + offset) + vec);
        }
      }
#pragma unroll
      for (int b = 0; b < kBatch; ++b) {
        const int u = base + b * blockDim.x;
        if (u < total) {
          const int row = u / vecs_per_row;
          const int vec = u - row * vecs_per_row;
          uint32_t* k_dst = reinterpret_cast<uint32_t*>(k_smem + row * p.kv_stride) + vec * 4;
          uint32_t* v_dst = reinterpret_cast<uint32_t*>(v_smem + row * p.kv_stride) + vec * 4;
          k_dst[0] = k_values[b].x;
          k_dst[1] = k_values[b].y;
          k_dst[2] = k_values[b].z;
          k_dst[3] = k_values[b].w;
          v_dst[0] = v_values[b].x;
          v_dst[1] = v_values[b].y;
          v_dst[2] = v_values[b].z;
          v_dst[3] = v_values[b].w;
        }
      }
    }
  } else {
    const int total = n_pos * head_dim;
    for (int u = threadIdx.x; u < total; u += blockDim.x) {
      const int row = u / head_dim;
      const int d = u - row * head_dim;
      const int pos = pos_begin + row;
      const long long block = table_row[pos / p.block_size];
      const long long slot = block * p.block_size + pos % p.block_size;
      const long long index = (slot * p.n_kv_heads + kv_head) * head_dim + d;
      k_smem[row * p.kv_stride + d] = k_cache[index];
      v_smem[row * p.kv_stride + d] = v_cache[index];
    }
  }
}

// The work of one block. kFlash: loop over all chunks of the tile and merge in shared memory;
// otherwise compute the one chunk item.chunk and store its states to the workspace.
template <typename T, bool kFlash>
__global__ void attentionChunkKernel(KernelParams p, const WorkItem* __restrict__ items) {
  waitForPredecessor();
  allowSuccessorLaunch();
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const WorkItem item = items[blockIdx.x];
  const int head_dim = p.head_dim;
  const int rows = item.row_count;
  const int rows_cap = p.rows_cap;
  const SmemLayout layout =
      smemLayout(head_dim, rows_cap, p.kv_stride, static_cast<int>(sizeof(T)), kFlash);
  float* q_tile = reinterpret_cast<float*>(smem_raw + layout.q_off);   // [d][row]
  float* weights = reinterpret_cast<float*>(smem_raw + layout.e_off);  // [pos][row]
  float* stats = reinterpret_cast<float*>(smem_raw + layout.stat_off);
  float* chunk_max = stats;
  float* running_max = stats + rows_cap;
  float* running_sum = stats + 2 * rows_cap;
  float* running_factor = stats + 3 * rows_cap;
  float* chunk_factor = stats + 4 * rows_cap;
  int* row_position = reinterpret_cast<int*>(stats + 5 * rows_cap);
  int* row_valid = reinterpret_cast<int*>(stats + 6 * rows_cap);
  float* running_acc = reinterpret_cast<float*>(smem_raw + layout.acc_off);  // [row][d]
  T* k_chunk = reinterpret_cast<T*>(smem_raw + layout.kv_off);
  T* v_chunk = k_chunk + kChunk * p.kv_stride;
  const int32_t* table_row =
      p.block_table + static_cast<long long>(item.seq) * p.max_blocks_per_seq;

  // Q tile (zero padding rows keep the unused lanes finite) and each row's absolute position.
  // kQBatch loads per thread are issued before their stores, so they are in flight together.
  constexpr int kQBatch = 8;
  for (int base = threadIdx.x; base < rows_cap * head_dim; base += kQBatch * blockDim.x) {
    float values[kQBatch];
#pragma unroll
    for (int b = 0; b < kQBatch; ++b) {
      const int u = base + b * blockDim.x;
      const int r = u / head_dim;
      const int d = u - r * head_dim;
      values[b] = 0.0f;
      if (u < rows_cap * head_dim && r < rows) {
        const int row = item.row_begin + r;
        const long long token = item.token_begin + row / p.group;
        const int head = item.kv_head * p.group + row % p.group;
        values[b] = loadAny(p.q, p.q_dtype, (token * p.n_heads + head) * head_dim + d);
      }
    }
#pragma unroll
    for (int b = 0; b < kQBatch; ++b) {
      const int u = base + b * blockDim.x;
      if (u < rows_cap * head_dim) {
        const int r = u / head_dim;
        q_tile[(u - r * head_dim) * rows_cap + r] = values[b];
      }
    }
  }
  int max_position = 0;
  for (int r = 0; r < rows; ++r) {
    const int position = item.cached + (item.row_begin + r) / p.group;
    max_position = position > max_position ? position : max_position;
  }
  for (int r = threadIdx.x; r < rows_cap; r += blockDim.x) {
    row_position[r] = r < rows ? item.cached + (item.row_begin + r) / p.group : -1;
  }

  const int chunk_first = kFlash ? 0 : item.chunk;
  const int chunk_last = kFlash ? max_position / kChunk : item.chunk;
  const int row_groups = (rows + kRowGroup - 1) / kRowGroup;

  for (int chunk = chunk_first; chunk <= chunk_last; ++chunk) {
    const int pos_begin = chunk * kChunk;
    __syncthreads();  // previous chunk's readers of k/v/weights are done; Q/positions visible
    int n_loaded = max_position + 1 - pos_begin;
    n_loaded = n_loaded < kChunk ? n_loaded : kChunk;
    for (int r = threadIdx.x; r < rows_cap; r += blockDim.x) {
      int valid = row_position[r] + 1 - pos_begin;  // <= 0: the row does not reach this chunk
      row_valid[r] = valid < kChunk ? valid : kChunk;
    }
    loadKvChunks<T>(p, k_chunk, v_chunk, table_row, item.kv_head, pos_begin, n_loaded);
    __syncthreads();

    // Scores: unit = (position, group of 8 rows); each is the canonical dot product over head_dim
    // (fma chain per 128-wide part, parts added left to right), times the scale.
    for (int u = threadIdx.x; u < n_loaded * row_groups; u += blockDim.x) {
      const int pos = u % n_loaded;
      const int group_row = (u / n_loaded) * kRowGroup;
      const T* k_row = k_chunk + pos * p.kv_stride;
      const float* q_col = q_tile + group_row;
      float dot[kRowGroup], part[kRowGroup];
#pragma unroll
      for (int i = 0; i < kRowGroup; ++i)
        dot[i] = 0.0f;
      const int first_end = head_dim < kReduceChunk ? head_dim : kReduceChunk;
      for (int d = 0; d < first_end; ++d) {
        const float k_value = loadFloat(k_row[d]);
        const float4 qa = *reinterpret_cast<const float4*>(q_col + d * rows_cap);
        const float4 qb = *reinterpret_cast<const float4*>(q_col + d * rows_cap + 4);
        dot[0] = fmaF32(qa.x, k_value, dot[0]);
        dot[1] = fmaF32(qa.y, k_value, dot[1]);
        dot[2] = fmaF32(qa.z, k_value, dot[2]);
        dot[3] = fmaF32(qa.w, k_value, dot[3]);
        dot[4] = fmaF32(qb.x, k_value, dot[4]);
        dot[5] = fmaF32(qb.y, k_value, dot[5]);
        dot[6] = fmaF32(qb.z, k_value, dot[6]);
        dot[7] = fmaF32(qb.w, k_value, dot[7]);
      }
      if (head_dim > kReduceChunk) {
#pragma unroll
        for (int i = 0; i < kRowGroup; ++i) {
          part[i] = dot[i];
          dot[i] = 0.0f;
        }
        for (int d = kReduceChunk; d < head_dim; ++d) {
          const float k_value = loadFloat(k_row[d]);
          const float4 qa = *reinterpret_cast<const float4*>(q_col + d * rows_cap);
          const float4 qb = *reinterpret_cast<const float4*>(q_col + d * rows_cap + 4);
          dot[0] = fmaF32(qa.x, k_value, dot[0]);
          dot[1] = fmaF32(qa.y, k_value, dot[1]);
          dot[2] = fmaF32(qa.z, k_value, dot[2]);
          dot[3] = fmaF32(qa.w, k_value, dot[3]);
          dot[4] = fmaF32(qb.x, k_value, dot[4]);
          dot[5] = fmaF32(qb.y, k_value, dot[5]);
          dot[6] = fmaF32(qb.z, k_value, dot[6]);
          dot[7] = fmaF32(qb.w, k_value, dot[7]);
        }
#pragma unroll
        for (int i = 0; i < kRowGroup; ++i)
          dot[i] = part[i] + dot[i];
      }
#pragma unroll
      for (int i = 0; i < kRowGroup; ++i) {
        weights[pos * rows_cap + group_row + i] = attn::scaledScore(dot[i], p.scale);
      }
    }
    __syncthreads();

    // Per row (one warp each): chunk max over the valid positions, weights, the sequential sum, and
    // (flash) the merge factors of the running state.
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, n_warps = blockDim.x / 32;
    for (int r = warp; r < rows; r += n_warps) {
      const int valid = row_valid[r];
      if (valid <= 0) continue;
      const float s0 = lane < valid ? weights[lane * rows_cap + r] : 0.0f;
      const float s1 = lane + 32 < valid ? weights[(lane + 32) * rows_cap + r] : 0.0f;
      float m = -__int_as_float(0x7f800000);
      if (lane < valid) m = attn::maxStep(m, s0);
      if (lane + 32 < valid) m = attn::maxStep(m, s1);
#pragma unroll
      for (int offset = 16; offset >= 1; offset /= 2) {
        m = attn::maxStep(m, __shfl_xor_sync(0xffffffffu, m, offset));
      }
      m = attn::canonicalMax(m);
      if (lane < valid) weights[lane * rows_cap + r] = attn::chunkWeight(s0, m);
      if (lane + 32 < valid) weights[(lane + 32) * rows_cap + r] = attn::chunkWeight(s1, m);
      __syncwarp();
      if (lane == 0) {
        float sum = 0.0f;  // canonicalSum: kChunk <= kReduceChunk, so one chain from +0
        for (int i = 0; i < valid; ++i)
          sum = sum + weights[i * rows_cap + r];
        chunk_max[r] = m;
        if (kFlash) {
          if (chunk == 0) {
            running_max[r] = m;
            running_sum[r] = sum;
          } else {
            const float old_max = running_max[r];
            const float new_max = attn::maxStep(old_max, m);
            const float a = attn::rescaleFactor(old_max, new_max);
            const float b = attn::rescaleFactor(m, new_max);
            running_sum[r] = attn::mergeValue(running_sum[r], a, sum, b);
            running_max[r] = new_max;
            running_factor[r] = a;
            chunk_factor[r] = b;
          }
        } else {
          const long long state =
              item.state_base + static_cast<long long>(item.row_begin + r) * item.n_chunks + chunk;
          p.ws_max[state] = m;
          p.ws_sum[state] = sum;
        }
      }
    }
    __syncthreads();

    // P.V: unit = (d, group of 8 rows); acc[d] = fma chain over the row's valid positions in order.
    for (int u = threadIdx.x; u < head_dim * row_groups; u += blockDim.x) {
      const int d = u % head_dim;
      const int group_row = (u / head_dim) * kRowGroup;
      int valid[kRowGroup];
      int valid_min = kChunk, valid_max = 0;
#pragma unroll
      for (int i = 0; i < kRowGroup; ++i) {
        valid[i] = group_row + i < rows ? row_valid[group_row + i] : 0;
        if (valid[i] > 0) {
          valid_min = valid[i] < valid_min ? valid[i] : valid_min;
          valid_max = valid[i] > valid_max ? valid[i] : valid_max;
        }
      }
      if (valid_max == 0) continue;
      float acc[kRowGroup];
#pragma unroll
      for (int i = 0; i < kRowGroup; ++i)
        acc[i] = 0.0f;
      const float* w_col = weights + group_row;
      if (valid_min == valid_max) {
        // Every participating row has the same positions; the others' lanes are never stored.
        for (int i = 0; i < valid_max; ++i) {
          const float v_value = loadFloat(v_chunk[i * p.kv_stride + d]);
          const float4 wa = *reinterpret_cast<const float4*>(w_col + i * rows_cap);
          const float4 wb = *reinterpret_cast<const float4*>(w_col + i * rows_cap + 4);
          acc[0] = fmaF32(wa.x, v_value, acc[0]);
          acc[1] = fmaF32(wa.y, v_value, acc[1]);
          acc[2] = fmaF32(wa.z, v_value, acc[2]);
          acc[3] = fmaF32(wa.w, v_value, acc[3]);
          acc[4] = fmaF32(wb.x, v_value, acc[4]);
          acc[5] = fmaF32(wb.y, v_value, acc[5]);
          acc[6] = fmaF32(wb.z, v_value, acc[6]);
          acc[7] = fmaF32(wb.w, v_value, acc[7]);
        }
      } else {
        // Diagonal chunk: a row's chain stops at its own position (skipped, not multiplied by 0).
        for (int i = 0; i < valid_max; ++i) {
          const float v_value = loadFloat(v_chunk[i * p.kv_stride + d]);
          const float4 wa = *reinterpret_cast<const float4*>(w_col + i * rows_cap);
          const float4 wb = *reinterpret_cast<const float4*>(w_col + i * rows_cap + 4);
          const float w[kRowGroup] = {wa.x, wa.y, wa.z, wa.w, wb.x, wb.y, wb.z, wb.w};
#pragma unroll
          for (int j = 0; j < kRowGroup; ++j) {
            if (i < valid[j]) acc[j] = fmaF32(w[j], v_value, acc[j]);
          }
        }
      }
#pragma unroll
      for (int i = 0; i < kRowGroup; ++i) {
        const int r = group_row + i;
        if (valid[i] <= 0) continue;
        if (kFlash) {
          float* slot = running_acc + r * head_dim + d;
          *slot = chunk == 0 ? acc[i]
                             : attn::mergeValue(*slot, running_factor[r], acc[i], chunk_factor[r]);
        } else {
          const long long state =
              item.state_base + static_cast<long long>(item.row_begin + r) * item.n_chunks + chunk;
          p.ws_acc[state * head_dim + d] = acc[i];
        }
      }
    }
  }

  if (kFlash) {
    __syncthreads();
    for (int u = threadIdx.x; u < rows * head_dim; u += blockDim.x) {
      const int r = u / head_dim;
      const int d = u - r * head_dim;
      const int row = item.row_begin + r;
      const long long token = item.token_begin + row / p.group;
      const int head = item.kv_head * p.group + row % p.group;
      storeAny(p.out, p.out_dtype, (token * p.n_heads + head) * head_dim + d,
               attn::finalOutput(running_acc[r * head_dim + d], running_sum[r]));
    }
  }
}

// Merges the chunk states of one row left to right (split path). The running maxima are a prefix
// maximum (exact, so computed as a parallel scan); the factors crExp(M_{j-1} - M_j) and
// crExp(m_j - M_j) of a tile of chunks are computed in parallel, then each thread folds its d's.
__global__ void attentionMergeKernel(KernelParams p, const MergeItem* __restrict__ items) {
  waitForPredecessor();
  allowSuccessorLaunch();
  __shared__ float prefix_max[kMergeThreads];
  __shared__ float factor_running[kMergeThreads];
  __shared__ float factor_chunk[kMergeThreads];
  __shared__ float warp_max[kMergeThreads / 32];
  const MergeItem item = items[blockIdx.x];
  const int head_dim = p.head_dim;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  constexpr int kMaxDPerThread = (kAttentionMaxHeadDim + kMergeThreads - 1) / kMergeThreads;
  float acc[kMaxDPerThread];
  float sum = 0.0f;
  float carry = -__int_as_float(0x7f800000);  // M of the chunk before this tile
  for (int tile = 0; tile < item.n_chunks; tile += kMergeThreads) {
    const int j = tile + threadIdx.x;
    const float m = j < item.n_chunks ? p.ws_max[item.state_row + j] : -__int_as_float(0x7f800000);
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
    if (j >= 1 && j < item.n_chunks) {
      const float before = threadIdx.x == 0 ? carry : prefix_max[threadIdx.x - 1];
      factor_running[threadIdx.x] = attn::rescaleFactor(before, running);
      factor_chunk[threadIdx.x] = attn::rescaleFactor(m, running);
    }
    __syncthreads();
    const int tile_count =
        item.n_chunks - tile < kMergeThreads ? item.n_chunks - tile : kMergeThreads;
    // The fold is a dependent chain, so the states of kFold chunks are loaded first (independent
    // loads in flight together) and then merged in order: one memory latency per kFold chunks
    // instead of one per chunk. The merge order and arithmetic are unchanged.
    constexpr int kFold = 8;
    for (int i0 = 0; i0 < tile_count; i0 += kFold) {
      float chunk_sum[kFold];
      float chunk_acc[kFold][kMaxDPerThread];
#pragma unroll
      for (int f = 0; f < kFold; ++f) {
        if (i0 + f < tile_count) {
          const long long state = item.state_row + tile + i0 + f;
          chunk_sum[f] = p.ws_sum[state];
#pragma unroll
          for (int k = 0; k < kMaxDPerThread; ++k) {
            const int d = threadIdx.x + k * kMergeThreads;
            chunk_acc[f][k] = d < head_dim ? p.ws_acc[state * head_dim + d] : 0.0f;
          }
        }
      }
#pragma unroll
      for (int f = 0; f < kFold; ++f) {
        const int i = i0 + f;
        if (i >= tile_count) break;
        const int jj = tile + i;
        if (jj == 0) {
          sum = chunk_sum[f];
        } else {
          sum = attn::mergeValue(sum, factor_running[i], chunk_sum[f], factor_chunk[i]);
        }
#pragma unroll
        for (int k = 0; k < kMaxDPerThread; ++k) {
          const int d = threadIdx.x + k * kMergeThreads;
          if (d < head_dim) {
            acc[k] = jj == 0 ? chunk_acc[f][k]
                             : attn::mergeValue(acc[k], factor_running[i], chunk_acc[f][k],
                                                factor_chunk[i]);
          }
        }
      }
    }
    carry = prefix_max[tile_count - 1];
    __syncthreads();  // the next tile overwrites the shared arrays
  }
#pragma unroll
  for (int k = 0; k < kMaxDPerThread; ++k) {
    const int d = threadIdx.x + k * kMergeThreads;
    if (d < head_dim) {
      storeAny(p.out, p.out_dtype,
               (static_cast<long long>(item.token) * p.n_heads + item.head) * head_dim + d,
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
  switch (a.cache_dtype) {
    case DType::kF32:
      launchChained(appendKvKernel<TIn, float>, tokens, threads, 0, stream, k_new, v_new,
                    static_cast<float*>(a.k_cache), static_cast<float*>(a.v_cache), dst, row_elems);
      break;
    case DType::kBF16:
      launchChained(appendKvKernel<TIn, bf16_t>, tokens, threads, 0, stream, k_new, v_new,
                    static_cast<bf16_t*>(a.k_cache), static_cast<bf16_t*>(a.v_cache), dst,
                    row_elems);
      break;
    case DType::kF16:
      launchChained(appendKvKernel<TIn, f16_t>, tokens, threads, 0, stream, k_new, v_new,
                    static_cast<f16_t*>(a.k_cache), static_cast<f16_t*>(a.v_cache), dst, row_elems);
      break;
  }
  REE_CUDA_CHECK_LAUNCH();
  return Status::kSuccess;
}

template <typename T>
Status launchChunkKernels(const KernelParams& base, const WorkItem* split_items, int n_split,
                          int split_rows_cap, const MergeItem* merge_items, int n_merge,
                          const WorkItem* flash_items, int n_flash, int flash_rows_cap,
                          cudaStream_t stream) {
  if (n_split > 0) {
    KernelParams p = base;
    p.rows_cap = split_rows_cap;
    const size_t bytes = smemLayout(p.head_dim, p.rows_cap, p.kv_stride, sizeof(T), false).bytes;
    REE_RETURN_IF_ERROR(allowFullSharedMemory(attentionChunkKernel<T, false>));
    launchChained(attentionChunkKernel<T, false>, n_split, kSplitThreads, bytes, stream, p,
                  split_items);
    REE_CUDA_CHECK_LAUNCH();
    launchChained(attentionMergeKernel, n_merge, kMergeThreads, 0, stream, p, merge_items);
    REE_CUDA_CHECK_LAUNCH();
  }
  if (n_flash > 0) {
    KernelParams p = base;
    p.rows_cap = flash_rows_cap;
    const size_t bytes = smemLayout(p.head_dim, p.rows_cap, p.kv_stride, sizeof(T), true).bytes;
    REE_RETURN_IF_ERROR(allowFullSharedMemory(attentionChunkKernel<T, true>));
    launchChained(attentionChunkKernel<T, true>, n_flash, kFlashThreads, bytes, stream, p,
                  flash_items);
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

}  // namespace

Status attention(const AttentionArgs& args, cudaStream_t stream) {
  REE_RETURN_IF_ERROR(validateAttentionArgs(args));
#if !REE_ATTENTION_HAVE_CRMATH
  return REE_FAIL(Status::kUnsupported, "attention: built without crmath.h (crExp/crRsqrt)");
#else
  if (args.batch == 0 || args.query_offsets[args.batch] == 0) return Status::kSuccess;
  const PagedKvCache& cache = args.cache;
  const int head_dim = args.head_dim;
  const int group = args.n_heads / args.n_kv_heads;
  const int kv_bytes = dtypeSize(cache.dtype);
  const int kv_stride = kvStrideElements(head_dim, cache.dtype);

  int device = 0, smem_optin = 0;
  REE_CUDA_CHECK(cudaGetDevice(&device));
  REE_CUDA_CHECK(
      cudaDeviceGetAttribute(&smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  auto fits = [&](int rows_cap, bool flash) {
    return smemLayout(head_dim, rows_cap, kv_stride, kv_bytes, flash).bytes <=
           static_cast<size_t>(smem_optin);
  };
  int flash_rows_cap = head_dim <= 128 ? 64 : 32;
  while (flash_rows_cap > kRowGroup && !fits(flash_rows_cap, true))
    flash_rows_cap /= 2;
  if (!fits(flash_rows_cap, true)) {
    return REE_FAIL(Status::kUnsupported,
                    "attention: head_dim %d with %s cache needs more shared memory than the "
                    "device's %d bytes",
                    head_dim, dtypeName(cache.dtype), smem_optin);
  }

  // Work lists (host), then one upload of block table + lists.
  std::vector<WorkItem> split_items, flash_items;
  std::vector<MergeItem> merge_items;
  long long states = 0;
  int split_rows_cap = kRowGroup;
  for (int s = 0; s < args.batch; ++s) {
    const int n_new = args.query_offsets[s + 1] - args.query_offsets[s];
    if (n_new == 0) continue;
    const int rows = n_new * group;
    const int cached = args.cached_lens[s];
    const int n_chunks = static_cast<int>(attn::chunkCount(cached + n_new - 1));
    const int rows_cap = roundUp(rows, kRowGroup);
    if (rows <= kSplitMaxRows && fits(rows_cap, false)) {
      split_rows_cap = std::max(split_rows_cap, rows_cap);
      for (int h = 0; h < args.n_kv_heads; ++h) {
        for (int j = 0; j < n_chunks; ++j) {
          split_items.push_back(
              WorkItem{s, h, 0, rows, j, n_chunks, args.query_offsets[s], cached, states});
        }
        for (int r = 0; r < rows; ++r) {
          const int token = r / group;
          merge_items.push_back(MergeItem{states + static_cast<long long>(r) * n_chunks,
                                          static_cast<int>(attn::chunkCount(cached + token)),
                                          args.query_offsets[s] + token, h * group + r % group});
        }
        states += static_cast<long long>(rows) * n_chunks;
      }
    } else {
      for (int h = 0; h < args.n_kv_heads; ++h) {
        for (int r0 = 0; r0 < rows; r0 += flash_rows_cap) {
          const int count = std::min(flash_rows_cap, rows - r0);
          flash_items.push_back(WorkItem{s, h, r0, count, 0, 0, args.query_offsets[s], cached, 0});
        }
      }
    }
  }
  // Longest tiles first: better tail balance (the order never changes the bits).
  std::stable_sort(flash_items.begin(), flash_items.end(),
                   [&](const WorkItem& x, const WorkItem& y) {
                     return x.cached + (x.row_begin + x.row_count - 1) / group >
                            y.cached + (y.row_begin + y.row_count - 1) / group;
                   });

  const size_t table_count = static_cast<size_t>(args.batch) * cache.max_blocks_per_seq;
  std::vector<int32_t> table(table_count);
  for (size_t i = 0; i < table_count; ++i) {
    table[i] = cache.block_table ? cache.block_table[i] : static_cast<int32_t>(i);
  }
  auto align256 = [](size_t x) { return (x + 255) & ~size_t{255}; };
  const size_t table_off = 0;
  const size_t split_off = align256(table_off + table.size() * sizeof(int32_t));
  const size_t merge_off = align256(split_off + split_items.size() * sizeof(WorkItem));
  const size_t flash_off = align256(merge_off + merge_items.size() * sizeof(MergeItem));
  const size_t upload_bytes = align256(flash_off + flash_items.size() * sizeof(WorkItem));
  const size_t ws_max_off = 0;  // the split path's workspace: a separate, per-call buffer
  const size_t ws_sum_off = align256(ws_max_off + states * sizeof(float));
  const size_t ws_acc_off = align256(ws_sum_off + states * sizeof(float));
  const size_t workspace_bytes = align256(ws_acc_off + states * head_dim * sizeof(float));

  std::vector<unsigned char> staging(upload_bytes, 0);
  std::memcpy(staging.data() + table_off, table.data(), table.size() * sizeof(int32_t));
  if (!split_items.empty()) {
    std::memcpy(staging.data() + split_off, split_items.data(),
                split_items.size() * sizeof(WorkItem));
  }
  if (!merge_items.empty()) {
    std::memcpy(staging.data() + merge_off, merge_items.data(),
                merge_items.size() * sizeof(MergeItem));
  }
  if (!flash_items.empty()) {
    std::memcpy(staging.data() + flash_off, flash_items.data(),
                flash_items.size() * sizeof(WorkItem));
  }
  const unsigned char* tables = nullptr;
  REE_RETURN_IF_ERROR(
      cachedTables(TableKind::kAttention, staging.data(), upload_bytes, stream, &tables));
  unsigned char* workspace = nullptr;
  if (states > 0) {
    REE_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&workspace), workspace_bytes, stream));
  }

  KernelParams p{};
  p.q = args.q;
  p.q_dtype = args.q_dtype;
  p.out = args.out;
  p.out_dtype = args.out_dtype;
  p.k = cache.k;
  p.v = cache.v;
  p.block_table = reinterpret_cast<const int32_t*>(tables + table_off);
  p.max_blocks_per_seq = cache.max_blocks_per_seq;
  p.block_size = cache.block_size;
  p.n_heads = args.n_heads;
  p.n_kv_heads = args.n_kv_heads;
  p.group = group;
  p.head_dim = head_dim;
  p.scale = args.scale == 0.0f ? attn::defaultScale(head_dim) : args.scale;
  p.kv_stride = kv_stride;
  p.vec16 = (head_dim * kv_bytes) % 16 == 0 && reinterpret_cast<uintptr_t>(cache.k) % 16 == 0 &&
            reinterpret_cast<uintptr_t>(cache.v) % 16 == 0;
  p.ws_max = reinterpret_cast<float*>(workspace + ws_max_off);
  p.ws_sum = reinterpret_cast<float*>(workspace + ws_sum_off);
  p.ws_acc = reinterpret_cast<float*>(workspace + ws_acc_off);
  const auto* split_dev = reinterpret_cast<const WorkItem*>(tables + split_off);
  const auto* merge_dev = reinterpret_cast<const MergeItem*>(tables + merge_off);
  const auto* flash_dev = reinterpret_cast<const WorkItem*>(tables + flash_off);
  const int n_split = static_cast<int>(split_items.size());
  const int n_merge = static_cast<int>(merge_items.size());
  const int n_flash = static_cast<int>(flash_items.size());

  Status status = Status::kSuccess;
  switch (cache.dtype) {
    case DType::kF32:
      status = launchChunkKernels<float>(p, split_dev, n_split, split_rows_cap, merge_dev, n_merge,
                                         flash_dev, n_flash, flash_rows_cap, stream);
      break;
    case DType::kBF16:
      status = launchChunkKernels<bf16_t>(p, split_dev, n_split, split_rows_cap, merge_dev, n_merge,
                                          flash_dev, n_flash, flash_rows_cap, stream);
      break;
    case DType::kF16:
      status = launchChunkKernels<f16_t>(p, split_dev, n_split, split_rows_cap, merge_dev, n_merge,
                                         flash_dev, n_flash, flash_rows_cap, stream);
      break;
  }
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
    switch (args.new_dtype) {
      case DType::kF32:
        status = launchAppend<float>(args, dst_dev, tokens, row_elems, stream);
        break;
      case DType::kBF16:
        status = launchAppend<bf16_t>(args, dst_dev, tokens, row_elems, stream);
        break;
      case DType::kF16:
        status = launchAppend<f16_t>(args, dst_dev, tokens, row_elems, stream);
        break;
    }
  }
  return status;
}

}  // namespace cuda
}  // namespace repops
}  // namespace ree
