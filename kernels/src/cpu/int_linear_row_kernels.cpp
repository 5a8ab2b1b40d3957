// Row exponents, int16 digit planes and exact row products of the CPU repops-3 linear
// (int_linear_row_simd.h), scalar and vectorised with the same integers.
#include <algorithm>
#include <cstdint>

#include "common/storage_element.h"
#include "cpu/int_linear_row_simd.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
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

// The planes of one integer: x's (d0 * 2^7 + d1, d2 * 2^7 + d3, d2), w's (e0, e1 * 2^7 + e2, e1).
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
    *out1 = static_cast<int16_t>(e[1] * 128 + e[2]);
    *out2 = e[1];
  }
}

// Elements [begin, padded_k) of a row into its planes at `out`: RNE(v * 2^(shift - e))
// (int_linear::quantize) below k, zeros after.
template <typename T>
void quantizeTailPortable(const T* src, int64_t begin, int64_t k, int32_t exponent, bool is_x,
                          int64_t padded_k, int16_t* out) {
  const int shift = is_x ? int_linear::kXShift : int_linear::kWShift;
  for (int64_t i = begin; i < padded_k; ++i) {
    const int32_t v = i < k ? int_linear::quantize(loadFloat(src[i]), exponent, shift) : 0;
    planesOf(v, is_x, out + planeIndex(0, i), out + planeIndex(1, i), out + planeIndex(2, i));
  }
}

// The exponent's scale suits the vector quantisation: a finite row with |S - e| <= 100.
inline bool vectorScaleFits(int32_t exponent, bool is_x) {
  const int power = (is_x ? int_linear::kXShift : int_linear::kWShift) - exponent;
  return exponent != int_linear::kNonFiniteExponent && power >= -100 && power <= 100;
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

// 2^p as binary32 lanes (|p| <= 100).
__attribute__((target("avx2"))) inline __m256 powerOfTwo8(int power) {
  return _mm256_castsi256_ps(_mm256_set1_epi32((127 + power) << 23));
}

// The planes of 16 elements from the digit identities q = top * 2^14 + rest with rest in
// [-8256, 8127], i.e. top = floor((q + 8256) / 2^14), and rest = mid * 2^7 + low with low in
// [-64, 63], i.e. mid = floor((rest + 64) / 2^7): these are the balanced digits' sums, so (top,
// rest, mid) is x's (d0 2^7 + d1, d2 2^7 + d3, d2) and w's (e0, e1 2^7 + e2, e1) alike.
// q = RNE(v * 2^p) is a binary32 product and a conversion: v times 2^p is exact for |p| <= 100
// unless it falls below 2^-126, and then |v * 2^p| < 2^-26 rounds to 0 either way; the conversion
// rounds to nearest even (the default MXCSR mode, as the portable path's binary64 addition
// assumes).
template <typename T>
__attribute__((target("avx2,f16c"))) inline void planes16(const T* src, __m256 scale,
                                                          __m256i (&planes)[3]) {
  __m256 a, b;
  load16(src, a, b);
  const __m256i qa = _mm256_cvtps_epi32(_mm256_mul_ps(a, scale));
  const __m256i qb = _mm256_cvtps_epi32(_mm256_mul_ps(b, scale));
  const __m256i bias = _mm256_set1_epi32(8256);
  const __m256i top_a = _mm256_srai_epi32(_mm256_add_epi32(qa, bias), 14);
  const __m256i top_b = _mm256_srai_epi32(_mm256_add_epi32(qb, bias), 14);
  planes[0] = _mm256_packs_epi32(top_a, top_b);
  planes[1] = _mm256_packs_epi32(_mm256_sub_epi32(qa, _mm256_slli_epi32(top_a, 14)),
                                 _mm256_sub_epi32(qb, _mm256_slli_epi32(top_b, 14)));
  planes[2] = _mm256_srai_epi16(_mm256_add_epi16(planes[1], _mm256_set1_epi16(64)), 7);
}

// The row with exponent e, 16 elements a step, the tail (and rows whose scale does not suit the
// vector quantisation) by quantizeTailPortable.
template <bool kIsX, typename T>
__attribute__((target("avx2,f16c"))) void quantizeRowAvx2(const T* src, int64_t k, int32_t exponent,
                                                          int64_t padded_k, int16_t* out) {
  if (!vectorScaleFits(exponent, kIsX)) {
    return quantizeTailPortable(src, 0, k, exponent, kIsX, padded_k, out);
  }
  const __m256 scale = powerOfTwo8((kIsX ? int_linear::kXShift : int_linear::kWShift) - exponent);
  int64_t i = 0;
  for (; i + 16 <= k; i += 16) {
    __m256i planes[3];
    planes16(src + i, scale, planes);
    __m256i* group = reinterpret_cast<__m256i*>(out + planeIndex(0, i));
    for (int p = 0; p < 3; ++p)
      _mm256_storeu_si256(group + p, planes[p]);
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
  if (level != SimdLevel::kScalar) {
    return is_x ? quantizeRowAvx2<true>(src, k, exponent, q->padded_k, planes)
                : quantizeRowAvx2<false>(src, k, exponent, q->padded_k, planes);
  }
#endif
  quantizeTailPortable(src, 0, k, exponent, is_x, q->padded_k, planes);
}

// ---- Exact products

// P = 2^14 sum xh e0 + sum (xh wl + xl e0 + d2 e1), exactly: with xh = d0 2^7 + d1, xl = d2 2^7
// + d3 and wl = e1 2^7 + e2 these are the nine kept digit pairs and nothing else. A k's second
// term is below 2^27 in magnitude (|xh| <= 2^13, |xl|, |wl| <= 8256, the other digits <= 64).
int64_t productPortable(const RowPlanes& x, const RowPlanes& w, int64_t padded_k) {
  int64_t high = 0, low = 0;
  for (int64_t group = 0; group < padded_k * kPlanes; group += kPlanes * kGroup) {
    const int16_t* xg = x.data + group;
    const int16_t* wg = w.data + group;
    for (int i = 0; i < kGroup; ++i) {
      const int32_t xh = xg[i], xl = xg[kGroup + i], xd = xg[2 * kGroup + i];
      const int32_t e0 = wg[i], wl = wg[kGroup + i], e1 = wg[2 * kGroup + i];
      high += xh * e0;
      low += xh * wl + xl * e0 + xd * e1;
    }
  }
  return high * (int64_t{1} << 14) + low;
}

#if defined(REE_INT_LINEAR_ROW_X86)
// The vector loops accumulate in int32 lanes. Per lane and 16 elements (two products per term):
// |sum xh e0| <= 2 * 2^13 * 64 = 2^20 and |sum (xh wl + xl e0 + d2 e1)| <= 2 * (2^13 * 8256 +
// 8256 * 64 + 64 * 64) = 136,331,264. So the low sum is added into int64 lanes every 15 steps
// (15 * 136,331,264 < 2^31) and the high sum every 2040 steps (2040 * 2^20 < 2^31).
constexpr int64_t kLowChunk = 15 * 16;
constexpr int64_t kHighChunk = 136 * kLowChunk;

// The 8 int32 lanes of v added pairwise into 4 int64 lanes.
__attribute__((target("avx2"))) inline __m256i widen(__m256i v) {
  return _mm256_add_epi64(_mm256_cvtepi32_epi64(_mm256_castsi256_si128(v)),
                          _mm256_cvtepi32_epi64(_mm256_extracti128_si256(v, 1)));
}

// The sum of the 4 int64 lanes of v.
__attribute__((target("avx2"))) inline int64_t laneSum64(__m256i v) {
  const __m128i s = _mm_add_epi64(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  return _mm_cvtsi128_si64(s) + _mm_extract_epi64(s, 1);
}

// P from the high sum's int32 lanes and the low sum's int64 lanes.
__attribute__((target("avx2"))) inline int64_t productOf(__m256i high, __m256i low64) {
  return laneSum64(widen(high)) * (int64_t{1} << 14) + laneSum64(low64);
}

inline const __m256i* vec(const int16_t* p) {
  return reinterpret_cast<const __m256i*>(p);
}

// The shared shape of the vector loops: ROWS outputs (index i), each with int32 lanes high[i]
// and low[i] and int64 lanes low64[i]; STEP(k) adds 16 elements at offset k. Then total[i] = P.
#define REE_CHUNKED_PRODUCTS(ROWS, STEP)                                 \
  int64_t total[ROWS] = {};                                              \
  for (int64_t outer = 0; outer < padded_k; outer += kHighChunk) {       \
    const int64_t outer_end = std::min(padded_k, outer + kHighChunk);    \
    __m256i high[ROWS], low64[ROWS];                                     \
    for (int i = 0; i < ROWS; ++i)                                       \
      high[i] = low64[i] = _mm256_setzero_si256();                       \
    for (int64_t begin = outer; begin < outer_end; begin += kLowChunk) { \
      const int64_t end = std::min(outer_end, begin + kLowChunk);        \
      __m256i low[ROWS];                                                 \
      for (int i = 0; i < ROWS; ++i)                                     \
        low[i] = _mm256_setzero_si256();                                 \
      for (int64_t k = begin; k < end; k += 16) {                        \
        STEP(k)                                                          \
      }                                                                  \
      for (int i = 0; i < ROWS; ++i)                                     \
        low64[i] = _mm256_add_epi64(low64[i], widen(low[i]));            \
    }                                                                    \
    for (int i = 0; i < ROWS; ++i)                                       \
      total[i] += productOf(high[i], low64[i]);                          \
  }

// One output's four products of 16 elements: MACC(acc, a, b) adds the pairwise int16 products
// of a and b to acc's int32 lanes (pmaddwd + paddd, or vpdpwssd).
#define REE_OUTPUT_STEP(MACC, i, xh, xl, xd, e0, wl, e1) \
  high[i] = MACC(high[i], xh, e0);                       \
  low[i] = MACC(low[i], xh, wl);                         \
  low[i] = MACC(low[i], xl, e0);                         \
  low[i] = MACC(low[i], xd, e1);

#define REE_MACC_AVX2(acc, a, b) _mm256_add_epi32((acc), _mm256_madd_epi16((a), (b)))
#define REE_MACC_VNNI(acc, a, b) _mm256_dpwssd_epi32((acc), (a), (b))

// MR x rows with NR w rows (planes) into products[r * NR + c].
#define REE_TILE_STEP(MACC)                                                        \
  {                                                                                \
    __m256i xv[MR][3];                                                             \
    for (int r = 0; r < MR; ++r)                                                   \
      for (int p = 0; p < 3; ++p)                                                  \
        xv[r][p] = _mm256_loadu_si256(vec(x[r].data + k * 3 + p * 16));            \
    for (int c = 0; c < NR; ++c) {                                                 \
      const __m256i e0 = _mm256_loadu_si256(vec(w[c].data + k * 3));               \
      const __m256i wl = _mm256_loadu_si256(vec(w[c].data + k * 3 + 16));          \
      const __m256i e1 = _mm256_loadu_si256(vec(w[c].data + k * 3 + 32));          \
      for (int r = 0; r < MR; ++r) {                                               \
        REE_OUTPUT_STEP(MACC, r* NR + c, xv[r][0], xv[r][1], xv[r][2], e0, wl, e1) \
      }                                                                            \
    }                                                                              \
  }
#define REE_TILE_STEP_AVX2(k) REE_TILE_STEP(REE_MACC_AVX2)
#define REE_TILE_STEP_VNNI(k) REE_TILE_STEP(REE_MACC_VNNI)

template <int MR, int NR>
__attribute__((target("avx2"))) void tileAvx2(const RowPlanes* x, const RowPlanes* w,
                                              int64_t padded_k, int64_t* products) {
  REE_CHUNKED_PRODUCTS(MR * NR, REE_TILE_STEP_AVX2)
  for (int i = 0; i < MR * NR; ++i)
    products[i] = total[i];
}

template <int MR, int NR>
__attribute__((target("avx2,avx512f,avx512vl,avx512vnni"))) void tileVnni(const RowPlanes* x,
                                                                          const RowPlanes* w,
                                                                          int64_t padded_k,
                                                                          int64_t* products) {
  REE_CHUNKED_PRODUCTS(MR * NR, REE_TILE_STEP_VNNI)
  for (int i = 0; i < MR * NR; ++i)
    products[i] = total[i];
}

// MR x rows with one w row quantised on the fly (its planes stay in registers; the last,
// partial group of 16 comes from the portable quantisation in `tail`), for few rows of x.
#define REE_FUSED_STEP(MACC)                                              \
  {                                                                       \
    __m256i e[3];                                                         \
    if (k < full) {                                                       \
      planes16(src + k, scale, e);                                        \
    } else {                                                              \
      for (int p = 0; p < 3; ++p)                                         \
        e[p] = _mm256_load_si256(vec(tail + p * kGroup));                 \
    }                                                                     \
    for (int r = 0; r < MR; ++r) {                                        \
      const __m256i xh = _mm256_loadu_si256(vec(x[r].data + k * 3));      \
      const __m256i xl = _mm256_loadu_si256(vec(x[r].data + k * 3 + 16)); \
      const __m256i xd = _mm256_loadu_si256(vec(x[r].data + k * 3 + 32)); \
      REE_OUTPUT_STEP(MACC, r, xh, xl, xd, e[0], e[1], e[2])              \
    }                                                                     \
  }
#define REE_FUSED_STEP_AVX2(k) REE_FUSED_STEP(REE_MACC_AVX2)
#define REE_FUSED_STEP_VNNI(k) REE_FUSED_STEP(REE_MACC_VNNI)

// The portable planes of w's last, partial group of 16 (from element `full` on).
template <typename T>
void tailGroup(const T* src, int64_t full, int64_t k, int32_t exponent, int16_t* tail) {
  for (int i = 0; i < kGroup; ++i) {
    const int32_t v =
        full + i < k ? int_linear::quantize(loadFloat(src[full + i]), exponent, int_linear::kWShift)
                     : 0;
    planesOf(v, false, tail + i, tail + kGroup + i, tail + 2 * kGroup + i);
  }
}

template <int MR, typename T>
__attribute__((target("avx2,f16c"))) void fusedAvx2(const RowPlanes* x, const T* src,
                                                    int64_t k_total, int32_t exponent,
                                                    int64_t padded_k, int64_t* products) {
  const int64_t full = k_total / kGroup * kGroup;
  alignas(32) int16_t tail[kPlanes * kGroup];
  tailGroup(src, full, k_total, exponent, tail);
  const __m256 scale = powerOfTwo8(int_linear::kWShift - exponent);
  REE_CHUNKED_PRODUCTS(MR, REE_FUSED_STEP_AVX2)
  for (int i = 0; i < MR; ++i)
    products[i] = total[i];
}

template <int MR, typename T>
__attribute__((target("avx2,f16c,avx512f,avx512vl,avx512vnni"))) void fusedVnni(
    const RowPlanes* x, const T* src, int64_t k_total, int32_t exponent, int64_t padded_k,
    int64_t* products) {
  const int64_t full = k_total / kGroup * kGroup;
  alignas(32) int16_t tail[kPlanes * kGroup];
  tailGroup(src, full, k_total, exponent, tail);
  const __m256 scale = powerOfTwo8(int_linear::kWShift - exponent);
  REE_CHUNKED_PRODUCTS(MR, REE_FUSED_STEP_VNNI)
  for (int i = 0; i < MR; ++i)
    products[i] = total[i];
}

// fusedRowProducts for one dtype: VNNI takes up to 4 rows at once, AVX2 (16 registers) 2.
template <typename T>
void fusedRows(SimdLevel level, const RowPlanes* x, int mr, const T* src, int64_t k,
               int32_t exponent, int64_t padded_k, int64_t* products) {
  if (level == SimdLevel::kAvx512Vnni) {
    switch (mr) {
      case 1:
        return fusedVnni<1>(x, src, k, exponent, padded_k, products);
      case 2:
        return fusedVnni<2>(x, src, k, exponent, padded_k, products);
      case 3:
        return fusedVnni<3>(x, src, k, exponent, padded_k, products);
      default:
        return fusedVnni<4>(x, src, k, exponent, padded_k, products);
    }
  }
  for (int r = 0; r < mr; r += 2) {
    if (mr - r >= 2) {
      fusedAvx2<2>(x + r, src, k, exponent, padded_k, products + r);
    } else {
      fusedAvx2<1>(x + r, src, k, exponent, padded_k, products + r);
    }
  }
}
#endif

}  // namespace

#if defined(REE_INT_LINEAR_ROW_X86)
// F16C from CPUID leaf 1 (ECX bit 29): clang 14's __builtin_cpu_supports does not know "f16c".
static bool hasF16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
}
#endif

SimdLevel bestSimdLevel() {
#if defined(REE_INT_LINEAR_ROW_X86)
  static const SimdLevel level = [] {
    if (__builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni")) {
      return SimdLevel::kAvx512Vnni;
    }
    if (__builtin_cpu_supports("avx2") && hasF16c()) return SimdLevel::kAvx2;
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
  const bool vnni = level == SimdLevel::kAvx512Vnni;
  if (vnni && mr == kTileRows && nr == kTileCols) {
    return tileVnni<kTileRows, kTileCols>(x, w, padded_k, products);
  }
  if (level != SimdLevel::kScalar) {
    // Row by row: 1 x 3 tiles (AVX2's 16 registers fit no more), then 1 x 1.
    for (int r = 0; r < mr; ++r) {
      int64_t* row = products + r * nr;
      int c = 0;
      for (; c + 3 <= nr; c += 3) {
        if (vnni) {
          tileVnni<1, 3>(x + r, w + c, padded_k, row + c);
        } else {
          tileAvx2<1, 3>(x + r, w + c, padded_k, row + c);
        }
      }
      for (; c < nr; ++c) {
        if (vnni) {
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

bool fusedRowProducts(SimdLevel level, const RowPlanes* x, int mr, const void* w, DType dtype,
                      int64_t offset, int64_t k, int32_t w_exponent, int64_t padded_k,
                      int64_t* products) {
#if defined(REE_INT_LINEAR_ROW_X86)
  if (level == SimdLevel::kScalar || mr > kFusedRows || !vectorScaleFits(w_exponent, false)) {
    return false;
  }
  switch (dtype) {
    case DType::kF32:
      fusedRows(level, x, mr, static_cast<const float*>(w) + offset, k, w_exponent, padded_k,
                products);
      break;
    case DType::kBF16:
      fusedRows(level, x, mr, static_cast<const bf16_t*>(w) + offset, k, w_exponent, padded_k,
                products);
      break;
    default:
      fusedRows(level, x, mr, static_cast<const f16_t*>(w) + offset, k, w_exponent, padded_k,
                products);
      break;
  }
  return true;
#else
  (void)level, (void)x, (void)mr, (void)w, (void)dtype, (void)offset, (void)k, (void)w_exponent,
      (void)padded_k, (void)products;
  return false;
#endif
}

}  // namespace ree::repops::cpu::int_linear_row_detail
