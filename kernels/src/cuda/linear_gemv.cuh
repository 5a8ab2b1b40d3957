// The CUDA linear GEMV for up to 4 rows of x (decode, docs/repops-spec/linear.md): one output
// feature per lane, the weights streamed through a per-warp cp.async ring, the chunk partials
// merged in chunk order as reduce.h's ChunkMerge. Launched by linear_gemv_launch.cuh; kept apart
// from the four-features kernel (linear_gemv4.cuh) because each is tuned on its own. Internal:
// included by linear.cu only (after linear_common.cuh); not a header of its own.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "chained_launch.cuh"
#include "linear_common.cuh"
#include "ree/kernels/reduce.h"
#include "shared_memory.cuh"

namespace ree::repops::cuda {
namespace {

// ==== GEMV =======================================================================================
// Decode shapes are bound by the weight bytes, so the kernel is organised around keeping enough of
// them in flight on every SM: a block owns up to 32 output features (lane l of every warp computes
// output n0 + l) and W warps (2, 4 or 8), both chosen per launch so that the grid fits the GPU in
// one wave and the SMs get equal numbers of weight rows (chooseGemvTiling). Warp w computes chunks
// w, w + W, w + 2W, ... of its 32 outputs; each chunk arrives in shared memory through the warp's
// own cp.async ring (3-4 stages of kStageK k: the 32 weight row segments and the matching x
// segments), so warps never wait for each other to load. Lane l runs the chunk's fma chain for
// every row of x over row l of the stage. After each round of W chunks the block synchronises once
// and the thread that owns output (m, n) adds the round's W partials to its running total in chunk
// order, exactly as reduce.h's ChunkMerge.
constexpr int kGemvRowsPerBlock = 32;  // output features per block (one per lane)
constexpr int kGemvMaxWarps = 8;

template <typename TW, typename TX, int kMaxRows>
struct GemvLayout {
  static constexpr int kStagesPerChunk = sizeof(TW) == 4 ? 4 : 2;
  static constexpr int kStageK = kReduceChunk / kStagesPerChunk;  // 32 or 64: 128 bytes per row
  static_assert(kStageK * sizeof(TW) % 16 == 0 && 32 % (kStageK * sizeof(TW) / 16) == 0,
                "a stage row is whole 16-byte pieces, a divisor of 32 of them");
  static constexpr int kWRowBytes = kStageK * static_cast<int>(sizeof(TW)) + 16;  // +16: banks
  static constexpr int kWBytes = kGemvRowsPerBlock * kWRowBytes;
  static constexpr int kXRowBytes = kStageK * static_cast<int>(sizeof(TX));
  static constexpr int kStageBytes = kWBytes + kMaxRows * kXRowBytes;  // multiple of 16
  // cp.async stages per warp: four keep 12 KiB of weights in flight per warp; with many x rows
  // the stages are larger, and three leave room for eight warps per block.
  static constexpr int kRing = kMaxRows >= 4 ? 3 : 4;
  static constexpr int kWarpBytes = kRing * kStageBytes;
  static constexpr int kPartialBytesPerWarp = 2 * kMaxRows * kGemvRowsPerBlock * 4;
  static constexpr int sharedBytes(int warps) {
    return warps * (kWarpBytes + kPartialBytesPerWarp);
  }
  static_assert(kStageBytes % 16 == 0, "stages must stay 16-byte aligned");
};

struct GemvShape {
  int warps;     // W
  int features;  // output features per block, 1..32 (lanes >= features compute zeros)
  int n_chunks;  // ceil(K / 128)
  int rounds;    // ceil(n_chunks / W)
};

// The first k of this warp's stage `t` (chunk q * W + warp, part t % stages).
template <typename TW, typename TX, int kMaxRows>
__device__ __forceinline__ int gemvStageK0(const GemvShape& g, int warp, int t) {
  using L = GemvLayout<TW, TX, kMaxRows>;
  const int chunk = (t / L::kStagesPerChunk) * g.warps + warp;
  return chunk * kReduceChunk + (t % L::kStagesPerChunk) * L::kStageK;
}

// Which of a lane's cp.async copies are worked out once per block (stored) and which when issued,
// by the rows of x: a stored plan saves integer work per stage but holds registers that the fma
// loop of three or four rows wants. Measured side by side on an H100 (docs/benchmarks-history.md):
// stored copies gain up to 14% with one or two rows; with three or four rows, stored weight copies
// gain 3-6% with fp32 x (on 12 of 14 shapes) and lose 3-13% with bf16 x, and stored x copies lost
// up to 16% (4096 x 4096, fp32 x: 20.9 against 18.0 us).
template <typename TX, int kMaxRows>
constexpr bool kGemvStoreWeightCopies = kMaxRows <= 2 || sizeof(TX) == 4;
template <int kMaxRows>
constexpr bool kGemvStoreXCopies = kMaxRows <= 2;

// This lane's weight copies of every stage: 32 rows of kStageK weights in 16-byte pieces; lane l
// copies pieces l, l + 32, ... of that list (consecutive lanes copy the consecutive pieces of a
// row). Stored: the row pointers and limits are worked out once per block, so that a stage costs
// a few integer operations per copy.
template <typename TW, typename TX, int kMaxRows,
          bool kStored = kGemvStoreWeightCopies<TX, kMaxRows>>
struct GemvWeightPlan {
  using L = GemvLayout<TW, TX, kMaxRows>;
  static constexpr int kElems = 16 / sizeof(TW);  // weights per piece
  static constexpr int kPiecesPerRow = L::kStageK / kElems;
  static constexpr int kCopies = kPiecesPerRow;        // 32 rows x kPiecesPerRow pieces / 32 lanes
  static constexpr int kRowStep = 32 / kPiecesPerRow;  // rows between a lane's copies
  const TW* row[kCopies];  // the piece's weight row at its first element, or w when not copied
  int end[kCopies];        // K - (the piece's first k in a stage); 0 for rows past the block or N
  int dst;                 // byte offset of the first copy in a stage

  __device__ __forceinline__ void init(const DeviceArgs& a, int n0, int n_rows, int lane) {
    const TW* w = static_cast<const TW*>(a.w);
    const int first_row = lane / kPiecesPerRow;
    const int col = lane % kPiecesPerRow;
    dst = first_row * L::kWRowBytes + col * 16;
#pragma unroll
    for (int i = 0; i < kCopies; ++i) {
      const int r = first_row + kRowStep * i;
      const bool ok = r < n_rows;
      row[i] = w + (ok ? static_cast<int64_t>(n0 + r) * a.w_stride + col * kElems : 0);
      end[i] = ok ? a.k - col * kElems : 0;
    }
  }

  // Issues the copies of the stage starting at k0 into `slot`.
  __device__ __forceinline__ void load(int k0, unsigned char* slot) const {
#pragma unroll
    for (int i = 0; i < kCopies; ++i) {
      int valid = end[i] - k0;
      valid = valid < 0 ? 0 : (valid > kElems ? kElems : valid);
      cpAsync16(slot + dst + i * kRowStep * L::kWRowBytes, valid ? row[i] + k0 : row[i],
                valid * static_cast<int>(sizeof(TW)));
    }
  }
};

template <typename TW, typename TX, int kMaxRows>
struct GemvWeightPlan<TW, TX, kMaxRows, false> {  // the copies worked out when issued
  using L = GemvLayout<TW, TX, kMaxRows>;
  static constexpr int kElems = 16 / sizeof(TW);
  static constexpr int kPiecesPerRow = L::kStageK / kElems;
  const TW* w;
  int64_t w_stride;
  int n0, n_rows, k;

  __device__ __forceinline__ void init(const DeviceArgs& a, int first, int rows, int) {
    w = static_cast<const TW*>(a.w), w_stride = a.w_stride;
    n0 = first, n_rows = rows, k = a.k;
  }

  __device__ __forceinline__ void load(int k0, unsigned char* slot) const {
    const int lane = threadIdx.x % 32;
#pragma unroll
    for (int i = 0; i < kPiecesPerRow; ++i) {
      const int piece = 32 * i + lane;
      const int row = piece / kPiecesPerRow;
      const int col = piece % kPiecesPerRow;
      const int kp = k0 + col * kElems;
      int valid = k - kp;
      valid = valid < 0 ? 0 : (valid > kElems ? kElems : valid);
      if (row >= n_rows) valid = 0;
      const TW* src = valid ? w + static_cast<int64_t>(n0 + row) * w_stride + kp : w;
      cpAsync16(slot + row * L::kWRowBytes + col * 16, src, valid * static_cast<int>(sizeof(TW)));
    }
  }
};

// This lane's x copies of every stage: kMaxRows rows of kStageK elements, lane l copies pieces
// l, l + 32, ... of that list. Stored (one copy per lane) with one or two rows of x, else worked
// out when issued.
template <typename TW, typename TX, int kMaxRows>
struct GemvXLayout {
  using L = GemvLayout<TW, TX, kMaxRows>;
  static constexpr int kElems = 16 / sizeof(TX);
  static constexpr int kPiecesPerRow = L::kXRowBytes / 16;
  static constexpr int kPieces = kMaxRows * kPiecesPerRow;
  static constexpr bool kOnePerLane = kPieces <= 32 && kGemvStoreXCopies<kMaxRows>;
};

template <typename TW, typename TX, int kMaxRows,
          bool kStored = GemvXLayout<TW, TX, kMaxRows>::kOnePerLane>
struct GemvXPlan {  // one copy per lane, stored
  using L = GemvLayout<TW, TX, kMaxRows>;
  using X = GemvXLayout<TW, TX, kMaxRows>;
  const TX* row;  // the piece's x row at its first element, or x when not copied
  int end;        // K - (the piece's first k in a stage); 0 for rows past M
  int dst;        // byte offset in the stage

  __device__ __forceinline__ void init(const DeviceArgs& a, int m0, int rows, int lane) {
    const int r = lane / X::kPiecesPerRow;
    const int col = lane % X::kPiecesPerRow;
    const bool ok = lane < X::kPieces && r < rows;
    row = static_cast<const TX*>(a.x) +
          (ok ? static_cast<int64_t>(m0 + r) * a.x_stride + col * X::kElems : 0);
    end = ok ? a.k - col * X::kElems : 0;
    dst = L::kWBytes + r * L::kXRowBytes + col * 16;
  }

  __device__ __forceinline__ void load(int k0, int lane, unsigned char* slot) const {
    if (X::kPieces == 32 || lane < X::kPieces) {
      int valid = end - k0;
      valid = valid < 0 ? 0 : (valid > X::kElems ? X::kElems : valid);
      cpAsync16(slot + dst, valid ? row + k0 : row, valid * static_cast<int>(sizeof(TX)));
    }
  }
};

template <typename TW, typename TX, int kMaxRows>
struct GemvXPlan<TW, TX, kMaxRows, false> {  // several copies per lane, worked out when issued
  using L = GemvLayout<TW, TX, kMaxRows>;
  using X = GemvXLayout<TW, TX, kMaxRows>;
  const TX* x;
  int64_t x_stride;
  int m0, rows, k;

  __device__ __forceinline__ void init(const DeviceArgs& a, int first_row, int row_count, int) {
    x = static_cast<const TX*>(a.x), x_stride = a.x_stride;
    m0 = first_row, rows = row_count, k = a.k;
  }

  __device__ __forceinline__ void load(int k0, int lane, unsigned char* slot) const {
    for (int piece = lane; piece < X::kPieces; piece += 32) {
      const int r = piece / X::kPiecesPerRow;
      const int col = piece % X::kPiecesPerRow;
      const int kp = k0 + col * X::kElems;
      int valid = k - kp;
      valid = valid < 0 ? 0 : (valid > X::kElems ? X::kElems : valid);
      if (r >= rows) valid = 0;
      const TX* src = valid ? x + static_cast<int64_t>(m0 + r) * x_stride + kp : x;
      cpAsync16(slot + L::kWBytes + r * L::kXRowBytes + col * 16, src,
                valid * static_cast<int>(sizeof(TX)));
    }
  }
};

template <typename TW, typename TX, int kMaxRows>
__global__ void __launch_bounds__(kGemvMaxWarps * 32) gemvKernel(DeviceArgs a, GemvShape g) {
  using L = GemvLayout<TW, TX, kMaxRows>;
  extern __shared__ __align__(16) unsigned char shared[];
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int threads = g.warps * 32;
  const int n0 = blockIdx.x * g.features;
  const int m0 = blockIdx.y * kMaxRows;
  const int rows = min(kMaxRows, a.m - m0);
  unsigned char* ring = shared + warp * L::kWarpBytes;
  float* partials = reinterpret_cast<float*>(shared + g.warps * L::kWarpBytes);

  // This warp's stages: every round in which it has a chunk.
  const int my_chunks = warp < g.n_chunks ? (g.n_chunks - warp + g.warps - 1) / g.warps : 0;
  const int my_stages = my_chunks * L::kStagesPerChunk;

  // Constant weights are not written by the kernels before this one, so their first stages are
  // requested before waiting for the predecessor: the bytes stream in while it finishes (and
  // while this grid launches), instead of after. x is read only once the predecessor is done.
  // cp.async groups complete in order, so the first group (all early weights and x of stage 0)
  // still completes before stage 0 is read, and group t before stage t.
  GemvWeightPlan<TW, TX, kMaxRows> plan;
  plan.init(a, n0, min(g.features, a.n - n0), lane);
  GemvXPlan<TW, TX, kMaxRows> x_plan;
  x_plan.init(a, m0, rows, lane);
  const bool early_weights = a.w_is_constant != 0;
  if (early_weights) {
#pragma unroll
    for (int t = 0; t < L::kRing - 1; ++t) {
      if (t < my_stages) {
        plan.load(gemvStageK0<TW, TX, kMaxRows>(g, warp, t), ring + t * L::kStageBytes);
      }
    }
  }
  waitForPredecessor();
  allowSuccessorLaunch();
#pragma unroll
  for (int t = 0; t < L::kRing - 1; ++t) {
    if (t < my_stages) {
      unsigned char* slot = ring + t * L::kStageBytes;
      if (!early_weights) plan.load(gemvStageK0<TW, TX, kMaxRows>(g, warp, t), slot);
      x_plan.load(gemvStageK0<TW, TX, kMaxRows>(g, warp, t), lane, slot);
    }
    cpAsyncCommit();
  }

  // Outputs (m, n0 + l) owned by this thread for the merge: index o = tid + i * threads.
  constexpr int kMaxMergePerThread = (kMaxRows * 32 + 63) / 64;  // W >= 2
  float totals[kMaxMergePerThread];
#pragma unroll
  for (int i = 0; i < kMaxMergePerThread; ++i)
    totals[i] = 0.0f;

  for (int q = 0; q < g.rounds; ++q) {
    const int chunk = q * g.warps + warp;
    const bool active = chunk < g.n_chunks;  // warp-uniform
    float partial[kMaxRows];
#pragma unroll
    for (int r = 0; r < kMaxRows; ++r)
      partial[r] = 0.0f;
    for (int part = 0; part < L::kStagesPerChunk; ++part) {
      const int t = q * L::kStagesPerChunk + part;
      cpAsyncWait<L::kRing - 2>();
      __syncwarp();  // stage t visible to all lanes; slot (t - 1) % ring no longer read
      {
        const int next = t + L::kRing - 1;
        if (next < my_stages) {
          unsigned char* slot = ring + (next % L::kRing) * L::kStageBytes;
          const int k0 = gemvStageK0<TW, TX, kMaxRows>(g, warp, next);
          plan.load(k0, slot);
          x_plan.load(k0, lane, slot);
        }
        cpAsyncCommit();
      }
      if (!active) continue;
      const unsigned char* slot = ring + (t % L::kRing) * L::kStageBytes;
      const TW* w_row = reinterpret_cast<const TW*>(slot + lane * L::kWRowBytes);
      const TX* x_rows = reinterpret_cast<const TX*>(slot + L::kWBytes);
      const int k0 = chunk * kReduceChunk + part * L::kStageK;
      const int valid = min(L::kStageK, a.k - k0);
      if (valid == L::kStageK) {
#pragma unroll
        for (int j = 0; j < L::kStageK; j += 8) {
          float w8[8];
          load8(w_row + j, w8);
#pragma unroll
          for (int r = 0; r < kMaxRows; ++r) {
            if (r < rows) {
              float x8[8];
              load8(x_rows + r * L::kStageK + j, x8);
#pragma unroll
              for (int e = 0; e < 8; ++e)
                partial[r] = fmaF32(x8[e], w8[e], partial[r]);
            }
          }
        }
      } else {
        for (int j = 0; j < valid; ++j) {
          const float wj = loadFloat(w_row[j]);
#pragma unroll
          for (int r = 0; r < kMaxRows; ++r) {
            if (r < rows)
              partial[r] = fmaF32(loadFloat(x_rows[r * L::kStageK + j]), wj, partial[r]);
          }
        }
      }
    }
    float* round_partials = partials + ((q & 1) * g.warps + warp) * kMaxRows * 32;
    if (active) {
#pragma unroll
      for (int r = 0; r < kMaxRows; ++r)
        round_partials[r * 32 + lane] = partial[r];
    }
    __syncthreads();

    // Ordered merge of this round's chunks. Round q + 2 reuses this buffer only after every thread
    // passed round q + 1's barrier, i.e. after this merge.
    const float* merge_from = partials + (q & 1) * g.warps * kMaxRows * 32;
    const int round_chunks = min(g.warps, g.n_chunks - q * g.warps);
#pragma unroll
    for (int i = 0; i < kMaxMergePerThread; ++i) {
      const int o = threadIdx.x + i * threads;
      if (o < kMaxRows * 32) {
        for (int c = 0; c < round_chunks; ++c) {
          const float p = merge_from[c * kMaxRows * 32 + o];
          totals[i] = (q == 0 && c == 0) ? p : totals[i] + p;
        }
      }
    }
  }
  cpAsyncWait<0>();

#pragma unroll
  for (int i = 0; i < kMaxMergePerThread; ++i) {
    const int o = threadIdx.x + i * threads;
    const int r = o / 32;
    const int col = n0 + o % 32;
    if (o < kMaxRows * 32 && r < rows && o % 32 < g.features && col < a.n) {
      storeOutput(a, m0 + r, col, totals[i]);
    }
  }
}

}  // namespace
}  // namespace ree::repops::cuda
