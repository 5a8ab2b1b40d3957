// repops-3 linear for at most 8 rows of x (decode): the skinny kernel (int_linear_row_skinny.cuh)
// with x's quantisation inside it, so that a decode call is one kernel (plus the w exponent
// pre-pass when w is not prepared) and no x planes go through memory. Included by
// int_linear_row.cu; not a header of its own.
//
// Each block first finds the exponents of the (at most 8) x rows, warp r scanning row r; then, for
// every chunk, lane (g, q) quantises x row g's elements 32 c + 8 q .. + 7 (int_linear's quantize
// and splitX, as quantizeRowsKernel does) into the B fragments of the four x digits and adds the
// digits to its row's digit sums. The sums are exact integers, so the block's totals (in any order)
// are the row's sums over the whole K, as quantizeRowsKernel gives them.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace ree::repops::cuda {
namespace {

constexpr int kFusedMaxRows = 8;  // one group of 8 x rows

struct FusedXArgs {
  const void* x;
  int64_t x_stride;
};

// x row `row`'s digits at k0 .. k0 + 7 (zeros beyond k) as four B fragments (digit i: bytes 0..3 in
// .x, 4..7 in .y), added to the lane's digit sums.
template <typename TX>
__device__ __forceinline__ void xDigits(const TX* row, int64_t k0, int64_t k, int exponent,
                                        uint2 (&b)[int_linear::kXSlices],
                                        int32_t (&sums)[int_linear::kXSlices]) {
  float v[8];
  loadEight(row, k0, k, v);
#pragma unroll
  for (int i = 0; i < int_linear::kXSlices; ++i)
    b[i] = make_uint2(0, 0);
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    int8_t d[int_linear::kXSlices];
    int_linear::splitX(int_linear::quantize(v[j], exponent, int_linear::kXShift), d);
#pragma unroll
    for (int i = 0; i < int_linear::kXSlices; ++i) {
      const uint32_t byte = static_cast<uint32_t>(static_cast<uint8_t>(d[i])) << (8 * (j & 3));
      if (j < 4) {
        b[i].x |= byte;
      } else {
        b[i].y |= byte;
      }
      sums[i] += d[i];
    }
  }
}

// Warp r < m writes x row r's exponent (int_linear_row::rowExponentOfMaxBits of its largest |bits|
// over the whole K).
template <typename TX>
__device__ __forceinline__ void xRowExponents(const SkinnyArgs& s, const FusedXArgs& fx, int warp,
                                              int lane, int32_t* exponents) {
  if (warp >= s.out.m) return;
  const TX* row = static_cast<const TX*>(fx.x) + warp * fx.x_stride;
  uint32_t max_bits = 0;
  for (int64_t k0 = lane * 8; k0 < s.k; k0 += 32 * 8) {
    float v[8];
    loadEight(row, k0, s.k, v);
#pragma unroll
    for (int j = 0; j < 8; ++j)
      max_bits = max(max_bits, __float_as_uint(v[j]) & 0x7fffffffu);
  }
  max_bits = __reduce_max_sync(0xffffffffu, max_bits);
  if (lane == 0) exponents[warp] = int_linear_row::rowExponentOfMaxBits(max_bits);
}

// The nine kept digit pairs of one chunk for the block's 8 x rows (B from xDigits).
__device__ __forceinline__ void multiplyFusedChunk(const uint32_t (&a)[3][4],
                                                   const uint2 (&b)[int_linear::kXSlices],
                                                   int32_t (&acc)[kClasses][1][4]) {
#pragma unroll
  for (int i = 0; i < int_linear::kXSlices; ++i) {
#pragma unroll
    for (int j = 0; j < int_linear::kWSlices; ++j) {
      if (i + j <= int_linear::kKeptPairSum) mmaU8S8(acc[i + j][0], a[j], b[i]);
    }
  }
}

template <typename T, typename TX>
__global__ void __launch_bounds__(kSkinnyWarps * 32) fusedXKernel(SkinnyArgs s, FusedXArgs fx) {
  constexpr int kUnroll = kSkinnyUnroll;
  constexpr int kStep = kSkinnyWarps * kUnroll;
  __shared__ int32_t totals[kClasses][kFusedMaxRows][kSkinnyTileN];
  __shared__ int32_t x_exponents[kFusedMaxRows];
  __shared__ int32_t x_sums[kFusedMaxRows][int_linear::kXSlices];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, q = lane & 3;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * kSkinnyTileN;
  const T* rows[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int64_t n = n0 + g + 8 * r;
    rows[r] = n < s.out.n ? static_cast<const T*>(s.w) + n * s.w_stride : nullptr;
  }
  float v[kUnroll][2][8];
  if (s.w_constant) loadChunks<T, kUnroll>(s, rows, warp, q, v);
  waitForPredecessor();
  allowSuccessorLaunch();
  if (!s.w_constant) loadChunks<T, kUnroll>(s, rows, warp, q, v);
  for (int i = threadIdx.x; i < kClasses * kFusedMaxRows * kSkinnyTileN; i += blockDim.x)
    (&totals[0][0][0])[i] = 0;
  if (threadIdx.x < kFusedMaxRows * int_linear::kXSlices) (&x_sums[0][0])[threadIdx.x] = 0;
  xRowExponents<TX>(s, fx, warp, lane, x_exponents);
  __syncthreads();
  float s1[2], s2[2];
#pragma unroll
  for (int r = 0; r < 2; ++r)
    wScale(rows[r] != nullptr ? s.out.w_exponents[n0 + g + 8 * r] : 0, s1[r], s2[r]);
  const bool live = g < s.out.m;
  const TX* x_row = static_cast<const TX*>(fx.x) + (live ? g : 0) * fx.x_stride;
  const int x_exponent = live ? x_exponents[g] : 0;
  int32_t digit_sums[int_linear::kXSlices] = {};
  int32_t acc[kClasses][1][4] = {};
  for (int c0 = warp; c0 < s.chunks; c0 += kStep) {
    uint32_t a[kUnroll][3][4];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      wFragments(v[u], s1, s2, a[u]);
    if (c0 + kStep < s.chunks) loadChunks<T, kUnroll>(s, rows, c0 + kStep, q, v);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int chunk = c0 + u * kSkinnyWarps;
      if (chunk >= s.chunks) break;
      uint2 b[int_linear::kXSlices] = {};
      if (live) {
        xDigits(x_row, static_cast<int64_t>(chunk) * kChunk + 8 * q, s.k, x_exponent, b,
                digit_sums);
      }
      multiplyFusedChunk(a[u], b, acc);
    }
  }
  if (live) {
#pragma unroll
    for (int i = 0; i < int_linear::kXSlices; ++i)
      atomicAdd(&x_sums[g][i], digit_sums[i]);
  }
  // The outputs read the exponents and digit sums from shared memory (finishSkinnyBlock's barrier
  // orders the sums' atomics before them).
  SkinnyArgs local = s;
  local.out.x_exponents = x_exponents;
  local.x_digit_sums = &x_sums[0][0];
  finishSkinnyBlock<1>(local, n0, lane, acc, totals);
}

template <typename T>
void launchFusedTyped(const SkinnyArgs& s, const FusedXArgs& fx, DType x_dtype, unsigned grid,
                      cudaStream_t stream) {
  if (x_dtype == DType::kF32) {
    launchChained(fusedXKernel<T, float>, grid, kSkinnyWarps * 32, 0, stream, s, fx);
  } else {
    launchChained(fusedXKernel<T, bf16_t>, grid, kSkinnyWarps * 32, 0, stream, s, fx);
  }
}

Status launchFusedX(const SkinnyArgs& s, const FusedXArgs& fx, DType w_dtype, DType x_dtype,
                    cudaStream_t stream) {
  const unsigned grid = static_cast<unsigned>((s.out.n + kSkinnyTileN - 1) / kSkinnyTileN);
  switch (w_dtype) {
    case DType::kF32:
      launchFusedTyped<float>(s, fx, x_dtype, grid, stream);
      break;
    case DType::kBF16:
      launchFusedTyped<bf16_t>(s, fx, x_dtype, grid, stream);
      break;
    default:
      launchFusedTyped<f16_t>(s, fx, x_dtype, grid, stream);
      break;
  }
  REE_CUDA_CHECK_LAUNCH();
  return Status::kSuccess;
}

}  // namespace
}  // namespace ree::repops::cuda
