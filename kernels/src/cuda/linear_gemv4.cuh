// The CUDA linear GEMV for 5 to 16 rows of x (and row blocks of 16 beyond;
// docs/repops-spec/linear.md): four output features per lane, so that each x value read from
// shared memory serves four fmas; same cp.async staging and ordered chunk merge as linear_gemv.cuh.
// Launched by linear_gemv_launch.cuh. Internal: included by linear.cu only (after
// linear_common.cuh); not a header of its own.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "chained_launch.cuh"
#include "linear_common.cuh"
#include "ree/kernels/reduce.h"
#include "shared_memory.cuh"

namespace ree::repops::cuda {
namespace {

// ==== GEMV, four features per lane ===============================================================
// With 8 or 16 rows of x the kernel of linear_gemv.cuh is bound by its shared-memory loads and its
// instruction count, not by the weight bytes: every fma of a lane needs an x value that no other
// fma of that lane uses. Here a lane owns four output features, so each x value it loads serves
// four fmas (and each weight value R of them). Measured on H100 (docs/benchmarks-history.md) it is
// the faster kernel from M = 5 on and the slower one below.
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

}  // namespace
}  // namespace ree::repops::cuda
