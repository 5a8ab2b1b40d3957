// Row exponents, int16 digit planes and exact row products of the CPU repops-3 linear
// (int_linear_row_simd.h), scalar and vectorised with the same integers.
#include <algorithm>
#include <cstdint>

#include "common/storage_element.h"
#include "cpu/int_linear_row_simd.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define REE_INT_LINEAR_ROW_X86 1
#endif

namespace ree::repops::cpu::int_linear_row_detail {
namespace {

// ---- Row exponents

template <typename T>
__attribute__((always_inline)) inline uint32_t maxAbsBitsBody(const T* src, int64_t k) {
  uint32_t max_bits = 0;
  for (int64_t i = 0; i < k; ++i) {
    const uint32_t abs_bits = floatBits(loadFloat(src[i])) & 0x7fffffffu;
    max_bits = max_bits > abs_bits ? max_bits : abs_bits;
  }
  return max_bits;
}

template <typename T>
uint32_t maxAbsBitsPortable(const T* src, int64_t k) {
  return maxAbsBitsBody(src, k);
}

#if defined(REE_INT_LINEAR_ROW_X86)
// The largest 32-bit (16-bit) lane of v.
__attribute__((target("avx2"))) inline uint32_t laneMax32(__m256i v) {
  __m128i m = _mm_max_epu32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  m = _mm_max_epu32(m, _mm_shuffle_epi32(m, 0x4e));
  m = _mm_max_epu32(m, _mm_shuffle_epi32(m, 0xb1));
  return static_cast<uint32_t>(_mm_cvtsi128_si32(m));
}
__attribute__((target("avx2"))) inline uint32_t laneMax16(__m256i v) {
  const __m256i lo = _mm256_and_si256(v, _mm256_set1_epi32(0xffff));
  return std::max(laneMax32(lo), laneMax32(_mm256_srli_epi32(v, 16)));
}

__attribute__((target("avx2"))) uint32_t maxAbsBitsAvx2(const float* src, int64_t k) {
  __m256i max = _mm256_setzero_si256();
  const __m256i magnitude = _mm256_set1_epi32(0x7fffffff);
  int64_t i = 0;
  for (; i + 8 <= k; i += 8) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i));
    max = _mm256_max_epu32(max, _mm256_and_si256(v, magnitude));
  }
  return std::max(laneMax32(max), maxAbsBitsPortable(src + i, k - i));
}

// For bf16 and fp16 too, the 16 bits without sign order like the magnitude (NaN and inf above).
template <typename T>
__attribute__((target("avx2"))) uint32_t maxAbsBits16Avx2(const T* src, int64_t k) {
  __m256i max = _mm256_setzero_si256();
  const __m256i magnitude = _mm256_set1_epi16(0x7fff);
  int64_t i = 0;
  for (; i + 16 <= k; i += 16) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i));
    max = _mm256_max_epu16(max, _mm256_and_si256(v, magnitude));
  }
  const uint32_t vector_max = floatBits(loadFloat(T{static_cast<uint16_t>(laneMax16(max))}));
  return std::max(vector_max & 0x7fffffffu, maxAbsBitsPortable(src + i, k - i));
}
__attribute__((target("avx2"))) uint32_t maxAbsBitsAvx2(const bf16_t* src, int64_t k) {
  return maxAbsBits16Avx2(src, k);
}
__attribute__((target("avx2"))) uint32_t maxAbsBitsAvx2(const f16_t* src, int64_t k) {
  return maxAbsBits16Avx2(src, k);
}
#endif

// For finite floats the bit pattern without sign orders like the magnitude, so the max of the
// bits is the bits of the max (and a NaN or inf has bits >= 0x7f800000).
template <typename T>
int32_t rowExponentOf(SimdLevel level, const T* src, int64_t k) {
  uint32_t max_bits;
#if defined(REE_INT_LINEAR_ROW_X86)
  if (level != SimdLevel::kScalar) {
    max_bits = maxAbsBitsAvx2(src, k);
  } else
#endif
  {
    (void)level;
    max_bits = maxAbsBitsPortable(src, k);
  }
  return int_linear_row::rowExponentOfMaxBits(max_bits);
}

// ---- Quantisation into planes

// The planes of one integer: x's (d0 * 2^7 + d1, d2 * 2^7 + d3, d2), w's digits (e0, e1, e2).
inline void planesOf(int32_t v, bool is_x, int16_t* out0, int16_t* out1, int16_t* out2) {
  if (is_x) {
    int8_t d[int_linear::kXSlices];
    int_linear::splitX(v, d);
    *out0 = static_cast<int16_t>(d[0] * 128 + d[1]);
    *out1 = static_cast<int16_t>(d[2] * 128 + d[3]);
    *out2 = d[2];
  } else {
    int8_t e[int_linear::kWSlices];
    int_linear::splitW(v, e);
    *out0 = e[0];
    *out1 = e[1];
    *out2 = e[2];
  }
}

// Elements [begin, padded_k) of a row: RNE(v * 2^(shift - e)) (int_linear::quantize) for k < k
// elements, zeros after.
template <typename T>
void quantizeTailPortable(const T* src, int64_t begin, int64_t k, int32_t exponent, bool is_x,
                          int64_t padded_k, int16_t* out) {
  const int shift = is_x ? int_linear::kXShift : int_linear::kWShift;
  for (int64_t i = begin; i < padded_k; ++i) {
    const int32_t v = i < k ? int_linear::quantize(loadFloat(src[i]), exponent, shift) : 0;
    planesOf(v, is_x, out + planeIndex(0, i), out + planeIndex(1, i), out + planeIndex(2, i));
  }
}

#if defined(REE_INT_LINEAR_ROW_X86)
// 16 elements as two vectors of 8 fp32 in the order that _mm256_packs_epi32 puts back: a holds
// elements 0-3 and 8-11, b elements 4-7 and 12-15.
__attribute__((target("avx2,f16c"))) inline void load16(const float* p, __m256& a, __m256& b) {
  const __m256 lo = _mm256_loadu_ps(p), hi = _mm256_loadu_ps(p + 8);
  a = _mm256_permute2f128_ps(lo, hi, 0x20);
  b = _mm256_permute2f128_ps(lo, hi, 0x31);
}
__attribute__((target("avx2,f16c"))) inline void load16(const f16_t* p, __m256& a, __m256& b) {
  const __m256 lo = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  const __m256 hi = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 8)));
  a = _mm256_permute2f128_ps(lo, hi, 0x20);
  b = _mm256_permute2f128_ps(lo, hi, 0x31);
}
// bf16 is the top half of fp32: interleaving zeros below each element widens it exactly, and the
// unpack's order within 128-bit lanes is the one packs restores.
__attribute__((target("avx2,f16c"))) inline void load16(const bf16_t* p, __m256& a, __m256& b) {
  const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  a = _mm256_castsi256_ps(_mm256_unpacklo_epi16(_mm256_setzero_si256(), v));
  b = _mm256_castsi256_ps(_mm256_unpackhi_epi16(_mm256_setzero_si256(), v));
}

// The top part of 8 integers q = top * 2^14 + rest with rest in [-8256, 8127] (two balanced
// digits below top: d2 * 2^7 + d3 for x, e1 * 2^7 + e2 for w): top = floor((q + 8256) / 2^14).
__attribute__((target("avx2"))) inline __m256i topOf8(__m256i q) {
  return _mm256_srai_epi32(_mm256_add_epi32(q, _mm256_set1_epi32(8256)), 14);
}

// The row with exponent e, 16 elements a step, the tail by quantizeTailPortable. The planes come
// from the digit identities: q = top * 2^14 + rest (topOf8), rest = mid * 2^7 + low with mid =
// floor((rest + 64) / 2^7), which are the balanced digits' sums: x's planes are (top, rest, mid)
// = (d0 2^7 + d1, d2 2^7 + d3, d2), w's (top, mid, low) = (e0, e1, e2). The scaling is a binary32
// product: v times 2^p is exact for |p| <= 100 unless it falls below 2^-126, and then
// |v * 2^p| < 2^-26 rounds to 0 either way; the conversion rounds to nearest even (the default
// MXCSR mode, as the portable path's binary64 addition assumes). Other exponents (and
// non-finite rows) take the portable path.
template <bool kIsX, typename T>
__attribute__((target("avx2,f16c"))) void quantizeRowAvx2(const T* src, int64_t k, int32_t exponent,
                                                          int64_t padded_k, int16_t* out) {
  const int power = (kIsX ? int_linear::kXShift : int_linear::kWShift) - exponent;
  if (exponent == int_linear::kNonFiniteExponent || power < -100 || power > 100) {
    return quantizeTailPortable(src, 0, k, exponent, kIsX, padded_k, out);
  }
  const __m256 scale = _mm256_castsi256_ps(_mm256_set1_epi32((127 + power) << 23));
  int64_t i = 0;
  for (; i + 16 <= k; i += 16) {
    __m256 a, b;
    load16(src + i, a, b);
    const __m256i qa = _mm256_cvtps_epi32(_mm256_mul_ps(a, scale));
    const __m256i qb = _mm256_cvtps_epi32(_mm256_mul_ps(b, scale));
    const __m256i top_a = topOf8(qa), top_b = topOf8(qb);
    const __m256i top = _mm256_packs_epi32(top_a, top_b);
    const __m256i rest = _mm256_packs_epi32(_mm256_sub_epi32(qa, _mm256_slli_epi32(top_a, 14)),
                                            _mm256_sub_epi32(qb, _mm256_slli_epi32(top_b, 14)));
    const __m256i mid = _mm256_srai_epi16(_mm256_add_epi16(rest, _mm256_set1_epi16(64)), 7);
    __m256i* group = reinterpret_cast<__m256i*>(out + planeIndex(0, i));
    _mm256_storeu_si256(group, top);
    if (kIsX) {
      _mm256_storeu_si256(group + 1, rest);
      _mm256_storeu_si256(group + 2, mid);
    } else {
      _mm256_storeu_si256(group + 1, mid);
      _mm256_storeu_si256(group + 2, _mm256_sub_epi16(rest, _mm256_slli_epi16(mid, 7)));
    }
  }
  quantizeTailPortable(src, i, k, exponent, kIsX, padded_k, out);
}
#endif

template <typename T>
void quantizeRowOf(SimdLevel level, const T* src, int64_t k, bool is_x, const int32_t* known,
                   int64_t out, QuantizedRows* q) {
  const int32_t exponent = known ? *known : rowExponentOf(level, src, k);
  q->exponents[static_cast<size_t>(out)] = exponent;
  int16_t* planes = q->rowData(out);
#if defined(REE_INT_LINEAR_ROW_X86)
  if (level != SimdLevel::kScalar)
    return is_x ? quantizeRowAvx2<true>(src, k, exponent, q->padded_k, planes)
                : quantizeRowAvx2<false>(src, k, exponent, q->padded_k, planes);
#endif
  quantizeTailPortable(src, 0, k, exponent, is_x, q->padded_k, planes);
}

// ---- Exact products

// P = 2^14 sum xh e0 + 2^7 sum xh e1 + sum (xh e2 + xl e0 + d2 e1), exactly: with xh = d0 2^7
// + d1 and xl = d2 2^7 + d3 these are the nine kept digit pairs and nothing else.
int64_t productPortable(const RowPlanes& x, const RowPlanes& w, int64_t padded_k) {
  int64_t a = 0, b = 0, c = 0;
  for (int64_t group = 0; group < padded_k * kPlanes; group += kPlanes * kGroup) {
    const int16_t* xg = x.data + group;
    const int16_t* wg = w.data + group;
    for (int i = 0; i < kGroup; ++i) {
      const int32_t xh = xg[i], xl = xg[kGroup + i], xd = xg[2 * kGroup + i];
      const int32_t e0 = wg[i], e1 = wg[kGroup + i], e2 = wg[2 * kGroup + i];
      a += xh * e0;
      b += xh * e1;
      c += xh * e2 + xl * e0 + xd * e1;
    }
  }
  return a * (int64_t{1} << 14) + b * (int64_t{1} << 7) + c;
}

#if defined(REE_INT_LINEAR_ROW_X86)
// The vector loops accumulate the three sums in int32 lanes for kVectorChunk elements at a time,
// then add them up in int64. Per lane and 16 elements (two products per sum term), with |xh| <=
// 2^13, |xl| <= 8256 and every other digit <= 64 in magnitude: |a|, |b| <= 2 * 2^13 * 64 = 2^20
// and |c| <= 2 * (2^13 * 64 + 8256 * 64 + 64 * 64) = 2,113,536, so 1016 steps stay below 2^31.
constexpr int64_t kVectorChunk = 1016 * 16;

// The sum of the 8 int32 lanes of v, in int64.
__attribute__((target("avx2"))) inline int64_t laneSum(__m256i v) {
  const __m256i wide = _mm256_add_epi64(_mm256_cvtepi32_epi64(_mm256_castsi256_si128(v)),
                                        _mm256_cvtepi32_epi64(_mm256_extracti128_si256(v, 1)));
  const __m128i s = _mm_add_epi64(_mm256_castsi256_si128(wide), _mm256_extracti128_si256(wide, 1));
  return _mm_cvtsi128_si64(s) + _mm_extract_epi64(s, 1);
}

inline const __m256i* vec(const int16_t* p) {
  return reinterpret_cast<const __m256i*>(p);
}

// The products of MR x rows with NR w rows into products[r * NR + c]; MACC(acc, a, b) adds the
// pairwise int16 products of a and b to acc's int32 lanes (pmaddwd + paddd, or vpdpwssd).
#define REE_TILE_PRODUCTS(MACC)                                                           \
  int64_t total[MR][NR] = {};                                                             \
  for (int64_t begin = 0; begin < padded_k; begin += kVectorChunk) {                      \
    const int64_t end = std::min(padded_k, begin + kVectorChunk);                         \
    __m256i acc[MR][NR][3];                                                               \
    for (int r = 0; r < MR; ++r)                                                          \
      for (int c = 0; c < NR; ++c)                                                        \
        acc[r][c][0] = acc[r][c][1] = acc[r][c][2] = _mm256_setzero_si256();              \
    for (int64_t k = begin; k < end; k += 16) {                                           \
      __m256i xv[MR][3];                                                                  \
      for (int r = 0; r < MR; ++r)                                                        \
        for (int p = 0; p < 3; ++p)                                                       \
          xv[r][p] = _mm256_loadu_si256(vec(x[r].data + k * 3 + p * 16));                 \
      for (int c = 0; c < NR; ++c) {                                                      \
        const __m256i e0 = _mm256_loadu_si256(vec(w[c].data + k * 3 + 0));                \
        const __m256i e1 = _mm256_loadu_si256(vec(w[c].data + k * 3 + 16));               \
        const __m256i e2 = _mm256_loadu_si256(vec(w[c].data + k * 3 + 32));               \
        for (int r = 0; r < MR; ++r) {                                                    \
          acc[r][c][0] = MACC(acc[r][c][0], xv[r][0], e0);                                \
          acc[r][c][1] = MACC(acc[r][c][1], xv[r][0], e1);                                \
          acc[r][c][2] = MACC(acc[r][c][2], xv[r][0], e2);                                \
          acc[r][c][2] = MACC(acc[r][c][2], xv[r][1], e0);                                \
          acc[r][c][2] = MACC(acc[r][c][2], xv[r][2], e1);                                \
        }                                                                                 \
      }                                                                                   \
    }                                                                                     \
    for (int r = 0; r < MR; ++r)                                                          \
      for (int c = 0; c < NR; ++c)                                                        \
        total[r][c] += laneSum(acc[r][c][0]) * (int64_t{1} << 14) +                       \
                       laneSum(acc[r][c][1]) * (int64_t{1} << 7) + laneSum(acc[r][c][2]); \
  }                                                                                       \
  for (int r = 0; r < MR; ++r)                                                            \
    for (int c = 0; c < NR; ++c)                                                          \
      products[r * NR + c] = total[r][c];

#define REE_MACC_AVX2(acc, a, b) _mm256_add_epi32((acc), _mm256_madd_epi16((a), (b)))
#define REE_MACC_VNNI(acc, a, b) _mm256_dpwssd_epi32((acc), (a), (b))

template <int MR, int NR>
__attribute__((target("avx2"))) void tileAvx2(const RowPlanes* x, const RowPlanes* w,
                                              int64_t padded_k, int64_t* products) {
  REE_TILE_PRODUCTS(REE_MACC_AVX2)
}

template <int MR, int NR>
__attribute__((target("avx2,avx512f,avx512vl,avx512vnni"))) void tileVnni(const RowPlanes* x,
                                                                          const RowPlanes* w,
                                                                          int64_t padded_k,
                                                                          int64_t* products) {
  REE_TILE_PRODUCTS(REE_MACC_VNNI)
}
#endif

}  // namespace

SimdLevel bestSimdLevel() {
#if defined(REE_INT_LINEAR_ROW_X86)
  static const SimdLevel level = [] {
    if (__builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni")) {
      return SimdLevel::kAvx512Vnni;
    }
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c")) return SimdLevel::kAvx2;
    return SimdLevel::kScalar;
  }();
  return level;
#else
  return SimdLevel::kScalar;
#endif
}

int32_t rowExponent(const void* base, DType dtype, int64_t offset, int64_t k) {
  const SimdLevel level = bestSimdLevel();
  switch (dtype) {
    case DType::kF32:
      return rowExponentOf(level, static_cast<const float*>(base) + offset, k);
    case DType::kBF16:
      return rowExponentOf(level, static_cast<const bf16_t*>(base) + offset, k);
    default:
      return rowExponentOf(level, static_cast<const f16_t*>(base) + offset, k);
  }
}

void quantizeRow(SimdLevel level, const void* base, DType dtype, int64_t offset, int64_t k,
                 bool is_x, const int32_t* known, int64_t out, QuantizedRows* q) {
  switch (dtype) {
    case DType::kF32:
      return quantizeRowOf(level, static_cast<const float*>(base) + offset, k, is_x, known, out, q);
    case DType::kBF16:
      return quantizeRowOf(level, static_cast<const bf16_t*>(base) + offset, k, is_x, known, out,
                           q);
    default:
      return quantizeRowOf(level, static_cast<const f16_t*>(base) + offset, k, is_x, known, out, q);
  }
}

void tileProducts(SimdLevel level, const RowPlanes* x, int mr, const RowPlanes* w, int nr,
                  int64_t padded_k, int64_t* products) {
#if defined(REE_INT_LINEAR_ROW_X86)
  static_assert(kTileRows == 2 && kTileCols == 3, "the vector tiles below are 2 x 3 and 1 x 3");
  if (level == SimdLevel::kAvx512Vnni && mr == 2 && nr == 3) {
    return tileVnni<2, 3>(x, w, padded_k, products);
  }
  if (level != SimdLevel::kScalar) {
    // Row by row: 1 x 3 tiles where the columns are complete (AVX2's 16 registers fit no more),
    // 1 x 1 otherwise.
    for (int r = 0; r < mr; ++r) {
      int64_t* row = products + r * nr;
      if (nr == 3) {
        if (level == SimdLevel::kAvx512Vnni) {
          tileVnni<1, 3>(x + r, w, padded_k, row);
        } else {
          tileAvx2<1, 3>(x + r, w, padded_k, row);
        }
        continue;
      }
      for (int c = 0; c < nr; ++c) {
        if (level == SimdLevel::kAvx512Vnni) {
          tileVnni<1, 1>(x + r, w + c, padded_k, row + c);
        } else {
          tileAvx2<1, 1>(x + r, w + c, padded_k, row + c);
        }
      }
    }
    return;
  }
#endif
  (void)level;
  for (int r = 0; r < mr; ++r) {
    for (int c = 0; c < nr; ++c)
      products[r * nr + c] = productPortable(x[r], w[c], padded_k);
  }
}

}  // namespace ree::repops::cpu::int_linear_row_detail
