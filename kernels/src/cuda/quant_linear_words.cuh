// Dequantisation of GGUF codes held in registers as 32-bit words, for the lane GEMV
// (quant_linear_lanes.cuh; included by it only). The values are gguf-dequant.md's, as
// quant_blocks.h computes them, with few instructions per weight: at M = 1 the GEMV is bound by
// instruction issue when each weight costs a shift, a mask, an integer add, an fp32 add and an
// fp32 multiply besides its fma (quant_blocks.h's smallIntToFloat path, 6 per weight).
//
// Codes to floats without conversions: a code byte b placed by one byte permute (PRMT) into
// byte j (1 or 2) of 2^23's bits (0x4B000000: byte 2's top bit, the exponent's low bit, is
// clear; byte 2 takes codes < 128 only) is f = 2^23 + b 2^(8 j), exactly. With b = u q (u = 16
// for a high nibble left in place, else 1) and the per-block constants
//   s = scale 2^-(8 j) / u,   C = -(2^(23 - 8 j) / u + z) scale,
// one fma gives fma(f, s, C) = round(f s + C) = round((q - z) scale) = (q - z) scale, exactly,
// when three things hold (bits(v): the significant bits of the integer v, or of scale's
// significand):
//   (a) s and C are exact: s is scale times a power of two (no underflow: a non-zero scale is at
//       least 2^-24, the smallest binary16 subnormal, so s >= 2^-44), and C needs
//       bits(scale) + bits(2^(23 - 8 j) / u + z) <= 24;
//   (b) the fma computes f s + C exactly and rounds once;
//   (c) (q - z) scale is representable: bits(scale) + bits(q - z) <= 24 (all magnitudes here
//       are below 65504 * 128 * 160 < 2^31, far inside fp32's range).
// Per type (scale: binary16 d, 11 bits; or a K type's exact product d * sub-scale):
//   Q4_0 (z = 8):  C's integers 136 = 8 * 17 (j = 2) and 2056 = 8 * 257 (j = 1, u = 16): 5 and 9
//                  bits, 11 + 9 <= 24; q - z in [-8, 7]: 11 + 4.
//   Q4_1 (z = 0):  128 and 2048, 1 bit; q in [0, 15]: 11 + 4; then + m, rounded as the spec.
//   Q8_0 (q ^ 0x80 = q + 128 in byte 1, z = 128): 32896 = 128 * 257, 9 bits: 11 + 9; q in
//                  [-128, 127]: 11 + 8.
//   Q5_0 (5-bit code in byte 2, z = 16): 144 = 16 * 9, 4 bits: 11 + 4; q - z in [-16, 15]:
//                  11 + 5.
//   Q5_1 (byte 2, z = 0): 128, 1 bit; q in [0, 31]: 11 + 5; then + m, rounded as the spec.
//   Q4_K (scale d * sc, sc 6-bit: 17 bits): 128 and 2048: 17 + 1; q in [0, 15]: 17 + 4; then
//                  - dmin * mn, rounded as the spec.
//   Q5_K (as Q4_K, the 5-bit code in byte 2): 128: 17 + 1; q in [0, 31]: 17 + 5.
//   Q6_K (scale d * sc, sc int8: |sc| <= 128 has at most 7 bits, so 18 bits; the loose 11 + 8
//                  = 19 still passes): the code c < 64 goes to byte 2 (z = 32): 160 = 32 * 5,
//                  3 bits: 18 + 3 (19 + 3 = 22); c - 32 in [-32, 31]: 18 + 5 = 23 (19 + 5 = 24).
//                  Byte 1 would not do: 2^15 + 32 = 32 * 1025 has 11 bits, and 18 + 11 > 24
//                  would round C.
// That is the product the spec computes (exact there too: gguf-dequant.md), except the sign of
// a zero: the fma gives +0 where the spec's product is -0. Signs of zero weights change no chain:
// a chain starts from +0 and an fma returns -0 only from -0 + -0, so its running value is never
// -0, and acc + x * (+0) == acc + x * (-0) for any other acc (x * +-0 is NaN for the same x in
// both). A scale that is not finite (inf * 0 is NaN in the spec but inf - inf everywhere here)
// takes quant_blocks.h's path. Host emulations of these functions against quant_blocks.h found
// no other difference: Q6_K every finite d x every int8 sub-scale x every code (1.04e9 values)
// and random super-blocks at both word offsets; Q5_K 72M values; Q5_0/Q5_1 24M values with the
// block at every byte offset of a word.
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

// The 32 bits at byte `offset` (compile-time after unrolling) of the words, little-endian.
template <int kWords>
__device__ __forceinline__ uint32_t wordAt(const uint32_t (&words)[kWords], int offset) {
  return offset % 4 == 0
             ? words[offset / 4]
             : __funnelshift_r(words[offset / 4], words[offset / 4 + 1], 8 * (offset % 4));
}

// Bits [j0, j0 + 4) of qh at bit 4 of bytes 0..3 (bits below 0, for j0 < 0, are 0), the other bits
// clear: bit i of the 4-bit t goes to bit 8 i + 4 (t times 2^4 + 2^11 + 2^18 + 2^25, whose four
// partial products occupy disjoint bits: no carries).
__device__ __forceinline__ uint32_t spreadHighBits(uint32_t qh, int j0) {
  const uint32_t t = (j0 >= 0 ? qh >> j0 : qh << -j0) & 0xFu;
  return (t * 0x02040810u) & 0x10101010u;
}

// Q5_0/Q5_1 codes of a block whose qs starts at byte kQs of the words (any alignment) and whose
// high bits are qh: y[j] = value(low nibble of byte j | bit j of qh << 4), y[16 + j] the same
// with the high nibble and bit 16 + j. Four codes are put together in a word's byte lanes; the
// code (< 32) takes byte 2 of 2^23 (CodeScale<2>).
template <int kQs, int kWords>
__device__ __forceinline__ void fiveBitValues(const uint32_t (&words)[kWords], uint32_t qh,
                                              CodeScale<2> value, float (&y)[32]) {
  constexpr int kFirst = kQs / 4, kCount = (kQs + 15) / 4 - kFirst + 1;
#pragma unroll
  for (int i = 0; i < kCount; ++i) {
    const int j0 = 4 * (kFirst + i) - kQs;  // the element of the word's byte 0 (may be < 0)
    const uint32_t word = words[kFirst + i];
    const uint32_t low = (word & 0x0F0F0F0Fu) | spreadHighBits(qh, j0);
    const uint32_t high = ((word >> 4) & 0x0F0F0F0Fu) | spreadHighBits(qh, j0 + 16);
#pragma unroll
    for (int lane = 0; lane < 4; ++lane) {
      const int j = j0 + lane;
      if (j >= 0 && j < 16) {
        y[j] = value(low, lane);
        y[16 + j] = value(high, lane);
      }
    }
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
  } else if constexpr (kType == QuantType::kQ5_0) {  // (q - 16) d
    fiveBitValues<kB + 6>(words, wordAt(words, kB + 2), CodeScale<2>(d, 16.0f, 1.0f), y);
  } else if constexpr (kType == QuantType::kQ5_1) {  // (d q) + m, as Q4_1
    const uint32_t m_bits = halfBitsAt(words, kB + 2);
    if ((m_bits & 0x7FFFu) > 0x7C00u) return false;
    const float m = halfToFloat(m_bits);
    fiveBitValues<kB + 8>(words, wordAt(words, kB + 4), CodeScale<2>(d, 0.0f, 1.0f), y);
#pragma unroll
    for (int j = 0; j < 32; ++j)
      y[j] = y[j] + m;
  } else {
    static_assert(kType == QuantType::kQ8_0, "Q4_0, Q4_1, Q5_0, Q5_1 or Q8_0");
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

// Bit kBit of each byte of `word` moved to bit kTo of the same byte, the other bits cleared.
template <int kBit, int kTo>
__device__ __forceinline__ uint32_t byteBitTo(uint32_t word) {
  constexpr uint32_t kMask = 0x01010101u << kTo;
  return (kBit <= kTo ? word << (kTo - kBit) : word >> (kBit - kTo)) & kMask;
}

// Q5_K sub-blocks 2 c and 2 c + 1 of the super-block at byte 0 of the words into y[0..63]:
// (d sc) q - (dmin m) as Q4_K's, with the code's bit 4 from qh[l] (bit 2 c, bit 2 c + 1), which
// lies in the same byte lane as the code byte qs[32 c + l] (offsets 16 + l and 48 + 32 c + l):
// q < 32 takes byte 2 of 2^23 (CodeScale<2>, z = 0). False when d or dmin is not finite.
template <int kC, int kWords>
__device__ __forceinline__ bool wordValuesQ5_K(const uint32_t (&words)[kWords],
                                               const unsigned char* block, float (&y)[64]) {
  const uint32_t h = halfBitsAt(words, 0), h_min = halfBitsAt(words, 2);
  if (!halfIsFinite(h) || !halfIsFinite(h_min)) return false;
  const float d = halfToFloat(h), dmin = halfToFloat(h_min);
  int sc0 = 0, mn0 = 0, sc1 = 0, mn1 = 0;
  quant_detail::scaleMinK(block + 4, 2 * kC, &sc0, &mn0);
  quant_detail::scaleMinK(block + 4, 2 * kC + 1, &sc1, &mn1);
  const float offset0 = dmin * quant_detail::smallIntToFloat(mn0);
  const float offset1 = dmin * quant_detail::smallIntToFloat(mn1);
  const CodeScale<2> low(d * quant_detail::smallIntToFloat(sc0), 0.0f, 1.0f);
  const CodeScale<2> high(d * quant_detail::smallIntToFloat(sc1), 0.0f, 1.0f);
#pragma unroll
  for (int l = 0; l < 32; ++l) {
    const uint32_t qs = words[(48 + 32 * kC + l) / 4], qh = words[(16 + l) / 4];
    const uint32_t code0 = (qs & 0x0F0F0F0Fu) | byteBitTo<2 * kC, 4>(qh);
    const uint32_t code1 = ((qs >> 4) & 0x0F0F0F0Fu) | byteBitTo<2 * kC + 1, 4>(qh);
    y[l] = low(code0, l % 4) - offset0;
    y[32 + l] = high(code1, l % 4) - offset1;
  }
  return true;
}

// Q6_K elements [128 kH + 64 kP, +64) (sub-blocks 4 kH + 2 kP and the next) into y[0..63],
// gguf-dequant.md's (d * scale) * (c - 32) zero signs aside; `words` is the 4-byte aligned shared
// memory whose byte kB (0 or 2) is the super-block's first. The 6-bit codes are put together
// four at a time in 32-bit words: ql byte 64 kH + i and qh byte 32 kH + i % 32 sit in the same
// byte lane of their words (their offsets differ by a multiple of 4), so that a mask and a shift
// of each (bits that cross a byte lane are masked off) and an OR give c in byte lane i's low six
// bits; c < 64 < 128 then takes byte 2 of 2^23 (CodeScale<2>, z = 32). False, y untouched, when
// d is not finite.
template <int kB, int kH, int kP>
__device__ __forceinline__ bool wordValuesQ6_K(const uint32_t* words, float (&y)[64]) {
  constexpr int kD = kB + 208;  // d's offset: even, so inside one word
  const uint32_t h = words[kD / 4] >> (8 * (kD % 4)) & 0xFFFFu;
  if (!halfIsFinite(h)) return false;
  const float d = halfToFloat(h);
#pragma unroll
  for (int g = 0; g < 4; ++g) {  // 16 elements per int8 scale
    constexpr int kScales = kB + 192 + 8 * kH + 4 * kP;
    const int at = kScales + g;
    const int scale = static_cast<int8_t>(words[at / 4] >> (8 * (at % 4)) & 0xFFu);
    const CodeScale<2> value(d * quant_detail::smallIntToFloat(scale), 32.0f, 1.0f);
#pragma unroll
    for (int i = 16 * g; i < 16 * g + 16; ++i) {
      const int ql = kB + 64 * kH + i, qh = kB + 128 + 32 * kH + i % 32;
      const int high_shift = 2 * (2 * kP + i / 32);  // qh bits high_shift, high_shift + 1
      const uint32_t low = (words[ql / 4] >> (4 * kP)) & 0x0F0F0F0Fu;
      const uint32_t q_high = words[qh / 4];
      const uint32_t high =
          (high_shift <= 4 ? q_high << (4 - high_shift) : q_high >> (high_shift - 4)) & 0x30303030u;
      y[i] = value(low | high, ql % 4);
    }
  }
  return true;
}

}  // namespace ree::repops::cuda::quant_lanes
