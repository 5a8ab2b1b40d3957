// CUDA linear layer (docs/repops-spec/linear.md): three kernels with the same bits.
//
// GEMV, M <= 4: a block owns up to 32 output features (one per lane; fewer with one row of x, so
// that every SM gets the same number of weight rows) and walks k in stages of 128-wide chunks;
// each warp computes one chunk of its rows for up to 4 rows of x, each lane running the chunk's
// fma chain in order. The stage's weights arrive in shared memory through a
// per-warp cp.async pipeline (coalesced 16-byte copies, each weight byte read once for all rows of
// x), and after each round one thread per output merges the warps' chunk partials into its running
// total, in chunk order, exactly as reduce.h's ChunkMerge.
//
// GEMV, 5 <= M <= 16 (and row blocks of 16 beyond): the same block and merge, but a lane owns four
// features and a warp four chunks, so that each x value read from shared memory serves four fmas.
//
// GEMM (large M): a 128x128 output tile per block, 8x8 outputs per thread, k tiles of 16 staged in
// shared memory as fp32 (double-buffered through registers). Every thread walks k in increasing
// order with one fma chain per output; at each 128 boundary the chunk partial is added to the
// output's total, which is kept in shared memory so that two blocks fit per SM. fp32 FFMA on CUDA
// cores only: tensor cores do not round like IEEE fma.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <mutex>

#include "chained_launch.cuh"
#include "common/dtype_dispatch.h"
#include "grid.cuh"
#include "ree/core/cuda_check.h"
#include "ree/kernels/linear.h"
#include "ree/kernels/reduce.h"
#include "shared_memory.cuh"

namespace ree::repops::cuda {
namespace {

enum BiasKind : int { kNoBias = 0, kBiasF32 = 1, kBiasBF16 = 2, kBiasF16 = 3 };

struct DeviceArgs {
  const void* x;
  const void* w;
  const void* bias;
  void* y;
  int64_t x_stride, w_stride, y_stride;  // elements
  int m, n, k;
  int bias_kind;
  int y_is_bf16;
  int w_is_constant;  // LinearArgs::w_is_constant
  int accumulate;     // LinearArgs::accumulate
};

__device__ __forceinline__ float loadBias(const DeviceArgs& a, int col) {
  switch (a.bias_kind) {
    case kBiasF32:
      return static_cast<const float*>(a.bias)[col];
    case kBiasBF16:
      return toFloat(static_cast<const bf16_t*>(a.bias)[col]);
    case kBiasF16:
      return toFloat(static_cast<const f16_t*>(a.bias)[col]);
  }
  return 0.0f;
}

// The output of (row, col) from its merged dot: bias, NaN canonicalisation, output rounding.
__device__ __forceinline__ void storeOutput(const DeviceArgs& a, int row, int col, float dot) {
  bool has_bias = a.bias_kind != kNoBias;
  float value = detail::linearFinish(dot, has_bias, has_bias ? loadBias(a, col) : 0.0f);
  int64_t index = static_cast<int64_t>(row) * a.y_stride + col;
  if (a.y_is_bf16) {
    bf16_t* y = static_cast<bf16_t*>(a.y) + index;
    *y = a.accumulate ? toBF16(detail::linearAccumulate(toFloat(*y), toFloat(toBF16(value))))
                      : toBF16(value);
  } else {
    float* y = static_cast<float*>(a.y) + index;
    *y = a.accumulate ? detail::linearAccumulate(*y, value) : value;
  }
}

// ---- 8 consecutive elements as fp32 (exact conversions)
// ------------------------------------------
__device__ __forceinline__ void unpack8(const uint4& raw, const bf16_t*, float out[8]) {
  const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {  // little endian: element 2i is the low half
    out[2 * i] = bitsFloat(words[i] << 16);
    out[2 * i + 1] = bitsFloat(words[i] & 0xffff0000u);
  }
}

__device__ __forceinline__ void unpack8(const uint4& raw, const f16_t*, float out[8]) {
  const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    out[2 * i] = toFloat(f16_t{static_cast<uint16_t>(words[i] & 0xffffu)});
    out[2 * i + 1] = toFloat(f16_t{static_cast<uint16_t>(words[i] >> 16)});
  }
}

// From shared or global memory through a generic pointer (16-byte aligned).
template <typename T>
__device__ __forceinline__ void load8(const T* p, float out[8]) {
  unpack8(*reinterpret_cast<const uint4*>(p), p, out);
}
__device__ __forceinline__ void load8(const float* p, float out[8]) {
  float4 lo = *reinterpret_cast<const float4*>(p);
  float4 hi = *reinterpret_cast<const float4*>(p + 4);
  out[0] = lo.x, out[1] = lo.y, out[2] = lo.z, out[3] = lo.w;
  out[4] = hi.x, out[5] = hi.y, out[6] = hi.z, out[7] = hi.w;
}

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

// ==== GEMV, four features per lane ===============================================================
// With 8 or 16 rows of x the kernel above is bound by its shared-memory loads and its instruction
// count, not by the weight bytes: every fma of a lane needs an x value that no other fma of that
// lane uses. Here a lane owns four output features, so each x value it loads serves four fmas
// (and each weight value R of them). Measured on H100 (docs/benchmarks-history.md) it is the faster
// kernel from M = 5 on and the slower one below.
//
// A block owns 32 output features and W warps (1-8, chosen per launch). The 32 lanes of a warp
// are four chunk groups of eight lanes (lane = 8 g + q): group g of warp w computes chunk
// 4 (W r + w) + g of round r, and lane q of the group computes features q, q + 8, q + 16 and
// q + 24 of the block for all R rows of x, each one fma chain in k order as reduce.h requires.
// The stages of the warp's chunks (4 chunks x 32 feature rows x 32 bytes of weights, plus the
// matching x segments) arrive through the warp's own cp.async ring; each lane issues its copies
// from addresses worked out once (Gemv4CopyPlan). After each round the four partials of every
// warp go to shared memory, the block synchronises, and the thread that owns output (m, n) adds
// the round's 4 W partials to its running total in chunk order, exactly as reduce.h's ChunkMerge.
constexpr int kGemv4Features = 32;  // output features per block
constexpr int kGemv4Groups = 4;     // chunk groups per warp
constexpr int kGemv4LaneFeatures = kGemv4Features / 8;
constexpr int kGemv4MaxWarps = 8;

template <typename TW, typename TX, int kRows>
struct Gemv4Layout {
  // 32 bytes of each weight row per stage: the stages of eight warps fit in shared memory with
  // 8 or 16 rows of x. (64- and 128-byte rows measured slower at M = 8: fewer warps per block.)
  static constexpr int kRowBytes = 32;
  static constexpr int kPieces = kRowBytes / 16;  // 16-byte pieces per weight row
  static constexpr int kStageK = kRowBytes / static_cast<int>(sizeof(TW));
  static constexpr int kStagesPerChunk = kReduceChunk / kStageK;
  static constexpr int kWGroupBytes = kGemv4Features * kRowBytes;
  static constexpr int kWBytes = kGemv4Groups * kWGroupBytes;
  static constexpr int kXRowBytes = kStageK * static_cast<int>(sizeof(TX));
  static constexpr int kXPieces = kXRowBytes / 16;
  // +16: the four groups' x segments start in different banks.
  static constexpr int kXGroupBytes = kRows * kXRowBytes + 16;
  static constexpr int kStageBytes = kWBytes + kGemv4Groups * kXGroupBytes;
  // cp.async stages per warp. Measured side by side on an H100 against three stages (the earlier
  // choice; docs/benchmarks-history.md): with 16 rows a warp's stages and partials are large (33 KB
  // with fp32 x), and with three stages the grid often fits the GPU at once only as one-warp
  // blocks; two stages let twice the warps in: 9-16 rows of fp32 x 21-48% faster on five of six LLM
  // shapes (6% slower at N = 28672), bf16 x 1-5% faster. With 8 rows, four stages keep more
  // weight bytes in flight: 5-8 rows 17-25% faster on the fused gate/up projection (N = 28672)
  // and, with bf16 x, on 4096 x 14336; 15-19% slower with fp32 x on 4096 x 14336 and 4096 x 6144;
  // within 6% elsewhere. Over one Llama-3-8B layer's four projections (q|k|v, o, gate|up, down)
  // 10-13% faster.
  static constexpr int kRing = kRows >= 16 ? 2 : 4;
  static constexpr int kWarpBytes = kRing * kStageBytes;
  // Partials of one chunk: kRows x 32 floats, +8 so the four groups of a warp store to
  // different banks.
  static constexpr int kPartialStride = kRows * kGemv4Features + 8;
  static constexpr int sharedBytes(int warps) {
    return warps * kWarpBytes + warps * kGemv4Groups * kPartialStride * 4;
  }
  static_assert(kXRowBytes % 16 == 0 && kStageBytes % 16 == 0, "16-byte aligned stages");
};

// Piece p of weight row n of a group is stored at piece p ^ swizzle(n): the eight lanes of a group
// read rows q + 8 f (q = 0..7) at once, and without the swizzle those would share banks.
template <int kPieces>
__device__ __forceinline__ int gemv4Piece(int n, int p) {
  return p ^ ((n / (8 / kPieces)) & (kPieces - 1));
}

// E elements of x from shared memory as fp32 (E * sizeof(T) is 8, 16 or 32 bytes).
template <int E>
__device__ __forceinline__ void gemv4ReadX(const float* p, float out[E]) {
#pragma unroll
  for (int i = 0; i < E; i += 4) {
    float4 v = *reinterpret_cast<const float4*>(p + i);
    out[i] = v.x, out[i + 1] = v.y, out[i + 2] = v.z, out[i + 3] = v.w;
  }
}
template <int E, typename T>
__device__ __forceinline__ void gemv4ReadX(const T* p, float out[E]) {
  if constexpr (E == 8) {
    unpack8(*reinterpret_cast<const uint4*>(p), p, out);
  } else {
    static_assert(E == 4, "4 or 8 elements");
    uint2 v = *reinterpret_cast<const uint2*>(p);
    uint4 wide = make_uint4(v.x, v.y, 0u, 0u);
    float eight[8];
    unpack8(wide, p, eight);
#pragma unroll
    for (int i = 0; i < 4; ++i)
      out[i] = eight[i];
  }
}

// One 16-byte piece of weights from shared memory as fp32.
template <typename T>
__device__ __forceinline__ void gemv4ReadW(const unsigned char* p, float out[16 / sizeof(T)]) {
  if constexpr (sizeof(T) == 4) {
    float4 v = *reinterpret_cast<const float4*>(p);
    out[0] = v.x, out[1] = v.y, out[2] = v.z, out[3] = v.w;
  } else {
    unpack8(*reinterpret_cast<const uint4*>(p), reinterpret_cast<const T*>(p), out);
  }
}

struct Gemv4Shape {
  int warps;     // W
  int n_chunks;  // ceil(K / 128)
  int rounds;    // ceil(n_chunks / (4 W))
};

// Chunk of group g of warp `warp` in round r.
__device__ __forceinline__ int gemv4Chunk(const Gemv4Shape& s, int round, int warp, int g) {
  return (round * s.warps + warp) * kGemv4Groups + g;
}

// This lane's share of every stage's cp.async copies, worked out once per block so that issuing a
// stage costs a few integer operations per 16-byte copy. A stage of round r, part `part` starts at
// k0 = 4 (W r + w) 128 + part * kStageK; group g's k range starts 128 g further.
//
// Weights: 4 groups x 32 rows x kPieces pieces; copy i of a lane is group i / kPieces, row
// (32 / kPieces) (i % kPieces) + lane / kPieces, piece lane % kPieces (consecutive lanes copy the
// consecutive pieces of a row). x: 4 groups x kRows rows x kXPieces pieces; copy i of a lane is
// piece 32 i + lane of that list.
template <typename TW, typename TX, int kRows>
struct Gemv4CopyPlan {
  using L = Gemv4Layout<TW, TX, kRows>;
  static constexpr int kWElems = 16 / sizeof(TW);
  static constexpr int kXElems = 16 / sizeof(TX);
  static constexpr int kXCopies = kGemv4Groups * kRows * L::kXPieces;
  static constexpr int kXPerLane = (kXCopies + 31) / 32;

  const TW* w_row[L::kPieces];  // this lane's weight rows at its piece's first element
  int w_end[L::kPieces];        // K - (the piece's first k in a stage row), 0 past N
  int w_dst[L::kPieces];        // byte offset in a group's weight tile
  const TX* x_row[kXPerLane];   // x row at the piece's first element of group g's range
  int x_end[kXPerLane];         // K - (128 g + the piece's first k), <= 0 when not copied
  int x_dst[kXPerLane];         // byte offset in the stage

  __device__ __forceinline__ void init(const DeviceArgs& a, int n0, int m0, int rows, int lane) {
    const TW* w = static_cast<const TW*>(a.w);
    const int p = lane % L::kPieces;
#pragma unroll
    for (int j = 0; j < L::kPieces; ++j) {
      const int row = (kGemv4Features / L::kPieces) * j + lane / L::kPieces;
      const bool ok = n0 + row < a.n;
      w_row[j] = w + static_cast<int64_t>(ok ? n0 + row : 0) * a.w_stride + p * kWElems;
      w_end[j] = ok ? a.k - p * kWElems : 0;
      w_dst[j] = row * L::kRowBytes + gemv4Piece<L::kPieces>(row, p) * 16;
    }
    const TX* x = static_cast<const TX*>(a.x);
#pragma unroll
    for (int i = 0; i < kXPerLane; ++i) {
      const int piece = 32 * i + lane;
      const int g = piece / (kRows * L::kXPieces);
      const int r = (piece / L::kXPieces) % kRows;
      const int col = piece % L::kXPieces;
      const bool ok = piece < kXCopies && r < rows;
      const int k = g * kReduceChunk + col * kXElems;
      x_row[i] = x + static_cast<int64_t>(ok ? m0 + r : 0) * a.x_stride + (ok ? k : 0);
      x_end[i] = ok ? a.k - k : 0;
      x_dst[i] = L::kWBytes + g * L::kXGroupBytes + r * L::kXRowBytes + col * 16;
    }
  }

  // Bytes of a copy whose k range starts `end` elements before K (0..16).
  template <int kElems, int kSize>
  static __device__ __forceinline__ int bytes(int end) {
    return (end <= 0 ? 0 : (end >= kElems ? kElems : end)) * kSize;
  }

  __device__ __forceinline__ void loadWeights(int k0, unsigned char* slot) const {
#pragma unroll
    for (int g = 0; g < kGemv4Groups; ++g) {
      const int k = k0 + g * kReduceChunk;
#pragma unroll
      for (int j = 0; j < L::kPieces; ++j) {
        const int n = bytes<kWElems, sizeof(TW)>(w_end[j] - k);
        cpAsync16(slot + g * L::kWGroupBytes + w_dst[j], n ? w_row[j] + k : w_row[j], n);
      }
    }
  }

  __device__ __forceinline__ void loadX(int k0, unsigned char* slot) const {
#pragma unroll
    for (int i = 0; i < kXPerLane; ++i) {
      if (kXCopies % 32 == 0 || 32 * i + static_cast<int>(threadIdx.x % 32) < kXCopies) {
        const int n = bytes<kXElems, sizeof(TX)>(x_end[i] - k0);
        cpAsync16(slot + x_dst[i], n ? x_row[i] + k0 : x_row[i], n);
      }
    }
  }
};

// First k of stage t of warp `warp` (round t / stages, part t % stages), group 0.
template <typename TW, typename TX, int kRows>
__device__ __forceinline__ int gemv4StageK0(const Gemv4Shape& s, int warp, int t) {
  using L = Gemv4Layout<TW, TX, kRows>;
  const int round = t / L::kStagesPerChunk;
  const int part = t % L::kStagesPerChunk;
  return gemv4Chunk(s, round, warp, 0) * kReduceChunk + part * L::kStageK;
}

template <typename TW, typename TX, int kRows>
__global__ void __launch_bounds__(kGemv4MaxWarps * 32) gemv4Kernel(DeviceArgs a, Gemv4Shape s) {
  using L = Gemv4Layout<TW, TX, kRows>;
  constexpr int F = kGemv4LaneFeatures;
  constexpr int kWElems = 16 / sizeof(TW);  // weights per 16-byte piece
  extern __shared__ __align__(16) unsigned char shared[];
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int g = lane / 8;  // chunk group
  const int q = lane % 8;  // features q + 8 f
  const int threads = s.warps * 32;
  const int n0 = blockIdx.x * kGemv4Features;
  const int m0 = blockIdx.y * kRows;
  const int rows = min(kRows, a.m - m0);
  unsigned char* ring = shared + warp * L::kWarpBytes;
  float* partials = reinterpret_cast<float*>(shared + s.warps * L::kWarpBytes);

  // This warp's stages: every round in which its group 0 has a chunk (a prefix of the rounds).
  const int first = warp * kGemv4Groups;
  const int per_round = s.warps * kGemv4Groups;
  const int my_rounds = first < s.n_chunks ? (s.n_chunks - first + per_round - 1) / per_round : 0;
  const int my_stages = my_rounds * L::kStagesPerChunk;

  // Constant weights: the first stages are requested before waiting for the predecessor (see
  // gemvKernel). cp.async groups complete in order, so stage t is complete after group t.
  Gemv4CopyPlan<TW, TX, kRows> plan;
  plan.init(a, n0, m0, rows, lane);
  const bool early_weights = a.w_is_constant != 0;
  if (early_weights) {
#pragma unroll
    for (int t = 0; t < L::kRing - 1; ++t) {
      if (t < my_stages) {
        plan.loadWeights(gemv4StageK0<TW, TX, kRows>(s, warp, t), ring + t * L::kStageBytes);
      }
    }
  }
  waitForPredecessor();
  allowSuccessorLaunch();
#pragma unroll
  for (int t = 0; t < L::kRing - 1; ++t) {
    if (t < my_stages) {
      unsigned char* slot = ring + t * L::kStageBytes;
      const int k0 = gemv4StageK0<TW, TX, kRows>(s, warp, t);
      if (!early_weights) plan.loadWeights(k0, slot);
      plan.loadX(k0, slot);
    }
    cpAsyncCommit();
  }

  // Outputs (m, n0 + j) merged by this thread: o = tid + i * threads, m = o / 32, j = o % 32.
  constexpr int kMaxMergePerThread = kRows * kGemv4Features;  // W = 1
  const int merge_count = (kRows * kGemv4Features + threads - 1) / threads;
  float totals[kMaxMergePerThread > 16 ? 16 : kMaxMergePerThread];
  static_assert(kRows * kGemv4Features <= 16 * 32, "a one-warp block merges 16 outputs/thread");
#pragma unroll
  for (int i = 0; i < (kMaxMergePerThread > 16 ? 16 : kMaxMergePerThread); ++i)
    totals[i] = -0.0f;  // -0 + p == p for every p: the first merge is total = p_0

  for (int round = 0; round < s.rounds; ++round) {
    const int chunk = gemv4Chunk(s, round, warp, g);
    const bool active = chunk < s.n_chunks;  // uniform in the group
    float partial[F][kRows];
#pragma unroll
    for (int f = 0; f < F; ++f) {
#pragma unroll
      for (int r = 0; r < kRows; ++r)
        partial[f][r] = 0.0f;
    }
    if (round < my_rounds) {
      for (int part = 0; part < L::kStagesPerChunk; ++part) {
        const int t = round * L::kStagesPerChunk + part;
        cpAsyncWait<L::kRing - 2>();
        __syncwarp();  // stage t visible to all lanes; slot (t - 1) % ring no longer read
        {
          const int next = t + L::kRing - 1;
          if (next < my_stages) {
            unsigned char* slot = ring + (next % L::kRing) * L::kStageBytes;
            const int k0 = gemv4StageK0<TW, TX, kRows>(s, warp, next);
            plan.loadWeights(k0, slot);
            plan.loadX(k0, slot);
          }
          cpAsyncCommit();
        }
        if (!active) continue;
        const unsigned char* slot = ring + (t % L::kRing) * L::kStageBytes;
        const unsigned char* w_group = slot + g * L::kWGroupBytes;
        const TX* x_group = reinterpret_cast<const TX*>(slot + L::kWBytes + g * L::kXGroupBytes);
        const int valid = min(L::kStageK, a.k - (chunk * kReduceChunk + part * L::kStageK));
        if (valid == L::kStageK) {
#pragma unroll
          for (int p = 0; p < L::kPieces; ++p) {
            float w[F][kWElems];
#pragma unroll
            for (int f = 0; f < F; ++f) {
              const int n = q + 8 * f;
              gemv4ReadW<TW>(w_group + n * L::kRowBytes + gemv4Piece<L::kPieces>(n, p) * 16, w[f]);
            }
            // Every row, also those past M: their x is zero-filled and their outputs are not
            // stored; a branch per row would cost more than the fmas.
#pragma unroll
            for (int r = 0; r < kRows; ++r) {
              float xr[kWElems];
              gemv4ReadX<kWElems>(x_group + r * L::kStageK + p * kWElems, xr);
#pragma unroll
              for (int e = 0; e < kWElems; ++e) {
#pragma unroll
                for (int f = 0; f < F; ++f)
                  partial[f][r] = fmaF32(xr[e], w[f][e], partial[f][r]);
              }
            }
          }
        } else {  // the last chunk's tail: only its `valid` (possibly <= 0) elements
          for (int j = 0; j < valid; ++j) {
            const int p = j / kWElems;
            const int e = j % kWElems;
#pragma unroll
            for (int f = 0; f < F; ++f) {
              const int n = q + 8 * f;
              const TW* piece = reinterpret_cast<const TW*>(w_group + n * L::kRowBytes +
                                                            gemv4Piece<L::kPieces>(n, p) * 16);
              const float wj = loadFloat(piece[e]);
#pragma unroll
              for (int r = 0; r < kRows; ++r) {
                if (r < rows)
                  partial[f][r] = fmaF32(loadFloat(x_group[r * L::kStageK + j]), wj, partial[f][r]);
              }
            }
          }
        }
      }
    }
    if (active) {
      float* mine = partials + (warp * kGemv4Groups + g) * L::kPartialStride;
#pragma unroll
      for (int f = 0; f < F; ++f) {
#pragma unroll
        for (int r = 0; r < kRows; ++r)
          mine[r * kGemv4Features + q + 8 * f] = partial[f][r];
      }
    }
    __syncthreads();
    // Ordered merge of this round's chunks (chunk c of the round is at partial slot c).
    const int round_chunks = min(per_round, s.n_chunks - round * per_round);
#pragma unroll
    for (int i = 0; i < (kMaxMergePerThread > 16 ? 16 : kMaxMergePerThread); ++i) {
      const int o = threadIdx.x + i * threads;
      if (i < merge_count && o < kRows * kGemv4Features) {
        for (int c = 0; c < round_chunks; ++c)
          totals[i] = totals[i] + partials[c * L::kPartialStride + o];
      }
    }
    __syncthreads();  // the next round overwrites the partials
  }
  cpAsyncWait<0>();

#pragma unroll
  for (int i = 0; i < (kMaxMergePerThread > 16 ? 16 : kMaxMergePerThread); ++i) {
    const int o = threadIdx.x + i * threads;
    const int r = o / kGemv4Features;
    const int col = n0 + o % kGemv4Features;
    if (i < merge_count && o < kRows * kGemv4Features && r < rows && col < a.n)
      storeOutput(a, m0 + r, col, totals[i]);
  }
}

// Per-device facts the launch shape depends on (looked up once per device).
struct GemvDevice {
  int sms = 0;
  int smem_per_sm = 0;
  int smem_optin = 0;
};

Status gemvDevice(GemvDevice* out) {
  int device = 0;
  REE_CUDA_CHECK(cudaGetDevice(&device));
  static std::mutex mutex;
  static GemvDevice cache[64];
  std::lock_guard<std::mutex> lock(mutex);
  GemvDevice* entry = device < 64 ? &cache[device] : nullptr;
  if (entry != nullptr && entry->sms > 0) {
    *out = *entry;
    return Status::kSuccess;
  }
  GemvDevice d;
  REE_CUDA_CHECK(cudaDeviceGetAttribute(&d.sms, cudaDevAttrMultiProcessorCount, device));
  REE_CUDA_CHECK(
      cudaDeviceGetAttribute(&d.smem_per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device));
  REE_CUDA_CHECK(
      cudaDeviceGetAttribute(&d.smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  if (entry != nullptr) *entry = d;
  *out = d;
  return Status::kSuccess;
}

// The most warps per block, from max_warps down to min_warps (halving), that still fits every
// tile on the GPU at once (one wave); when none does, two warps (short rounds, many blocks per
// SM). `shared_bytes(w)` is a block's shared memory with w warps.
template <typename SharedBytes>
Status chooseGemvWarps(const GemvDevice& dev, long long tiles, int max_warps, int min_warps,
                       SharedBytes shared_bytes, int* warps, int* bytes) {
  *warps = 2;
  for (int w = max_warps; w >= min_warps; w /= 2) {
    const int b = shared_bytes(w);
    if (b > dev.smem_optin) continue;
    const long long per_sm = dev.smem_per_sm / (b + 1024);  // + the per-block reservation
    if (per_sm >= 1 && tiles <= per_sm * dev.sms) {
      *warps = w;
      break;
    }
  }
  *bytes = shared_bytes(*warps);
  if (*bytes > dev.smem_optin) {
    return REE_FAIL(Status::kUnsupported,
                    "linear: the GEMV kernel needs %d bytes of shared memory per block; the device "
                    "allows %d",
                    *bytes, dev.smem_optin);
  }
  return Status::kSuccess;
}

// Warps and output features per block of the one-feature-per-lane GEMV. Every SM streams the
// weight rows of the blocks it holds, so a launch lasts about as long as its busiest SM takes:
// with T tiles of F features spread over S SMs, ceil(T / S) * F weight rows. With F = 32 some LLM
// shapes leave SMs idle for a third of the launch (N = 6144: 192 tiles, 60 SMs with two and 72
// with one; N = 14336: 448 tiles, four or three per SM). A smaller F that evens the SMs out costs
// only idle lanes, which a bandwidth-bound kernel can afford. Among the tilings whose blocks all
// fit on the GPU at once (one wave), the first in the order (most warps, most features) is kept
// unless a later one puts at least 2% fewer rows on the busiest SM. When none fits in one wave:
// 32 features and two warps (short rounds, many blocks per SM), as for the four-feature kernel.
struct GemvTiling {
  int warps = 2;
  int features = kGemvRowsPerBlock;
  int bytes = 0;
};

template <typename SharedBytes>
Status chooseGemvTiling(const GemvDevice& dev, int n, long long row_blocks, int min_features,
                        bool cap_blocks_per_sm, SharedBytes shared_bytes, GemvTiling* out) {
  GemvTiling best;
  long long best_rows = -1;
  for (int w = kGemvMaxWarps; w >= 2; w /= 2) {
    const int b = shared_bytes(w);
    if (b > dev.smem_optin) continue;
    const long long per_sm =
        std::min<long long>(dev.smem_per_sm / (b + 1024), 2048 / (32 * w));  // + reservation
    for (int f = kGemvRowsPerBlock; f >= min_features; --f) {
      const long long tiles = static_cast<long long>(divUp(n, f)) * row_blocks;
      if (tiles > per_sm * dev.sms) continue;
      const long long rows = static_cast<long long>(divUp(tiles, dev.sms)) * f;
      if (best_rows < 0 || rows * 50 < best_rows * 49) {
        best_rows = rows;
        best.warps = w;
        best.features = f;
      }
    }
  }
  best.bytes = shared_bytes(best.warps);
  if (best.bytes > dev.smem_optin) {
    return REE_FAIL(Status::kUnsupported,
                    "linear: the GEMV kernel needs %d bytes of shared memory per block; the device "
                    "allows %d",
                    best.bytes, dev.smem_optin);
  }
  // Blocks per SM capped at the even share ceil(T / S) by asking for more shared memory than the
  // kernel uses: where more blocks fit, the hardware may give some SMs more blocks than others
  // (N = 6144 with bf16 x: 256 blocks, three fit per SM), and the launch lasts as long as its
  // busiest SM. H100, one row of x, side by side: 4096 x 14336 48.4 -> 44.0 us, 4096 x 6144
  // 21.4 -> 19.3 us (constant weights), no shape slower (docs/benchmarks-history.md).
  if (cap_blocks_per_sm && best_rows >= 0) {
    const long long tiles = static_cast<long long>(divUp(n, best.features)) * row_blocks;
    const long long share = static_cast<long long>(divUp(tiles, dev.sms));
    // Rounded down to 128 bytes so that the allocation granularity cannot push a block past the
    // share; + 1 KiB: the per-block reservation.
    const long long padded = (dev.smem_per_sm / share - 1024) / 128 * 128;
    if (padded > best.bytes && padded <= dev.smem_optin &&
        dev.smem_per_sm / (padded + 1024) == share) {
      best.bytes = static_cast<int>(padded);
    }
  }
  *out = best;
  return Status::kSuccess;
}

template <typename TW, typename TX, int kMaxRows>
Status launchGemv(const DeviceArgs& a, cudaStream_t stream) {
  using L = GemvLayout<TW, TX, kMaxRows>;
  auto kernel = gemvKernel<TW, TX, kMaxRows>;
  GemvDevice dev;
  REE_RETURN_IF_ERROR(gemvDevice(&dev));
  REE_RETURN_IF_ERROR(allowFullSharedMemory(kernel));
  // Balanced tiles for one row of x only: with two to four rows the kernel is also bound by its
  // fmas, and idle lanes cost more than the balance gains (H100: 4096 x 6144, four rows of x,
  // 33.5 us with 32 features per block against 36.1 us with 24).
  const int min_features = kMaxRows == 1 ? 8 : kGemvRowsPerBlock;
  GemvTiling tiling;
  REE_RETURN_IF_ERROR(chooseGemvTiling(dev, a.n, divUp(a.m, kMaxRows), min_features,
                                       /*cap_blocks_per_sm=*/kMaxRows == 1, L::sharedBytes,
                                       &tiling));
  const int warps = tiling.warps, bytes = tiling.bytes;
  GemvShape g;
  g.warps = warps;
  g.features = tiling.features;
  g.n_chunks = static_cast<int>(divUp(a.k, kReduceChunk));
  g.rounds = static_cast<int>(divUp(g.n_chunks, warps));
  dim3 grid(divUp(a.n, g.features), divUp(a.m, kMaxRows));
  launchChained(kernel, grid, warps * 32, bytes, stream, a, g);
  REE_CUDA_CHECK_LAUNCH();
  return Status::kSuccess;
}

template <typename TW, typename TX, int kRows>
Status launchGemv4(const DeviceArgs& a, cudaStream_t stream) {
  using L = Gemv4Layout<TW, TX, kRows>;
  auto kernel = gemv4Kernel<TW, TX, kRows>;
  GemvDevice dev;
  REE_RETURN_IF_ERROR(gemvDevice(&dev));
  REE_RETURN_IF_ERROR(allowFullSharedMemory(kernel));
  const long long tiles = static_cast<long long>(divUp(a.n, kGemv4Features)) * divUp(a.m, kRows);
  int warps = 0, bytes = 0;
  REE_RETURN_IF_ERROR(
      chooseGemvWarps(dev, tiles, kGemv4MaxWarps, 1, L::sharedBytes, &warps, &bytes));
  Gemv4Shape s;
  s.warps = warps;
  s.n_chunks = static_cast<int>(divUp(a.k, kReduceChunk));
  s.rounds = static_cast<int>(divUp(s.n_chunks, warps * kGemv4Groups));
  dim3 grid(divUp(a.n, kGemv4Features), divUp(a.m, kRows));
  launchChained(kernel, grid, warps * 32, bytes, stream, a, s);
  REE_CUDA_CHECK_LAUNCH();
  return Status::kSuccess;
}

template <typename TW, typename TX>
Status dispatchGemv(const DeviceArgs& a, cudaStream_t stream) {
  // Up to four rows of x the one-feature-per-lane kernel is the faster one (measured on H100,
  // docs/benchmarks-history.md); from five rows on, the four-features-per-lane kernel.
  if (a.m <= 1) return launchGemv<TW, TX, 1>(a, stream);
  if (a.m <= 2) return launchGemv<TW, TX, 2>(a, stream);
  if (a.m <= 4) return launchGemv<TW, TX, 4>(a, stream);
  if (a.m <= 8) return launchGemv4<TW, TX, 8>(a, stream);
  return launchGemv4<TW, TX, 16>(a, stream);  // M > 16: several row blocks (grid.y)
}

// ==== GEMM =======================================================================================
// Prefill shapes are bound by FFMA issue, so the kernel is organised around keeping four warps
// per SM sub-partition busy: 8 x 8 outputs per thread in registers (the running chunk's fma
// chains), and the per-output totals of the finished chunks in shared memory, not in registers.
// With both in registers a thread needed ~205 registers and an SM held one block (two warps per
// sub-partition, too few to hide the shared-memory loads of the inner loop); the totals are touched
// once per 128-wide chunk (16 float4 loads and stores per thread for 8192 fmas), so keeping them in
// shared memory costs little and lets two blocks share an SM.
constexpr int kTileM = 128;
constexpr int kTileN = 128;
constexpr int kTileK = 16;  // divides kReduceChunk: chunk boundaries fall on tile boundaries
constexpr int kGemmThreads = 256;
static_assert(kReduceChunk % kTileK == 0, "k tiles must not straddle chunks");

struct GemmShared {
  float x_tile[2][kTileK][kTileM];  // fp32 staging, double-buffered
  float w_tile[2][kTileK][kTileN];
  float4 totals[16][kGemmThreads];  // thread t's 64 chunk totals: totals[q][t], q = 0..15
};
constexpr int kGemmSharedBytes = static_cast<int>(sizeof(GemmShared));

// 8 consecutive k of one row as loaded from global memory, converted to fp32 only when the tile
// is written to shared memory. Converting right after the load made every thread wait for its
// loads at the top of each tile (ncu: long-scoreboard stalls), where the raw words can wait in
// registers while the tile before is computed.
template <typename T>
struct Raw8 {  // 16-bit types: 8 elements in 16 bytes
  uint4 words;
};
template <>
struct Raw8<float> {
  float4 lo, hi;
};

// Positions past k hold `pad`: x pads with -0 and w with +0, so a padded step computes
// fma(-0, +0, p) = -0 + p = p exactly, for every p including -0 (a +0 product would turn a -0
// partial into +0). Rows past the matrix load +0 (never stored).
template <typename T>
__device__ __forceinline__ void gemmLoadRaw8(const T* row, bool row_valid, int k, int k_total,
                                             bool vector_ok, bool pad_negative, Raw8<T>& out) {
  if (row_valid && vector_ok && k + 8 <= k_total) {
    out.words = __ldg(reinterpret_cast<const uint4*>(row + k));
    return;
  }
  const uint32_t pad = pad_negative ? 0x8000u : 0u;  // -0 / +0 in bf16 and in f16
  uint32_t h[8];
#pragma unroll
  for (int e = 0; e < 8; ++e)
    h[e] = !row_valid ? 0u : (k + e < k_total) ? row[k + e].bits : pad;
  out.words =
      make_uint4(h[0] | h[1] << 16, h[2] | h[3] << 16, h[4] | h[5] << 16, h[6] | h[7] << 16);
}
__device__ __forceinline__ void gemmLoadRaw8(const float* row, bool row_valid, int k, int k_total,
                                             bool vector_ok, bool pad_negative, Raw8<float>& out) {
  if (row_valid && vector_ok && k + 8 <= k_total) {
    out.lo = __ldg(reinterpret_cast<const float4*>(row + k));
    out.hi = __ldg(reinterpret_cast<const float4*>(row + k + 4));
    return;
  }
  const float pad = pad_negative ? -0.0f : 0.0f;
  float v[8];
#pragma unroll
  for (int e = 0; e < 8; ++e)
    v[e] = !row_valid ? 0.0f : (k + e < k_total) ? row[k + e] : pad;
  out.lo = make_float4(v[0], v[1], v[2], v[3]);
  out.hi = make_float4(v[4], v[5], v[6], v[7]);
}

template <typename T>
__device__ __forceinline__ void gemmUnpack8(const Raw8<T>& raw, float out[8]) {
  unpack8(raw.words, static_cast<const T*>(nullptr), out);
}
__device__ __forceinline__ void gemmUnpack8(const Raw8<float>& raw, float out[8]) {
  out[0] = raw.lo.x, out[1] = raw.lo.y, out[2] = raw.lo.z, out[3] = raw.lo.w;
  out[4] = raw.hi.x, out[5] = raw.hi.y, out[6] = raw.hi.z, out[7] = raw.hi.w;
}

template <typename TW, typename TX>
__global__ void __launch_bounds__(kGemmThreads, 2)
    gemmKernel(DeviceArgs a, int x_vector_ok, int w_vector_ok) {
  extern __shared__ __align__(16) unsigned char gemm_shared_bytes[];
  GemmShared& shared = *reinterpret_cast<GemmShared*>(gemm_shared_bytes);

  const int tid = threadIdx.x;
  const int tx = tid % 16;  // n fragment: tx*4 + {0..3} and 64 + tx*4 + {0..3}
  const int ty = tid / 16;  // m fragment: ty*4 + {0..3} and 64 + ty*4 + {0..3}
  const int n0 = blockIdx.x * kTileN;
  const int m0 = blockIdx.y * kTileM;

  // Staging role: one row of the tile (x row or w row) and one half of the 16 k.
  const int load_row = tid % 128;
  const int load_k = (tid / 128) * 8;
  const bool x_row_valid = m0 + load_row < a.m;
  const bool w_row_valid = n0 + load_row < a.n;
  const TX* x_row = static_cast<const TX*>(a.x) +
                    static_cast<int64_t>(x_row_valid ? m0 + load_row : 0) * a.x_stride;
  const TW* w_row = static_cast<const TW*>(a.w) +
                    static_cast<int64_t>(w_row_valid ? n0 + load_row : 0) * a.w_stride;

  Raw8<TX> x_raw;
  Raw8<TW> w_raw;
  auto loadTile = [&](int k0) {
    gemmLoadRaw8(x_row, x_row_valid, k0 + load_k, a.k, x_vector_ok != 0, true, x_raw);
    gemmLoadRaw8(w_row, w_row_valid, k0 + load_k, a.k, w_vector_ok != 0, false, w_raw);
  };
  auto storeTile = [&](int buffer) {
    float x_stage[8], w_stage[8];
    gemmUnpack8(x_raw, x_stage);
    gemmUnpack8(w_raw, w_stage);
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      shared.x_tile[buffer][load_k + e][load_row] = x_stage[e];
      shared.w_tile[buffer][load_k + e][load_row] = w_stage[e];
    }
  };

  float partial[8][8];
#pragma unroll
  for (int i = 0; i < 8; ++i) {
#pragma unroll
    for (int j = 0; j < 8; ++j)
      partial[i][j] = 0.0f;
  }

  const int tiles = (a.k + kTileK - 1) / kTileK;
  loadTile(0);
  storeTile(0);
  __syncthreads();
  bool first_chunk = true;
  for (int tile = 0; tile < tiles; ++tile) {
    const int buffer = tile & 1;
    if (tile + 1 < tiles) loadTile((tile + 1) * kTileK);
#pragma unroll
    for (int kk = 0; kk < kTileK; ++kk) {
      float4 a_lo = *reinterpret_cast<const float4*>(&shared.x_tile[buffer][kk][ty * 4]);
      float4 a_hi = *reinterpret_cast<const float4*>(&shared.x_tile[buffer][kk][64 + ty * 4]);
      float4 b_lo = *reinterpret_cast<const float4*>(&shared.w_tile[buffer][kk][tx * 4]);
      float4 b_hi = *reinterpret_cast<const float4*>(&shared.w_tile[buffer][kk][64 + tx * 4]);
      const float xa[8] = {a_lo.x, a_lo.y, a_lo.z, a_lo.w, a_hi.x, a_hi.y, a_hi.z, a_hi.w};
      const float wb[8] = {b_lo.x, b_lo.y, b_lo.z, b_lo.w, b_hi.x, b_hi.y, b_hi.z, b_hi.w};
#pragma unroll
      for (int i = 0; i < 8; ++i) {
#pragma unroll
        for (int j = 0; j < 8; ++j)
          partial[i][j] = fmaF32(xa[i], wb[j], partial[i][j]);
      }
    }
    const int k_end = (tile + 1) * kTileK;
    // End of a chunk that is not the last: total = total + partial, in chunk order. The first
    // chunk stores its partial as the total (-0 + p == p for every p, including -0 and NaN).
    if (k_end % kReduceChunk == 0 && k_end < a.k) {
#pragma unroll
      for (int q = 0; q < 16; ++q) {
        float* p = &partial[q / 2][(q % 2) * 4];
        float4 t;
        if (first_chunk) {
          t = make_float4(p[0], p[1], p[2], p[3]);
        } else {
          t = shared.totals[q][tid];
          t.x = t.x + p[0], t.y = t.y + p[1], t.z = t.z + p[2], t.w = t.w + p[3];
        }
        shared.totals[q][tid] = t;
        p[0] = p[1] = p[2] = p[3] = 0.0f;
      }
      first_chunk = false;
    }
    if (tile + 1 < tiles) storeTile(buffer ^ 1);
    __syncthreads();
  }

  // The last chunk's partial joins the total as the output's dot.
#pragma unroll
  for (int q = 0; q < 16; ++q) {
    float* p = &partial[q / 2][(q % 2) * 4];
    if (!first_chunk) {
      float4 t = shared.totals[q][tid];
      p[0] = t.x + p[0], p[1] = t.y + p[1], p[2] = t.z + p[2], p[3] = t.w + p[3];
    }
  }
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    int row = m0 + (i < 4 ? ty * 4 + i : 64 + ty * 4 + (i - 4));
    if (row >= a.m) continue;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      int col = n0 + (j < 4 ? tx * 4 + j : 64 + tx * 4 + (j - 4));
      if (col < a.n) storeOutput(a, row, col, partial[i][j]);
    }
  }
}

bool aligned16(const void* pointer, int64_t stride, int element_size) {
  return (reinterpret_cast<uintptr_t>(pointer) % 16 == 0) && (stride * element_size) % 16 == 0;
}

template <typename TW, typename TX>
Status launchGemm(const DeviceArgs& a, cudaStream_t stream) {
  auto kernel = gemmKernel<TW, TX>;
  REE_RETURN_IF_ERROR(allowFullSharedMemory(kernel));
  int x_vector_ok = aligned16(a.x, a.x_stride, sizeof(TX)) ? 1 : 0;
  int w_vector_ok = aligned16(a.w, a.w_stride, sizeof(TW)) ? 1 : 0;
  dim3 grid(divUp(a.n, kTileN), divUp(a.m, kTileM));
  kernel<<<grid, kGemmThreads, kGemmSharedBytes, stream>>>(a, x_vector_ok, w_vector_ok);
  REE_CUDA_CHECK_LAUNCH();
  return Status::kSuccess;
}

// Up to this many rows of x, kAuto runs the GEMV (row blocks of 16, launched together, each
// streaming the weights through L2) rather than the GEMM, whose 128 x 128 tiles leave most SMs
// idle at decode batch sizes: at M = 64 and N = 4096 the GEMM has 32 blocks for 132 SMs, and a
// batch-64 decode step of the Llama-3-8B shape was 9x a batch-16 one (H100). Both kernels give the
// same bits (the spec fixes every output's order; tested against the CPU). Measured crossover:
// bench_gpu_linear_bench's "batched decode" rows (docs/benchmarks.md).
constexpr int kAutoGemvMaxRows = 64;

template <typename TW, typename TX>
Status dispatchKernel(const DeviceArgs& a, LinearKernel kernel, cudaStream_t stream) {
  bool gemv_ok = aligned16(a.x, a.x_stride, sizeof(TX)) && aligned16(a.w, a.w_stride, sizeof(TW));
  if (kernel == LinearKernel::kGemv) {
    if (!gemv_ok) {
      return REE_FAIL(Status::kUnsupported,
                      "linear: the GEMV kernel needs 16-byte aligned x and w rows (pointer and "
                      "row stride in bytes)");
    }
    return dispatchGemv<TW, TX>(a, stream);
  }
  if (kernel == LinearKernel::kAuto && gemv_ok && a.m <= kAutoGemvMaxRows) {
    return dispatchGemv<TW, TX>(a, stream);
  }
  return launchGemm<TW, TX>(a, stream);
}

template <typename TW>
Status dispatchX(const DeviceArgs& a, DType x_dtype, LinearKernel kernel, cudaStream_t stream) {
  if (x_dtype == DType::kBF16) return dispatchKernel<TW, bf16_t>(a, kernel, stream);
  return dispatchKernel<TW, float>(a, kernel, stream);
}

}  // namespace

Status linearWithKernel(const LinearArgs& args, LinearKernel kernel, cudaStream_t stream) {
  REE_RETURN_IF_ERROR(validateLinearArgs(args));
  REE_CHECK_ARG(kernel == LinearKernel::kAuto || kernel == LinearKernel::kGemv ||
                    kernel == LinearKernel::kGemm,
                "linear: unknown kernel %d", static_cast<int>(kernel));
  if (args.m == 0) return Status::kSuccess;
  DeviceArgs a;
  a.x = args.x;
  a.w = args.w;
  a.bias = args.bias;
  a.y = args.y;
  a.x_stride = args.x_row_stride ? args.x_row_stride : args.k;
  a.w_stride = args.w_row_stride ? args.w_row_stride : args.k;
  a.y_stride = args.y_row_stride ? args.y_row_stride : args.n;
  a.m = static_cast<int>(args.m);
  a.n = static_cast<int>(args.n);
  a.k = static_cast<int>(args.k);
  a.bias_kind = kNoBias;
  if (args.bias) {
    a.bias_kind = args.bias_dtype == DType::kF32    ? kBiasF32
                  : args.bias_dtype == DType::kBF16 ? kBiasBF16
                                                    : kBiasF16;
  }
  a.y_is_bf16 = args.y_dtype == DType::kBF16 ? 1 : 0;
  a.w_is_constant = args.w_is_constant ? 1 : 0;
  a.accumulate = args.accumulate ? 1 : 0;
  return dispatchStorageType(args.w_dtype, "linear", [&](auto w_tag) {
    return dispatchX<decltype(w_tag)>(a, args.x_dtype, kernel, stream);
  });
}

Status linear(const LinearArgs& args, cudaStream_t stream) {
  return linearWithKernel(args, LinearKernel::kAuto, stream);
}

}  // namespace ree::repops::cuda
