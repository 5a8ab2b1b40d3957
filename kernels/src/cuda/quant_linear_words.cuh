// Dequantisation of GGUF codes held in registers as 32-bit words, for the lane GEMV
// (quant_linear_lanes.cuh; included by it only). The values are gguf-dequant.md's, as
// quant_blocks.h computes them, with few instructions per weight: at M = 1 the GEMV is bound by
// instruction issue when each weight costs a shift, a mask, an integer add, an fp32 add and an
// fp32 multiply besides its fma (quant_blocks.h's smallIntToFloat path, 6 per weight).
//
// Codes to floats without conversions: a code byte b placed by one byte permute (PRMT) into
// byte j (1 or 2) of 2^23's bits (0x4B000000: byte 2's top bit, the exponent's low bit, is
// clear; byte 2 takes codes < 128 only) is f = 2^23 + b 2^(8 j), exactly. With the per-block
// constants s = scale 2^-(8 j) u and C = -(2^(23 - 8 j) u + z) scale (b = u q: u = 16 for a high
// nibble left in place), one fma gives
//   fma(f, s, C) = round((2^(23 - 8 j) + b) u^-1 ... ) = round((q - z) scale) = (q - z) scale
// exactly, because (a) s and C are exact: scale (at most 17 significant bits: binary16 d, or a
// K type's d * 6-bit scale) times a power of two, or times an integer of at most 9 significant
// bits (136, 2056 or 32896 with 11-bit scales; 128 or 2048 with 17-bit ones), inside fp32's
// normal range for every finite binary16; (b) the fma computes f s + C exactly and rounds once;
// (c) (q - z) scale has at most 8 + 11 or 4 + 17 significant bits: representable. That is the
// product the spec computes (exact there too), except the sign of a zero: the fma gives +0 where
// the spec's product is -0. Signs of zero weights change no chain: a chain starts from +0 and an
// fma returns -0 only from -0 + -0, so its running value is never -0, and acc + x * (+0) ==
// acc + x * (-0) for any other acc (x * +-0 is NaN for the same x in both). A scale that is not
// finite (inf * 0 is NaN in the spec but inf - inf everywhere here) takes quant_blocks.h's path.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "ree/kernels/quant_blocks.h"

namespace ree::repops::cuda::quant_lanes {

constexpr uint32_t kMagic = 0x4B000000u;  // 2^23

// The binary16 bits at byte `offset` (compile-time after unrolling) of the words.
template <int kWords>
__device__ __forceinline__ uint32_t halfBitsAt(const uint32_t (&words)[kWords], int offset) {
  const uint32_t pair = offset % 4 == 3
                            ? __funnelshift_r(words[offset / 4], words[offset / 4 + 1], 24)
                            : words[offset / 4] >> (8 * (offset % 4));
  return pair & 0xFFFFu;
}
__device__ __forceinline__ bool halfIsFinite(uint32_t h) {
  return (h & 0x7C00u) != 0x7C00u;
}
// Exact widening of a binary16 (for finite ones the value of quant_blocks.h's halfAt).
__device__ __forceinline__ float halfToFloat(uint32_t h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(static_cast<unsigned short>(h)));
  return f;
}

// (q - z) scale for a code placed in byte kTo by placeCode, q = b / u.
template <int kTo>
struct CodeScale {
  float s, c;
  __device__ __forceinline__ CodeScale(float scale, float z, float u) {
    constexpr float kDown = kTo == 2 ? 1.0f / 65536.0f : 1.0f / 256.0f;  // 2^-(8 kTo)
    constexpr float kBase = kTo == 2 ? 128.0f : 32768.0f;                // 2^(23 - 8 kTo)
    s = scale * kDown / u;                                               // exact: powers of two
    c = -(kBase / u + z) * scale;
  }
  // 2^23 + byte `byte` (compile-time after unrolling) of `word` * 2^(8 kTo), then the fma.
  __device__ __forceinline__ float operator()(uint32_t word, int byte) const {
    const uint32_t select = kTo == 2 ? 0x7054u | (byte << 8) : 0x7604u | (byte << 4);
    return __fmaf_rn(__uint_as_float(__byte_perm(word, kMagic, select)), s, c);
  }
};

// kBytes (16 or 32) code bytes from byte kQs of the words (any alignment): y[j] from the low
// nibble of byte j, y[kBytes + j] from its high nibble.
template <int kQs, int kBytes, int kWords>
__device__ __forceinline__ void nibbleValues(const uint32_t (&words)[kWords], CodeScale<2> low,
                                             CodeScale<1> high, float (&y)[2 * kBytes]) {
  constexpr int kFirst = kQs / 4, kCount = (kQs + kBytes - 1) / 4 - kFirst + 1;
  uint32_t lo[kCount], hi[kCount];
#pragma unroll
  for (int i = 0; i < kCount; ++i) {
    lo[i] = words[kFirst + i] & 0x0F0F0F0Fu;
    hi[i] = words[kFirst + i] & 0xF0F0F0F0u;  // 16 q < 256 in byte 1
  }
#pragma unroll
  for (int j = 0; j < kBytes; ++j) {
    const int o = kQs + j;
    y[j] = low(lo[o / 4 - kFirst], o % 4);
    y[kBytes + j] = high(hi[o / 4 - kFirst], o % 4);
  }
}

// The 32-element block at byte kB of the words into y (gguf-dequant.md's values, zero signs
// aside); false, y untouched, when its scale d is not finite.
template <QuantType kType, int kB, int kWords>
__device__ __forceinline__ bool wordValues32(const uint32_t (&words)[kWords], float (&y)[32]) {
  const uint32_t h = halfBitsAt(words, kB);
  if (!halfIsFinite(h)) return false;
  const float d = halfToFloat(h);
  if constexpr (kType == QuantType::kQ4_0) {  // (q - 8) d
    nibbleValues<kB + 2, 16>(words, CodeScale<2>(d, 8.0f, 1.0f), CodeScale<1>(d, 8.0f, 16.0f), y);
  } else if constexpr (kType == QuantType::kQ4_1) {  // (d q) + m: d q exact, then one rounding
    const uint32_t m_bits = halfBitsAt(words, kB + 2);
    if ((m_bits & 0x7FFFu) > 0x7C00u) return false;  // a NaN m keeps halfAt's payload
    const float m = halfToFloat(m_bits);
    nibbleValues<kB + 4, 16>(words, CodeScale<2>(d, 0.0f, 1.0f), CodeScale<1>(d, 0.0f, 16.0f), y);
#pragma unroll
    for (int j = 0; j < 32; ++j)
      y[j] = y[j] + m;
  } else {
    static_assert(kType == QuantType::kQ8_0, "Q4_0, Q4_1 or Q8_0");
    // q d for int8 q: the byte q ^ 0x80 = q + 128 < 256 in byte 1.
    constexpr int kQs = kB + 2, kFirst = kQs / 4, kCount = (kQs + 31) / 4 - kFirst + 1;
    uint32_t u[kCount];
#pragma unroll
    for (int i = 0; i < kCount; ++i)
      u[i] = words[kFirst + i] ^ 0x80808080u;
    const CodeScale<1> value(d, 128.0f, 1.0f);
#pragma unroll
    for (int j = 0; j < 32; ++j)
      y[j] = value(u[(kQs + j) / 4 - kFirst], (kQs + j) % 4);
  }
  return true;
}

// Q4_K sub-blocks 2 c and 2 c + 1 of the super-block at byte 0 of the words into y[0..63]:
// (d sc) q - (dmin m), the first product exact (4 + 17 bits), then one rounding (pairQ4_K's
// values); false when d is not finite.
template <int kWords>
__device__ __forceinline__ bool wordValuesQ4_K(const uint32_t (&words)[kWords],
                                               const unsigned char* block, int c, float (&y)[64]) {
  const uint32_t h = halfBitsAt(words, 0), h_min = halfBitsAt(words, 2);
  if (!halfIsFinite(h) || !halfIsFinite(h_min)) return false;
  const float d = halfToFloat(h), dmin = halfToFloat(h_min);
  int sc0 = 0, mn0 = 0, sc1 = 0, mn1 = 0;
  quant_detail::scaleMinK(block + 4, 2 * c, &sc0, &mn0);
  quant_detail::scaleMinK(block + 4, 2 * c + 1, &sc1, &mn1);
  const float scale0 = d * quant_detail::smallIntToFloat(sc0);
  const float offset0 = dmin * quant_detail::smallIntToFloat(mn0);
  const float scale1 = d * quant_detail::smallIntToFloat(sc1);
  const float offset1 = dmin * quant_detail::smallIntToFloat(mn1);
  switch (c) {  // compile-time after unrolling
    case 0:
      nibbleValues<16, 32>(words, CodeScale<2>(scale0, 0.0f, 1.0f),
                           CodeScale<1>(scale1, 0.0f, 16.0f), y);
      break;
    case 1:
      nibbleValues<48, 32>(words, CodeScale<2>(scale0, 0.0f, 1.0f),
                           CodeScale<1>(scale1, 0.0f, 16.0f), y);
      break;
    case 2:
      nibbleValues<80, 32>(words, CodeScale<2>(scale0, 0.0f, 1.0f),
                           CodeScale<1>(scale1, 0.0f, 16.0f), y);
      break;
    default:
      nibbleValues<112, 32>(words, CodeScale<2>(scale0, 0.0f, 1.0f),
                            CodeScale<1>(scale1, 0.0f, 16.0f), y);
      break;
  }
#pragma unroll
  for (int l = 0; l < 32; ++l) {
    y[l] = y[l] - offset0;
    y[32 + l] = y[32 + l] - offset1;
  }
  return true;
}

}  // namespace ree::repops::cuda::quant_lanes
