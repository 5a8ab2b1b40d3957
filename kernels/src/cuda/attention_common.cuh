// Shared pieces of the CUDA attention kernels (docs/repops-spec/attention.md): the work and
// parameter descriptions, the shared-memory staging of K/V chunks (cp.async pipeline), the Q tile
// and the per-row positions. Used by the chunk kernel (split-KV decode, legacy flash prefill) in
// attention_chunk_kernel.cuh and by the tiled prefill kernel (attention_prefill_tiled.cuh).
// Internal: included by attention.cu only.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "common/storage_element.h"
#include "ree/kernels/attention.h"
#include "shared_memory.cuh"

namespace ree {
namespace repops {
namespace cuda {
namespace attention_detail {
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

// Shared-memory row stride (elements) of a K/V chunk: whole 16-byte vectors, an odd number of
// them. Rows are 16-byte aligned (cp.async copies, 16-byte reads), and the 8 threads of a quarter
// warp that each read a 16-byte vector of their own position's row hit 8 distinct vector slots,
// i.e. all 32 banks once.
inline int kvStrideElements(int head_dim, DType dtype) {
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
__host__ __device__ inline SmemLayout smemLayout(int head_dim, int rows_cap, int kv_stride,
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
__device__ inline void fillSlots(const KernelParams& p, long long* slots, const int32_t* table_row,
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

// ---- The chunk kernel, phase by phase ----------------------------------------------------------
// kHeadDim: as in loadKvChunks. kRows: rows per thread in the score and P.V loops (a multiple of
// 4; rows_cap is a multiple of it).

// The block's shared-memory arrays (smemLayout).
template <typename T>
struct ChunkTiles {
  float* q_tile;   // [d][row]
  float* weights;  // [pos][row]: the chunk's scores, then its weights
  float* chunk_max;
  float* running_max;  // flash: the running state's maximum, sum and merge factors
  float* running_sum;
  float* running_factor;
  float* chunk_factor;
  int* row_position;   // each row's absolute position (-1: padding row)
  int* row_valid;      // positions of the current chunk the row attends to (<= 0: none)
  float* running_acc;  // [row][d] (flash only)
  long long* slots;    // cache rows of the positions of two consecutive chunks
  T* k_chunk;
  T* v_chunk;
};

template <typename T>
__device__ __forceinline__ ChunkTiles<T> chunkTiles(unsigned char* smem_raw,
                                                    const SmemLayout& layout, int rows_cap,
                                                    int kv_stride) {
  ChunkTiles<T> t;
  t.q_tile = reinterpret_cast<float*>(smem_raw + layout.q_off);
  t.weights = reinterpret_cast<float*>(smem_raw + layout.e_off);
  float* stats = reinterpret_cast<float*>(smem_raw + layout.stat_off);
  t.chunk_max = stats;
  t.running_max = stats + rows_cap;
  t.running_sum = stats + 2 * rows_cap;
  t.running_factor = stats + 3 * rows_cap;
  t.chunk_factor = stats + 4 * rows_cap;
  t.row_position = reinterpret_cast<int*>(stats + 5 * rows_cap);
  t.row_valid = reinterpret_cast<int*>(stats + 6 * rows_cap);
  t.running_acc = reinterpret_cast<float*>(smem_raw + layout.acc_off);
  t.slots = reinterpret_cast<long long*>(smem_raw + layout.slot_off);
  t.k_chunk = reinterpret_cast<T*>(smem_raw + layout.kv_off);
  t.v_chunk = t.k_chunk + kChunk * kv_stride;
  return t;
}

// The split path's block: (sequence, KV head, first chunk) from its grid position. False for the
// blocks past the sequence's n_kv_heads * n_chunks (uniform over the block: they exit).
__device__ __forceinline__ bool splitWorkItem(const KernelParams& p,
                                              const SplitSeq* __restrict__ split_seqs,
                                              WorkItem* item) {
  const SplitSeq ss = split_seqs[blockIdx.y];
  const int local = static_cast<int>(blockIdx.x);
  const int blocks_per_head =
      (ss.n_chunks + p.split_chunks_per_block - 1) / p.split_chunks_per_block;
  if (local >= p.n_kv_heads * blocks_per_head) return false;
  const int kv_head = local / blocks_per_head;
  *item = WorkItem{ss.seq,
                   kv_head,
                   0,
                   ss.rows,
                   (local - kv_head * blocks_per_head) * p.split_chunks_per_block,
                   ss.n_chunks,
                   ss.token_begin,
                   ss.cached,
                   ss.state_base + static_cast<long long>(kv_head) * ss.rows * ss.n_chunks};
  return true;
}

// Q tile, transposed to [d][row] (zero padding rows keep the unused lanes finite). kQBatch loads
// per thread are issued before their stores, so they are in flight together.
__device__ __forceinline__ void loadQueryTile(const KernelParams& p, const WorkItem& item,
                                              int head_dim, float* q_tile) {
  const int rows = item.row_count;
  const int rows_cap = p.rows_cap;
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
        values[b] = loadStorageElement(p.q, p.q_dtype, (token * p.n_heads + head) * head_dim + d);
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
}

// Each row's absolute position into row_position (padding rows: -1); returns the largest.
__device__ __forceinline__ int setRowPositions(const KernelParams& p, const WorkItem& item,
                                               int* row_position) {
  const int rows = item.row_count;
  int max_position = 0;
  for (int r = 0; r < rows; ++r) {
    const int position = item.cached + (item.row_begin + r) / p.group;
    max_position = position > max_position ? position : max_position;
  }
  for (int r = threadIdx.x; r < p.rows_cap; r += blockDim.x) {
    row_position[r] = r < rows ? item.cached + (item.row_begin + r) / p.group : -1;
  }
  return max_position;
}

// Where chunk `chunk` stands among the block's chunks.
struct ChunkSpan {
  int pos_begin;          // its first position
  int n_loaded;           // its positions that some row attends to
  long long* cur_slots;   // cache rows of its positions: slot buffer (chunk - chunk_first) % 2
  long long* next_slots;  // and of the next chunk's
  bool has_next;
  int n_next;  // the next chunk's positions that some row attends to
};

__device__ __forceinline__ ChunkSpan chunkSpan(long long* slots, int chunk, int chunk_first,
                                               int chunk_last, int max_position) {
  ChunkSpan s;
  s.pos_begin = chunk * kChunk;
  s.n_loaded = max_position + 1 - s.pos_begin;
  s.n_loaded = s.n_loaded < kChunk ? s.n_loaded : kChunk;
  const int parity = (chunk - chunk_first) & 1;
  s.cur_slots = slots + parity * kChunk;
  s.next_slots = slots + (parity ^ 1) * kChunk;
  s.has_next = chunk < chunk_last;
  s.n_next = s.has_next ? min(kChunk, max_position + 1 - (s.pos_begin + kChunk)) : 0;
  return s;
}

// Each row's count of valid positions in this chunk (<= 0: the row does not reach it).
__device__ __forceinline__ void setRowValid(int rows_cap, const int* row_position, int pos_begin,
                                            int* row_valid) {
  for (int r = threadIdx.x; r < rows_cap; r += blockDim.x) {
    int valid = row_position[r] + 1 - pos_begin;
    row_valid[r] = valid < kChunk ? valid : kChunk;
  }
}

// K and V of the chunk into shared memory. Pipelined when p.vec16: K of chunk c + 1 is copied
// while chunk c's weights and P.V are computed (its copies are issued by the caller once the
// scores of chunk c are done with the K buffer), V of chunk c while chunk c's scores are
// computed. Groups complete in issue order: K_c (issued during chunk c - 1), V_c (here), then
// K_c+1; this returns once K_c has landed. The split path filled the first chunk's slots before
// waiting for its predecessor.
template <typename T, bool kFlash, int kHeadDim>
__device__ __forceinline__ void stageKvChunk(const KernelParams& p, const WorkItem& item,
                                             const ChunkTiles<T>& t, const int32_t* table_row,
                                             const ChunkSpan& s, bool first_chunk) {
  if (p.vec16) {
    if (first_chunk) {
      if (kFlash) {
        fillSlots(p, s.cur_slots, table_row, s.pos_begin, s.n_loaded);
        __syncthreads();
      }
      copyChunkAsync<T, kHeadDim>(p, static_cast<const T*>(p.k), t.k_chunk, s.cur_slots,
                                  item.kv_head, s.n_loaded);
    }
    copyChunkAsync<T, kHeadDim>(p, static_cast<const T*>(p.v), t.v_chunk, s.cur_slots, item.kv_head,
                                s.n_loaded);
    if (s.has_next) fillSlots(p, s.next_slots, table_row, s.pos_begin + kChunk, s.n_next);
    cpAsyncWait<1>();  // K of this chunk has landed (V may still be in flight)
  } else {
    if (kFlash || !first_chunk) {  // the split path's first chunk: before the wait
      fillSlots(p, s.cur_slots, table_row, s.pos_begin, s.n_loaded);
      __syncthreads();
    }
    loadKvChunks<T, kHeadDim>(p, t.k_chunk, t.v_chunk, s.cur_slots, item.kv_head, s.n_loaded);
  }
}

}  // namespace attention_detail
}  // namespace cuda
}  // namespace repops
}  // namespace ree
