// CUDA attention (docs/repops-spec/attention.md). Same operations as kernels/src/cpu/attention.cpp,
// organised for the GPU:
//   * decode-like sequences (few new rows per KV head): split-KV. One block per (sequence, KV head,
//     run of 1-8 consecutive chunks) computes the chunk states of all the rows of that KV group
//     (the G query heads share every K/V read) and stores them; a merge kernel then folds the
//     chunks of each row left to right.
//   * prefill-like sequences: one block per (sequence, KV head, tile of rows) loops over the
//     chunks in order and merges each chunk state into a running state kept in shared memory
//     (flash style).
// Both paths compute a chunk state with the same device code and merge with the same functions, so
// a query gets the same bits in either path. All arithmetic is fp32 FFMA/FADD/FMUL on CUDA cores
// plus crExp; no tensor cores (not IEEE).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <tuple>
#include <utility>
#include <vector>

#include "chained_launch.cuh"
#include "ree/core/cuda_check.h"
#include "ree/kernels/attention.h"
#include "shared_memory.cuh"

namespace ree {
namespace repops {
namespace cuda {
namespace {

constexpr int kChunk = kAttentionChunk;
constexpr int kRowGroup = 8;        // rows per thread in the score and P.V loops
constexpr int kSmallRowGroup = 4;   // the same for split-path calls whose sequences have <= 4 rows
constexpr int kSplitThreads = 128;  // split-KV chunk blocks
constexpr int kFlashThreads = 256;  // prefill blocks
constexpr int kMergeThreads = 128;  // merge blocks (also the chunks per factor tile)
constexpr int kSplitMaxRows = 32;   // a (sequence, KV head) with more rows takes the flash path
// Runs of chunks per split block: 1, 2, 4 or 8 (SplitWork::blocks[i] for a run of 2^i).
constexpr int kSplitRunChoices = 4;
// When even runs of 8 chunks need more than one wave of blocks: H100, context 4096, 8 KV heads,
// batch 16 (1.55 waves with 8): 164.5 / 166.6 / 172.2 us with runs of 2 / 4 / 8 side by side.
constexpr int kSplitManyWavesRun = 4;
static_assert(kChunk == 64, "the chunk softmax gives lane l positions l and l + 32");

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

// The split path's work for the launcher: chunk blocks needed with runs of 1, 2, 4, 8 chunks
// per block, and the longest sequence's chunks.
struct SplitWork {
  long long blocks[kSplitRunChoices] = {};
  int max_chunks = 0;
};

// One decode-like sequence of the split path: grid row blockIdx.y of the chunk kernel (block x:
// KV head major, then chunk; blocks past the sequence's n_kv_heads * n_chunks exit) and of the
// merge kernel (block x: KV head major, then row). The host prepares one entry per sequence:
// per-block and per-row lists grew with batch x context and cost more host time than the
// kernels at batch 16.
struct SplitSeq {
  int seq;
  int token_begin;       // global index of the sequence's first new token
  int cached;            // positions cached before the first new token
  int rows;              // rows per KV head (new tokens x group)
  int n_chunks;          // chunk slots per row in the workspace (those of the last row)
  int unused = 0;        // explicit padding: the tables are compared byte for byte (TableCache)
  long long state_base;  // workspace state index of (KV head 0, row 0, chunk 0)
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
  int rows_cap;   // row capacity of the shared-memory tiles (multiple of the kernel's kRows)
  int kv_stride;  // shared-memory row stride of the K/V chunk in elements
  bool vec16;     // K/V rows can be read as 16-byte vectors
  int split_chunks_per_block;  // split path: consecutive chunks computed by one block
  float* ws_max;               // split path: chunk states
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

// Shared-memory row stride (elements) of a K/V chunk: whole 16-byte vectors, an odd number of
// them. Rows are 16-byte aligned (cp.async copies, 16-byte reads), and the 8 threads of a quarter
// warp that each read a 16-byte vector of their own position's row hit 8 distinct vector slots,
// i.e. all 32 banks once.
int kvStrideElements(int head_dim, DType dtype) {
  const int element = dtypeSize(dtype);
  int vectors = (head_dim * element + 15) / 16;
  if (vectors % 2 == 0) ++vectors;
  return vectors * 16 / element;
}

// The 16 / sizeof(T) elements of one 16-byte vector in shared memory, as fp32 (exact).
__device__ __forceinline__ void loadVector16(const bf16_t* p, float out[8]) {
  const uint4 raw = *reinterpret_cast<const uint4*>(p);
  const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {  // little endian: element 2i is the low half
    out[2 * i] = bitsFloat(words[i] << 16);
    out[2 * i + 1] = bitsFloat(words[i] & 0xffff0000u);
  }
}
__device__ __forceinline__ void loadVector16(const f16_t* p, float out[8]) {
  const uint4 raw = *reinterpret_cast<const uint4*>(p);
  const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    out[2 * i] = toFloat(f16_t{static_cast<uint16_t>(words[i] & 0xffffu)});
    out[2 * i + 1] = toFloat(f16_t{static_cast<uint16_t>(words[i] >> 16)});
  }
}
__device__ __forceinline__ void loadVector16(const float* p, float out[4]) {
  const float4 raw = *reinterpret_cast<const float4*>(p);
  out[0] = raw.x, out[1] = raw.y, out[2] = raw.z, out[3] = raw.w;
}

struct SmemLayout {
  size_t q_off, e_off, stat_off, acc_off, slot_off, kv_off, bytes;
};

// Q tile [head_dim][rows_cap] f32, scores/weights [kChunk][rows_cap] f32, per-row stats (7 arrays
// of rows_cap), running acc [rows_cap][head_dim] f32 (flash only), the cache rows (slots) of the
// positions of two consecutive chunks (the current one and the next, whose K is fetched early),
// then K and V chunks.
__host__ __device__ SmemLayout smemLayout(int head_dim, int rows_cap, int kv_stride,
                                          int kv_elem_bytes, bool flash) {
  auto align16 = [](size_t x) { return (x + 15) & ~size_t{15}; };
  SmemLayout layout{};
  layout.q_off = 0;
  layout.e_off = align16(layout.q_off + sizeof(float) * head_dim * rows_cap);
  layout.stat_off = align16(layout.e_off + sizeof(float) * kChunk * rows_cap);
  layout.acc_off = align16(layout.stat_off + sizeof(float) * 7 * rows_cap);
  layout.slot_off =
      align16(layout.acc_off + (flash ? sizeof(float) * rows_cap * head_dim : size_t{0}));
  layout.kv_off = align16(layout.slot_off + sizeof(long long) * 2 * kChunk);
  layout.bytes = align16(layout.kv_off + 2 * size_t(kChunk) * kv_stride * kv_elem_bytes);
  return layout;
}

// Copies positions [pos_begin, pos_begin + n_pos) of one KV head of both caches into shared
// memory. 16-byte path: each thread issues kBatch loads of K and kBatch of V before storing any,
// so a chunk arrives in as few memory latencies as possible.
// Cache row (physical block * block_size + offset) of positions [pos_begin, pos_begin + n_pos),
// looked up once per chunk so that the K/V loads need no dependent table read of their own.
__device__ void fillSlots(const KernelParams& p, long long* slots, const int32_t* table_row,
                          int pos_begin, int n_pos) {
  for (int i = threadIdx.x; i < n_pos; i += blockDim.x) {
    const int pos = pos_begin + i;
    slots[i] =
        static_cast<long long>(table_row[pos / p.block_size]) * p.block_size + pos % p.block_size;
  }
}

// kHeadDim: the head dimension when fixed at compile time (0: p.head_dim), so that the index
// arithmetic is shifts rather than divisions.
//
// One chunk of one cache (K or V) into shared memory by 16-byte cp.async copies, committed as one
// group; returns with the copies in flight (p.vec16 only).
template <typename T, int kHeadDim>
__device__ void copyChunkAsync(const KernelParams& p, const T* cache, T* smem,
                               const long long* slots, int kv_head, int n_pos) {
  const int head_dim = kHeadDim > 0 ? kHeadDim : p.head_dim;
  constexpr int kPerVec = 16 / sizeof(T);
  const int vecs_per_row = head_dim / kPerVec;
  const int total = n_pos * vecs_per_row;
  for (int u = threadIdx.x; u < total; u += blockDim.x) {
    const int row = u / vecs_per_row;
    const int vec = u - row * vecs_per_row;
    const long long offset = (slots[row] * p.n_kv_heads + kv_head) * head_dim;
    cpAsync16(smem + row * p.kv_stride + vec * kPerVec, cache + offset + vec * kPerVec, 16);
  }
  cpAsyncCommit();
}

// Both caches of one chunk, synchronously (rows that are not whole 16-byte vectors).
template <typename T, int kHeadDim>
__device__ void loadKvChunks(const KernelParams& p, T* k_smem, T* v_smem, const long long* slots,
                             int kv_head, int n_pos) {
  const int head_dim = kHeadDim > 0 ? kHeadDim : p.head_dim;
  const T* k_cache = static_cast<const T*>(p.k);
  const T* v_cache = static_cast<const T*>(p.v);
  const int total = n_pos * head_dim;
  for (int u = threadIdx.x; u < total; u += blockDim.x) {
    const int row = u / head_dim;
    const int d = u - row * head_dim;
    const long long index = (slots[row] * p.n_kv_heads + kv_head) * head_dim + d;
    k_smem[row * p.kv_stride + d] = k_cache[index];
    v_smem[row * p.kv_stride + d] = v_cache[index];
  }
}

// The work of one block. kFlash: loop over all chunks of the tile and merge in shared memory;
// otherwise compute chunks [item.chunk, item.chunk + p.split_chunks_per_block) (those that exist)
// one after another and store each chunk's states to the workspace: the Q tile and the setup are
// paid once for several chunks. Which block computes a chunk never changes its bits.
//
// kHeadDim: as in loadKvChunks.
//
// kRows: rows per thread in the score and P.V loops (a multiple of 4; rows_cap is a multiple of
// it). Decode of a model with G <= 4 query heads per KV head uses 4, so no lane works on padding.
//
// The split path reads its work description and the chunk's block-table entries before
// waitForPredecessor(): they are uploaded by copies, never written by a kernel, so they are
// complete before this kernel can start, and their latency overlaps the previous kernel's tail.
template <typename T, bool kFlash, int kRows, int kHeadDim>
__global__ void attentionChunkKernel(KernelParams p, const WorkItem* __restrict__ items,
                                     const SplitSeq* __restrict__ split_seqs) {
  static_assert(kRows % 4 == 0, "rows per thread are read as float4");
  extern __shared__ __align__(16) unsigned char smem_raw[];
  WorkItem item;
  if constexpr (kFlash) {
    waitForPredecessor();
    allowSuccessorLaunch();
    item = items[blockIdx.x];
  } else {
    const SplitSeq ss = split_seqs[blockIdx.y];
    const int local = static_cast<int>(blockIdx.x);
    const int blocks_per_head =
        (ss.n_chunks + p.split_chunks_per_block - 1) / p.split_chunks_per_block;
    if (local >= p.n_kv_heads * blocks_per_head) return;  // uniform over the block
    const int kv_head = local / blocks_per_head;
    item = WorkItem{ss.seq,
                    kv_head,
                    0,
                    ss.rows,
                    (local - kv_head * blocks_per_head) * p.split_chunks_per_block,
                    ss.n_chunks,
                    ss.token_begin,
                    ss.cached,
                    ss.state_base + static_cast<long long>(kv_head) * ss.rows * ss.n_chunks};
  }
  const int head_dim = kHeadDim > 0 ? kHeadDim : p.head_dim;
  long long* slots = reinterpret_cast<long long*>(
      smem_raw +
      smemLayout(head_dim, p.rows_cap, p.kv_stride, static_cast<int>(sizeof(T)), kFlash).slot_off);
  const int32_t* table_row =
      p.block_table + static_cast<long long>(item.seq) * p.max_blocks_per_seq;
  if constexpr (!kFlash) {
    const int last_position = item.cached + (item.row_count - 1) / p.group;
    const int pos_begin = item.chunk * kChunk;
    fillSlots(p, slots, table_row, pos_begin, min(kChunk, last_position + 1 - pos_begin));
    waitForPredecessor();
    allowSuccessorLaunch();
  }
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
  const int chunk_last = kFlash ? max_position / kChunk
                                : min(item.chunk + p.split_chunks_per_block, item.n_chunks) - 1;
  const int row_groups = (rows + kRows - 1) / kRows;

  for (int chunk = chunk_first; chunk <= chunk_last; ++chunk) {
    const int pos_begin = chunk * kChunk;
    __syncthreads();  // previous chunk's readers of k/v/weights are done; Q/positions visible
    int n_loaded = max_position + 1 - pos_begin;
    n_loaded = n_loaded < kChunk ? n_loaded : kChunk;
    for (int r = threadIdx.x; r < rows_cap; r += blockDim.x) {
      int valid = row_position[r] + 1 - pos_begin;  // <= 0: the row does not reach this chunk
      row_valid[r] = valid < kChunk ? valid : kChunk;
    }
    // Slots of chunk c are in buffer (c - chunk_first) % 2; the split path filled the first
    // chunk's before the wait.
    const int parity = (chunk - chunk_first) & 1;
    long long* const cur_slots = slots + parity * kChunk;
    long long* const next_slots = slots + (parity ^ 1) * kChunk;
    const bool has_next = chunk < chunk_last;
    const int n_next = has_next ? min(kChunk, max_position + 1 - (pos_begin + kChunk)) : 0;
    if (p.vec16) {
      // Pipelined staging: K of chunk c + 1 is copied while chunk c's weights and P.V are computed
      // (its copies are issued once the scores of chunk c are done with the K buffer), V of chunk
      // c while chunk c's scores are computed. Groups complete in issue order: K_c (issued during
      // chunk c - 1), V_c (here), then K_c+1.
      if (chunk == chunk_first) {
        if (kFlash) {
          fillSlots(p, cur_slots, table_row, pos_begin, n_loaded);
          __syncthreads();
        }
        copyChunkAsync<T, kHeadDim>(p, static_cast<const T*>(p.k), k_chunk, cur_slots, item.kv_head,
                                    n_loaded);
      }
      copyChunkAsync<T, kHeadDim>(p, static_cast<const T*>(p.v), v_chunk, cur_slots, item.kv_head,
                                  n_loaded);
      if (has_next) fillSlots(p, next_slots, table_row, pos_begin + kChunk, n_next);
      cpAsyncWait<1>();  // K of this chunk has landed (V may still be in flight)
    } else {
      if (kFlash || chunk != chunk_first) {  // the split path's first chunk: before the wait
        fillSlots(p, cur_slots, table_row, pos_begin, n_loaded);
        __syncthreads();
      }
      loadKvChunks<T, kHeadDim>(p, k_chunk, v_chunk, cur_slots, item.kv_head, n_loaded);
    }
    __syncthreads();

    // Scores: unit = (position, group of kRows rows); each is the canonical dot product over
    // head_dim (fma chain per 128-wide part, parts added left to right), times the scale. K rows
    // are read 16 bytes at a time (rows are 16-byte aligned, kvStrideElements).
    for (int u = threadIdx.x; u < n_loaded * row_groups; u += blockDim.x) {
      const int pos = u % n_loaded;
      const int group_row = (u / n_loaded) * kRows;
      const T* k_row = k_chunk + pos * p.kv_stride;
      const float* q_col = q_tile + group_row;
      float dot[kRows];
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
      auto part = [&](int d_begin, int d_end) {  // dot = fma chain over [d_begin, d_end)
#pragma unroll
        for (int i = 0; i < kRows; ++i)
          dot[i] = 0.0f;
        constexpr int kPerVec = 16 / sizeof(T);
        int d = d_begin;  // parts start at multiples of kReduceChunk: 16-byte aligned in the row
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
      };
      part(0, head_dim < kReduceChunk ? head_dim : kReduceChunk);
      if (head_dim > kReduceChunk) {
        float first[kRows];
#pragma unroll
        for (int i = 0; i < kRows; ++i)
          first[i] = dot[i];
        part(kReduceChunk, head_dim);
#pragma unroll
        for (int i = 0; i < kRows; ++i)
          dot[i] = first[i] + dot[i];
      }
#pragma unroll
      for (int i = 0; i < kRows; ++i) {
        weights[pos * rows_cap + group_row + i] = attn::scaledScore(dot[i], p.scale);
      }
    }
    __syncthreads();
    if (p.vec16 && has_next) {  // the K buffer is free: fetch the next chunk's K
      copyChunkAsync<T, kHeadDim>(p, static_cast<const T*>(p.k), k_chunk, next_slots, item.kv_head,
                                  n_next);
    }

    // Per row (one warp each): chunk max over the valid positions, the weights, and (flash) the
    // merge factors of the running state.
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
      // Positions past `valid` take the maximum itself (weight 1, discarded): a defined input.
      const float scores[2] = {lane < valid ? s0 : m, lane + 32 < valid ? s1 : m};
      float w[2];
      attn::chunkWeights(scores, m, w);
      if (lane < valid) weights[lane * rows_cap + r] = w[0];
      if (lane + 32 < valid) weights[(lane + 32) * rows_cap + r] = w[1];
      if (lane == 0) {
        chunk_max[r] = m;
        if (kFlash) {
          if (chunk == 0) {
            running_max[r] = m;
          } else {
            const float old_max = running_max[r];
            const float new_max = attn::maxStep(old_max, m);
            running_max[r] = new_max;
            running_factor[r] = attn::rescaleFactor(old_max, new_max);
            chunk_factor[r] = attn::rescaleFactor(m, new_max);
          }
        } else {
          const long long state =
              item.state_base + static_cast<long long>(item.row_begin + r) * item.n_chunks + chunk;
          p.ws_max[state] = m;
        }
      }
    }
    if (p.vec16 && has_next) {
      cpAsyncWait<1>();  // V of this chunk has landed (the next chunk's K may be in flight)
    } else {
      cpAsyncWait<0>();
    }
    __syncthreads();

    // Chunk sums: canonicalSum (kChunk <= kReduceChunk, so one chain from +0 over the positions in
    // order). Lane r of the last warp runs row r's chain, so one warp instruction serves up to 32
    // rows (a warp per row would issue the same chain once per row); the other warps start P.V.
    if (warp == n_warps - 1) {
      for (int r = lane; r < rows; r += 32) {
        const int valid = row_valid[r];
        if (valid <= 0) continue;
        float sum = 0.0f;
        for (int i = 0; i < valid; ++i)
          sum = sum + weights[i * rows_cap + r];
        if (kFlash) {
          running_sum[r] = chunk == 0 ? sum
                                      : attn::mergeValue(running_sum[r], running_factor[r], sum,
                                                         chunk_factor[r]);
        } else {
          const long long state =
              item.state_base + static_cast<long long>(item.row_begin + r) * item.n_chunks + chunk;
          p.ws_sum[state] = sum;
        }
      }
    }

    // P.V: unit = (d, group of kRows rows); acc[d] = fma chain over the row's valid positions in
    // order.
    for (int u = threadIdx.x; u < head_dim * row_groups; u += blockDim.x) {
      const int d = u % head_dim;
      const int group_row = (u / head_dim) * kRows;
      int valid[kRows];
      int valid_min = kChunk, valid_max = 0;
#pragma unroll
      for (int i = 0; i < kRows; ++i) {
        valid[i] = group_row + i < rows ? row_valid[group_row + i] : 0;
        if (valid[i] > 0) {
          valid_min = valid[i] < valid_min ? valid[i] : valid_min;
          valid_max = valid[i] > valid_max ? valid[i] : valid_max;
        }
      }
      if (valid_max == 0) continue;
      float acc[kRows];
#pragma unroll
      for (int i = 0; i < kRows; ++i)
        acc[i] = 0.0f;
      const float* w_col = weights + group_row;
      if (valid_min == valid_max) {
        // Every participating row has the same positions; the others' lanes are never stored.
#pragma unroll 4
        for (int i = 0; i < valid_max; ++i) {
          const float v_value = loadFloat(v_chunk[i * p.kv_stride + d]);
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
        // Diagonal chunk: a row's chain stops at its own position (skipped, not multiplied by 0).
        for (int i = 0; i < valid_max; ++i) {
          const float v_value = loadFloat(v_chunk[i * p.kv_stride + d]);
#pragma unroll
          for (int j = 0; j < kRows; j += 4) {
            const float4 w4 = *reinterpret_cast<const float4*>(w_col + i * rows_cap + j);
            const float w[4] = {w4.x, w4.y, w4.z, w4.w};
#pragma unroll
            for (int t = 0; t < 4; ++t) {
              if (i < valid[j + t]) acc[j + t] = fmaF32(w[t], v_value, acc[j + t]);
            }
          }
        }
      }
#pragma unroll
      for (int i = 0; i < kRows; ++i) {
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
// an H100: docs/benchmarks.md.)
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
      storeAny(p.out, p.out_dtype, (token * p.n_heads + head) * head_dim + d,
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

template <typename T>
Status launchChunkKernels(const KernelParams& base, const SplitSeq* split_seqs, int n_split_seqs,
                          const SplitWork& split_work, int split_rows_cap, int merge_blocks,
                          const WorkItem* flash_items, int n_flash, int flash_rows_cap,
                          cudaStream_t stream) {
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
  if (n_flash > 0) {
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

  // Work descriptions (host): one entry per split-path sequence, one item per flash tile; then
  // one upload of block table + descriptions.
  std::vector<SplitSeq> split_seqs;
  std::vector<WorkItem> flash_items;
  long long states = 0;
  SplitWork split_work;
  int merge_blocks = 0;  // grid x of the merge kernel: the maximum
  int split_max_rows = 0;
  for (int s = 0; s < args.batch; ++s) {
    const int n_new = args.query_offsets[s + 1] - args.query_offsets[s];
    if (n_new == 0) continue;
    const int rows = n_new * group;
    const int cached = args.cached_lens[s];
    const int n_chunks = static_cast<int>(attn::chunkCount(cached + n_new - 1));
    const int rows_cap = roundUp(rows, kRowGroup);
    if (rows <= kSplitMaxRows && fits(rows_cap, false)) {
      split_max_rows = std::max(split_max_rows, rows);
      SplitSeq ss{};
      ss.seq = s;
      ss.token_begin = args.query_offsets[s];
      ss.cached = cached;
      ss.rows = rows;
      ss.n_chunks = n_chunks;
      ss.state_base = states;
      split_seqs.push_back(ss);
      const long long blocks = static_cast<long long>(args.n_kv_heads) * n_chunks;
      if (blocks > INT32_MAX || split_seqs.size() > 65535) {
        return REE_FAIL(Status::kInvalidArgument,
                        "attention: sequence %d needs %lld split-KV blocks, or the batch has more "
                        "than 65535 decode-like sequences: beyond one CUDA grid",
                        s, blocks);
      }
      for (int i = 0; i < kSplitRunChoices; ++i) {
        split_work.blocks[i] +=
            static_cast<long long>(args.n_kv_heads) * ((n_chunks + (1 << i) - 1) >> i);
      }
      split_work.max_chunks = std::max(split_work.max_chunks, n_chunks);
      merge_blocks = std::max(merge_blocks, args.n_kv_heads * rows);
      states += static_cast<long long>(args.n_kv_heads) * rows * n_chunks;
    } else {
      for (int h = 0; h < args.n_kv_heads; ++h) {
        for (int r0 = 0; r0 < rows; r0 += flash_rows_cap) {
          const int count = std::min(flash_rows_cap, rows - r0);
          flash_items.push_back(WorkItem{s, h, r0, count, 0, 0, args.query_offsets[s], cached, 0});
        }
      }
    }
  }
  // kSmallRowGroup rows per thread when every split sequence has that few (decode with G <= 4).
  const int split_rows_cap =
      roundUp(split_max_rows, split_max_rows <= kSmallRowGroup ? kSmallRowGroup : kRowGroup);
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
  const size_t flash_off = align256(split_off + split_seqs.size() * sizeof(SplitSeq));
  const size_t upload_bytes = align256(flash_off + flash_items.size() * sizeof(WorkItem));
  const size_t ws_max_off = 0;  // the split path's workspace: a separate, per-call buffer
  const size_t ws_sum_off = align256(ws_max_off + states * sizeof(float));
  const size_t ws_acc_off = align256(ws_sum_off + states * sizeof(float));
  const size_t workspace_bytes = align256(ws_acc_off + states * head_dim * sizeof(float));

  std::vector<unsigned char> staging(upload_bytes, 0);
  std::memcpy(staging.data() + table_off, table.data(), table.size() * sizeof(int32_t));
  if (!split_seqs.empty()) {
    std::memcpy(staging.data() + split_off, split_seqs.data(),
                split_seqs.size() * sizeof(SplitSeq));
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
  p.split_chunks_per_block = 1;  // chosen by the launcher (launchSplit)
  p.vec16 = (head_dim * kv_bytes) % 16 == 0 && reinterpret_cast<uintptr_t>(cache.k) % 16 == 0 &&
            reinterpret_cast<uintptr_t>(cache.v) % 16 == 0;
  p.ws_max = reinterpret_cast<float*>(workspace + ws_max_off);
  p.ws_sum = reinterpret_cast<float*>(workspace + ws_sum_off);
  p.ws_acc = reinterpret_cast<float*>(workspace + ws_acc_off);
  const auto* split_dev = reinterpret_cast<const SplitSeq*>(tables + split_off);
  const auto* flash_dev = reinterpret_cast<const WorkItem*>(tables + flash_off);
  const int n_split_seqs = static_cast<int>(split_seqs.size());
  const int n_flash = static_cast<int>(flash_items.size());

  Status status = Status::kSuccess;
  switch (cache.dtype) {
    case DType::kF32:
      status = launchChunkKernels<float>(p, split_dev, n_split_seqs, split_work, split_rows_cap,
                                         merge_blocks, flash_dev, n_flash, flash_rows_cap, stream);
      break;
    case DType::kBF16:
      status = launchChunkKernels<bf16_t>(p, split_dev, n_split_seqs, split_work, split_rows_cap,
                                          merge_blocks, flash_dev, n_flash, flash_rows_cap, stream);
      break;
    case DType::kF16:
      status = launchChunkKernels<f16_t>(p, split_dev, n_split_seqs, split_work, split_rows_cap,
                                         merge_blocks, flash_dev, n_flash, flash_rows_cap, stream);
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
