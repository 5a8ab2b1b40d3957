// Linear layer RepOp, spec version repops-3 (docs/repops-spec/linear-int-row.md): repops-2's
// integers and digits (int_linear.h) with ONE exponent per row of x and per row of w over the
// whole K instead of one per 128-block. The dot product of an output is then a single exact
// integer P (the sum over every k of the nine kept digit-pair products, i + j <= 3), rounded once:
//
//     dot(m, n) = fp32_RNE( double(P) * 2^(e_x(m) + e_w(n) - 27 - 20 + 14) )
//
// Why: with no per-block binary64 fold, P is four plain int8 GEMMs with exact int32 accumulation
// (one per shift class, the digit planes concatenated along K), which any int8 tensor-core GEMM
// (cuBLASLt, mma.sync, wgmma) computes in any order with the same result, and a skinny kernel
// needs four int32 accumulators per output and nothing else. Exponents stay per row, never per
// tensor or per batch: a token's bits never depend on its batch-mates.
//
// The functions below are the one arithmetic source of both backends (host and device); the
// element-level steps (quantize, digits, class combination, scale) are repops-2's.
#pragma once

#include <cstdint>
#include <memory>

#include "ree/core/status.h"
#include "ree/kernels/int_linear.h"
#include "ree/kernels/linear.h"
#include "ree/kernels/numeric.h"

namespace ree::repops {

namespace int_linear_row {

using int_linear::kKeptPairSum;
using int_linear::kNonFiniteExponent;
using int_linear::kProductUnitShift;
using int_linear::kWShift;
using int_linear::kWSlices;
using int_linear::kXShift;
using int_linear::kXSlices;

// The largest K: every shift-class sum (at most three digit pairs per k, each |d e| <= 65 * 65)
// stays below 2^31, so int32 accumulation over the whole row is exact, and |P| < 2^52 (exact in
// binary64).
constexpr int64_t kMaxK = 131072;

// A row's exponent from the largest magnitude's bits over the whole row (repops-2's block rule
// applied to the row): frexp exponent, 0 for an all-zero row, kNonFiniteExponent for a row with a
// NaN or an infinity.
REE_HD int rowExponentOfMaxBits(uint32_t max_abs_bits) {
  return int_linear::blockExponentOfMaxBits(max_abs_bits);
}

// dot(m, n) from the exact integer P and the two row exponents: double(P) is exact (|P| < 2^52),
// the power-of-two scale is exact (exponent in [-329, 223]), so the only rounding is the final
// binary64 -> binary32 conversion (RNE, subnormals kept, overflow to infinity). P = 0 gives +0.
// NaN when either row holds a non-finite value (canonicalised by detail::linearFinish).
REE_HD float dotOf(int64_t product, int x_exponent, int w_exponent) {
  return int_linear::roundDot(static_cast<double>(product) *
                              int_linear::blockScale(x_exponent, w_exponent));
}

}  // namespace int_linear_row

// The arguments are repops-1's (linear.h), same dtypes, shapes, strides and limits, plus
// k <= int_linear_row::kMaxK. w_is_constant is ignored.
Status validateIntLinearRowArgs(const LinearArgs& args);

namespace cpu {

// repops-3 linear on the calling thread plus the parallelFor pool. Bits: docs/repops-spec/
// linear-int-row.md; they never depend on M, the thread count or the SIMD path.
Status intLinearRow(const LinearArgs& args);

// What a constant w (a model parameter) keeps between calls: its row exponents (4 bytes per row),
// so that a call does not scan w for them again. The digits are made from args.w inside each
// call (re-quantising 2 bytes of bf16 costs less than reading 6 bytes of planes). The bits are
// those of intLinearRow(args).
class IntLinearRowWeights {
 public:
  ~IntLinearRowWeights();
  int64_t rows() const;  // n
  int64_t k() const;

 private:
  IntLinearRowWeights();
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int64_t rows_ = 0, k_ = 0;
  friend Status prepareIntLinearRowWeights(const LinearArgs&,
                                           std::unique_ptr<IntLinearRowWeights>*);
  friend Status intLinearRow(const LinearArgs&, const IntLinearRowWeights*);
};

int64_t intLinearRowWeightsBytes(int64_t n, int64_t k);
// From args.w, w_dtype, n, k and the w stride (the other fields are not read).
Status prepareIntLinearRowWeights(const LinearArgs& args,
                                  std::unique_ptr<IntLinearRowWeights>* out);
// intLinearRow with w's integers from `prepared` (made from this args.w; null: quantise w here).
Status intLinearRow(const LinearArgs& args, const IntLinearRowWeights* prepared);

// For tests and benchmarks: false forces the portable scalar integer loop instead of the vector
// one chosen at run time (AVX2, or AVX-512 VNNI where the CPU has it: the same integers either
// way; default true).
void setIntLinearRowSimdEnabled(bool enabled);
// For tests and benchmarks: false makes a CPU with AVX-512 VNNI take the AVX2 loops (the same
// integers; default true).
void setIntLinearRowAvx512Enabled(bool enabled);

}  // namespace cpu

namespace cuda {

// Kernel choice. Every kernel gives the same bits; kAuto picks by M, the dtypes and alignment.
enum class IntLinearRowKernel : int {
  kAuto = 0,
  // kDecode and kTiled need 16-byte aligned w rows (w and its row stride) and k a multiple of 8;
  // every kernel but kGemm needs k <= 65536 (int32 raw digit sums).
  kDecode = 1,  // at most 8 rows of x, bf16 w
  kSkinny = 2,  // at most 64 rows of x, any w dtype
  kTiled = 3,   // bf16 or f16 w, at most 65535 * 64 rows of x (kAuto: 9 to 256 rows)
  kGemm = 4,    // four int8 class GEMMs on cuBLASLt; any shape
};

// Enqueues repops-3 linear on `stream`; returns once launched. Takes stream-ordered scratch
// memory (cudaMallocAsync), freed on the stream afterwards.
Status intLinearRow(const LinearArgs& args, cudaStream_t stream);

// What a constant w (a model parameter) keeps on the device between calls (at least its row
// exponents), so that a call does not scan w for them again. The bits are those of
// intLinearRow(args, stream).
class IntLinearRowDeviceWeights {
 public:
  ~IntLinearRowDeviceWeights();
  int64_t rows() const;  // n
  int64_t k() const;
  int64_t bytes() const;  // device memory held

 private:
  IntLinearRowDeviceWeights();
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int64_t rows_ = 0, k_ = 0;
  friend Status prepareIntLinearRowWeights(const LinearArgs&, cudaStream_t,
                                           std::unique_ptr<IntLinearRowDeviceWeights>*);
  friend Status intLinearRowWithKernel(const LinearArgs&, const IntLinearRowDeviceWeights*,
                                       IntLinearRowKernel, cudaStream_t);
};

// From args.w (device memory), w_dtype, n, k and the w stride; enqueued on `stream`.
Status prepareIntLinearRowWeights(const LinearArgs& args, cudaStream_t stream,
                                  std::unique_ptr<IntLinearRowDeviceWeights>* out);
// intLinearRow with w's prepared data (made from this args.w; null: as intLinearRow(args, stream)).
Status intLinearRow(const LinearArgs& args, const IntLinearRowDeviceWeights* prepared,
                    cudaStream_t stream);
// Same with an explicit kernel (tests, benchmarks). kUnsupported if `kernel` cannot serve args.
Status intLinearRowWithKernel(const LinearArgs& args, const IntLinearRowDeviceWeights* prepared,
                              IntLinearRowKernel kernel, cudaStream_t stream);

}  // namespace cuda

}  // namespace ree::repops
