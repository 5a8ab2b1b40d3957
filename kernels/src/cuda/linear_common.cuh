// Shared pieces of the CUDA linear kernels (docs/repops-spec/linear.md): the argument block every
// kernel takes, the store of one output (bias, NaN canonicalisation, output rounding, accumulate)
// and the loads of 8 consecutive elements as fp32. The GEMV kernels (linear_gemv.cuh,
// linear_gemv4.cuh) and the GEMM (linear_gemm.cuh) finish every output through the same
// storeOutput, so their bits agree. Internal: included by linear.cu only; not a header of its own.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "ree/kernels/linear.h"
#include "ree/kernels/numeric.h"

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

}  // namespace
}  // namespace ree::repops::cuda
