// CPU repops-2 linear (docs/repops-spec/linear-int.md), the reference of the integer path.
//
// x and w are quantised once per call (per row and 128-block: exponent, integers, digits). The
// block product P (int_linear.h: the nine kept digit pairs, in units of 2^14) is computed from
// int16 combinations of the digits, x = (xh, xl, xd) = (d0 * 2^7 + d1, d2 * 2^7 + d3, d2) and
// w = (wh, wl, we) = (e0, e1 * 2^7 + e2, e1):
//   P = 2^14 sum xh wh + sum xh wl + sum xl wh + sum xd we,
// which expands to exactly the kept pairs (d0e0 2^21; d0e1, d1e0 2^14; d0e2, d1e1, d2e0 2^7;
// d1e2, d2e1, d3e0 2^0). Each product is int16 x int16 (pmaddwd when vectorised) and every sum is
// exact (sum xh wl in int64), so the vectorised and scalar loops give the same P. Blocks are then
// added in increasing order in binary64 (int_linear.h), one output at a time. Work is split over
// outputs only.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <vector>

#include "common/storage_element.h"
#include "ree/core/parallel.h"
#include "ree/kernels/int_linear.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define REE_INT_LINEAR_X86 1
#endif

namespace ree::repops {

namespace cpu {
namespace {

using int_linear::kBlock;

constexpr int kPanel = 16;     // output features per task
constexpr int kTaskRows = 64;  // rows of x per task
constexpr int kPlanes = 3;     // int16 planes per operand: x (xh, xl, xd), w (wh, wl, we)

std::atomic<bool> g_simd_enabled{true};

// Rows quantised per 128-block: the exponent of every (row, block) and the three int16 planes of
// the digits (see the top of the file), zero-padded to whole blocks.
struct QuantizedRows {
  int64_t blocks = 0;
  int64_t padded_k = 0;
  std::vector<int32_t> exponents;        // [rows][blocks]
  std::vector<int16_t> planes[kPlanes];  // [rows][padded_k] each

  void resize(int64_t rows, int64_t k_total) {
    blocks = (k_total + kBlock - 1) / kBlock;
    padded_k = blocks * kBlock;
    exponents.resize(static_cast<size_t>(rows * blocks));
    for (auto& plane : planes)
      plane.resize(static_cast<size_t>(rows * padded_k));
  }
  const int16_t* plane(int p, int64_t row) const { return planes[p].data() + row * padded_k; }
};

// The int16 planes of one integer of x (4 digits) or w (3 digits).
inline void xPlanes(int32_t v, int16_t out[kPlanes]) {
  int8_t d[int_linear::kXSlices];
  int_linear::splitX(v, d);
  out[0] = static_cast<int16_t>(d[0] * 128 + d[1]);
  out[1] = static_cast<int16_t>(d[2] * 128 + d[3]);
  out[2] = d[2];
}
inline void wPlanes(int32_t v, int16_t out[kPlanes]) {
  int8_t e[int_linear::kWSlices];
  int_linear::splitW(v, e);
  out[0] = e[0];
  out[1] = static_cast<int16_t>(e[1] * 128 + e[2]);
  out[2] = e[1];
}

// The planes of one block's 128 values with exponent `exponent`: RNE(v * 2^(shift - exponent))
// (int_linear::quantize), then x's or w's planes.
void blockPlanesPortable(const float* values, int exponent, int shift, bool is_x,
                         int16_t* const (&out)[kPlanes]) {
  for (int i = 0; i < kBlock; ++i) {
    int16_t digits[kPlanes];
    const int32_t v = int_linear::quantize(values[i], exponent, shift);
    if (is_x) {
      xPlanes(v, digits);
    } else {
      wPlanes(v, digits);
    }
    for (int p = 0; p < kPlanes; ++p)
      out[p][i] = digits[p];
  }
}

#if defined(REE_INT_LINEAR_X86)
// ((v + 64) & 127) - 64 in each lane: int_linear::lowSlice.
__attribute__((target("avx2"))) inline __m256i lowSlice8(__m256i v) {
  return _mm256_sub_epi32(
      _mm256_and_si256(_mm256_add_epi32(v, _mm256_set1_epi32(64)), _mm256_set1_epi32(127)),
      _mm256_set1_epi32(64));
}

// The three planes of 8 integers (int32 lanes), as int32 lanes, from the digit recurrence of
// int_linear::splitDigits: with low = lowSlice(q), r = (q - low) / 2^7, mid = lowSlice(r) and
// top = (r - mid) / 2^7, x's planes (d0 * 2^7 + d1, d2 * 2^7 + d3, d2) and w's (e0, e1 * 2^7 + e2,
// e1) are both (top, q - top * 2^14, mid).
__attribute__((target("avx2"))) inline void planes8(__m256i q, __m256i (&out)[kPlanes]) {
  const __m256i low = lowSlice8(q);
  const __m256i r = _mm256_srai_epi32(_mm256_sub_epi32(q, low), 7);
  const __m256i mid = lowSlice8(r);
  const __m256i top = _mm256_srai_epi32(_mm256_sub_epi32(r, mid), 7);
  out[0] = top;
  out[1] = _mm256_sub_epi32(q, _mm256_slli_epi32(top, 14));
  out[2] = mid;
}

// blockPlanesPortable, 16 values a step. The scaling is a binary32 product: v times 2^p is exact
// for |p| <= 100 unless it falls below 2^-126, and then |v * 2^p| < 2^-26 rounds to 0 either
// way; the conversion rounds to nearest even (the default MXCSR mode, as the portable path's
// binary64 addition assumes). Other exponents (and non-finite blocks) take the portable path.
__attribute__((target("avx2"))) void blockPlanesAvx2(const float* values, int exponent, int shift,
                                                     bool is_x, int16_t* const (&out)[kPlanes]) {
  const int power = shift - exponent;
  if (exponent == int_linear::kNonFiniteExponent || power < -100 || power > 100) {
    return blockPlanesPortable(values, exponent, shift, is_x, out);
  }
  const __m256 scale = _mm256_castsi256_ps(_mm256_set1_epi32((127 + power) << 23));
  for (int i = 0; i < kBlock; i += 16) {
    __m256i a[kPlanes], b[kPlanes];
    planes8(_mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(values + i), scale)), a);
    planes8(_mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(values + i + 8), scale)), b);
    for (int p = 0; p < kPlanes; ++p) {
      const __m256i packed = _mm256_permute4x64_epi64(_mm256_packs_epi32(a[p], b[p]), 0xD8);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out[p] + i), packed);
    }
  }
}
#endif

// Row `row` of `q` from `src` (k_total elements of type T): per block the exponent
// (int_linear::blockExponentOfMaxBits) and the planes of its integers (x's when is_x, else w's),
// through kPlanesOf (blockPlanesPortable or blockPlanesAvx2: the same integers).
template <typename T, void (*kPlanesOf)(const float*, int, int, bool, int16_t* const (&)[kPlanes])>
__attribute__((always_inline)) inline void quantizeRowBody(const T* src, int64_t k_total, int shift,
                                                           bool is_x, int64_t row,
                                                           QuantizedRows* q) {
  for (int64_t b = 0; b < q->blocks; ++b) {
    const int64_t begin = b * kBlock;
    const int count = static_cast<int>(std::min<int64_t>(kBlock, k_total - begin));
    float values[kBlock];
    uint32_t max_bits = 0;
    for (int i = 0; i < count; ++i) {
      values[i] = loadFloat(src[begin + i]);
      uint32_t abs_bits = floatBits(values[i]) & 0x7fffffffu;
      max_bits = max_bits > abs_bits ? max_bits : abs_bits;
    }
    for (int i = count; i < kBlock; ++i)
      values[i] = 0.0f;
    int exponent = int_linear::blockExponentOfMaxBits(max_bits);
    q->exponents[row * q->blocks + b] = exponent;
    const int64_t at = row * q->padded_k + begin;
    int16_t* const out[kPlanes] = {q->planes[0].data() + at, q->planes[1].data() + at,
                                   q->planes[2].data() + at};
    kPlanesOf(values, exponent, shift, is_x, out);
  }
}

template <typename T>
void quantizeRowPortable(const T* src, int64_t k_total, int shift, bool is_x, int64_t row,
                         QuantizedRows* q) {
  quantizeRowBody<T, blockPlanesPortable>(src, k_total, shift, is_x, row, q);
}

#if defined(REE_INT_LINEAR_X86)
// The loads and the block maximum compiled for AVX2, the integers and planes by blockPlanesAvx2.
template <typename T>
__attribute__((target("avx2"))) void quantizeRowAvx2(const T* src, int64_t k_total, int shift,
                                                     bool is_x, int64_t row, QuantizedRows* q) {
  quantizeRowBody<T, blockPlanesAvx2>(src, k_total, shift, is_x, row, q);
}
#endif

template <typename T>
void quantizeRow(bool simd, const T* src, int64_t k_total, int shift, bool is_x, int64_t row,
                 QuantizedRows* q) {
#if defined(REE_INT_LINEAR_X86)
  if (simd) return quantizeRowAvx2(src, k_total, shift, is_x, row, q);
#endif
  (void)simd;
  quantizeRowPortable(src, k_total, shift, is_x, row, q);
}

// Rows [row_begin, row_end) of a [rows, K] matrix with row stride `stride` into q's rows
// out_first, out_first + 1, ... (x's planes when is_x, else w's).
void quantizeRows(bool simd, const void* base, DType dtype, int64_t stride, int64_t k_total,
                  bool is_x, int64_t row_begin, int64_t row_end, int64_t out_first,
                  QuantizedRows* q) {
  const int shift = is_x ? int_linear::kXShift : int_linear::kWShift;
  for (int64_t row = row_begin; row < row_end; ++row) {
    const int64_t at = row * stride;
    const int64_t out = out_first + (row - row_begin);
    switch (dtype) {
      case DType::kF32:
        quantizeRow(simd, static_cast<const float*>(base) + at, k_total, shift, is_x, out, q);
        break;
      case DType::kBF16:
        quantizeRow(simd, static_cast<const bf16_t*>(base) + at, k_total, shift, is_x, out, q);
        break;
      default:
        quantizeRow(simd, static_cast<const f16_t*>(base) + at, k_total, shift, is_x, out, q);
        break;
    }
  }
}

// Row starts of the three planes of one quantised row (x's or w's).
struct RowPlanes {
  const int16_t* p[kPlanes];
};

RowPlanes rowPlanes(const QuantizedRows& q, int64_t row) {
  return {{q.plane(0, row), q.plane(1, row), q.plane(2, row)}};
}

// The block product at offset `at`: P = 2^14 sum xh wh + sum xh wl + sum xl wh + sum xd we (see
// the top of the file). |sum xh wl| < 2^33 needs int64; the other sums fit int32.
int64_t blockDotPortable(const RowPlanes& x, const RowPlanes& w, int64_t at) {
  int32_t hh = 0, lh_dd = 0;
  int64_t hl = 0;
  for (int64_t k = at; k < at + kBlock; ++k) {
    hh += static_cast<int32_t>(x.p[0][k]) * w.p[0][k];
    hl += static_cast<int32_t>(x.p[0][k]) * w.p[1][k];
    lh_dd +=
        static_cast<int32_t>(x.p[1][k]) * w.p[0][k] + static_cast<int32_t>(x.p[2][k]) * w.p[2][k];
  }
  return static_cast<int64_t>(hh) * (int64_t{1} << 14) + hl + lh_dd;
}

#if defined(REE_INT_LINEAR_X86)
// The four int32 lane sums of a, b, c, d (each 8 lanes, sums within int32) as int64 lanes.
__attribute__((target("avx2"))) inline __m256i laneSums4(__m256i a, __m256i b, __m256i c,
                                                         __m256i d) {
  __m256i ab = _mm256_hadd_epi32(a, b), cd = _mm256_hadd_epi32(c, d);
  __m256i abcd = _mm256_hadd_epi32(ab, cd);
  return _mm256_cvtepi32_epi64(
      _mm_add_epi32(_mm256_castsi256_si128(abcd), _mm256_extracti128_si256(abcd, 1)));
}

// The same for lanes whose int32 values fit but whose sums may not: widened to int64 first.
__attribute__((target("avx2"))) inline __m256i wideLanes(__m256i v) {
  return _mm256_add_epi64(_mm256_cvtepi32_epi64(_mm256_castsi256_si128(v)),
                          _mm256_cvtepi32_epi64(_mm256_extracti128_si256(v, 1)));
}
__attribute__((target("avx2"))) inline __m256i wideLaneSums4(__m256i a, __m256i b, __m256i c,
                                                             __m256i d) {
  __m256i sa = wideLanes(a), sb = wideLanes(b), sc = wideLanes(c), sd = wideLanes(d);
  __m256i ab = _mm256_add_epi64(_mm256_unpacklo_epi64(sa, sb), _mm256_unpackhi_epi64(sa, sb));
  __m256i cd = _mm256_add_epi64(_mm256_unpacklo_epi64(sc, sd), _mm256_unpackhi_epi64(sc, sd));
  return _mm256_add_epi64(_mm256_permute2x128_si256(ab, cd, 0x20),
                          _mm256_permute2x128_si256(ab, cd, 0x31));
}

// The three sums of one block for w rows c and c + 1 (six accumulators, so that with x's three
// planes and w's loads they stay within the 16 ymm registers).
__attribute__((target("avx2"))) inline void blockSums2Avx2(const RowPlanes& x, const RowPlanes* w,
                                                           int64_t at, __m256i* hh, __m256i* hl,
                                                           __m256i* lh_dd) {
  for (int c = 0; c < 2; ++c)
    hh[c] = hl[c] = lh_dd[c] = _mm256_setzero_si256();
#pragma GCC unroll 1
  for (int64_t k = at; k < at + kBlock; k += 16) {
    __m256i xh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.p[0] + k));
    __m256i xl = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.p[1] + k));
    __m256i xd = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.p[2] + k));
    for (int c = 0; c < 2; ++c) {
      __m256i wh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[c].p[0] + k));
      __m256i wl = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[c].p[1] + k));
      __m256i we = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[c].p[2] + k));
      hh[c] = _mm256_add_epi32(hh[c], _mm256_madd_epi16(xh, wh));
      hl[c] = _mm256_add_epi32(hl[c], _mm256_madd_epi16(xh, wl));
      lh_dd[c] = _mm256_add_epi32(
          lh_dd[c], _mm256_add_epi32(_mm256_madd_epi16(xl, wh), _mm256_madd_epi16(xd, we)));
    }
  }
}

// The block products at offset `at` of one x row with 4 w rows, as int64 lanes.
__attribute__((target("avx2"))) inline __m256i blockDots4Avx2(const RowPlanes& x,
                                                              const RowPlanes* w, int64_t at) {
  __m256i hh[4], hl[4], lh_dd[4];
  blockSums2Avx2(x, w, at, hh, hl, lh_dd);
  blockSums2Avx2(x, w + 2, at, hh + 2, hl + 2, lh_dd + 2);
  // Per lane: 16 products each, |hl| < 2^31 per lane, the others far less.
  return _mm256_add_epi64(
      _mm256_add_epi64(_mm256_slli_epi64(laneSums4(hh[0], hh[1], hh[2], hh[3]), 14),
                       wideLaneSums4(hl[0], hl[1], hl[2], hl[3])),
      laneSums4(lh_dd[0], lh_dd[1], lh_dd[2], lh_dd[3]));
}

// The whole dots of one x row with 4 w rows; w_exp4[b * 4 + c] is w row c's exponent of block b.
// The block combination runs 4 outputs wide: P in int64 lanes, converted to binary64 exactly
// (|P| < 2^51: add the bits of 1.5 * 2^52, subtract 1.5 * 2^52), times the power-of-two scale
// built from its bits (a non-finite block's scale is all-ones bits: NaN), then one binary64
// addition per output and block in increasing block order: int_linear.h's steps.
__attribute__((target("avx2"))) void rowDots4Avx2(const RowPlanes& x, const RowPlanes* w,
                                                  const int32_t* x_exp, const int32_t* w_exp4,
                                                  int64_t blocks, double* out) {
  const __m256d magic = _mm256_set1_pd(6755399441055744.0);  // 1.5 * 2^52
  const __m128i sentinel = _mm_set1_epi32(int_linear::kNonFiniteExponent);
  const __m128i bias = _mm_set1_epi32(1023 - int_linear::kXShift - int_linear::kWShift +
                                      int_linear::kProductUnitShift);
  __m256d acc = _mm256_setzero_pd();
  for (int64_t b = 0; b < blocks; ++b) {
    const __m256i product = blockDots4Avx2(x, w, b * kBlock);
    const __m256d product_f64 = _mm256_sub_pd(
        _mm256_castsi256_pd(_mm256_add_epi64(product, _mm256_castpd_si256(magic))), magic);
    const __m128i w_e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w_exp4 + b * 4));
    const __m128i x_e = _mm_set1_epi32(x_exp[b]);
    const __m128i power = _mm_add_epi32(_mm_add_epi32(x_e, w_e), bias);
    const __m128i bad =
        _mm_or_si128(_mm_cmpeq_epi32(w_e, sentinel), _mm_cmpeq_epi32(x_e, sentinel));
    const __m256i scale_bits = _mm256_or_si256(_mm256_slli_epi64(_mm256_cvtepi32_epi64(power), 52),
                                               _mm256_cvtepi32_epi64(bad));
    const __m256d term = _mm256_mul_pd(product_f64, _mm256_castsi256_pd(scale_bits));
    acc = _mm256_add_pd(acc, term);
  }
  _mm256_storeu_pd(out, acc);
}

bool cpuHasAvx2() {
  static const bool has = __builtin_cpu_supports("avx2");
  return has;
}
#endif

// The dots of x rows [m0, m1) (of xq) with the panel's `count` w rows (of wq) into
// dots[(m - m0) * kPanel + c]: for each row and group of 4 outputs, the blocks in increasing
// order, each added to the output's binary64 accumulator (the x row stays in L1, the panel in L2).
// The panel is wq's rows w0 .. w0 + count - 1.
void taskDots(bool simd, const QuantizedRows& xq, int64_t m0, int64_t m1, const QuantizedRows& wq,
              int64_t w0, int count, float* dots) {
  // The panel's exponents by block, 4 outputs side by side: w_exp4[(c0 / 4)][b * 4 + c].
  const int32_t* w_exponents = wq.exponents.data() + w0 * wq.blocks;
  std::vector<int32_t> w_exp4(static_cast<size_t>(kPanel * wq.blocks));
  for (int c = 0; c < count; ++c) {
    for (int64_t b = 0; b < wq.blocks; ++b)
      w_exp4[(c / 4) * 4 * wq.blocks + b * 4 + c % 4] = w_exponents[c * wq.blocks + b];
  }
  for (int64_t m = m0; m < m1; ++m) {
    const RowPlanes x = rowPlanes(xq, m);
    const int32_t* x_exp = xq.exponents.data() + m * xq.blocks;
    for (int c0 = 0; c0 < count; c0 += 4) {
      const int cols = std::min(4, count - c0);
      RowPlanes w[4];
      for (int c = 0; c < cols; ++c)
        w[c] = rowPlanes(wq, w0 + c0 + c);
      double acc[4] = {0.0, 0.0, 0.0, 0.0};
#if defined(REE_INT_LINEAR_X86)
      if (simd && cols == 4) {
        rowDots4Avx2(x, w, x_exp, w_exp4.data() + c0 * wq.blocks, xq.blocks, acc);
      } else
#endif
      {
        for (int64_t b = 0; b < xq.blocks; ++b) {
          for (int c = 0; c < cols; ++c) {
            const int64_t product = blockDotPortable(x, w[c], b * kBlock);
            const double scale =
                int_linear::blockScale(x_exp[b], w_exponents[(c0 + c) * wq.blocks + b]);
            acc[c] = int_linear::addBlock(acc[c], product, scale);
          }
        }
      }
      for (int c = 0; c < cols; ++c)
        dots[(m - m0) * kPanel + c0 + c] = int_linear::roundDot(acc[c]);
    }
  }
}

}  // namespace

void setIntLinearSimdEnabled(bool enabled) {
  g_simd_enabled.store(enabled);
}

struct IntLinearWeights::Impl {
  QuantizedRows rows;
};

IntLinearWeights::IntLinearWeights() : impl_(std::make_unique<Impl>()) {}
IntLinearWeights::~IntLinearWeights() = default;
int64_t IntLinearWeights::rows() const {
  return rows_;
}
int64_t IntLinearWeights::k() const {
  return k_;
}

int64_t intLinearWeightsBytes(int64_t n, int64_t k) {
  const int64_t blocks = (k + kBlock - 1) / kBlock;
  return n * blocks * (kPlanes * kBlock * 2 + 4);
}

Status prepareIntLinearWeights(const LinearArgs& a, std::unique_ptr<IntLinearWeights>* out) {
  REE_CHECK_ARG(out != nullptr, "prepareIntLinearWeights: out is null");
  REE_CHECK_ARG(a.w != nullptr && a.n >= 1 && a.k >= 1,
                "prepareIntLinearWeights: w must be a non-empty [n, k] matrix (n=%lld, k=%lld)",
                static_cast<long long>(a.n), static_cast<long long>(a.k));
#if defined(REE_INT_LINEAR_X86)
  const bool simd = g_simd_enabled.load() && cpuHasAvx2();
#else
  const bool simd = false;
#endif
  auto prepared = std::unique_ptr<IntLinearWeights>(new IntLinearWeights());
  prepared->rows_ = a.n;
  prepared->k_ = a.k;
  QuantizedRows& wq = prepared->impl_->rows;
  wq.resize(a.n, a.k);
  parallelFor(a.n, 16, [&](int64_t begin, int64_t end) {
    quantizeRows(simd, a.w, a.w_dtype, a.wStride(), a.k, /*is_x=*/false, begin, end, begin, &wq);
  });
  *out = std::move(prepared);
  return Status::kSuccess;
}

Status intLinear(const LinearArgs& a) {
  return intLinear(a, nullptr);
}

Status intLinear(const LinearArgs& a, const IntLinearWeights* prepared) {
  REE_RETURN_IF_ERROR(validateIntLinearArgs(a));
  REE_CHECK_ARG(prepared == nullptr || (prepared->rows() == a.n && prepared->k() == a.k),
                "intLinear: prepared weights of [%lld, %lld] for a [%lld, %lld] w",
                static_cast<long long>(prepared ? prepared->rows() : 0),
                static_cast<long long>(prepared ? prepared->k() : 0), static_cast<long long>(a.n),
                static_cast<long long>(a.k));
  if (a.m == 0) return Status::kSuccess;
  const int64_t x_stride = a.xStride(), w_stride = a.wStride(), y_stride = a.yStride();
  bool simd = g_simd_enabled.load();
#if defined(REE_INT_LINEAR_X86)
  simd = simd && cpuHasAvx2();
#else
  simd = false;
#endif

  QuantizedRows xq;
  xq.resize(a.m, a.k);
  parallelFor(a.m, 4, [&](int64_t begin, int64_t end) {
    quantizeRows(simd, a.x, a.x_dtype, x_stride, a.k, /*is_x=*/true, begin, end, begin, &xq);
  });

  const int64_t panels = (a.n + kPanel - 1) / kPanel;
  const int64_t row_tasks = (a.m + kTaskRows - 1) / kTaskRows;
  parallelFor(panels * row_tasks, 1, [&](int64_t task_begin, int64_t task_end) {
    QuantizedRows local;  // this thread's panel of w, quantised once per panel (unprepared w)
    if (prepared == nullptr) local.resize(kPanel, a.k);
    const QuantizedRows& wq = prepared ? prepared->impl_->rows : local;
    int64_t quantized_panel = -1;
    for (int64_t task = task_begin; task < task_end; ++task) {
      const int64_t panel = task / row_tasks;
      const int64_t n0 = panel * kPanel;
      const int count = static_cast<int>(std::min<int64_t>(kPanel, a.n - n0));
      if (prepared == nullptr && panel != quantized_panel) {
        quantizeRows(simd, a.w, a.w_dtype, w_stride, a.k, /*is_x=*/false, n0, n0 + count, 0,
                     &local);
        quantized_panel = panel;
      }
      const int64_t m0 = (task % row_tasks) * kTaskRows;
      const int64_t m1 = std::min(a.m, m0 + kTaskRows);
      float dots[kTaskRows * kPanel];
      taskDots(simd, xq, m0, m1, wq, prepared ? n0 : 0, count, dots);
      for (int64_t m = m0; m < m1; ++m) {
        for (int c = 0; c < count; ++c) {
          const int64_t n = n0 + c;
          float bias = a.bias ? loadStorageElement(a.bias, a.bias_dtype, n) : 0.0f;
          detail::linearStore(
              a.y, a.y_dtype == DType::kBF16, m * y_stride + n,
              detail::linearFinish(dots[(m - m0) * kPanel + c], a.bias != nullptr, bias),
              a.accumulate);
        }
      }
    }
  });
  return Status::kSuccess;
}

}  // namespace cpu
}  // namespace ree::repops
