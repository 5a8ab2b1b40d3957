// GGUF block dequantization, the one arithmetic source of docs/repops-spec/gguf-dequant.md for
// the host (models' dequantise-at-load, the CPU quantised linear) and the device (the CUDA
// quantised linear): every element is the fp32 value that chapter defines, computed by the same
// fp32 operations in the same order (no contraction: the host build uses -ffp-contract=off and
// the device build -fmad=false, cmake/ReeNumerics.cmake).
//
// The unit of work is 32 consecutive elements of a block ("sub-block" s): elements
// [32 s, 32 s + 32) of a 32-element block (s = 0) or of a 256-element super-block (s = 0..7).
// A 32-element group never straddles two scales, so a caller holding any 32-aligned run of a row
// gets exactly the values of whole-block dequantization.
#pragma once

#include <cstdint>

#include "ree/kernels/numeric.h"

namespace ree::repops {

// The GGUF block types with a defined dequantization (numbers are REE's, not ggml's).
enum class QuantType : int {
  kQ8_0 = 0,
  kQ4_0 = 1,
  kQ4_1 = 2,
  kQ5_0 = 3,
  kQ5_1 = 4,
  kQ4_K = 5,
  kQ5_K = 6,
  kQ6_K = 7,
};
constexpr int kQuantTypeCount = 8;

// Elements per block: 32, or 256 for the K types.
REE_HD constexpr int quantBlockElems(QuantType type) {
  return static_cast<int>(type) >= static_cast<int>(QuantType::kQ4_K) ? 256 : 32;
}

// Bytes per block (ggml's layout).
REE_HD constexpr int quantBlockBytes(QuantType type) {
  switch (type) {
    case QuantType::kQ8_0:
      return 34;
    case QuantType::kQ4_0:
      return 18;
    case QuantType::kQ4_1:
      return 20;
    case QuantType::kQ5_0:
      return 22;
    case QuantType::kQ5_1:
      return 24;
    case QuantType::kQ4_K:
      return 144;
    case QuantType::kQ5_K:
      return 176;
    case QuantType::kQ6_K:
      return 210;
  }
  return 0;
}

inline const char* quantTypeName(QuantType type) {
  static const char* const names[kQuantTypeCount] = {"Q8_0", "Q4_0", "Q4_1", "Q5_0",
                                                     "Q5_1", "Q4_K", "Q5_K", "Q6_K"};
  const int i = static_cast<int>(type);
  return i >= 0 && i < kQuantTypeCount ? names[i] : "?";
}

namespace quant_detail {

// The binary16 at p (little-endian), widened exactly.
REE_HD float halfAt(const unsigned char* p) {
  return toFloat(f16_t{static_cast<uint16_t>(p[0] | (p[1] << 8))});
}

// (float)c for an integer |c| < 2^22, exactly: the bits of 1.5 * 2^23 + c minus 1.5 * 2^23 (one
// exact subtraction). The same value as a conversion instruction, without the GPU's quarter-rate
// integer-to-float unit.
REE_HD float smallIntToFloat(int c) {
  return bitsFloat(static_cast<uint32_t>(0x4B400000 + c)) - 12582912.0f;
}

// The 6-bit scale and min of sub-block j of a Q4_K/Q5_K super-block (12 packed bytes).
REE_HD void scaleMinK(const unsigned char* s, int j, int* scale, int* min) {
  if (j < 4) {
    *scale = s[j] & 63;
    *min = s[j + 4] & 63;
  } else {
    *scale = (s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4);
    *min = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

// Each function below writes y[0..31] from the block at b. y never overlaps the block
// (__restrict__: the loops then vectorise on the host), and the two halves of a 32-element block
// come from the low and the high nibbles of the same 16 bytes.

// Q8_0: d (fp16), 32 int8 codes. y = q * d.
REE_HD void subQ8_0(const unsigned char* __restrict__ b, float* __restrict__ y) {
  const float d = halfAt(b);
  for (int j = 0; j < 32; ++j)
    y[j] = smallIntToFloat(static_cast<int8_t>(b[2 + j])) * d;
}

// Q4_0: d (fp16), 16 bytes of codes (low nibbles: elements 0..15, high nibbles: 16..31).
// y = (q - 8) * d.
REE_HD void subQ4_0(const unsigned char* __restrict__ b, float* __restrict__ y) {
  const float d = halfAt(b);
  const unsigned char* qs = b + 2;
  for (int j = 0; j < 16; ++j) {
    y[j] = smallIntToFloat((qs[j] & 0x0F) - 8) * d;
    y[j + 16] = smallIntToFloat((qs[j] >> 4) - 8) * d;
  }
}

// Q4_1: d, m (fp16), 16 bytes of codes as Q4_0. y = (d * q) + m, two roundings.
REE_HD void subQ4_1(const unsigned char* __restrict__ b, float* __restrict__ y) {
  const float d = halfAt(b), m = halfAt(b + 2);
  const unsigned char* qs = b + 4;
  for (int j = 0; j < 16; ++j) {
    const float low = d * smallIntToFloat(qs[j] & 0x0F);
    const float high = d * smallIntToFloat(qs[j] >> 4);
    y[j] = low + m;
    y[j + 16] = high + m;
  }
}

// The little-endian uint32 qh of a Q5_0/Q5_1 block: bit j is bit 4 of element j's code.
REE_HD uint32_t highBits5(const unsigned char* qh) {
  return qh[0] | (qh[1] << 8) | (qh[2] << 16) | (uint32_t{qh[3]} << 24);
}

// Q5_0: d (fp16), qh (4 bytes), 16 bytes of low nibbles. y = (q - 16) * d.
REE_HD void subQ5_0(const unsigned char* __restrict__ b, float* __restrict__ y) {
  const float d = halfAt(b);
  const uint32_t qh = highBits5(b + 2);
  const unsigned char* qs = b + 6;
  for (int j = 0; j < 16; ++j) {
    const int low = (qs[j] & 0x0F) | static_cast<int>(((qh >> j) & 1u) << 4);
    const int high = (qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1u) << 4);
    y[j] = smallIntToFloat(low - 16) * d;
    y[j + 16] = smallIntToFloat(high - 16) * d;
  }
}

// Q5_1: d, m (fp16), qh, 16 bytes of low nibbles. y = (d * q) + m, two roundings.
REE_HD void subQ5_1(const unsigned char* __restrict__ b, float* __restrict__ y) {
  const float d = halfAt(b), m = halfAt(b + 2);
  const uint32_t qh = highBits5(b + 4);
  const unsigned char* qs = b + 8;
  for (int j = 0; j < 16; ++j) {
    const int low = (qs[j] & 0x0F) | static_cast<int>(((qh >> j) & 1u) << 4);
    const int high = (qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1u) << 4);
    const float low_scaled = d * smallIntToFloat(low);
    const float high_scaled = d * smallIntToFloat(high);
    y[j] = low_scaled + m;
    y[j + 16] = high_scaled + m;
  }
}

// Q4_K sub-block s: d, dmin (fp16), 12 bytes of scales/mins, 128 bytes of codes; bytes
// 32c..32c+31 hold sub-block 2c in their low nibbles and 2c+1 in their high ones.
// y = (d * sc_s) * q - (dmin * m_s).
REE_HD void subQ4_K(const unsigned char* __restrict__ b, int s, float* __restrict__ y) {
  const float d = halfAt(b), dmin = halfAt(b + 2);
  int sc = 0, mn = 0;
  scaleMinK(b + 4, s, &sc, &mn);
  const float scale = d * smallIntToFloat(sc);
  const float offset = dmin * smallIntToFloat(mn);
  const unsigned char* q = b + 16 + 32 * (s / 2);
  const int shift = 4 * (s % 2);
  for (int l = 0; l < 32; ++l) {
    const float scaled = scale * smallIntToFloat((q[l] >> shift) & 0x0F);
    y[l] = scaled - offset;
  }
}

// Q5_K sub-block s: as Q4_K, with 32 bytes qh after the scales whose bit s of byte l is bit 4 of
// element l of sub-block s.
REE_HD void subQ5_K(const unsigned char* __restrict__ b, int s, float* __restrict__ y) {
  const float d = halfAt(b), dmin = halfAt(b + 2);
  int sc = 0, mn = 0;
  scaleMinK(b + 4, s, &sc, &mn);
  const float scale = d * smallIntToFloat(sc);
  const float offset = dmin * smallIntToFloat(mn);
  const unsigned char* qh = b + 16;
  const unsigned char* q = b + 48 + 32 * (s / 2);
  const int shift = 4 * (s % 2);
  for (int l = 0; l < 32; ++l) {
    const int code = ((q[l] >> shift) & 0x0F) | (((qh[l] >> s) & 1) << 4);
    const float scaled = scale * smallIntToFloat(code);
    y[l] = scaled - offset;
  }
}

// Q4_K sub-blocks 2c and 2c + 1 (elements [64 c, 64 c + 64)) into y[0..63]: the low and the
// high nibbles of the same 32 code bytes, each element exactly as subQ4_K computes it (one read
// of the bytes for both: the GPU kernel's shared-memory loads).
REE_HD void pairQ4_K(const unsigned char* __restrict__ b, int c, float* __restrict__ y) {
  const float d = halfAt(b), dmin = halfAt(b + 2);
  int sc0 = 0, mn0 = 0, sc1 = 0, mn1 = 0;
  scaleMinK(b + 4, 2 * c, &sc0, &mn0);
  scaleMinK(b + 4, 2 * c + 1, &sc1, &mn1);
  const float scale0 = d * smallIntToFloat(sc0), offset0 = dmin * smallIntToFloat(mn0);
  const float scale1 = d * smallIntToFloat(sc1), offset1 = dmin * smallIntToFloat(mn1);
  const unsigned char* q = b + 16 + 32 * c;
  for (int l = 0; l < 32; ++l) {
    const float low = scale0 * smallIntToFloat(q[l] & 0x0F);
    const float high = scale1 * smallIntToFloat(q[l] >> 4);
    y[l] = low - offset0;
    y[32 + l] = high - offset1;
  }
}

// Q5_K sub-blocks 2c and 2c + 1 into y[0..63], each element exactly as subQ5_K computes it.
REE_HD void pairQ5_K(const unsigned char* __restrict__ b, int c, float* __restrict__ y) {
  const float d = halfAt(b), dmin = halfAt(b + 2);
  int sc0 = 0, mn0 = 0, sc1 = 0, mn1 = 0;
  scaleMinK(b + 4, 2 * c, &sc0, &mn0);
  scaleMinK(b + 4, 2 * c + 1, &sc1, &mn1);
  const float scale0 = d * smallIntToFloat(sc0), offset0 = dmin * smallIntToFloat(mn0);
  const float scale1 = d * smallIntToFloat(sc1), offset1 = dmin * smallIntToFloat(mn1);
  const unsigned char* qh = b + 16;
  const unsigned char* q = b + 48 + 32 * c;
  for (int l = 0; l < 32; ++l) {
    const int code0 = (q[l] & 0x0F) | (((qh[l] >> (2 * c)) & 1) << 4);
    const int code1 = (q[l] >> 4) | (((qh[l] >> (2 * c + 1)) & 1) << 4);
    const float low = scale0 * smallIntToFloat(code0);
    const float high = scale1 * smallIntToFloat(code1);
    y[l] = low - offset0;
    y[32 + l] = high - offset1;
  }
}

// Q6_K elements [32 s, 32 s + 32): 128 bytes ql, 64 bytes qh, 16 int8 scales, d (fp16). Element
// e (h = e / 128, r = e % 128): low 4 bits from ql[64h + r % 64] (nibble r / 64), high 2 bits
// from qh[32h + r % 32] (bits 2 (r / 32)); y = (d * scales[e / 16]) * (code - 32). The 32
// elements of sub-block s share h and r / 32: r = 32 (s % 4) + i, r % 32 = i.
REE_HD void subQ6_K(const unsigned char* __restrict__ b, int s, float* __restrict__ y) {
  const int h = s / 4, r0 = (s % 4) * 32;
  const unsigned char* ql = b + 64 * h + r0 % 64;
  const unsigned char* qh = b + 128 + 32 * h;
  const unsigned char* scales = b + 192;
  const float d = halfAt(b + 208);
  const int low_shift = 4 * (r0 / 64), high_shift = 2 * (r0 / 32);
  for (int half = 0; half < 2; ++half) {
    const float scale = d * smallIntToFloat(static_cast<int8_t>(scales[2 * s + half]));
    for (int i = 16 * half; i < 16 * half + 16; ++i) {
      const int low = (ql[i] >> low_shift) & 0x0F;
      const int high = (qh[i] >> high_shift) & 0x03;
      y[i] = scale * smallIntToFloat((low | (high << 4)) - 32);
    }
  }
}

}  // namespace quant_detail

// Elements [32 sub, 32 sub + 32) of the block at `block` (sub = 0 for the 32-element types,
// 0..7 for the K types) as the fp32 values of gguf-dequant.md, into y[0..31].
template <QuantType kType>
REE_HD void dequantizeSub32(const unsigned char* block, int sub, float* y) {
  using namespace quant_detail;
  if constexpr (kType == QuantType::kQ8_0) {
    subQ8_0(block, y);
  } else if constexpr (kType == QuantType::kQ4_0) {
    subQ4_0(block, y);
  } else if constexpr (kType == QuantType::kQ4_1) {
    subQ4_1(block, y);
  } else if constexpr (kType == QuantType::kQ5_0) {
    subQ5_0(block, y);
  } else if constexpr (kType == QuantType::kQ5_1) {
    subQ5_1(block, y);
  } else if constexpr (kType == QuantType::kQ4_K) {
    subQ4_K(block, sub, y);
  } else if constexpr (kType == QuantType::kQ5_K) {
    subQ5_K(block, sub, y);
  } else {
    static_assert(kType == QuantType::kQ6_K, "a GGUF block type");
    subQ6_K(block, sub, y);
  }
}

// Elements [64 pair, 64 pair + 64) of a K-type super-block (pair = 0..3) into y[0..63]: the
// values of dequantizeSub32 for sub-blocks 2 pair and 2 pair + 1.
template <QuantType kType>
REE_HD void dequantizeSub64(const unsigned char* block, int pair, float* y) {
  using namespace quant_detail;
  if constexpr (kType == QuantType::kQ4_K) {
    pairQ4_K(block, pair, y);
  } else if constexpr (kType == QuantType::kQ5_K) {
    pairQ5_K(block, pair, y);
  } else {
    dequantizeSub32<kType>(block, 2 * pair, y);
    dequantizeSub32<kType>(block, 2 * pair + 1, y + 32);
  }
}

// The same with the type chosen at run time (host loops).
inline void dequantizeSub32(QuantType type, const unsigned char* block, int sub, float* y) {
  switch (type) {
    case QuantType::kQ8_0:
      return dequantizeSub32<QuantType::kQ8_0>(block, sub, y);
    case QuantType::kQ4_0:
      return dequantizeSub32<QuantType::kQ4_0>(block, sub, y);
    case QuantType::kQ4_1:
      return dequantizeSub32<QuantType::kQ4_1>(block, sub, y);
    case QuantType::kQ5_0:
      return dequantizeSub32<QuantType::kQ5_0>(block, sub, y);
    case QuantType::kQ5_1:
      return dequantizeSub32<QuantType::kQ5_1>(block, sub, y);
    case QuantType::kQ4_K:
      return dequantizeSub32<QuantType::kQ4_K>(block, sub, y);
    case QuantType::kQ5_K:
      return dequantizeSub32<QuantType::kQ5_K>(block, sub, y);
    case QuantType::kQ6_K:
      return dequantizeSub32<QuantType::kQ6_K>(block, sub, y);
  }
}

// The `elements` values (a multiple of the block) held by `data` into out: whole blocks in order.
template <QuantType kType>
inline void dequantizeBlocks(const unsigned char* data, int64_t elements, float* out) {
  constexpr int kElems = quantBlockElems(kType), kBytes = quantBlockBytes(kType);
  for (int64_t block = 0; block < elements / kElems; ++block) {
    for (int sub = 0; sub < kElems / 32; ++sub)
      dequantizeSub32<kType>(data + block * kBytes, sub, out + block * kElems + 32 * sub);
  }
}

inline void dequantizeBlocks(QuantType type, const unsigned char* data, int64_t elements,
                             float* out) {
  switch (type) {
    case QuantType::kQ8_0:
      return dequantizeBlocks<QuantType::kQ8_0>(data, elements, out);
    case QuantType::kQ4_0:
      return dequantizeBlocks<QuantType::kQ4_0>(data, elements, out);
    case QuantType::kQ4_1:
      return dequantizeBlocks<QuantType::kQ4_1>(data, elements, out);
    case QuantType::kQ5_0:
      return dequantizeBlocks<QuantType::kQ5_0>(data, elements, out);
    case QuantType::kQ5_1:
      return dequantizeBlocks<QuantType::kQ5_1>(data, elements, out);
    case QuantType::kQ4_K:
      return dequantizeBlocks<QuantType::kQ4_K>(data, elements, out);
    case QuantType::kQ5_K:
      return dequantizeBlocks<QuantType::kQ5_K>(data, elements, out);
    case QuantType::kQ6_K:
      return dequantizeBlocks<QuantType::kQ6_K>(data, elements, out);
  }
}

}  // namespace ree::repops
