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

constexpr int kChunk = 128;  // elements converted to fp32 at a time while quantising

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
template <typename T>
__attribute__((target("avx2,f16c"))) uint32_t maxAbsBitsAvx2(const T* src, int64_t k) {
  return maxAbsBitsBody(src, k);
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

// The planes of n values with exponent e: RNE(v * 2^(shift - e)) (int_linear::quantize), then
// x's planes (d0 * 2^7 + d1, d2 * 2^7 + d3, d2) or w's (e0, e1 * 2^7 + e2, e1).
void planesPortable(const float* values, int n, int exponent, bool is_x, int16_t* const out[3]) {
  const int shift = is_x ? int_linear::kXShift : int_linear::kWShift;
  for (int i = 0; i < n; ++i) {
    const int32_t v = int_linear::quantize(values[i], exponent, shift);
    if (is_x) {
      int8_t d[int_linear::kXSlices];
      int_linear::splitX(v, d);
      out[0][i] = static_cast<int16_t>(d[0] * 128 + d[1]);
      out[1][i] = static_cast<int16_t>(d[2] * 128 + d[3]);
      out[2][i] = d[2];
    } else {
      int8_t e[int_linear::kWSlices];
      int_linear::splitW(v, e);
      out[0][i] = e[0];
      out[1][i] = static_cast<int16_t>(e[1] * 128 + e[2]);
      out[2][i] = e[1];
    }
  }
}

#if defined(REE_INT_LINEAR_ROW_X86)
// ((v + 64) & 127) - 64 in each lane: int_linear::lowSlice.
__attribute__((target("avx2"))) inline __m256i lowSlice8(__m256i v) {
  return _mm256_sub_epi32(
      _mm256_and_si256(_mm256_add_epi32(v, _mm256_set1_epi32(64)), _mm256_set1_epi32(127)),
      _mm256_set1_epi32(64));
}

// The three planes of 8 integers, from the digit recurrence of int_linear::splitDigits: with
// low = lowSlice(q), r = (q - low) / 2^7, mid = lowSlice(r), top = (r - mid) / 2^7, x's planes
// and w's are both (top, q - top * 2^14, mid).
__attribute__((target("avx2"))) inline void planes8(__m256i q, __m256i (&out)[3]) {
  const __m256i low = lowSlice8(q);
  const __m256i r = _mm256_srai_epi32(_mm256_sub_epi32(q, low), 7);
  const __m256i mid = lowSlice8(r);
  const __m256i top = _mm256_srai_epi32(_mm256_sub_epi32(r, mid), 7);
  out[0] = top;
  out[1] = _mm256_sub_epi32(q, _mm256_slli_epi32(top, 14));
  out[2] = mid;
}

// planesPortable for n a multiple of 16. The scaling is a binary32 product: v times 2^p is exact
// for |p| <= 100 unless it falls below 2^-126, and then |v * 2^p| < 2^-26 rounds to 0 either way;
// the conversion rounds to nearest even (the default MXCSR mode, as the portable path's binary64
// addition assumes). Other exponents (and non-finite rows) take the portable path.
__attribute__((target("avx2"))) void planesAvx2(const float* values, int n, int exponent, bool is_x,
                                                int16_t* const out[3]) {
  const int shift = is_x ? int_linear::kXShift : int_linear::kWShift;
  const int power = shift - exponent;
  if (exponent == int_linear::kNonFiniteExponent || power < -100 || power > 100) {
    return planesPortable(values, n, exponent, is_x, out);
  }
  const __m256 scale = _mm256_castsi256_ps(_mm256_set1_epi32((127 + power) << 23));
  for (int i = 0; i < n; i += 16) {
    __m256i a[3], b[3];
    planes8(_mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(values + i), scale)), a);
    planes8(_mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(values + i + 8), scale)), b);
    for (int p = 0; p < 3; ++p) {
      const __m256i packed = _mm256_permute4x64_epi64(_mm256_packs_epi32(a[p], b[p]), 0xD8);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out[p] + i), packed);
    }
  }
}
#endif

// Elements [0, padded_k) of a row (zeros beyond k) into q's row `out`, kChunk at a time.
template <typename T>
void quantizeRowOf(SimdLevel level, const T* src, int64_t k, bool is_x, const int32_t* known,
                   int64_t out, QuantizedRows* q) {
  const int32_t exponent = known ? *known : rowExponentOf(level, src, k);
  q->exponents[static_cast<size_t>(out)] = exponent;
  float values[kChunk];
  for (int64_t begin = 0; begin < q->padded_k; begin += kChunk) {
    const int n = static_cast<int>(std::min<int64_t>(kChunk, q->padded_k - begin));
    const int valid = static_cast<int>(std::max<int64_t>(0, std::min<int64_t>(n, k - begin)));
    for (int i = 0; i < valid; ++i)
      values[i] = loadFloat(src[begin + i]);
    for (int i = valid; i < n; ++i)
      values[i] = 0.0f;
    int16_t* const planes[3] = {q->plane(0, out) + begin, q->plane(1, out) + begin,
                                q->plane(2, out) + begin};
#if defined(REE_INT_LINEAR_ROW_X86)
    if (level != SimdLevel::kScalar) {
      planesAvx2(values, n, exponent, is_x, planes);
      continue;
    }
#endif
    planesPortable(values, n, exponent, is_x, planes);
  }
}

// ---- Exact row products

// P = 2^14 sum xh wh + sum (xh wl + xl wh + xd we), exactly: each k's second sum is below 2^27
// in magnitude (|xh| <= 2^13, |wl| <= 8256, the rest far smaller), so int32 per k, int64 overall.
int64_t productPortable(const RowPlanes& x, const RowPlanes& w, int64_t padded_k) {
  int64_t hh = 0, lo = 0;
  for (int64_t k = 0; k < padded_k; ++k) {
    hh += static_cast<int32_t>(x.p[0][k]) * w.p[0][k];
    lo += static_cast<int32_t>(x.p[0][k]) * w.p[1][k] +
          static_cast<int32_t>(x.p[1][k]) * w.p[0][k] + static_cast<int32_t>(x.p[2][k]) * w.p[2][k];
  }
  return hh * (int64_t{1} << 14) + lo;
}

#if defined(REE_INT_LINEAR_ROW_X86)
// The vector loops accumulate in int32 lanes for kVectorChunk elements at a time, then add the
// lanes into int64: per lane and 16 elements (two products of each kind), |sum xh wh| <=
// 2 * 2^13 * 64 = 2^20 and |sum (xh wl + xl wh + xd we)| <= 2 * (8192 * 8256 + 8256 * 64 +
// 64 * 64) < 136.4e6, so 15 steps stay below 2^31 - 1 (2.046e9).
constexpr int64_t kVectorChunk = 15 * 16;

// Sum of the 8 int32 lanes of hh * 2^14 + lo as 4 int64 lanes.
__attribute__((target("avx2"))) inline __m256i chunkTotal(__m256i hh, __m256i lo) {
  const __m256i hh64 = _mm256_add_epi64(_mm256_cvtepi32_epi64(_mm256_castsi256_si128(hh)),
                                        _mm256_cvtepi32_epi64(_mm256_extracti128_si256(hh, 1)));
  const __m256i lo64 = _mm256_add_epi64(_mm256_cvtepi32_epi64(_mm256_castsi256_si128(lo)),
                                        _mm256_cvtepi32_epi64(_mm256_extracti128_si256(lo, 1)));
  return _mm256_add_epi64(_mm256_slli_epi64(hh64, 14), lo64);
}

__attribute__((target("avx2"))) inline int64_t laneTotal(__m256i v) {
  const __m128i s = _mm_add_epi64(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  return _mm_cvtsi128_si64(s) + _mm_extract_epi64(s, 1);
}

inline const __m256i* vec(const int16_t* p) {
  return reinterpret_cast<const __m256i*>(p);
}

// The products of one x row with 4 w rows; MACC(acc, a, b) adds the pairwise int16 products of
// a and b to acc's int32 lanes (pmaddwd + paddd, or vpdpwssd).
#define REE_ROW_PRODUCTS4(MACC)                                          \
  __m256i total[4];                                                      \
  for (int c = 0; c < 4; ++c)                                            \
    total[c] = _mm256_setzero_si256();                                   \
  for (int64_t begin = 0; begin < padded_k; begin += kVectorChunk) {     \
    const int64_t end = std::min(padded_k, begin + kVectorChunk);        \
    __m256i hh[4], lo[4];                                                \
    for (int c = 0; c < 4; ++c)                                          \
      hh[c] = lo[c] = _mm256_setzero_si256();                            \
    for (int64_t k = begin; k < end; k += 16) {                          \
      const __m256i xh = _mm256_loadu_si256(vec(x.p[0] + k));            \
      const __m256i xl = _mm256_loadu_si256(vec(x.p[1] + k));            \
      const __m256i xd = _mm256_loadu_si256(vec(x.p[2] + k));            \
      for (int c = 0; c < 4; ++c) {                                      \
        const __m256i wh = _mm256_loadu_si256(vec(w[c].p[0] + k));       \
        hh[c] = MACC(hh[c], xh, wh);                                     \
        lo[c] = MACC(lo[c], xh, _mm256_loadu_si256(vec(w[c].p[1] + k))); \
        lo[c] = MACC(lo[c], xl, wh);                                     \
        lo[c] = MACC(lo[c], xd, _mm256_loadu_si256(vec(w[c].p[2] + k))); \
      }                                                                  \
    }                                                                    \
    for (int c = 0; c < 4; ++c)                                          \
      total[c] = _mm256_add_epi64(total[c], chunkTotal(hh[c], lo[c]));   \
  }                                                                      \
  for (int c = 0; c < 4; ++c)                                            \
    products[c] = laneTotal(total[c]);

#define REE_MACC_AVX2(acc, a, b) _mm256_add_epi32((acc), _mm256_madd_epi16((a), (b)))
#define REE_MACC_VNNI(acc, a, b) _mm256_dpwssd_epi32((acc), (a), (b))

__attribute__((target("avx2"))) void products4Avx2(const RowPlanes& x, const RowPlanes* w,
                                                   int64_t padded_k, int64_t* products) {
  REE_ROW_PRODUCTS4(REE_MACC_AVX2)
}

__attribute__((target("avx2,avx512f,avx512vl,avx512vnni"))) void products4Vnni(const RowPlanes& x,
                                                                               const RowPlanes* w,
                                                                               int64_t padded_k,
                                                                               int64_t* products) {
  REE_ROW_PRODUCTS4(REE_MACC_VNNI)
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

void rowProducts(SimdLevel level, const RowPlanes& x, const RowPlanes* w, int count,
                 int64_t padded_k, int64_t* products) {
#if defined(REE_INT_LINEAR_ROW_X86)
  if (count == 4 && level == SimdLevel::kAvx512Vnni) return products4Vnni(x, w, padded_k, products);
  if (count == 4 && level == SimdLevel::kAvx2) return products4Avx2(x, w, padded_k, products);
#endif
  (void)level;
  for (int c = 0; c < count; ++c)
    products[c] = productPortable(x, w[c], padded_k);
}

}  // namespace ree::repops::cpu::int_linear_row_detail
