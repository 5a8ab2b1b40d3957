// CUDA GEMV over GGUF blocks with one lane per output feature (included by quant_linear.cu only).
//
// A block owns 32 output features (lane l of every warp computes feature n0 + l) and up to 8 rows
// of x; its W warps split K: warp w takes the 256-wide stages w, w + W, w + 2W, ... (a stage is
// two 128-wide chunks: one K-type super-block, or eight 32-element blocks). Each stage arrives in
// the warp's own cp.async ring (2 or 3 stages): the 32 weight rows' bytes of the stage, 16-byte
// pieces copied coalesced (consecutive lanes, consecutive pieces of one row) into rows padded to
// an odd number of pieces, so that a lane reading 16 bytes of its own row never shares a bank with
// the 7 other lanes of its quarter-warp; and the stage's x rows as they are in memory (bf16 or
// fp32), which every lane reads at the same address (a broadcast). Each lane dequantises its
// row's elements once (quant_blocks.h, the values of gguf-dequant.md) and runs, for every row of
// x, the chunk's fma chain from +0 in k order (linear.md, step 2). After each round of W stages
// the block synchronises once, and the thread that owns output (m, n) adds the round's chunk
// partials to its running total in chunk order (linear.md's merge, from -0: -0 + p == p). So
// every output has exactly repops-1's bits over the dequantised weights, whatever W, the ring or
// the row blocking.
//
// Needs 16-byte aligned weight rows (pointer and row bytes) and x rows (pointer and stride): the
// stage pieces are then whole 16-byte pieces of the row. quant_linear.cu's window kernel takes
// the other cases (same bits).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "chained_launch.cuh"
#include "quant_linear_words.cuh"
#include "ree/kernels/linear.h"
#include "ree/kernels/quant_blocks.h"
#include "ree/kernels/reduce.h"
#include "shared_memory.cuh"

namespace ree::repops::cuda::quant_lanes {

constexpr int kStageK = 2 * kReduceChunk;  // elements of a row per stage: two chunks
constexpr int kFeatures = 32;              // output features per block, one per lane
// Warps per block at most: 16 for one or two rows of x (grids of about a block per SM then keep
// 16 warps on an SM), 8 for more (their registers allow no more).
constexpr int maxWarps(int rows) {
  return rows <= 2 ? 16 : 8;
}
constexpr int kMinWarps = 2;
constexpr int kMaxRing = 3;  // cp.async stages per warp (Args::ring: 2 or 3)

// The operands as the kernels read them (quant_linear.cu fills it).
struct Args {
  const void* x;
  const unsigned char* w;
  const float* bias;
  void* y;
  int64_t x_stride, w_row_bytes, y_stride;
  int m, n, k;
  int y_is_bf16, accumulate;
  int w_is_constant;  // LinearArgs::w_is_constant: the first weights are requested before waiting
  int ring;           // stages in each warp's ring, 2 or 3: ring - 1 in flight while one is read
};

template <QuantType kType>
struct Layout {
  static constexpr int kBlockElems = quantBlockElems(kType);
  static constexpr int kBlockBytes = quantBlockBytes(kType);
  static constexpr int kStageBytes = kStageK / kBlockElems * kBlockBytes;  // one row, one stage
  // Stages start on a 16-byte boundary of an aligned row for every type but Q6_K (210-byte
  // super-blocks): those then span one more piece and are read from shared memory byte by byte.
  static constexpr bool kAlignedStages = kStageBytes % 16 == 0;
  static constexpr int kPieces = (kStageBytes + 15) / 16 + (kAlignedStages ? 0 : 1);
  static constexpr int kPitch = 16 * (kPieces % 2 == 1 ? kPieces : kPieces + 1);  // odd pieces
  static constexpr int kWBytes = kFeatures * kPitch;
};

template <QuantType kType, typename TX, int kRows>
struct Shared {
  static constexpr int kXRowBytes = kStageK * static_cast<int>(sizeof(TX));
  static constexpr int kStageBytes = Layout<kType>::kWBytes + kRows * kXRowBytes;
  // Chunk partials of a round, double-buffered: [2][warps][2 chunks][kRows][32].
  static constexpr int kPartialBytesPerWarp = 2 * 2 * kRows * kFeatures * 4;
  static constexpr int bytes(int warps, int ring) {
    return warps * (ring * kStageBytes + kPartialBytesPerWarp);
  }
  static_assert(kStageBytes % 16 == 0, "stages stay 16-byte aligned");
};

constexpr int largestPowerOfTwoAtMost(int n) {
  return n >= 16 ? 16 : n >= 8 ? 8 : n >= 4 ? 4 : n >= 2 ? 2 : 1;
}

// Pieces [kFirst, kFirst + kGroup) of the 32 rows' stage bytes (kGroup a power of two): kGroup
// lanes per row, 32 / kGroup rows per copy instruction, so that a lane's row and piece are a shift
// and a mask of its index and each copy adds a constant; then the pieces left, the same way (the
// binary digits of kPieces: as many copies per lane as pieces per row, without divisions).
// `stage` is the stage's first byte in the block's first row: a row's offset from there fits
// 32 bits (fewer than 32 rows of at most 64 MiB). Rows past n_rows and pieces past `pieces` are
// zero-filled from `stage` itself.
template <QuantType kType, int kFirst, int kGroup>
__device__ __forceinline__ void loadPieceGroups(const unsigned char* stage, uint32_t w_row_bytes,
                                                int n_rows, int pieces, unsigned char* slot,
                                                int lane) {
  using L = Layout<kType>;
  constexpr int kRowsPerCopy = 32 / kGroup;
  const int row = lane / kGroup, p = kFirst + lane % kGroup;
  const bool piece_in = p < pieces;
  const uint32_t offset = row * w_row_bytes + 16u * p;
  unsigned char* dst = slot + row * L::kPitch + 16 * p;
#pragma unroll
  for (int t = 0; t < kGroup; ++t) {
    const bool copy = piece_in && row + t * kRowsPerCopy < n_rows;
    const uint32_t at = offset + static_cast<uint32_t>(t * kRowsPerCopy) * w_row_bytes;
    cpAsync16(dst + t * kRowsPerCopy * L::kPitch, stage + (copy ? at : 0u), copy ? 16 : 0);
  }
  constexpr int kLeft = L::kPieces - kFirst - kGroup;
  if constexpr (kLeft > 0) {
    loadPieceGroups<kType, kFirst + kGroup, largestPowerOfTwoAtMost(kLeft)>(
        stage, w_row_bytes, n_rows, pieces, slot, lane);
  }
}

// Copies the weight bytes of stage `s` of the block's rows into `slot`: row r's pieces from the
// 16-byte boundary at or before the stage's first byte, kPieces of them (the last ones may hold
// the next stage's bytes; never past the row, whose length is a multiple of 16).
template <QuantType kType>
__device__ __forceinline__ void loadStageWeights(const Args& a, int n0, int n_rows, int s,
                                                 unsigned char* slot, int lane) {
  using L = Layout<kType>;
  static_assert(L::kPieces <= 31, "at most 31 pieces per row and stage");
  const int64_t row_bytes = static_cast<int64_t>(a.k / L::kBlockElems) * L::kBlockBytes;
  const int64_t first = static_cast<int64_t>(s) * L::kStageBytes / 16 * 16;
  const int64_t stage_end = static_cast<int64_t>(s + 1) * L::kStageBytes;
  const int64_t end = stage_end < row_bytes ? stage_end : row_bytes;
  const int pieces = static_cast<int>((end - first + 15) / 16);
  const unsigned char* stage = a.w + static_cast<int64_t>(n0) * a.w_row_bytes + first;
  loadPieceGroups<kType, 0, largestPowerOfTwoAtMost(L::kPieces)>(
      stage, static_cast<uint32_t>(a.w_row_bytes), n_rows, pieces, slot, lane);
}

// Copies the x values of stage `s` (kRows rows from m0, zeros past K or M) after the weights.
template <QuantType kType, typename TX, int kRows>
__device__ __forceinline__ void loadStageX(const Args& a, int m0, int rows, int s,
                                           unsigned char* slot, int lane) {
  using S = Shared<kType, TX, kRows>;
  constexpr int kElems = 16 / static_cast<int>(sizeof(TX));
  constexpr int kPiecesPerRow = S::kXRowBytes / 16;
  const TX* x = static_cast<const TX*>(a.x);
#pragma unroll
  for (int j = 0; j < kRows * kPiecesPerRow / 32; ++j) {
    const int i = lane + 32 * j;
    const int r = i / kPiecesPerRow, c = i % kPiecesPerRow;
    const int k = s * kStageK + c * kElems;
    const bool copy = r < rows && k < a.k;  // K is a multiple of 32: whole pieces
    const TX* src = copy ? x + (m0 + r) * a.x_stride + k : x;
    cpAsync16(slot + Layout<kType>::kWBytes + r * S::kXRowBytes + 16 * c, src, copy ? 16 : 0);
  }
}

// Four consecutive x values of one row from shared memory (all lanes read the same address).
__device__ __forceinline__ void loadX4(const float* p, float (&v)[4]) {
  const float4 q = *reinterpret_cast<const float4*>(p);
  v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
}
__device__ __forceinline__ void loadX4(const bf16_t* p, float (&v)[4]) {
  const uint2 q = *reinterpret_cast<const uint2*>(p);
  v[0] = bitsFloat(q.x << 16), v[1] = bitsFloat(q.x & 0xFFFF0000u);
  v[2] = bitsFloat(q.y << 16), v[3] = bitsFloat(q.y & 0xFFFF0000u);
}

// The fma chains of the x rows over kCount dequantised weights of this lane's row, in k order;
// x holds the stage's x rows (row r at x + r * kStageK), from the weights' first k. Every row of
// the block runs, also those past M (x zero-filled; never stored): no branch between the chains,
// so the scheduler interleaves the rows' x reads and fmas.
template <typename TX, int kRows, int kCount>
__device__ __forceinline__ void chainWeights(const TX* x, const float (&w)[kCount],
                                             float (&partial)[kRows]) {
#pragma unroll
  for (int j = 0; j < kCount; j += 4) {
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      float v[4];
      loadX4(x + r * kStageK + j, v);
#pragma unroll
      for (int e = 0; e < 4; ++e)
        partial[r] = fmaF32(v[e], w[j + e], partial[r]);
    }
  }
}

// kCount bytes of this lane's row in the stage from byte `kOffset`, as 16-byte shared-memory
// reads (conflict-free: odd pitch in pieces) into registers; returns the bytes' first address.
template <int kOffset, int kCount>
struct RowBytes {
  static constexpr int kFirst = kOffset / 16;
  static constexpr int kPieces = (kOffset + kCount + 15) / 16 - kFirst;
  uint4 pieces[kPieces];
  __device__ __forceinline__ explicit RowBytes(const unsigned char* row) {
#pragma unroll
    for (int i = 0; i < kPieces; ++i)
      pieces[i] = *reinterpret_cast<const uint4*>(row + 16 * (kFirst + i));
  }
  __device__ __forceinline__ const unsigned char* bytes() const {
    return reinterpret_cast<const unsigned char*>(pieces) + (kOffset - 16 * kFirst);
  }
  // The pieces as words; the bytes start at byte kOffset % 16 of word 0.
  __device__ __forceinline__ void words(uint32_t (&out)[4 * kPieces]) const {
#pragma unroll
    for (int i = 0; i < kPieces; ++i)
      out[4 * i] = pieces[i].x, out[4 * i + 1] = pieces[i].y, out[4 * i + 2] = pieces[i].z,
              out[4 * i + 3] = pieces[i].w;
  }
};

// Block kBlock (0..7) of a stage of a 32-element type: its 32 weights of this lane's row continue
// the chains of every row of x. Blocks past K run too, without a branch: their weight bytes and x
// are cp.async's zero fill (d = 0: finite weights w; x = 0), and fma(0, w, acc) == acc for a chain
// value acc that is never -0 (it starts from +0; an fma gives -0 only from -0 + -0).
template <QuantType kType, typename TX, int kRows, int kBlock>
__device__ __forceinline__ void blockPartials(const unsigned char* row, const TX* x,
                                              float (&partial)[kRows]) {
  constexpr int kBytes = quantBlockBytes(kType);
  using Bytes = RowBytes<kBlock * kBytes, kBytes>;
  const Bytes block(row);
  float w[32];
  uint32_t words[4 * Bytes::kPieces];
  block.words(words);
  if (!wordValues32<kType, kBlock * kBytes - 16 * Bytes::kFirst>(words, w))
    dequantizeSub32<kType>(block.bytes(), 0, w);
  chainWeights<TX, kRows>(x, w, partial);
}

// Q6_K elements [128 kH + 64 kP, +64) of the super-block at `row` (byte kB of a word) continue
// the chains of every row of x (x from those elements' first k).
template <typename TX, int kRows, int kH, int kP, int kB>
__device__ __forceinline__ void pairPartialsQ6_K(const unsigned char* row, const TX* x,
                                                 float (&partial)[kRows]) {
  float w[64];
  if (!wordValuesQ6_K<kB, kH, kP>(reinterpret_cast<const uint32_t*>(row - kB), w))
    dequantizeSub64<QuantType::kQ6_K>(row, 2 * kH + kP, w);
  chainWeights<TX, kRows>(x, w, partial);
}

// Chunk h (0 or 1) of the stage for this lane's row (the stage's bytes at `row`, byte kB of a
// 32-bit word; x from the chunk's first k): the chunk partial of every row of x (a chunk that
// ends K early: its blocks past K add nothing, see blockPartials).
template <QuantType kType, typename TX, int kRows, int kH, int kB>
__device__ __forceinline__ void chunkPartials(const unsigned char* row, const TX* x,
                                              float (&partial)[kRows]) {
  using L = Layout<kType>;
#pragma unroll
  for (int r = 0; r < kRows; ++r)
    partial[r] = 0.0f;
  if constexpr (L::kBlockElems == 32) {
    blockPartials<kType, TX, kRows, 4 * kH>(row, x, partial);
    blockPartials<kType, TX, kRows, 4 * kH + 1>(row, x + 32, partial);
    blockPartials<kType, TX, kRows, 4 * kH + 2>(row, x + 64, partial);
    blockPartials<kType, TX, kRows, 4 * kH + 3>(row, x + 96, partial);
  } else if constexpr (L::kAlignedStages) {
#pragma unroll
    for (int p = 0; p < 2; ++p) {
      using Bytes = RowBytes<0, L::kBlockBytes>;
      const Bytes block(row);  // unused pieces are never loaded
      float w[64];
      bool done = false;
      if constexpr (kType == QuantType::kQ4_K) {
        uint32_t words[4 * Bytes::kPieces];
        block.words(words);
        done = wordValuesQ4_K(words, block.bytes(), 2 * kH + p, w);
      } else if constexpr (kType == QuantType::kQ5_K) {
        uint32_t words[4 * Bytes::kPieces];
        block.words(words);
        done = p == 0 ? wordValuesQ5_K<2 * kH>(words, block.bytes(), w)
                      : wordValuesQ5_K<2 * kH + 1>(words, block.bytes(), w);
      }
      if (!done) dequantizeSub64<kType>(block.bytes(), 2 * kH + p, w);
      chainWeights<TX, kRows>(x + 64 * p, w, partial);
    }
  } else if constexpr (kRows <= 2) {  // Q6_K: the super-block's words where they lie
    static_assert(kType == QuantType::kQ6_K, "the one type whose stages are not aligned");
    pairPartialsQ6_K<TX, kRows, kH, 0, kB>(row, x, partial);
    pairPartialsQ6_K<TX, kRows, kH, 1, kB>(row, x + 64, partial);
  } else {  // Q6_K, more rows of x: the bytes, one loop body (two word variants of 8 rows' chains
            // overflow the instruction cache: M = 16 took 120 instead of 79 us at K = N = 4096)
#pragma unroll 1
    for (int p = 0; p < 2; ++p) {
      float w[64];
      dequantizeSub64<kType>(row, 2 * kH + p, w);
      chainWeights<TX, kRows>(x + 64 * p, w, partial);
    }
  }
}

// The chunk partials of a stage (its bytes at `row`, byte kB of a word; `left` elements of K from
// its first) into the round's buffer.
template <QuantType kType, typename TX, int kRows, int kB>
__device__ __forceinline__ void stagePartials(const unsigned char* row, const TX* x, int left,
                                              float* round_partials, int lane) {
  float partial[kRows];
  chunkPartials<kType, TX, kRows, 0, kB>(row, x, partial);
#pragma unroll
  for (int r = 0; r < kRows; ++r)
    round_partials[r * kFeatures + lane] = partial[r];
  if (left > kReduceChunk) {
    chunkPartials<kType, TX, kRows, 1, kB>(row, x + kReduceChunk, partial);
#pragma unroll
    for (int r = 0; r < kRows; ++r)
      round_partials[(kRows + r) * kFeatures + lane] = partial[r];
  }
}

// At most 128 registers for one or two rows of x (blocks of up to 16 warps): at M = 1 the warps
// resident on an SM bound the GEMV, and Q8_0 (180) and Q6_K (199) would otherwise take more;
// Q6_K then spills 16 bytes, on its non-finite-scale path only.
template <QuantType kType, typename TX, int kRows>
__global__ void __launch_bounds__(maxWarps(kRows) * 32, 1) laneGemvKernel(Args a) {
  using L = Layout<kType>;
  using S = Shared<kType, TX, kRows>;
  extern __shared__ __align__(16) unsigned char shared[];
  const int warps = blockDim.x / 32, threads = blockDim.x;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  // Blocks of one weight slice and different rows of x are consecutive: the later ones read the
  // slice from L2.
  const int row_blocks = (a.m + kRows - 1) / kRows;
  const int n0 = blockIdx.x / row_blocks * kFeatures;
  const int m0 = blockIdx.x % row_blocks * kRows;
  const int rows = min(kRows, a.m - m0);
  const int n_rows = min(kFeatures, a.n - n0);
  const int stages = (a.k + kStageK - 1) / kStageK;
  const int chunks = (a.k + kReduceChunk - 1) / kReduceChunk;
  const int rounds = (stages + warps - 1) / warps;
  const int my_stages = warp < stages ? (stages - warp + warps - 1) / warps : 0;
  const int ring_stages = a.ring;
  unsigned char* ring = shared + warp * ring_stages * S::kStageBytes;
  float* partials = reinterpret_cast<float*>(shared + warps * ring_stages * S::kStageBytes);
  auto stageOf = [&](int t) { return t * warps + warp; };

  // Constant weights are not written by earlier kernels: their first stages are requested before
  // waiting for the predecessor (chained_launch.cuh); x only after. cp.async groups complete in
  // order, so group t (stage t's x, and the early weights in group 0) completes before stage t
  // is read.
  const bool early = a.w_is_constant != 0;
  if (early) {
#pragma unroll
    for (int t = 0; t < kMaxRing - 1; ++t) {
      if (t < ring_stages - 1 && t < my_stages)
        loadStageWeights<kType>(a, n0, n_rows, stageOf(t), ring + t * S::kStageBytes, lane);
    }
  }
  waitForPredecessor();
  allowSuccessorLaunch();
#pragma unroll
  for (int t = 0; t < kMaxRing - 1; ++t) {
    if (t < ring_stages - 1) {
      if (t < my_stages) {
        unsigned char* slot = ring + t * S::kStageBytes;
        if (!early) loadStageWeights<kType>(a, n0, n_rows, stageOf(t), slot, lane);
        loadStageX<kType, TX, kRows>(a, m0, rows, stageOf(t), slot, lane);
      }
      cpAsyncCommit();
    }
  }

  constexpr int kMerges = (kRows * kFeatures + kMinWarps * 32 - 1) / (kMinWarps * 32);
  float totals[kMerges];
#pragma unroll
  for (int i = 0; i < kMerges; ++i)
    totals[i] = -0.0f;  // -0 + p == p for every p: the first merge gives partial 0

  // Stage q is in slot q % ring (`read`); stage q + ring - 1 goes to the slot stage q - 1 left
  // (`write`). Counted, not divided: a division by the run-time ring costs ~25 instructions.
  int read = 0, write = ring_stages - 1;
  for (int q = 0; q < rounds; ++q) {
    if (ring_stages == 2) {  // ring - 2 groups may stay pending: stage q's has completed
      cpAsyncWait<0>();
    } else {
      cpAsyncWait<1>();
    }
    __syncwarp();  // stage q visible to every lane; slot (q - 1) % ring no longer read
    {
      const int next = q + ring_stages - 1;
      if (next < my_stages) {
        unsigned char* slot = ring + write * S::kStageBytes;
        loadStageWeights<kType>(a, n0, n_rows, stageOf(next), slot, lane);
        loadStageX<kType, TX, kRows>(a, m0, rows, stageOf(next), slot, lane);
      }
      cpAsyncCommit();
    }
    float* round_partials = partials + ((q & 1) * warps + warp) * 2 * kRows * kFeatures;
    if (q < my_stages) {  // warp-uniform
      const int s = stageOf(q);
      const unsigned char* slot = ring + read * S::kStageBytes;
      const unsigned char* row =
          slot + lane * L::kPitch + static_cast<int>(static_cast<int64_t>(s) * L::kStageBytes % 16);
      const TX* x = reinterpret_cast<const TX*>(slot + L::kWBytes);
      const int left = a.k - s * kStageK;
      if constexpr (L::kAlignedStages || kRows > 2) {
        stagePartials<kType, TX, kRows, 0>(row, x, left, round_partials, lane);
      } else if (s % 2 == 0) {  // Q6_K: stage s starts at byte 2 (s % 8) of a piece; warp w's
        // stages all have w's parity (the warps are even), so each warp runs one of the two
        stagePartials<kType, TX, kRows, 0>(row, x, left, round_partials, lane);
      } else {
        stagePartials<kType, TX, kRows, 2>(row, x, left, round_partials, lane);
      }
    }
    write = read;
    read = read + 1 == ring_stages ? 0 : read + 1;
    __syncthreads();

    // Ordered merge of the round's chunks: 2 (q W + w) + h increases with (w, h). Round q + 2
    // reuses this buffer only after every thread passed round q + 1's barrier.
    const float* merge_from = partials + (q & 1) * warps * 2 * kRows * kFeatures;
    const int first_chunk = 2 * q * warps;
    const int round_chunks = min(2 * warps, chunks - first_chunk);
#pragma unroll
    for (int i = 0; i < kMerges; ++i) {
      const int o = threadIdx.x + i * threads;  // output (o / 32, o % 32) of the block
      if (o < kRows * kFeatures) {
        for (int c = 0; c < round_chunks; ++c)
          totals[i] = totals[i] + merge_from[c * kRows * kFeatures + o];
      }
    }
  }
  cpAsyncWait<0>();

#pragma unroll
  for (int i = 0; i < kMerges; ++i) {
    const int o = threadIdx.x + i * threads;
    const int r = o / kFeatures, l = o % kFeatures;
    if (o < kRows * kFeatures && r < rows && l < n_rows) {
      const int n = n0 + l;
      const bool has_bias = a.bias != nullptr;
      const float value = detail::linearFinish(totals[i], has_bias, has_bias ? a.bias[n] : 0.0f);
      detail::linearStore(a.y, a.y_is_bf16 != 0, static_cast<int64_t>(m0 + r) * a.y_stride + n,
                          value, a.accumulate != 0);
    }
  }
}

}  // namespace ree::repops::cuda::quant_lanes
