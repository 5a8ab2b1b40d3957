// Linear layer RepOp, spec version repops-2 (docs/repops-spec/linear-int.md): the dot product of
// each output is computed in exact integer arithmetic. x and w are scaled per row and per K-block
// of 128 by a power of two and rounded to integers (27 bits for x, 20 for w), written as balanced
// base-128 digits (4 for x, 3 for w); a block's product is the exact integer sum of the nine digit
// pairs of weight 2^14 and above (the triangle i + j <= 3), so any evaluation order (SIMD, int8
// tensor-core slices) gives the same integer; blocks are then added in increasing order in
// binary64 and rounded once to fp32. Bias, NaN canonicalisation, output rounding and accumulate
// are repops-1's (linear.h).
//
// The functions below are the one arithmetic source of both backends (host and device).
#pragma once

#include <cstdint>
#include <memory>

#include "ree/core/status.h"
#include "ree/kernels/linear.h"
#include "ree/kernels/numeric.h"

namespace ree::repops {

namespace int_linear {

constexpr int kBlock = 128;  // K-block length B: one exponent per row and block
constexpr int kXShift = 27;  // Sx: |X| <= 2^27 (four base-128 digits)
constexpr int kWShift = 20;  // Sw: |W| <= 2^20 (three digits)
constexpr int kXSlices = 4;  // X = d0 * 2^21 + d1 * 2^14 + d2 * 2^7 + d3
constexpr int kWSlices = 3;  // W = e0 * 2^14 + e1 * 2^7 + e2
constexpr int kSliceBits = 7;
// Digit pairs (i, j) with i + j <= 3 are kept; the block product counts in units of their lowest
// weight, 2^(7 * (3 + 2 - 3)) = 2^14, which the block scale puts back.
constexpr int kKeptPairSum = 3;
constexpr int kProductUnitShift = 14;

// The exponent recorded for a block holding a NaN or an infinity (never a real exponent, which
// lies in [-148, 128]). Such a block's term is NaN, so the output is the canonical NaN.
constexpr int kNonFiniteExponent = 0x4000;

// frexp's exponent of a float magnitude given by its bits without sign (finite, may be 0):
// |v| = f * 2^e with f in [0.5, 1). 0 gives 0. Subnormals: the exponent of their leading bit.
REE_HD int frexpExponentOfBits(uint32_t abs_bits) {
  if (abs_bits == 0) return 0;
  int biased = static_cast<int>(abs_bits >> 23);
  if (biased != 0) return biased - 126;
  // Subnormal: v = m * 2^-149 with 1 <= m < 2^23; e = bitlength(m) - 149.
  int length = 0;
  for (uint32_t m = abs_bits; m != 0; m >>= 1)
    ++length;
  return length - 149;
}

// The block exponent from the largest magnitude's bits (for finite floats the bit pattern without
// sign orders like the magnitude, so the max of the bits is the bits of the max): the frexp
// exponent, 0 for an all-zero block, kNonFiniteExponent when any element is NaN or infinite.
REE_HD int blockExponentOfMaxBits(uint32_t max_abs_bits) {
  if (max_abs_bits >= 0x7f800000u) return kNonFiniteExponent;
  return frexpExponentOfBits(max_abs_bits);
}

// 2^power as a binary64, for -1022 <= power <= 1023 (built from its bits: exact).
REE_HD double powerOfTwo(int power) {
  return bitsDouble(static_cast<uint64_t>(1023 + power) << 52);
}

// RNE(v * 2^(shift - exponent)) for a finite v with |v| < 2^exponent (or v = 0): |result| <=
// 2^shift. The product is exact in binary64 (a float times a power of two in [2^-108, 2^175]);
// adding and subtracting 1.5 * 2^52 then rounds it to an integer, to nearest with ties to even
// (binary64 addition in the default rounding mode; exact for |t| < 2^51). An fma could not change
// it either (the product is exact), so contraction is harmless.
// A block with exponent kNonFiniteExponent quantises to 0 (its term is NaN through blockScale).
REE_HD int32_t quantize(float v, int exponent, int shift) {
  if (exponent == kNonFiniteExponent) return 0;
  const double kRoundingConstant = 6755399441055744.0;  // 1.5 * 2^52
  double t = static_cast<double>(v) * powerOfTwo(shift - exponent);
  double rounded = (t + kRoundingConstant) - kRoundingConstant;
  return static_cast<int32_t>(rounded);
}

// The balanced base-128 digit of v: d in [-64, 63] with v - d divisible by 128.
REE_HD int32_t lowSlice(int32_t v) {
  return ((v + 64) & 127) - 64;
}

// v as `count` balanced base-128 digits, most significant first: v = sum d[i] * 2^(7 (count-1-i)),
// the low digits in [-64, 63], d[0] in [-65, 65] (|v| <= 2^(7 count - 1)). Each step is exact:
// v - lowSlice(v) is a multiple of 128.
template <int kCount>
REE_HD void splitDigits(int32_t v, int8_t d[kCount]) {
  for (int i = kCount - 1; i > 0; --i) {
    const int32_t digit = lowSlice(v);
    d[i] = static_cast<int8_t>(digit);
    v = (v - digit) >> kSliceBits;
  }
  d[0] = static_cast<int8_t>(v);
}

// X = d[0] * 2^21 + d[1] * 2^14 + d[2] * 2^7 + d[3] (|X| <= 2^27).
REE_HD void splitX(int32_t x, int8_t d[kXSlices]) {
  splitDigits<kXSlices>(x, d);
}

// W = e[0] * 2^14 + e[1] * 2^7 + e[2] (|W| <= 2^20).
REE_HD void splitW(int32_t w, int8_t e[kWSlices]) {
  splitDigits<kWSlices>(w, e);
}

// The block product (in units of 2^14) from the sums of the kept digit-pair products grouped by
// weight: c21 = sum d0 e0, c14 = sum d0 e1 + d1 e0, c7 = sum d0 e2 + d1 e1 + d2 e0,
// c0 = sum d1 e2 + d2 e1 + d3 e0 (each |c| < 2^22), exactly in int64:
// P = c21 * 2^21 + c14 * 2^14 + c7 * 2^7 + c0 (|P| < 2^41).
REE_HD int64_t combineShiftClasses(int32_t c21, int32_t c14, int32_t c7, int32_t c0) {
  return static_cast<int64_t>(c21) * (int64_t{1} << 21) +
         static_cast<int64_t>(c14) * (int64_t{1} << 14) +
         static_cast<int64_t>(c7) * (int64_t{1} << 7) + static_cast<int64_t>(c0);
}

// 2^(e_x + e_w - Sx - Sw + 14) as a binary64 (always a normal number: the exponent lies in
// [-329, 223]); NaN when either block holds a non-finite value.
REE_HD double blockScale(int x_exponent, int w_exponent) {
  if (x_exponent == kNonFiniteExponent || w_exponent == kNonFiniteExponent) {
    return bitsDouble(0x7ff8000000000000ull);
  }
  return powerOfTwo(x_exponent + w_exponent - kXShift - kWShift + kProductUnitShift);
}

// One step of the across-block sum: acc + P * scale. P * scale is exact (|P| < 2^41, a power of
// two scale, no underflow), so the only rounding is the binary64 addition, and an fma would give
// the same bits (contraction cannot change them).
REE_HD double addBlock(double acc, int64_t block_product, double scale) {
  double term = static_cast<double>(block_product) * scale;
  return acc + term;
}

// The dot as fp32 (RNE, overflow to infinity; a NaN stays NaN and is canonicalised by
// detail::linearFinish).
REE_HD float roundDot(double acc) {
#if defined(__CUDA_ARCH__)
  return __double2float_rn(acc);
#else
  return static_cast<float>(acc);
#endif
}

}  // namespace int_linear

// The arguments are repops-1's (linear.h); the same limits apply (validateLinearArgs).
// w_is_constant is ignored.
Status validateIntLinearArgs(const LinearArgs& args);

namespace cpu {

// repops-2 linear on the calling thread plus the parallelFor pool. Bits: docs/repops-spec/
// linear-int.md; they never depend on M, the thread count or the SIMD path.
Status intLinear(const LinearArgs& args);

// w quantised once into the digit planes intLinear computes with (three int16 planes and an
// exponent per row and block: intLinearWeightsBytes), for weights that never change (model
// parameters), so that a call does not quantise w again. The bits are those of intLinear(args).
class IntLinearWeights {
 public:
  ~IntLinearWeights();
  int64_t rows() const;  // n
  int64_t k() const;

 private:
  IntLinearWeights();
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int64_t rows_ = 0, k_ = 0;
  friend Status prepareIntLinearWeights(const LinearArgs&, std::unique_ptr<IntLinearWeights>*);
  friend Status intLinear(const LinearArgs&, const IntLinearWeights*);
};

int64_t intLinearWeightsBytes(int64_t n, int64_t k);
// From args.w, w_dtype, n, k and the w stride (the other fields are not read).
Status prepareIntLinearWeights(const LinearArgs& args, std::unique_ptr<IntLinearWeights>* out);
// intLinear with w's planes from `prepared` (made from this args.w; null: quantise w here).
Status intLinear(const LinearArgs& args, const IntLinearWeights* prepared);

// For tests and benchmarks: false forces the portable scalar integer loop instead of the AVX2 one
// chosen at run time (the same integers either way; default true).
void setIntLinearSimdEnabled(bool enabled);

}  // namespace cpu

namespace cuda {

// Enqueues repops-2 linear on `stream` (quantisation kernels, then the int8 tensor-core GEMM; for
// m <= 4 a GEMV that quantises w on the fly); returns once launched. Takes stream-ordered
// scratch memory (cudaMallocAsync) for the int8 digit planes, freed on the stream afterwards.
Status intLinear(const LinearArgs& args, cudaStream_t stream);

// For benchmarks: only the quantisation kernels of intLinear (x, and w unless m <= 4, into digit
// planes and exponents, on scratch memory freed on the stream), so that their share of the time
// can be measured. Writes nothing to args.y.
Status intLinearQuantizeOnly(const LinearArgs& args, cudaStream_t stream);

}  // namespace cuda
}  // namespace ree::repops
