// CPU linear layer (docs/repops-spec/linear.md). Work is split over independent outputs only:
// tasks are (panel of 16 output features) x (block of rows), and inside a task SIMD lanes run over
// the 16 features, each lane keeping its own in-order fma chain. No reduction is ever reassociated,
// so the bits do not depend on the thread count or on the SIMD width.
#include "ree/kernels/linear.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define REE_LINEAR_X86 1
#endif

#include "common/storage_element.h"
#include "ree/core/parallel.h"
#include "ree/kernels/reduce.h"

namespace ree::repops {
namespace cpu {
namespace {

constexpr int kPanel = 16;     // output features per task, one SIMD lane each
constexpr int kRowBlock = 4;   // rows of x sharing one pass over the packed panel
constexpr int kTaskRows = 64;  // rows of x per task (a task packs its panel once)

std::atomic<bool> g_simd_enabled{true};

// Writes W rows [n0, n0 + count) transposed as panel[k * kPanel + lane] (lanes >= count: +0).
void packPanel(const LinearArgs& a, int64_t w_stride, int64_t n0, int count, float* panel) {
  for (int lane = 0; lane < kPanel; ++lane) {
    if (lane < count) {
      int64_t row = (n0 + lane) * w_stride;
      for (int64_t k = 0; k < a.k; ++k)
        panel[k * kPanel + lane] = loadStorageElement(a.w, a.w_dtype, row + k);
    } else {
      for (int64_t k = 0; k < a.k; ++k)
        panel[k * kPanel + lane] = 0.0f;
    }
  }
}

#if defined(REE_LINEAR_X86)
// In-register transpose of 8 x 8 floats: r[i][j] -> r[j][i]. Pure data movement, so every bit
// pattern (NaN payloads, -0, denormals) comes through unchanged.
__attribute__((target("avx2,fma"))) inline void transpose8x8(__m256 (&r)[8]) {
  const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
  const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
  const __m256 u0 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 u1 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 u2 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 u3 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 u4 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 u5 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 u6 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 u7 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(3, 2, 3, 2));
  r[0] = _mm256_permute2f128_ps(u0, u4, 0x20);
  r[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
  r[2] = _mm256_permute2f128_ps(u2, u6, 0x20);
  r[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
  r[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
  r[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
  r[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
  r[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

// 8 consecutive weights as fp32, exactly as loadElement widens them.
__attribute__((target("avx2,fma"))) inline __m256 load8(const float* p) {
  return _mm256_loadu_ps(p);
}
__attribute__((target("avx2,fma"))) inline __m256 load8(const bf16_t* p) {
  const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(raw), 16));
}

// packPanel for a full panel of fp32 or bf16 weights: 8 x 8 blocks transposed in registers. At
// small M a task uses its panel for a few rows of x only, and the scalar transpose was almost all
// of the time (perf, M = 1: 57% of the samples against 3.4% in the fma loop).
template <typename T>
__attribute__((target("avx2,fma"))) void packFullPanelAvx2(const T* w, int64_t w_stride, int64_t n0,
                                                           int64_t k_total, float* panel) {
  const T* rows[kPanel];
  for (int lane = 0; lane < kPanel; ++lane)
    rows[lane] = w + (n0 + lane) * w_stride;
  int64_t k = 0;
  for (; k + 8 <= k_total; k += 8) {
    for (int half = 0; half < 2; ++half) {
      __m256 block[8];
      for (int i = 0; i < 8; ++i)
        block[i] = load8(rows[half * 8 + i] + k);
      transpose8x8(block);
      for (int j = 0; j < 8; ++j)
        _mm256_storeu_ps(panel + (k + j) * kPanel + half * 8, block[j]);
    }
  }
  for (; k < k_total; ++k) {
    for (int lane = 0; lane < kPanel; ++lane)
      panel[k * kPanel + lane] = loadFloat(rows[lane][k]);
  }
}
#endif

// packPanel, through the SIMD transpose where it applies (the same values either way).
void packPanelFast(bool simd, const LinearArgs& a, int64_t w_stride, int64_t n0, int count,
                   float* panel) {
#if defined(REE_LINEAR_X86)
  if (simd && count == kPanel) {
    if (a.w_dtype == DType::kBF16) {
      return packFullPanelAvx2(static_cast<const bf16_t*>(a.w), w_stride, n0, a.k, panel);
    }
    if (a.w_dtype == DType::kF32) {
      return packFullPanelAvx2(static_cast<const float*>(a.w), w_stride, n0, a.k, panel);
    }
  }
#endif
  (void)simd;
  packPanel(a, w_stride, n0, count, panel);
}

// totals[r][lane] = canonicalDot over k of x_rows[r][k] * panel[k][lane], for r < kRows.
template <int kRows>
void panelDotScalar(const float* const* x_rows, const float* panel, int k_total,
                    float (*totals)[kPanel]) {
  for (int begin = 0; begin < k_total; begin += kReduceChunk) {
    int end = std::min(begin + kReduceChunk, k_total);
    float partial[kRows][kPanel] = {};
    for (int k = begin; k < end; ++k) {
      const float* w = panel + static_cast<int64_t>(k) * kPanel;
      for (int r = 0; r < kRows; ++r) {
        float x = x_rows[r][k];
        for (int lane = 0; lane < kPanel; ++lane) {
          partial[r][lane] = fmaF32(x, w[lane], partial[r][lane]);
        }
      }
    }
    for (int r = 0; r < kRows; ++r) {
      for (int lane = 0; lane < kPanel; ++lane) {
        totals[r][lane] = begin == 0 ? partial[r][lane] : totals[r][lane] + partial[r][lane];
      }
    }
  }
}

#if defined(REE_LINEAR_X86)
// The same operations as panelDotScalar, 8 lanes per instruction (vfmadd is one IEEE fma).
template <int kRows>
__attribute__((target("avx2,fma"))) void panelDotAvx2(const float* const* x_rows,
                                                      const float* panel, int k_total,
                                                      float (*totals)[kPanel]) {
  __m256 total_lo[kRows], total_hi[kRows];
  for (int r = 0; r < kRows; ++r)
    total_lo[r] = total_hi[r] = _mm256_setzero_ps();  // k >= 1
  for (int begin = 0; begin < k_total; begin += kReduceChunk) {
    int end = std::min(begin + kReduceChunk, k_total);
    __m256 partial_lo[kRows], partial_hi[kRows];
    for (int r = 0; r < kRows; ++r) {
      partial_lo[r] = _mm256_setzero_ps();
      partial_hi[r] = _mm256_setzero_ps();
    }
    for (int k = begin; k < end; ++k) {
      const float* w = panel + static_cast<int64_t>(k) * kPanel;
      __m256 w_lo = _mm256_loadu_ps(w);
      __m256 w_hi = _mm256_loadu_ps(w + 8);
      for (int r = 0; r < kRows; ++r) {
        __m256 x = _mm256_broadcast_ss(x_rows[r] + k);
        partial_lo[r] = _mm256_fmadd_ps(x, w_lo, partial_lo[r]);
        partial_hi[r] = _mm256_fmadd_ps(x, w_hi, partial_hi[r]);
      }
    }
    for (int r = 0; r < kRows; ++r) {
      total_lo[r] = begin == 0 ? partial_lo[r] : _mm256_add_ps(total_lo[r], partial_lo[r]);
      total_hi[r] = begin == 0 ? partial_hi[r] : _mm256_add_ps(total_hi[r], partial_hi[r]);
    }
  }
  for (int r = 0; r < kRows; ++r) {
    _mm256_storeu_ps(totals[r], total_lo[r]);
    _mm256_storeu_ps(totals[r] + 8, total_hi[r]);
  }
}

bool cpuHasAvx2Fma() {
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return has;
}
#endif

template <int kRows>
void panelDot(bool simd, const float* const* x_rows, const float* panel, int k_total,
              float (*totals)[kPanel]) {
#if defined(REE_LINEAR_X86)
  if (simd) return panelDotAvx2<kRows>(x_rows, panel, k_total, totals);
#endif
  (void)simd;
  panelDotScalar<kRows>(x_rows, panel, k_total, totals);
}

}  // namespace

void setLinearSimdEnabled(bool enabled) {
  g_simd_enabled.store(enabled);
}

Status linear(const LinearArgs& a) {
  REE_RETURN_IF_ERROR(validateLinearArgs(a));
  if (a.m == 0) return Status::kSuccess;
  const int64_t x_stride = a.x_row_stride ? a.x_row_stride : a.k;
  const int64_t w_stride = a.w_row_stride ? a.w_row_stride : a.k;
  const int64_t y_stride = a.y_row_stride ? a.y_row_stride : a.n;
  const int k_total = static_cast<int>(a.k);
  bool simd = g_simd_enabled.load();
#if defined(REE_LINEAR_X86)
  simd = simd && cpuHasAvx2Fma();
#else
  simd = false;
#endif

  // x as fp32 rows: used in place when it already is fp32, else converted once (exact).
  std::vector<float> x_converted;
  const float* x_f32 = static_cast<const float*>(a.x);
  int64_t x_f32_stride = x_stride;
  if (a.x_dtype != DType::kF32) {
    x_converted.resize(static_cast<size_t>(a.m * a.k));
    parallelFor(a.m, 16, [&](int64_t begin, int64_t end) {
      for (int64_t m = begin; m < end; ++m) {
        for (int64_t k = 0; k < a.k; ++k) {
          x_converted[m * a.k + k] = loadStorageElement(a.x, a.x_dtype, m * x_stride + k);
        }
      }
    });
    x_f32 = x_converted.data();
    x_f32_stride = a.k;
  }

  const int64_t panels = (a.n + kPanel - 1) / kPanel;
  const int64_t row_tasks = (a.m + kTaskRows - 1) / kTaskRows;
  parallelFor(panels * row_tasks, 1, [&](int64_t task_begin, int64_t task_end) {
    std::vector<float> panel(static_cast<size_t>(a.k) * kPanel);
    int64_t packed_panel = -1;
    for (int64_t task = task_begin; task < task_end; ++task) {
      const int64_t panel_index = task / row_tasks;
      const int64_t n0 = panel_index * kPanel;
      const int count = static_cast<int>(std::min<int64_t>(kPanel, a.n - n0));
      if (panel_index != packed_panel) {
        packPanelFast(simd, a, w_stride, n0, count, panel.data());
        packed_panel = panel_index;
      }
      float bias[kPanel] = {};
      for (int lane = 0; lane < count && a.bias; ++lane) {
        bias[lane] = loadStorageElement(a.bias, a.bias_dtype, n0 + lane);
      }
      const int64_t m_begin = (task % row_tasks) * kTaskRows;
      const int64_t m_end = std::min(a.m, m_begin + kTaskRows);
      for (int64_t m0 = m_begin; m0 < m_end; m0 += kRowBlock) {
        const int rows = static_cast<int>(std::min<int64_t>(kRowBlock, m_end - m0));
        const float* x_rows[kRowBlock];
        for (int r = 0; r < rows; ++r)
          x_rows[r] = x_f32 + (m0 + r) * x_f32_stride;
        float totals[kRowBlock][kPanel];
        switch (rows) {
          case 4:
            panelDot<4>(simd, x_rows, panel.data(), k_total, totals);
            break;
          case 3:
            panelDot<3>(simd, x_rows, panel.data(), k_total, totals);
            break;
          case 2:
            panelDot<2>(simd, x_rows, panel.data(), k_total, totals);
            break;
          default:
            panelDot<1>(simd, x_rows, panel.data(), k_total, totals);
            break;
        }
        for (int r = 0; r < rows; ++r) {
          const int64_t y_row = (m0 + r) * y_stride + n0;
          for (int lane = 0; lane < count; ++lane) {
            float value = detail::linearFinish(totals[r][lane], a.bias != nullptr, bias[lane]);
            if (a.y_dtype == DType::kF32) {
              float* y = static_cast<float*>(a.y) + y_row + lane;
              *y = a.accumulate ? detail::linearAccumulate(*y, value) : value;
            } else {
              bf16_t* y = static_cast<bf16_t*>(a.y) + y_row + lane;
              *y = a.accumulate
                       ? toBF16(detail::linearAccumulate(toFloat(*y), toFloat(toBF16(value))))
                       : toBF16(value);
            }
          }
        }
      }
    }
  });
  return Status::kSuccess;
}

}  // namespace cpu
}  // namespace ree::repops
