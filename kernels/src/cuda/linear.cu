// CUDA linear layer (docs/repops-spec/linear.md): two kernels with the same bits.
//
// GEMV (small M): a block owns 32 output features (one per lane) and walks k in stages of four
// 128-wide chunks; warp w computes chunk 4s + w of its 32 rows for up to 16 rows of x, each lane
// running the chunk's fma chain in order. The stage's weights arrive in shared memory through a
// cp.async pipeline (coalesced 16-byte copies, each weight byte read once for all rows of x), and
// after each stage one thread per output merges the four chunk partials into its running total,
// in chunk order, exactly as reduce.h's ChunkMerge.
//
// GEMM (large M): a 128x128 output tile per block, 8x8 outputs per thread, k tiles of 16 staged in
// shared memory as fp32 (double-buffered through registers). Every thread walks k in increasing
// order with one fma chain per output; at each 128 boundary the chunk partial is added to the
// output's total. fp32 FFMA on CUDA cores only: tensor cores do not round like IEEE fma.
#include <cuda_runtime.h>

#include <cstdint>
#include <mutex>

#include "chained_launch.cuh"
#include "cuda_check.cuh"
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

// From global memory through the read-only path (16-byte aligned).
template <typename T>
__device__ __forceinline__ void ldg8(const T* p, float out[8]) {
  unpack8(__ldg(reinterpret_cast<const uint4*>(p)), p, out);
}
__device__ __forceinline__ void ldg8(const float* p, float out[8]) {
  float4 lo = __ldg(reinterpret_cast<const float4*>(p));
  float4 hi = __ldg(reinterpret_cast<const float4*>(p + 4));
  out[0] = lo.x, out[1] = lo.y, out[2] = lo.z, out[3] = lo.w;
  out[4] = hi.x, out[5] = hi.y, out[6] = hi.z, out[7] = hi.w;
}

// ==== GEMV =======================================================================================
// Decode shapes are bound by the weight bytes, so the kernel is organised around keeping enough of
// them in flight on every SM: a block owns 32 output features (lane l of every warp computes
// output n0 + l) and W warps (2, 4 or 8, chosen per launch so the grid fills the GPU in one wave
// where it can). Warp w computes chunks w, w + W, w + 2W, ... of its 32 outputs; each chunk
// arrives in shared memory through the warp's own cp.async ring (3-4 stages of kStageK k: the
// 32 weight row segments and the matching x segments), so warps never wait for each other to
// load. Lane l runs the chunk's fma chain for every row of x over row l of the stage. After each
// round of W chunks the block synchronises once and the thread that owns output (m, n) adds the
// round's W partials to its running total in chunk order, exactly as reduce.h's ChunkMerge.
constexpr int kGemvRowsPerBlock = 32;  // output features per block (one per lane)
constexpr int kGemvMaxWarps = 8;

template <typename TW, typename TX, int kMaxRows>
struct GemvLayout {
  static constexpr int kStagesPerChunk = sizeof(TW) == 4 ? 4 : 2;
  static constexpr int kStageK = kReduceChunk / kStagesPerChunk;  // 32 or 64: 128 bytes per row
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

// Issues the cp.async copies of the weights of this warp's stage `t` into `slot`.
template <typename TW, typename TX, int kMaxRows>
__device__ __forceinline__ void gemvLoadWeights(const DeviceArgs& a, const GemvShape& g, int n0,
                                                int warp, int lane, int t, unsigned char* slot) {
  using L = GemvLayout<TW, TX, kMaxRows>;
  const int k0 = gemvStageK0<TW, TX, kMaxRows>(g, warp, t);
  // 32 rows x 128 bytes, 8 pieces of 16 bytes per row; lane l copies pieces l, l+32, ...
  constexpr int kWElemsPerPiece = 16 / sizeof(TW);
  const TW* w = static_cast<const TW*>(a.w);
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int piece = i * 32 + lane;
    const int row = piece / 8;
    const int col = piece % 8;
    const int k = k0 + col * kWElemsPerPiece;
    int valid = a.k - k;
    valid = valid < 0 ? 0 : (valid > kWElemsPerPiece ? kWElemsPerPiece : valid);
    if (n0 + row >= a.n) valid = 0;
    const TW* src = valid ? w + static_cast<int64_t>(n0 + row) * a.w_stride + k : w;
    cpAsync16(slot + row * L::kWRowBytes + col * 16, src, valid * static_cast<int>(sizeof(TW)));
  }
}

// Issues the cp.async copies of the x segments (kMaxRows rows) of this warp's stage `t`.
template <typename TW, typename TX, int kMaxRows>
__device__ __forceinline__ void gemvLoadX(const DeviceArgs& a, const GemvShape& g, int m0, int rows,
                                          int warp, int lane, int t, unsigned char* slot) {
  using L = GemvLayout<TW, TX, kMaxRows>;
  const int k0 = gemvStageK0<TW, TX, kMaxRows>(g, warp, t);
  constexpr int kXElemsPerPiece = 16 / sizeof(TX);
  constexpr int kXPiecesPerRow = L::kXRowBytes / 16;
  const TX* x = static_cast<const TX*>(a.x);
  for (int piece = lane; piece < kMaxRows * kXPiecesPerRow; piece += 32) {
    const int r = piece / kXPiecesPerRow;
    const int col = piece % kXPiecesPerRow;
    const int k = k0 + col * kXElemsPerPiece;
    int valid = a.k - k;
    valid = valid < 0 ? 0 : (valid > kXElemsPerPiece ? kXElemsPerPiece : valid);
    if (r >= rows) valid = 0;
    const TX* src = valid ? x + static_cast<int64_t>(m0 + r) * a.x_stride + k : x;
    cpAsync16(slot + L::kWBytes + r * L::kXRowBytes + col * 16, src,
              valid * static_cast<int>(sizeof(TX)));
  }
}

template <typename TW, typename TX, int kMaxRows>
__global__ void __launch_bounds__(kGemvMaxWarps * 32) gemvKernel(DeviceArgs a, GemvShape g) {
  using L = GemvLayout<TW, TX, kMaxRows>;
  extern __shared__ __align__(16) unsigned char shared[];
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int threads = g.warps * 32;
  const int n0 = blockIdx.x * kGemvRowsPerBlock;
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
  const bool early_weights = a.w_is_constant != 0;
  if (early_weights) {
#pragma unroll
    for (int t = 0; t < L::kRing - 1; ++t) {
      if (t < my_stages) {
        gemvLoadWeights<TW, TX, kMaxRows>(a, g, n0, warp, lane, t, ring + t * L::kStageBytes);
      }
    }
  }
  waitForPredecessor();
  allowSuccessorLaunch();
#pragma unroll
  for (int t = 0; t < L::kRing - 1; ++t) {
    if (t < my_stages) {
      unsigned char* slot = ring + t * L::kStageBytes;
      if (!early_weights) gemvLoadWeights<TW, TX, kMaxRows>(a, g, n0, warp, lane, t, slot);
      gemvLoadX<TW, TX, kMaxRows>(a, g, m0, rows, warp, lane, t, slot);
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
          gemvLoadWeights<TW, TX, kMaxRows>(a, g, n0, warp, lane, next, slot);
          gemvLoadX<TW, TX, kMaxRows>(a, g, m0, rows, warp, lane, next, slot);
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
    if (o < kMaxRows * 32 && r < rows && col < a.n) storeOutput(a, m0 + r, col, totals[i]);
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

template <typename TW, typename TX, int kMaxRows>
Status launchGemv(const DeviceArgs& a, cudaStream_t stream) {
  using L = GemvLayout<TW, TX, kMaxRows>;
  auto kernel = gemvKernel<TW, TX, kMaxRows>;
  GemvDevice dev;
  REE_RETURN_IF_ERROR(gemvDevice(&dev));
  const long long tiles =
      static_cast<long long>(divUp(a.n, kGemvRowsPerBlock)) * divUp(a.m, kMaxRows);
  // The most warps per block that still fits every tile on the GPU at once (one wave); tiles
  // beyond one wave take two warps each (short rounds, many blocks per SM).
  int warps = 2;
  for (int w = kGemvMaxWarps; w >= 2; w /= 2) {
    const int bytes = L::sharedBytes(w);
    if (bytes > dev.smem_optin) continue;
    const long long per_sm = dev.smem_per_sm / (bytes + 1024);  // + the per-block reservation
    if (per_sm >= 1 && tiles <= per_sm * dev.sms) {
      warps = w;
      break;
    }
  }
  const int bytes = L::sharedBytes(warps);
  if (bytes > dev.smem_optin) {
    return REE_FAIL(Status::kUnsupported,
                    "linear: the GEMV kernel needs %d bytes of shared memory per block; the device "
                    "allows %d",
                    bytes, dev.smem_optin);
  }
  {
    // The attribute is per device and kernel; setting it is cheap but not free, so once.
    int device = 0;
    REE_CUDA_CHECK(cudaGetDevice(&device));
    static std::mutex mutex;
    static uint64_t configured = 0;
    std::lock_guard<std::mutex> lock(mutex);
    if (device >= 64 || !(configured & (1ull << device))) {
      int largest = 0;  // the largest block any launch on this device may ask for
      for (int w = kGemvMaxWarps; w >= 2; w /= 2) {
        if (L::sharedBytes(w) <= dev.smem_optin && L::sharedBytes(w) > largest) {
          largest = L::sharedBytes(w);
        }
      }
      REE_CUDA_CHECK(
          cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, largest));
      if (device < 64) configured |= 1ull << device;
    }
  }
  GemvShape g;
  g.warps = warps;
  g.n_chunks = static_cast<int>(divUp(a.k, kReduceChunk));
  g.rounds = static_cast<int>(divUp(g.n_chunks, warps));
  dim3 grid(divUp(a.n, kGemvRowsPerBlock), divUp(a.m, kMaxRows));
  launchChained(kernel, grid, warps * 32, bytes, stream, a, g);
  REE_CUDA_CHECK_LAUNCH();
  return Status::kSuccess;
}

template <typename TW, typename TX>
Status dispatchGemv(const DeviceArgs& a, cudaStream_t stream) {
  if (a.m <= 1) return launchGemv<TW, TX, 1>(a, stream);
  if (a.m <= 2) return launchGemv<TW, TX, 2>(a, stream);
  if (a.m <= 4) return launchGemv<TW, TX, 4>(a, stream);
  if (a.m <= 8) return launchGemv<TW, TX, 8>(a, stream);
  return launchGemv<TW, TX, 16>(a, stream);  // M > 16: several row blocks (grid.y)
}

// ==== GEMM =======================================================================================
constexpr int kTileM = 128;
constexpr int kTileN = 128;
constexpr int kTileK = 16;  // divides kReduceChunk: chunk boundaries fall on tile boundaries
constexpr int kGemmThreads = 256;
static_assert(kReduceChunk % kTileK == 0, "k tiles must not straddle chunks");

// Loads 8 consecutive k of one row into registers. Positions past k hold `pad`: x pads with -0
// and w with +0, so a padded step computes fma(-0, +0, p) = -0 + p = p exactly, for every p
// including -0 (a +0 product would turn a -0 partial into +0).
template <typename T>
__device__ __forceinline__ void gemmLoadRow8(const T* row, int k, int k_total, bool vector_ok,
                                             float pad, float out[8]) {
  if (vector_ok && k + 8 <= k_total) {
    ldg8(row + k, out);
  } else {
#pragma unroll
    for (int e = 0; e < 8; ++e)
      out[e] = (k + e < k_total) ? loadFloat(row[k + e]) : pad;
  }
}

template <typename TW, typename TX>
__global__ void __launch_bounds__(kGemmThreads, 1)
    gemmKernel(DeviceArgs a, int x_vector_ok, int w_vector_ok) {
  __shared__ __align__(16) float x_tile[2][kTileK][kTileM];
  __shared__ __align__(16) float w_tile[2][kTileK][kTileN];

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

  float x_stage[8], w_stage[8];
  auto loadTile = [&](int k0) {
    if (x_row_valid) {
      gemmLoadRow8(x_row, k0 + load_k, a.k, x_vector_ok, -0.0f, x_stage);
    } else {
#pragma unroll
      for (int e = 0; e < 8; ++e)
        x_stage[e] = 0.0f;
    }
    if (w_row_valid) {
      gemmLoadRow8(w_row, k0 + load_k, a.k, w_vector_ok, 0.0f, w_stage);
    } else {
#pragma unroll
      for (int e = 0; e < 8; ++e)
        w_stage[e] = 0.0f;
    }
  };
  auto storeTile = [&](int buffer) {
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      x_tile[buffer][load_k + e][load_row] = x_stage[e];
      w_tile[buffer][load_k + e][load_row] = w_stage[e];
    }
  };

  float partial[8][8];
  float total[8][8];
#pragma unroll
  for (int i = 0; i < 8; ++i) {
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      partial[i][j] = 0.0f;
      total[i][j] = -0.0f;  // -0 + p == p for every p: the first merge is total = p_0
    }
  }

  const int tiles = (a.k + kTileK - 1) / kTileK;
  loadTile(0);
  storeTile(0);
  __syncthreads();
  for (int tile = 0; tile < tiles; ++tile) {
    const int buffer = tile & 1;
    if (tile + 1 < tiles) loadTile((tile + 1) * kTileK);
#pragma unroll
    for (int kk = 0; kk < kTileK; ++kk) {
      float4 a_lo = *reinterpret_cast<const float4*>(&x_tile[buffer][kk][ty * 4]);
      float4 a_hi = *reinterpret_cast<const float4*>(&x_tile[buffer][kk][64 + ty * 4]);
      float4 b_lo = *reinterpret_cast<const float4*>(&w_tile[buffer][kk][tx * 4]);
      float4 b_hi = *reinterpret_cast<const float4*>(&w_tile[buffer][kk][64 + tx * 4]);
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
    if (k_end % kReduceChunk == 0 || k_end >= a.k) {  // end of a chunk: ordered merge
#pragma unroll
      for (int i = 0; i < 8; ++i) {
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          total[i][j] = total[i][j] + partial[i][j];
          partial[i][j] = 0.0f;
        }
      }
    }
    if (tile + 1 < tiles) storeTile(buffer ^ 1);
    __syncthreads();
  }

#pragma unroll
  for (int i = 0; i < 8; ++i) {
    int row = m0 + (i < 4 ? ty * 4 + i : 64 + ty * 4 + (i - 4));
    if (row >= a.m) continue;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      int col = n0 + (j < 4 ? tx * 4 + j : 64 + tx * 4 + (j - 4));
      if (col < a.n) storeOutput(a, row, col, total[i][j]);
    }
  }
}

bool aligned16(const void* pointer, int64_t stride, int element_size) {
  return (reinterpret_cast<uintptr_t>(pointer) % 16 == 0) && (stride * element_size) % 16 == 0;
}

template <typename TW, typename TX>
Status launchGemm(const DeviceArgs& a, cudaStream_t stream) {
  int x_vector_ok = aligned16(a.x, a.x_stride, sizeof(TX)) ? 1 : 0;
  int w_vector_ok = aligned16(a.w, a.w_stride, sizeof(TW)) ? 1 : 0;
  dim3 grid(divUp(a.n, kTileN), divUp(a.m, kTileM));
  gemmKernel<TW, TX><<<grid, kGemmThreads, 0, stream>>>(a, x_vector_ok, w_vector_ok);
  REE_CUDA_CHECK_LAUNCH();
  return Status::kSuccess;
}

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
  if (kernel == LinearKernel::kAuto && gemv_ok && a.m <= 16) return dispatchGemv<TW, TX>(a, stream);
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
  switch (args.w_dtype) {
    case DType::kBF16:
      return dispatchX<bf16_t>(a, args.x_dtype, kernel, stream);
    case DType::kF16:
      return dispatchX<f16_t>(a, args.x_dtype, kernel, stream);
    case DType::kF32:
      return dispatchX<float>(a, args.x_dtype, kernel, stream);
  }
  return REE_FAIL(Status::kInternal, "linear: unreachable w dtype");
}

Status linear(const LinearArgs& args, cudaStream_t stream) {
  return linearWithKernel(args, LinearKernel::kAuto, stream);
}

}  // namespace ree::repops::cuda
