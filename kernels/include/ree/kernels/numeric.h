// Storage types and exact conversions shared by host and device code (one arithmetic source).
//
// Every function here is pure integer/IEEE arithmetic, so the CPU and CUDA builds give the same
// bits. Conversions to narrower types round to nearest, ties to even (RNE), keep subnormals, map
// overflow to infinity and every NaN to the canonical quiet NaN of the target type with the sign
// of the input (docs/repops-spec.md, section "Storage types").
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define REE_HD __host__ __device__ __forceinline__
#else
#define REE_HD inline
#endif

// The CUDA runtime's own declaration, repeated so that public headers need no CUDA include.
typedef struct CUstream_st* cudaStream_t;

namespace ree {

enum class DType : int { kF32 = 0, kBF16 = 1, kF16 = 2 };

inline const char* dtypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "f32";
    case DType::kBF16:
      return "bf16";
    case DType::kF16:
      return "f16";
  }
  return "?";
}

REE_HD int dtypeSize(DType dtype) {
  return dtype == DType::kF32 ? 4 : 2;
}

// bfloat16 and IEEE binary16 storage: the raw 16 bits, no implicit arithmetic.
struct bf16_t {
  uint16_t bits;
};
struct f16_t {
  uint16_t bits;
};

REE_HD uint32_t floatBits(float value) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(value);
#else
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
#endif
}

REE_HD float bitsFloat(uint32_t bits) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
#endif
}

REE_HD uint64_t doubleBits(double value) {
#if defined(__CUDA_ARCH__)
  return static_cast<uint64_t>(__double_as_longlong(value));
#else
  uint64_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
#endif
}

REE_HD double bitsDouble(uint64_t bits) {
#if defined(__CUDA_ARCH__)
  return __longlong_as_double(static_cast<long long>(bits));
#else
  double value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
#endif
}

// ---- bf16
// ----------------------------------------------------------------------------------------
REE_HD float toFloat(bf16_t value) {
  return bitsFloat(static_cast<uint32_t>(value.bits) << 16);
}

namespace numeric_detail {

// The bf16 nearest to a value that is not NaN (round-to-nearest-even, overflow to infinity).
REE_HD uint16_t bf16BitsNotNan(float value) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  // The GPU's conversion instruction rounds the same way (IEEE round-to-nearest-even, overflow to
  // infinity, subnormals kept) in one instruction instead of six integer ones (it returns 0x7fff
  // for every NaN, hence the callers' NaN handling).
  // NumericCuda.NarrowingMatchesCpuForAllFloats compares this with the integer code of the CPU
  // build on all 2^32 inputs.
  uint16_t rounded;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(rounded) : "f"(value));
  return rounded;
#else
  // RNE on the 16 dropped bits; a carry into the exponent gives the right result, including
  // overflow to infinity.
  uint32_t bits = floatBits(value);
  uint32_t rounding_bias = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding_bias) >> 16);
#endif
}

}  // namespace numeric_detail

// NaN -> the quiet NaN with the input's sign (0x7fc0 | sign); otherwise round-to-nearest-even.
REE_HD bf16_t toBF16(float value) {
  if (value != value)
    return bf16_t{static_cast<uint16_t>(((floatBits(value) >> 16) & 0x8000u) | 0x7fc0u)};
  return bf16_t{numeric_detail::bf16BitsNotNan(value)};
}

// toBF16(lo).bits | toBF16(hi).bits << 16: two values rounded and packed in one word (on the GPU
// one conversion instruction for both; NumericCuda.NarrowingMatchesCpuForAllFloats checks it).
REE_HD uint32_t toBF16x2(float lo, float hi) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  uint32_t packed;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(packed) : "f"(hi), "f"(lo));
  if (lo != lo) packed = (packed & 0xffff0000u) | ((floatBits(lo) >> 16) & 0x8000u) | 0x7fc0u;
  if (hi != hi) packed = (packed & 0x0000ffffu) | (floatBits(hi) & 0x80000000u) | 0x7fc00000u;
  return packed;
#else
  return static_cast<uint32_t>(toBF16(lo).bits) | (static_cast<uint32_t>(toBF16(hi).bits) << 16);
#endif
}

// ---- IEEE binary16
// -------------------------------------------------------------------------------
REE_HD float toFloat(f16_t value) {
  uint32_t h = value.bits;
  uint32_t sign = (h & 0x8000u) << 16;
  uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1fu) {  // inf or NaN; NaN payload kept in the top mantissa bits
    return bitsFloat(sign | 0x7f800000u | (mantissa << 13));
  }
  if (exponent == 0) {
    if (mantissa == 0) return bitsFloat(sign);
    // Subnormal half: value = mantissa * 2^-24, exact in float.
    int shift = 0;
    while ((mantissa & 0x400u) == 0) {
      mantissa <<= 1;
      ++shift;
    }
    mantissa &= 0x3ffu;
    return bitsFloat(sign | (static_cast<uint32_t>(127 - 15 + 1 - shift) << 23) | (mantissa << 13));
  }
  return bitsFloat(sign | ((exponent + (127 - 15)) << 23) | (mantissa << 13));
}

namespace numeric_detail {

// The binary16 nearest to a value that is not NaN (round-to-nearest-even, >= 65520 to infinity,
// subnormal halves kept).
REE_HD uint16_t f16BitsNotNan(float value) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  // As bf16BitsNotNan: the conversion instruction equals the integer code below on every non-NaN
  // input.
  uint16_t rounded;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(rounded) : "f"(value));
  return rounded;
#else
  uint32_t bits = floatBits(value);
  uint32_t sign = (bits >> 16) & 0x8000u;
  uint32_t abs_bits = bits & 0x7fffffffu;
  if (abs_bits >= 0x477ff000u) {
    // >= 65520 rounds to infinity (65504 is the largest finite half; 65520 is the midpoint).
    return static_cast<uint16_t>(sign | 0x7c00u);
  }
  if (abs_bits < 0x38800000u) {
    // Result is subnormal or zero: value / 2^-24 rounded to an integer with RNE.
    if (abs_bits < 0x33000000u) return static_cast<uint16_t>(sign);  // < 2^-25: to zero
    uint32_t exponent = abs_bits >> 23;
    uint32_t mantissa = (abs_bits & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126u - exponent;  // 14..24 for exponents 102..112
    uint32_t result = mantissa >> shift;
    uint32_t remainder = mantissa & ((1u << shift) - 1u);
    uint32_t halfway = 1u << (shift - 1u);
    if (remainder > halfway || (remainder == halfway && (result & 1u))) ++result;
    return static_cast<uint16_t>(sign | result);
  }
  // Normal: rebias the exponent, RNE on 13 dropped bits (carry may reach infinity correctly).
  uint32_t rebased = abs_bits - ((127u - 15u) << 23);
  uint32_t rounding_bias = 0xfffu + ((rebased >> 13) & 1u);
  return static_cast<uint16_t>(sign | ((rebased + rounding_bias) >> 13));
#endif
}

}  // namespace numeric_detail

// NaN -> the quiet NaN with the input's sign (0x7e00 | sign); otherwise round-to-nearest-even.
REE_HD f16_t toF16(float value) {
  if (value != value)
    return f16_t{static_cast<uint16_t>(((floatBits(value) >> 16) & 0x8000u) | 0x7e00u)};
  return f16_t{numeric_detail::f16BitsNotNan(value)};
}

// Generic load/store so kernels can be written once per storage type.
REE_HD float loadFloat(float value) {
  return value;
}
REE_HD float loadFloat(bf16_t value) {
  return toFloat(value);
}
REE_HD float loadFloat(f16_t value) {
  return toFloat(value);
}

template <typename T>
REE_HD T storeAs(float value);
template <>
REE_HD float storeAs<float>(float value) {
  return value;
}
template <>
REE_HD bf16_t storeAs<bf16_t>(float value) {
  return toBF16(value);
}
template <>
REE_HD f16_t storeAs<f16_t>(float value) {
  return toF16(value);
}

// storeAs<T>, except that every NaN is stored as T's canonical quiet NaN (positive, no payload:
// 0x7fc00000, 0x7fc0, 0x7e00). The same as storeAs<T> of the canonical float NaN, with one NaN
// test: RepOps canonicalise every stored NaN (x86 and CUDA give NaNs different signs and payloads).
template <typename T>
REE_HD T storeCanonical(float value);
template <>
REE_HD float storeCanonical<float>(float value) {
  return value != value ? bitsFloat(0x7fc00000u) : value;
}
template <>
REE_HD bf16_t storeCanonical<bf16_t>(float value) {
  return bf16_t{value != value ? uint16_t{0x7fc0u} : numeric_detail::bf16BitsNotNan(value)};
}
template <>
REE_HD f16_t storeCanonical<f16_t>(float value) {
  return f16_t{value != value ? uint16_t{0x7e00u} : numeric_detail::f16BitsNotNan(value)};
}

// loadFloat(storeAs<T>(v)), except that a NaN v gives some NaN (of any sign and payload): for an
// intermediate rounding whose NaN results are canonicalised later (storeCanonical). On the GPU
// one conversion instruction (it turns every NaN into a NaN), no NaN test.
template <typename T>
REE_HD float roundThrough(float value);
template <>
REE_HD float roundThrough<float>(float value) {
  return value;
}
template <>
REE_HD float roundThrough<bf16_t>(float value) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  return toFloat(bf16_t{numeric_detail::bf16BitsNotNan(value)});  // NaN -> 0x7fff, a NaN
#else
  return toFloat(toBF16(value));
#endif
}
template <>
REE_HD float roundThrough<f16_t>(float value) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  return toFloat(f16_t{numeric_detail::f16BitsNotNan(value)});  // NaN -> 0x7fff, a NaN
#else
  return toFloat(toF16(value));
#endif
}

}  // namespace ree
