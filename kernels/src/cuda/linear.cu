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

#include "cuda_check.cuh"
#include "ree/kernels/linear.h"
#include "ree/kernels/reduce.h"

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
    static_cast<bf16_t*>(a.y)[index] = toBF16(value);
  } else {
    static_cast<float*>(a.y)[index] = value;
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

// ---- cp.async
// ------------------------------------------------------------------------------------ Copies
// src_bytes (0..16) from global and zero-fills the rest of the 16 shared bytes.
__device__ __forceinline__ void cpAsync16(void* shared, const void* global, int src_bytes) {
  unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(shared));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(address), "l"(global),
               "r"(src_bytes));
}
__device__ __forceinline__ void cpAsyncCommit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
template <int kPending>
__device__ __forceinline__ void cpAsyncWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
}

// ==== GEMV =======================================================================================
constexpr int kGemvWarps = 4;  // chunks per stage
constexpr int kGemvThreads = kGemvWarps * 32;
constexpr int kGemvRows = 32;                           // output features per block (lanes)
constexpr int kGemvStageK = kGemvWarps * kReduceChunk;  // k per stage

template <typename TW, int kMaxRows>
struct GemvLayout {
  static constexpr int kRowBytes = kGemvStageK * static_cast<int>(sizeof(TW)) + 16;  // +16: banks
  static constexpr int kStageBytes = kGemvRows * kRowBytes;
  static constexpr int kStages = (sizeof(TW) == 4 || kMaxRows > 8) ? 2 : 3;
  static constexpr int kPartialBytes = 2 * kGemvWarps * kMaxRows * 32 * 4;
  static constexpr int kSharedBytes = kStages * kStageBytes + kPartialBytes;
  static constexpr int kMergePerThread = (kMaxRows * 32 + kGemvThreads - 1) / kGemvThreads;
};

// Issues the copies of stage `stage` (k in [stage * 512, +512), rows n0..n0+31) into `buffer`.
template <typename TW, int kMaxRows>
__device__ __forceinline__ void gemvLoadStage(const DeviceArgs& a, int n0, int stage,
                                              unsigned char* buffer) {
  using L = GemvLayout<TW, kMaxRows>;
  constexpr int kElemsPerPiece = 16 / sizeof(TW);
  constexpr int kPiecesPerRow = kGemvStageK / kElemsPerPiece;
  const TW* w = static_cast<const TW*>(a.w);
  const int k_begin = stage * kGemvStageK;
#pragma unroll 4
  for (int piece = threadIdx.x; piece < kGemvRows * kPiecesPerRow; piece += kGemvThreads) {
    int row = piece / kPiecesPerRow;
    int col = piece % kPiecesPerRow;
    int k = k_begin + col * kElemsPerPiece;
    int valid = a.k - k;
    valid = valid < 0 ? 0 : (valid > kElemsPerPiece ? kElemsPerPiece : valid);
    if (n0 + row >= a.n) valid = 0;
    const TW* src = valid ? w + static_cast<int64_t>(n0 + row) * a.w_stride + k : w;
    cpAsync16(buffer + row * L::kRowBytes + col * 16, src, valid * static_cast<int>(sizeof(TW)));
  }
}

template <typename TW, typename TX, int kMaxRows>
__global__ void __launch_bounds__(kGemvThreads) gemvKernel(DeviceArgs a) {
  using L = GemvLayout<TW, kMaxRows>;
  extern __shared__ __align__(16) unsigned char shared[];
  float* partials = reinterpret_cast<float*>(shared + L::kStages * L::kStageBytes);

  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int n0 = blockIdx.x * kGemvRows;
  const int m0 = blockIdx.y * kMaxRows;
  const int rows = min(kMaxRows, a.m - m0);
  const int stages = (a.k + kGemvStageK - 1) / kGemvStageK;
  const TX* x = static_cast<const TX*>(a.x) + static_cast<int64_t>(m0) * a.x_stride;

  float totals[L::kMergePerThread];
#pragma unroll
  for (int i = 0; i < L::kMergePerThread; ++i)
    totals[i] = 0.0f;

#pragma unroll
  for (int s = 0; s < L::kStages - 1; ++s) {
    if (s < stages) gemvLoadStage<TW, kMaxRows>(a, n0, s, shared + s * L::kStageBytes);
    cpAsyncCommit();
  }

  for (int stage = 0; stage < stages; ++stage) {
    cpAsyncWait<L::kStages - 2>();
    __syncthreads();  // stage ready for all; everyone is done with the buffer refilled below
    {
      int next = stage + L::kStages - 1;
      if (next < stages) {
        gemvLoadStage<TW, kMaxRows>(a, n0, next, shared + (next % L::kStages) * L::kStageBytes);
      }
      cpAsyncCommit();
    }

    // This warp's chunk: one fma chain per row of x, in k order, starting from +0.
    const int chunk_begin = stage * kGemvStageK + warp * kReduceChunk;
    float* my_partials = partials + ((stage & 1) * kGemvWarps + warp) * kMaxRows * 32;
    if (chunk_begin < a.k) {
      const int length = min(kReduceChunk, a.k - chunk_begin);
      const TW* w_row = reinterpret_cast<const TW*>(shared + (stage % L::kStages) * L::kStageBytes +
                                                    lane * L::kRowBytes) +
                        warp * kReduceChunk;
      float partial[kMaxRows];
#pragma unroll
      for (int r = 0; r < kMaxRows; ++r)
        partial[r] = 0.0f;
      const int full = length & ~7;
      for (int j = 0; j < full; j += 8) {
        float w8[8];
        load8(w_row + j, w8);
#pragma unroll
        for (int r = 0; r < kMaxRows; ++r) {
          if (r < rows) {
            float x8[8];
            ldg8(x + static_cast<int64_t>(r) * a.x_stride + chunk_begin + j, x8);
#pragma unroll
            for (int e = 0; e < 8; ++e)
              partial[r] = fmaF32(x8[e], w8[e], partial[r]);
          }
        }
      }
      for (int j = full; j < length; ++j) {
        float wj = loadFloat(w_row[j]);
#pragma unroll
        for (int r = 0; r < kMaxRows; ++r) {
          if (r < rows) {
            float xj = loadFloat(x[static_cast<int64_t>(r) * a.x_stride + chunk_begin + j]);
            partial[r] = fmaF32(xj, wj, partial[r]);
          }
        }
      }
#pragma unroll
      for (int r = 0; r < kMaxRows; ++r)
        my_partials[r * 32 + lane] = partial[r];
    }
    __syncthreads();

    // Ordered merge: output (r, lane) adds the stage's chunk partials left to right.
    const float* stage_partials = partials + (stage & 1) * kGemvWarps * kMaxRows * 32;
#pragma unroll
    for (int i = 0; i < L::kMergePerThread; ++i) {
      int output = threadIdx.x + i * kGemvThreads;
      if (output < kMaxRows * 32) {
#pragma unroll
        for (int c = 0; c < kGemvWarps; ++c) {
          int chunk = stage * kGemvWarps + c;
          if (chunk * kReduceChunk < a.k) {
            float partial = stage_partials[c * kMaxRows * 32 + output];
            totals[i] = chunk == 0 ? partial : totals[i] + partial;
          }
        }
      }
    }
  }

#pragma unroll
  for (int i = 0; i < L::kMergePerThread; ++i) {
    int output = threadIdx.x + i * kGemvThreads;
    int r = output / 32;
    int col = n0 + output % 32;
    if (output < kMaxRows * 32 && r < rows && col < a.n) storeOutput(a, m0 + r, col, totals[i]);
  }
}

template <typename TW, typename TX, int kMaxRows>
Status launchGemv(const DeviceArgs& a, cudaStream_t stream) {
  using L = GemvLayout<TW, kMaxRows>;
  auto kernel = gemvKernel<TW, TX, kMaxRows>;
  int device = 0;
  REE_CUDA_CHECK(cudaGetDevice(&device));
  // The attribute is per device; setting it is cheap but not free, so once per device.
  static std::mutex mutex;
  static uint64_t configured = 0;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (device >= 64 || !(configured & (1ull << device))) {
      REE_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          L::kSharedBytes));
      if (device < 64) configured |= 1ull << device;
    }
  }
  dim3 grid(divUp(a.n, kGemvRows), divUp(a.m, kMaxRows));
  kernel<<<grid, kGemvThreads, L::kSharedBytes, stream>>>(a);
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
