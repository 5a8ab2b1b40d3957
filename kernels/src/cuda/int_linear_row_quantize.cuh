// repops-3 linear (int_linear_row.h): the row exponents and the int8 digit planes, one thread
// block per row. Included by int_linear_row.cu; not a header of its own.
//
// Plane layout (made for GEMMs over contiguous K ranges): K is padded to k_padded (a multiple of
// 32) with zeros, and a row of x holds its four digit planes one after another, [d0 | d1 | d2 |
// d3] (row pitch 4 k_padded); a row of w holds its three in reverse order, [e2 | e1 | e0] (pitch
// 3 k_padded). Rows beyond the matrix (padding up to a tile) are all zeros with exponent 0.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "chained_launch.cuh"
#include "ree/kernels/int_linear_row.h"

namespace ree::repops::cuda {
namespace {

constexpr int kRowThreads = 256;  // threads per row block
constexpr int kRowWarps = kRowThreads / 32;

// fp16 bits to fp32 (exact; the hardware conversion).
__device__ __forceinline__ float halfBitsToFloat(uint32_t bits) {
  float value;
  asm("cvt.f32.f16 %0, %1;" : "=f"(value) : "h"(static_cast<unsigned short>(bits)));
  return value;
}

// Eight consecutive elements row[k0 .. k0 + 7] widened to fp32 (zeros at and beyond k): 16-byte
// loads (read-only path) when the address is 16-byte aligned, else element by element.
template <typename T>
__device__ __forceinline__ void loadEight(const T* row, int64_t k0, int64_t k, float (&v)[8]) {
  const T* p = row + k0;
  if (k0 + 8 <= k && (reinterpret_cast<uintptr_t>(p) & 15) == 0) {
    if constexpr (sizeof(T) == 4) {
      const uint4 a = __ldg(reinterpret_cast<const uint4*>(p));
      const uint4 b = __ldg(reinterpret_cast<const uint4*>(p) + 1);
      const uint32_t words[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
#pragma unroll
      for (int j = 0; j < 8; ++j)
        v[j] = __uint_as_float(words[j]);
    } else {
      const uint4 a = __ldg(reinterpret_cast<const uint4*>(p));
      const uint32_t words[4] = {a.x, a.y, a.z, a.w};
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        if constexpr (std::is_same_v<T, bf16_t>) {
          v[2 * j] = __uint_as_float(words[j] << 16);
          v[2 * j + 1] = __uint_as_float(words[j] & 0xffff0000u);
        } else {
          v[2 * j] = halfBitsToFloat(words[j] & 0xffffu);
          v[2 * j + 1] = halfBitsToFloat(words[j] >> 16);
        }
      }
    }
    return;
  }
#pragma unroll
  for (int j = 0; j < 8; ++j)
    v[j] = k0 + j < k ? loadFloat(p[j]) : 0.0f;
}

// loadEight, or eight zeros where `live` is false (padding rows, elements past the row).
template <typename T>
__device__ __forceinline__ void loadEightOrZeros(bool live, const T* row, int64_t k0, int64_t k,
                                                 float (&v)[8]) {
  if (live) {
    loadEight(row, k0, k, v);
    return;
  }
#pragma unroll
  for (int j = 0; j < 8; ++j)
    v[j] = 0.0f;
}

// The block's maximum of `value` (every thread gets it). Uses `scratch` (kRowWarps words).
__device__ __forceinline__ uint32_t blockMax(uint32_t value, uint32_t* scratch) {
  value = __reduce_max_sync(0xffffffffu, value);
  if ((threadIdx.x & 31) == 0) scratch[threadIdx.x >> 5] = value;
  __syncthreads();
  uint32_t result = scratch[0];
#pragma unroll
  for (int w = 1; w < kRowWarps; ++w)
    result = max(result, scratch[w]);
  __syncthreads();  // scratch is reused
  return result;
}

// The row's exponent (int_linear_row::rowExponentOfMaxBits of the largest |bits|).
template <typename T>
__device__ __forceinline__ int rowExponent(const T* row, int64_t k, uint32_t* scratch) {
  uint32_t max_bits = 0;
  for (int64_t k0 = threadIdx.x * 8; k0 < k; k0 += kRowThreads * 8) {
    float v[8];
    loadEight(row, k0, k, v);
#pragma unroll
    for (int j = 0; j < 8; ++j)
      max_bits = max(max_bits, __float_as_uint(v[j]) & 0x7fffffffu);
  }
  return int_linear_row::rowExponentOfMaxBits(blockMax(max_bits, scratch));
}

// exponents[r] for every row r < rows of src (a block per row, grid-stride).
template <typename T>
__global__ void __launch_bounds__(kRowThreads)
    rowExponentKernel(const T* __restrict__ src, int64_t stride, int64_t rows, int64_t k,
                      int32_t* __restrict__ exponents) {
  __shared__ uint32_t scratch[kRowWarps];
  waitForPredecessor();
  allowSuccessorLaunch();
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int exponent = rowExponent(src + r * stride, k, scratch);
    if (threadIdx.x == 0) exponents[r] = exponent;
  }
}

// Where digit s of a row goes: x keeps the digit order, w reverses it (see the layout above).
template <int kSlices>
__device__ __forceinline__ int planeSlot(int s) {
  return kSlices == int_linear::kXSlices ? s : kSlices - 1 - s;
}

struct QuantizeRowsArgs {
  int64_t stride, rows, rows_padded, k, k_padded;
  const int32_t* given_exponents;  // null: computed here
  int8_t* planes;                  // [rows_padded][kSlices * k_padded]
  int32_t* exponents;              // [rows_padded], written unless null
  int32_t* digit_sums;             // [rows_padded][kSlices]: sum over k of each digit; or null
};

// Eight values' digit planes (8 bytes each, at k0 of each plane of the row at `out`) and their
// digit sums: quantize with shift kXShift (x, four digits) or kWShift (w, three).
template <int kSlices>
__device__ __forceinline__ void storeDigits(const float (&v)[8], int exponent, int8_t* out,
                                            int64_t k_padded, int64_t k0,
                                            int32_t (&digit_sum)[kSlices]) {
  constexpr int kShift =
      kSlices == int_linear::kXSlices ? int_linear::kXShift : int_linear::kWShift;
  uint2 packed[kSlices] = {};
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    int8_t d[kSlices];
    int_linear::splitDigits<kSlices>(int_linear::quantize(v[j], exponent, kShift), d);
#pragma unroll
    for (int s = 0; s < kSlices; ++s) {
      const uint32_t byte = static_cast<uint32_t>(static_cast<uint8_t>(d[s])) << (8 * (j & 3));
      if (j < 4) {
        packed[s].x |= byte;
      } else {
        packed[s].y |= byte;
      }
      digit_sum[s] += d[s];
    }
  }
#pragma unroll
  for (int s = 0; s < kSlices; ++s)
    *reinterpret_cast<uint2*>(out + planeSlot<kSlices>(s) * k_padded + k0) = packed[s];
}

// The end of row r's block: the row's digit sums (from every thread's) and its exponent written.
// `sums` (shared, zeroed before the row's first barrier) is free again on return.
template <int kSlices>
__device__ __forceinline__ void finishRow(const QuantizeRowsArgs& a, int64_t r, int exponent,
                                          const int32_t (&digit_sum)[kSlices], int32_t* sums) {
  if (a.digit_sums) {
#pragma unroll
    for (int s = 0; s < kSlices; ++s) {
      const int32_t warp_sum = __reduce_add_sync(0xffffffffu, digit_sum[s]);
      if ((threadIdx.x & 31) == 0) atomicAdd(&sums[s], warp_sum);
    }
  }
  __syncthreads();
  if (threadIdx.x == 0 && a.exponents) a.exponents[r] = exponent;
  if (threadIdx.x < kSlices && a.digit_sums)
    a.digit_sums[r * kSlices + threadIdx.x] = sums[threadIdx.x];
  __syncthreads();  // sums (and any scratch) are reused by the next row
}

// Digit planes of every row (a block per row, grid-stride): exponent, integers (quantize with
// shift kXShift or kWShift), balanced digits, and the row's digit sums (used by the skinny
// kernel's unsigned-digit correction).
template <typename T, int kSlices>
__global__ void __launch_bounds__(kRowThreads)
    quantizeRowsKernel(const T* __restrict__ src, QuantizeRowsArgs a) {
  __shared__ uint32_t scratch[kRowWarps];
  __shared__ int32_t sums[kSlices];
  waitForPredecessor();
  allowSuccessorLaunch();
  for (int64_t r = blockIdx.x; r < a.rows_padded; r += gridDim.x) {
    const bool real = r < a.rows;
    const T* row = src + (real ? r : 0) * a.stride;
    int exponent = 0;
    if (real) {
      exponent = a.given_exponents ? a.given_exponents[r] : rowExponent(row, a.k, scratch);
    }
    if (threadIdx.x < kSlices) sums[threadIdx.x] = 0;
    __syncthreads();
    int8_t* out = a.planes + r * kSlices * a.k_padded;
    int32_t digit_sum[kSlices] = {};
    for (int64_t k0 = threadIdx.x * 8; k0 < a.k_padded; k0 += kRowThreads * 8) {
      float v[8];
      loadEightOrZeros(real, row, k0, a.k, v);
      storeDigits<kSlices>(v, exponent, out, a.k_padded, k0, digit_sum);
    }
    finishRow<kSlices>(a, r, exponent, digit_sum, sums);
  }
}

// x's digit planes for rows of at most kShortRowK elements (every model's decode activations):
// the quantizeRowsKernel's integers, with the row read once into registers by 512 threads whose
// loads are all in flight together, instead of one block of 256 threads walking the row twice
// with one load per thread outstanding. A block per row, grid-stride; padding rows get zeros.
constexpr int kShortRowThreads = 512;
constexpr int kShortRowGroups = 4;  // groups of 8 elements per thread
constexpr int64_t kShortRowK = int64_t{kShortRowThreads} * kShortRowGroups * 8;

// The block's largest |bits| (every thread gets it); `scratch` holds a word per warp.
__device__ __forceinline__ uint32_t shortRowMax(uint32_t bits, uint32_t* scratch) {
  bits = __reduce_max_sync(0xffffffffu, bits);
  if ((threadIdx.x & 31) == 0) scratch[threadIdx.x >> 5] = bits;
  __syncthreads();
#pragma unroll
  for (int w = 0; w < kShortRowThreads / 32; ++w)
    bits = max(bits, scratch[w]);
  return bits;
}

template <typename T>
__global__ void __launch_bounds__(kShortRowThreads)
    quantizeShortRowsKernel(const T* __restrict__ src, QuantizeRowsArgs a) {
  constexpr int kSlices = int_linear::kXSlices;
  __shared__ uint32_t scratch[kShortRowThreads / 32];
  __shared__ int32_t sums[kSlices];
  waitForPredecessor();
  allowSuccessorLaunch();
  for (int64_t r = blockIdx.x; r < a.rows_padded; r += gridDim.x) {
    const bool real = r < a.rows;
    const T* row = src + (real ? r : 0) * a.stride;
    float v[kShortRowGroups][8];
    uint32_t max_bits = 0;
#pragma unroll
    for (int i = 0; i < kShortRowGroups; ++i) {
      const int64_t k0 = (static_cast<int64_t>(i) * kShortRowThreads + threadIdx.x) * 8;
      loadEightOrZeros(real && k0 < a.k, row, k0, a.k, v[i]);
#pragma unroll
      for (int j = 0; j < 8; ++j)
        max_bits = max(max_bits, __float_as_uint(v[i][j]) & 0x7fffffffu);
    }
    if (threadIdx.x < kSlices) sums[threadIdx.x] = 0;
    max_bits = shortRowMax(max_bits, scratch);
    const int exponent = real ? int_linear_row::rowExponentOfMaxBits(max_bits) : 0;
    int8_t* out = a.planes + r * kSlices * a.k_padded;
    int32_t digit_sum[kSlices] = {};
#pragma unroll
    for (int i = 0; i < kShortRowGroups; ++i) {
      const int64_t k0 = (static_cast<int64_t>(i) * kShortRowThreads + threadIdx.x) * 8;
      if (k0 < a.k_padded) storeDigits<kSlices>(v[i], exponent, out, a.k_padded, k0, digit_sum);
    }
    finishRow<kSlices>(a, r, exponent, digit_sum, sums);
  }
}

int rowGrid(int64_t rows) {
  return static_cast<int>(rows < (int64_t{1} << 20) ? rows : (int64_t{1} << 20));
}

// Launchers by run-time dtype, chained (chained_launch.cuh): each kernel waits for its
// predecessor before it reads anything.
Status launchRowExponents(const void* src, DType dtype, int64_t stride, int64_t rows, int64_t k,
                          int32_t* exponents, cudaStream_t stream) {
  if (rows == 0) return Status::kSuccess;
  const int grid = rowGrid(rows);
  switch (dtype) {
    case DType::kF32:
      launchChained(rowExponentKernel<float>, grid, kRowThreads, 0, stream,
                    static_cast<const float*>(src), stride, rows, k, exponents);
      break;
    case DType::kBF16:
      launchChained(rowExponentKernel<bf16_t>, grid, kRowThreads, 0, stream,
                    static_cast<const bf16_t*>(src), stride, rows, k, exponents);
      break;
    default:
      launchChained(rowExponentKernel<f16_t>, grid, kRowThreads, 0, stream,
                    static_cast<const f16_t*>(src), stride, rows, k, exponents);
      break;
  }
  REE_CUDA_CHECK_LAUNCH();
  return Status::kSuccess;
}

// x rows of at most kShortRowK elements whose exponents are found here: the short-row kernel.
Status launchQuantizeShortRows(const void* src, DType dtype, const QuantizeRowsArgs& a,
                               cudaStream_t stream) {
  const int grid = rowGrid(a.rows_padded);
  switch (dtype) {
    case DType::kF32:
      launchChained(quantizeShortRowsKernel<float>, grid, kShortRowThreads, 0, stream,
                    static_cast<const float*>(src), a);
      break;
    case DType::kBF16:
      launchChained(quantizeShortRowsKernel<bf16_t>, grid, kShortRowThreads, 0, stream,
                    static_cast<const bf16_t*>(src), a);
      break;
    default:
      launchChained(quantizeShortRowsKernel<f16_t>, grid, kShortRowThreads, 0, stream,
                    static_cast<const f16_t*>(src), a);
      break;
  }
  REE_CUDA_CHECK_LAUNCH();
  return Status::kSuccess;
}

template <int kSlices>
Status launchQuantizeRows(const void* src, DType dtype, const QuantizeRowsArgs& a,
                          cudaStream_t stream) {
  if (a.rows_padded == 0) return Status::kSuccess;
  if (kSlices == int_linear::kXSlices && a.given_exponents == nullptr && a.k_padded <= kShortRowK) {
    return launchQuantizeShortRows(src, dtype, a, stream);
  }
  const int grid = rowGrid(a.rows_padded);
  switch (dtype) {
    case DType::kF32:
      launchChained(quantizeRowsKernel<float, kSlices>, grid, kRowThreads, 0, stream,
                    static_cast<const float*>(src), a);
      break;
    case DType::kBF16:
      launchChained(quantizeRowsKernel<bf16_t, kSlices>, grid, kRowThreads, 0, stream,
                    static_cast<const bf16_t*>(src), a);
      break;
    default:
      launchChained(quantizeRowsKernel<f16_t, kSlices>, grid, kRowThreads, 0, stream,
                    static_cast<const f16_t*>(src), a);
      break;
  }
  REE_CUDA_CHECK_LAUNCH();
  return Status::kSuccess;
}

}  // namespace
}  // namespace ree::repops::cuda
