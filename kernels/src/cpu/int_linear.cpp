// CPU repops-2 linear (docs/repops-spec/linear-int.md), the reference of the integer path.
//
// x and w are quantised once per call (per row and 128-block: exponent, then the integers). A
// block's integer dot product P = sum X * W is computed exactly in two int32 halves: X = xh * 2^11
// + xl with xl in [-1024, 1023], so sum xh * W and sum xl * W fit in int32 over a block (|W| <=
// 2^13), and both are int16 x int16 products (pmaddwd when vectorised). Integer sums are exact,
// so the vectorised and scalar loops give the same P. Blocks are then added in increasing order
// in binary64 (int_linear.h), one output at a time. Work is split over outputs only.
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
constexpr int kLowBits = 11;   // X = xh * 2^11 + xl

std::atomic<bool> g_simd_enabled{true};

// Rows quantised per 128-block: the exponent of every (row, block) and the integers, zero-padded
// to whole blocks. x keeps each integer as two int16 halves (hi * 2^11 + lo); w as one int16.
struct QuantizedRows {
  int64_t blocks = 0;
  int64_t padded_k = 0;
  std::vector<int32_t> exponents;  // [rows][blocks]
  std::vector<int16_t> hi;         // [rows][padded_k]: x's high half, or w
  std::vector<int16_t> lo;         // [rows][padded_k]: x's low half (x only)

  void resize(int64_t rows, int64_t k_total, bool split) {
    blocks = (k_total + kBlock - 1) / kBlock;
    padded_k = blocks * kBlock;
    exponents.resize(static_cast<size_t>(rows * blocks));
    hi.resize(static_cast<size_t>(rows * padded_k));
    if (split) lo.resize(hi.size());
  }
};

// Row `row` of `q` from `src` (k_total elements of type T): per block the exponent
// (int_linear::blockExponentOfMaxBits) and RNE(v * 2^(shift - e)) (int_linear::quantize).
template <typename T>
__attribute__((always_inline)) inline void quantizeRowBody(const T* src, int64_t k_total, int shift,
                                                           int64_t row, QuantizedRows* q) {
  const bool split = !q->lo.empty();
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
    int16_t* hi = q->hi.data() + row * q->padded_k + begin;
    int16_t* lo = split ? q->lo.data() + row * q->padded_k + begin : nullptr;
    for (int i = 0; i < kBlock; ++i) {
      int32_t v = int_linear::quantize(values[i], exponent, shift);
      if (split) {
        int32_t low = ((v + 1024) & 2047) - 1024;
        lo[i] = static_cast<int16_t>(low);
        hi[i] = static_cast<int16_t>((v - low) >> kLowBits);
      } else {
        hi[i] = static_cast<int16_t>(v);
      }
    }
  }
}

template <typename T>
void quantizeRowPortable(const T* src, int64_t k_total, int shift, int64_t row, QuantizedRows* q) {
  quantizeRowBody(src, k_total, shift, row, q);
}

#if defined(REE_INT_LINEAR_X86)
// The same source compiled for AVX2 (the compiler vectorises the conversions 4 doubles wide);
// the same integers, since every step is exact or correctly rounded.
template <typename T>
__attribute__((target("avx2"))) void quantizeRowAvx2(const T* src, int64_t k_total, int shift,
                                                     int64_t row, QuantizedRows* q) {
  quantizeRowBody(src, k_total, shift, row, q);
}
#endif

template <typename T>
void quantizeRow(bool simd, const T* src, int64_t k_total, int shift, int64_t row,
                 QuantizedRows* q) {
#if defined(REE_INT_LINEAR_X86)
  if (simd) return quantizeRowAvx2(src, k_total, shift, row, q);
#endif
  (void)simd;
  quantizeRowPortable(src, k_total, shift, row, q);
}

// Rows [row_begin, row_end) of a [rows, K] matrix with row stride `stride` into q's rows
// out_first, out_first + 1, ...
void quantizeRows(bool simd, const void* base, DType dtype, int64_t stride, int64_t k_total,
                  int shift, int64_t row_begin, int64_t row_end, int64_t out_first,
                  QuantizedRows* q) {
  for (int64_t row = row_begin; row < row_end; ++row) {
    const int64_t at = row * stride;
    const int64_t out = out_first + (row - row_begin);
    switch (dtype) {
      case DType::kF32:
        quantizeRow(simd, static_cast<const float*>(base) + at, k_total, shift, out, q);
        break;
      case DType::kBF16:
        quantizeRow(simd, static_cast<const bf16_t*>(base) + at, k_total, shift, out, q);
        break;
      default:
        quantizeRow(simd, static_cast<const f16_t*>(base) + at, k_total, shift, out, q);
        break;
    }
  }
}

// The block product of one x row and one w row over one block of 128: P = sum xh * w * 2^11 +
// sum xl * w, each half an exact int32 sum (|sum xh w| <= 2^29, |sum xl w| <= 2^30).
int64_t blockDotPortable(const int16_t* xh, const int16_t* xl, const int16_t* w) {
  int32_t high = 0, low = 0;
  for (int k = 0; k < kBlock; ++k) {
    high += static_cast<int32_t>(xh[k]) * w[k];
    low += static_cast<int32_t>(xl[k]) * w[k];
  }
  return static_cast<int64_t>(high) * (int64_t{1} << kLowBits) + low;
}

#if defined(REE_INT_LINEAR_X86)
// The four int32 lane sums of a, b, c, d (each 8 lanes) as one 128-bit vector {sum a, .., sum d}.
__attribute__((target("avx2"))) inline __m128i laneSums4(__m256i a, __m256i b, __m256i c,
                                                         __m256i d) {
  __m256i ab = _mm256_hadd_epi32(a, b), cd = _mm256_hadd_epi32(c, d);
  __m256i abcd = _mm256_hadd_epi32(ab, cd);
  return _mm_add_epi32(_mm256_castsi256_si128(abcd), _mm256_extracti128_si256(abcd, 1));
}

// The whole dots of one x row with 4 w rows (row starts w[c]); w_exp4[b * 4 + c] is w row c's
// exponent of block b. The block combination runs 4 outputs wide: P in int64 lanes, converted
// to binary64 exactly (|P| < 2^51: add the bits of 1.5 * 2^52, subtract 1.5 * 2^52), times the
// power-of-two scale built from its bits (a non-finite block's scale is all-ones bits: NaN), then
// one binary64 addition per output and block in increasing block order: int_linear.h's steps.
__attribute__((target("avx2"))) void rowDots4Avx2(const int16_t* xh, const int16_t* xl,
                                                  const int16_t* const* w, const int32_t* x_exp,
                                                  const int32_t* w_exp4, int64_t blocks,
                                                  double* out) {
  const __m256d magic = _mm256_set1_pd(6755399441055744.0);  // 1.5 * 2^52
  const __m128i sentinel = _mm_set1_epi32(int_linear::kNonFiniteExponent);
  __m256d acc = _mm256_setzero_pd();
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t at = b * kBlock;
    __m256i high[4], low[4];
    for (int c = 0; c < 4; ++c)
      high[c] = low[c] = _mm256_setzero_si256();
#pragma GCC unroll 1
    for (int k = 0; k < kBlock; k += 16) {
      __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xh + at + k));
      __m256i l = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xl + at + k));
      for (int c = 0; c < 4; ++c) {
        __m256i wv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[c] + at + k));
        high[c] = _mm256_add_epi32(high[c], _mm256_madd_epi16(h, wv));
        low[c] = _mm256_add_epi32(low[c], _mm256_madd_epi16(l, wv));
      }
    }
    const __m256i product = _mm256_add_epi64(
        _mm256_slli_epi64(_mm256_cvtepi32_epi64(laneSums4(high[0], high[1], high[2], high[3])),
                          kLowBits),
        _mm256_cvtepi32_epi64(laneSums4(low[0], low[1], low[2], low[3])));
    const __m256d product_f64 = _mm256_sub_pd(
        _mm256_castsi256_pd(_mm256_add_epi64(product, _mm256_castpd_si256(magic))), magic);
    const __m128i w_e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w_exp4 + b * 4));
    const __m128i x_e = _mm_set1_epi32(x_exp[b]);
    const __m128i power = _mm_add_epi32(
        _mm_add_epi32(x_e, w_e), _mm_set1_epi32(1023 - int_linear::kXShift - int_linear::kWShift));
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
void taskDots(bool simd, const QuantizedRows& xq, int64_t m0, int64_t m1, const QuantizedRows& wq,
              int count, float* dots) {
  // The panel's exponents by block, 4 outputs side by side: w_exp4[(c0 / 4)][b * 4 + c].
  std::vector<int32_t> w_exp4(static_cast<size_t>(kPanel * wq.blocks));
  for (int c = 0; c < count; ++c) {
    for (int64_t b = 0; b < wq.blocks; ++b)
      w_exp4[(c / 4) * 4 * wq.blocks + b * 4 + c % 4] = wq.exponents[c * wq.blocks + b];
  }
  for (int64_t m = m0; m < m1; ++m) {
    const int16_t* xh = xq.hi.data() + m * xq.padded_k;
    const int16_t* xl = xq.lo.data() + m * xq.padded_k;
    const int32_t* x_exp = xq.exponents.data() + m * xq.blocks;
    for (int c0 = 0; c0 < count; c0 += 4) {
      const int cols = std::min(4, count - c0);
      const int16_t* w[4];
      for (int c = 0; c < cols; ++c)
        w[c] = wq.hi.data() + (c0 + c) * wq.padded_k;
      double acc[4] = {0.0, 0.0, 0.0, 0.0};
#if defined(REE_INT_LINEAR_X86)
      if (simd && cols == 4) {
        rowDots4Avx2(xh, xl, w, x_exp, w_exp4.data() + c0 * wq.blocks, xq.blocks, acc);
      } else
#endif
      {
        for (int64_t b = 0; b < xq.blocks; ++b) {
          const int64_t at = b * kBlock;
          for (int c = 0; c < cols; ++c) {
            const int64_t product = blockDotPortable(xh + at, xl + at, w[c] + at);
            const double scale =
                int_linear::blockScale(x_exp[b], wq.exponents[(c0 + c) * wq.blocks + b]);
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

Status intLinear(const LinearArgs& a) {
  REE_RETURN_IF_ERROR(validateIntLinearArgs(a));
  if (a.m == 0) return Status::kSuccess;
  const int64_t x_stride = a.xStride(), w_stride = a.wStride(), y_stride = a.yStride();
  bool simd = g_simd_enabled.load();
#if defined(REE_INT_LINEAR_X86)
  simd = simd && cpuHasAvx2();
#else
  simd = false;
#endif

  QuantizedRows xq;
  xq.resize(a.m, a.k, /*split=*/true);
  parallelFor(a.m, 4, [&](int64_t begin, int64_t end) {
    quantizeRows(simd, a.x, a.x_dtype, x_stride, a.k, int_linear::kXShift, begin, end, begin, &xq);
  });

  const int64_t panels = (a.n + kPanel - 1) / kPanel;
  const int64_t row_tasks = (a.m + kTaskRows - 1) / kTaskRows;
  parallelFor(panels * row_tasks, 1, [&](int64_t task_begin, int64_t task_end) {
    QuantizedRows wq;  // this thread's panel of w, quantised once per panel
    wq.resize(kPanel, a.k, /*split=*/false);
    int64_t quantized_panel = -1;
    for (int64_t task = task_begin; task < task_end; ++task) {
      const int64_t panel = task / row_tasks;
      const int64_t n0 = panel * kPanel;
      const int count = static_cast<int>(std::min<int64_t>(kPanel, a.n - n0));
      if (panel != quantized_panel) {
        quantizeRows(simd, a.w, a.w_dtype, w_stride, a.k, int_linear::kWShift, n0, n0 + count, 0,
                     &wq);
        quantized_panel = panel;
      }
      const int64_t m0 = (task % row_tasks) * kTaskRows;
      const int64_t m1 = std::min(a.m, m0 + kTaskRows);
      float dots[kTaskRows * kPanel];
      taskDots(simd, xq, m0, m1, wq, count, dots);
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
