// Internals of crmath.h: double-double arithmetic, constants, rounding tests, argument reduction.
//
// Everything here is IEEE binary64 add/sub/mul/div/sqrt/fma plus integer operations, written as
// REE_HD functions so the CPU and the GPU execute the same operation sequence. Constants are hex
// literals generated with mpmath at 600 bits (docs/repops-spec/crmath.md lists how).
#pragma once

#include <cstdint>

#include "ree/kernels/numeric.h"
#include "ree/kernels/reduce.h"

// The accurate paths are large and rare: keep them out of line on the GPU so that the fast path
// of a memory-bound kernel stays small in registers and instruction cache.
#if defined(__CUDACC__)
#define REE_CR_SLOW static __host__ __device__ __noinline__
#else
#define REE_CR_SLOW inline
#endif

namespace ree {
namespace crdetail {

// ---- double-double ------------------------------------------------------------------------------
struct DD {
  double hi;
  double lo;
};

REE_HD DD twoSum(double a, double b) {
  double s = a + b;
  double bb = s - a;
  double err = (a - (s - bb)) + (b - bb);
  return {s, err};
}

// Requires |a| >= |b| (or a == 0).
REE_HD DD fastTwoSum(double a, double b) {
  double s = a + b;
  double err = b - (s - a);
  return {s, err};
}

REE_HD DD twoProd(double a, double b) {
  double p = a * b;
  return {p, fmaF64(a, b, -p)};
}

REE_HD DD ddAdd(DD a, DD b) {
  DD s = twoSum(a.hi, b.hi);
  DD t = twoSum(a.lo, b.lo);
  s.lo = s.lo + t.hi;
  s = fastTwoSum(s.hi, s.lo);
  s.lo = s.lo + t.lo;
  return fastTwoSum(s.hi, s.lo);
}

REE_HD DD ddNeg(DD a) {
  return {-a.hi, -a.lo};
}
REE_HD DD ddSub(DD a, DD b) {
  return ddAdd(a, ddNeg(b));
}

REE_HD DD ddMul(DD a, DD b) {
  DD p = twoProd(a.hi, b.hi);
  p.lo = fmaF64(a.hi, b.lo, p.lo);
  p.lo = fmaF64(a.lo, b.hi, p.lo);
  return fastTwoSum(p.hi, p.lo);
}

REE_HD DD ddMulD(DD a, double b) {
  DD p = twoProd(a.hi, b);
  p.lo = fmaF64(a.lo, b, p.lo);
  return fastTwoSum(p.hi, p.lo);
}

// Three-step long division: relative error about 2^-104.
REE_HD DD ddDiv(DD a, DD b) {
  double q1 = a.hi / b.hi;
  DD r = ddSub(a, ddMulD(b, q1));
  double q2 = r.hi / b.hi;
  r = ddSub(r, ddMulD(b, q2));
  double q3 = r.hi / b.hi;
  DD q = fastTwoSum(q1, q2);
  return ddAdd(q, DD{q3, 0.0});
}

REE_HD DD ddFromD(double a) {
  return {a, 0.0};
}

// 2^k as a double, k in [-1022, 1023].
REE_HD double pow2(int k) {
  return bitsDouble(static_cast<uint64_t>(k + 1023) << 52);
}

// Round-to-nearest-even of a double to an integer-valued double (|v| < 2^51), no libm.
REE_HD double roundToInt(double v) {
  constexpr double kMagic = 0x1.8p52;
  return (v + kMagic) - kMagic;
}

// ---- constants ----------------------------------------------------------------------------------
// ln 2 = kLn2Hi32 + kLn2Mid + kLn2Lo; kLn2Hi32 has 32 significant bits so k * kLn2Hi32 is exact.
constexpr double kLn2Hi32 = 0x1.62e42feep-1;
constexpr double kLn2Mid = 0x1.a39ef35793c76p-33;
constexpr double kLn2Lo = 0x1.cc01f97b57a08p-87;
constexpr double kInvLn2 = 0x1.71547652b82fep+0;
constexpr double kPiOver2Hi = 0x1.921fb54442d18p+0;
constexpr double kPiOver2Lo = 0x1.1a62633145c07p-54;
constexpr double kTwoOverSqrtPiHi = 0x1.20dd750429b6dp+0;
constexpr double kTwoOverSqrtPiLo = 0x1.1ae3a914fed80p-56;

// Tables exist twice: in __constant__ memory for device code and as ordinary constants for host
// code (a host function must not read a __constant__ variable). Same literals, same values.
#define REE_CR_INV_FACTORIAL_DATA                                                        \
  {                                                                                      \
    {0x1.0000000000000p+0, 0x0.0p+0}, {0x1.0000000000000p+0, 0x0.0p+0},                  \
        {0x1.0000000000000p-1, 0x0.0p+0}, {0x1.5555555555555p-3, 0x1.5555555555555p-57}, \
        {0x1.5555555555555p-5, 0x1.5555555555555p-59},                                   \
        {0x1.1111111111111p-7, 0x1.1111111111111p-63},                                   \
        {0x1.6c16c16c16c17p-10, -0x1.f49f49f49f49fp-65},                                 \
        {0x1.a01a01a01a01ap-13, 0x1.a01a01a01a01ap-73},                                  \
        {0x1.a01a01a01a01ap-16, 0x1.a01a01a01a01ap-76},                                  \
        {0x1.71de3a556c734p-19, -0x1.c154f8ddc6c00p-73},                                 \
        {0x1.27e4fb7789f5cp-22, 0x1.cbbc05b4fa99ap-76},                                  \
        {0x1.ae64567f544e4p-26, -0x1.c062e06d1f209p-80},                                 \
        {0x1.1eed8eff8d898p-29, -0x1.2aec959e14c06p-83},                                 \
        {0x1.6124613a86d09p-33, 0x1.f28e0cc748ebep-87},                                  \
        {0x1.93974a8c07c9dp-37, 0x1.05d6f8a2efd1fp-92},                                  \
        {0x1.ae7f3e733b81fp-41, 0x1.1d8656b0ee8cbp-97},                                  \
        {0x1.ae7f3e733b81fp-45, 0x1.1d8656b0ee8cbp-101},                                 \
        {0x1.952c77030ad4ap-49, 0x1.ac981465ddc6cp-103},                                 \
        {0x1.6827863b97d97p-53, 0x1.eec01221a8b0bp-107},                                 \
        {0x1.2f49b46814157p-57, 0x1.2650f61dbdcb4p-112},                                 \
        {0x1.e542ba4020225p-62, 0x1.ea72b4afe3c2fp-120},                                 \
        {0x1.71b8ef6dcf572p-66, -0x1.d043ae40c4647p-120},                                \
        {0x1.0ce396db7f853p-70, -0x1.aebcdbd20331cp-124},                                \
        {0x1.761b41316381ap-75, -0x1.3423c7d91404fp-130},                                \
        {0x1.f2cf01972f578p-80, -0x1.9ada5fcc1ab14p-135},                                \
        {0x1.3f3ccdd165fa9p-84, -0x1.58ddadf344487p-139},                                \
        {0x1.88e85fc6a4e5ap-89, -0x1.71c37ebd16540p-143},                                \
        {0x1.d1ab1c2dccea3p-94, 0x1.054d0c78aea14p-149},                                 \
        {0x1.0a18a2635085dp-98, 0x1.b9e2e28e1aa54p-153},                                 \
        {0x1.259f98b4358adp-103, 0x1.eaf8c39dd9bc5p-157},                                \
  }
#define REE_CR_TWO_OVER_PI_DATA                                                                \
  {                                                                                            \
    0xa2f9836eu, 0x4e441529u, 0xfc2757d1u, 0xf534ddc0u, 0xdb629599u, 0x3c439041u, 0xfe5163abu, \
        0xdebbc561u, 0xb7246e3au, 0x424dd2e0u, 0x06492eeau, 0x09d1921cu                        \
  }
// 1/i! as double-double, i = 0..29.
static const double kInvFactorialHost[30][2] = REE_CR_INV_FACTORIAL_DATA;
// Bits of 2/pi: 2/pi = sum_j word[j] * 2^(-32 (j + 1)).
static const uint32_t kTwoOverPiHost[12] = REE_CR_TWO_OVER_PI_DATA;
#if defined(__CUDACC__)
static __constant__ double kInvFactorialDevice[30][2] = REE_CR_INV_FACTORIAL_DATA;
static __constant__ uint32_t kTwoOverPiDevice[12] = REE_CR_TWO_OVER_PI_DATA;
#endif

REE_HD uint32_t twoOverPiWord(int j) {
#if defined(__CUDA_ARCH__)
  return kTwoOverPiDevice[j];
#else
  return kTwoOverPiHost[j];
#endif
}

REE_HD DD invFactorial(int i) {
#if defined(__CUDA_ARCH__)
  return {kInvFactorialDevice[i][0], kInvFactorialDevice[i][1]};
#else
  return {kInvFactorialHost[i][0], kInvFactorialHost[i][1]};
#endif
}

// ---- rounding tests -----------------------------------------------------------------------------
// The fast paths return a double y with |y - f(x)| <= eps |f(x)|. If y (1 - 2 eps) and
// y (1 + 2 eps) round to the same float, every value in the error interval does too, so that
// float is RN(f(x)). The factor 2 covers the rounding of the two products (2^-53 each).
REE_HD bool roundFast(double y, double eps, float* out) {
  float lo = static_cast<float>(y * (1.0 - 2.0 * eps));
  float hi = static_cast<float>(y * (1.0 + 2.0 * eps));
  if (floatBits(lo) != floatBits(hi)) return false;
  *out = lo;
  return true;
}

// Rounding test of a double-double v with |v - f(x)| <= eps |v.hi|: succeeds when the error
// interval lies strictly between two consecutive float rounding boundaries (midpoints). The
// candidate starts at RN(v.hi) and moves one float down or up when v.lo puts the whole interval
// beyond a boundary (v.hi itself may sit exactly on a midpoint).
REE_HD bool roundAccurate(DD v, double eps, float* out) {
  bool negative = v.hi < 0.0;
  double h = negative ? -v.hi : v.hi;
  double l = negative ? -v.lo : v.lo;
  uint32_t fb = floatBits(static_cast<float>(h));
  double threshold = eps * h * (1.0 + 0x1p-40);
  for (int attempt = 0; attempt < 2; ++attempt) {
    double f = static_cast<double>(bitsFloat(fb));
    double d_up = 0x1p1000, d_down = 0x1p1000;  // distances from v to the boundaries around f
    if (fb < 0x7f800000u) {
      uint32_t biased = fb >> 23;
      double upper = f + pow2((biased > 1 ? static_cast<int>(biased) : 1) - 151);
      DD gap = twoSum(upper, -h);
      d_up = gap.hi + (gap.lo - l);
    }
    if (fb != 0u) {
      double lower;
      if (fb == 0x7f800000u) {
        lower = 0x1.fffffep127 + 0x1p103;
      } else {
        uint32_t biased = fb >> 23;
        bool power_of_two = (fb & 0x7fffffu) == 0 && biased > 1;
        int ulp_exp = (biased > 1 ? static_cast<int>(biased) : 1) - 151 - (power_of_two ? 1 : 0);
        lower = f - pow2(ulp_exp);
      }
      DD gap = twoSum(h, -lower);
      d_down = gap.hi + (gap.lo + l);
    }
    if (d_up > threshold && d_down > threshold) {
      float result = bitsFloat(fb);
      *out = negative ? -result : result;
      return true;
    }
    if (d_down < -threshold && fb != 0u) {
      fb -= 1u;
    } else if (d_up < -threshold && fb < 0x7f800000u) {
      fb += 1u;
    } else {
      return false;
    }
  }
  return false;
}

// RN of a double-double taken as exact (a tie only when v.lo == 0: the conversion breaks it).
REE_HD float roundNearest(DD v) {
  float out;
  if (roundAccurate(v, 0.0, &out)) return out;
  return static_cast<float>(v.hi);
}

// ---- exp ----------------------------------------------------------------------------------------
constexpr double kExpEps = 0x1p-47;

// exp(x) for a double x in [-750, 710], relative error < 2^-50 (|r| <= 0.347, degree-13 Taylor,
// tail < 2^-57; k * kLn2Hi32 and x - k * kLn2Hi32 are exact).
REE_HD double expFast(double x) {
  double k = roundToInt(x * kInvLn2);
  double r = (x - k * kLn2Hi32) - k * kLn2Mid;
  double p = 0x1.6124613a86d09p-33;  // 1/13!
  p = fmaF64(p, r, 0x1.1eed8eff8d898p-29);
  p = fmaF64(p, r, 0x1.ae64567f544e4p-26);
  p = fmaF64(p, r, 0x1.27e4fb7789f5cp-22);
  p = fmaF64(p, r, 0x1.71de3a556c734p-19);
  p = fmaF64(p, r, 0x1.a01a01a01a01ap-16);
  p = fmaF64(p, r, 0x1.a01a01a01a01ap-13);
  p = fmaF64(p, r, 0x1.6c16c16c16c17p-10);
  p = fmaF64(p, r, 0x1.1111111111111p-7);
  p = fmaF64(p, r, 0x1.5555555555555p-5);
  p = fmaF64(p, r, 0x1.5555555555555p-3);
  p = fmaF64(p, r, 0.5);
  p = fmaF64(p, r, 1.0);
  p = fmaF64(p, r, 1.0);
  int ki = static_cast<int>(k);
  // Split the scaling so 2^k never leaves the double range for k in [-1100, 1100].
  int k1 = ki / 2;
  return p * pow2(k1) * pow2(ki - k1);
}

// ---- exp: table-driven path of crExp ----------------------------------------------------------
// expTableScaled(x, bias) returns y = e^x 2^-bias (1 + err), |err| < kExpTableEps = 2^-48, for a
// float x in [-104, kExpTableMax]. With bias = 896 (x >= kExpTableMin, e^x >= 2^-126) y's
// exponent field equals that of the float e^x, so roundScaledToFloat rounds y's bit pattern to
// the float's with integer operations; subnormal results use bias 832 and a final * 2^-64.
//
// Algorithm: n = RN(x C) (C ~ 32/ln2), n = 32 m + j with 0 <= j < 32, r = x - n ln2/32 (two
// steps), e^x = 2^m 2^(j/32) e^r; Ts = kExp2Table[j] 2^(m - bias) (integer addition to the
// exponent field); P = 1 + r (1/2 + r (1/6 + r (1/24 + r/120))) (Horner); y = Ts + (Ts r) P.
//
// Error bound, for |x| <= 104 (so |n| <= 4802); u = 2^-53:
// - Reduction. t = RN(x C + 1.5 2^52) with C = 0x1.71547p+5 lies in [2^52, 2^53) (ulp 1), so
//   n = t - 1.5 2^52 (exact) is an integer nearest x C, and the low 32 bits of t hold n.
//   |C - 32/ln2| < 1.21e-5, so |x 32/ln2 - n| <= 1/2 + 104 * 1.21e-5 and the exact reduced
//   argument r* = x - n ln2/32 has |r*| <= h = 0.0108576 (at most 1/2 + 0.0013 of ln2/32).
//   r1 = x - n StepHi (one fma) is exact: StepHi = 0x1.62e43p-6 has ulp 2^-26, so n StepHi is a
//   multiple of 2^-26; x is a multiple of 2^-30 when n != 0 (then |x| > 2^-7; n = 0 gives
//   r1 = x), and |r1| <= h + 4802 |StepHi - ln2/32| < 0.01086 < 2^-6, so r1 = k 2^-30, |k| < 2^24.
//   r = RN(r1 - n StepLo) with StepLo = RN(ln2/32 - StepHi): |ln2/32 - StepHi - StepLo| <
//   5.3e-27, so |r - r*| <= 4802 * 5.3e-27 + u (h + 1e-22) < 1.21e-18 =: er; |r| <= h' = h + er.
// - Polynomial. T5(r) = r + r^2/2 + r^3/6 + r^4/24 + r^5/120: |e^r - 1 - T5(r)| <= h'^6/720 e^h'
//   < 2.3004e-15. Coefficients: |RN(1/6) - 1/6| < 9.3e-18, |RN(1/24) - 1/24| < 2.4e-18,
//   |0x1.11111p-7 - 1/120| < 5.0e-10. Each Horner step p_k = RN(p_{k+1} r + c_k) has error
//   e_k <= h' e_{k+1} + |c_k error| + u |p_k|: e5 < 5.4e-12, e4 < 5.9e-14, e3 < 6.92e-16,
//   e2 < 1.192e-16 against 1/24 + r/120, ..., 1 + r/2 + r^2/6 + r^3/24 + r^4/120 (|P| < 1.0055).
//   With RN(Ts r) = Ts r (1 + d), |d| <= u: Ts + RN(Ts r) P = Ts (1 + Q), Q = r (1 + d) P, and
//   |Q - T5(r)| <= h' (e2 + u 1.0055) < 2.6e-18. So |1 + Q - e^r| < 2.3029e-15, relative to
//   e^r >= e^-h' > 0.98920: < 2.3280e-15.
// - Table: |kExp2Table[j] - 2^(j/32)| <= u 2^(j/32) (RN; checked against MPFR by the tests);
//   the exponent addition is exact (Ts stays a normal double, see exp2TableScaled).
// - Final fma: y = RN(Ts + RN(Ts r) P) = Ts (1 + Q) (1 + d'), |d'| <= u (for bias 896 the exact
//   value is at least 2^-1022 (1 - 2^-48): a subnormal y just below 2^-1022 still has an absolute
//   error <= 2^-1075 <= u 2^-1022).
// Total: (1 + u)^2 (1 + 2.3280e-15) (1 + 1.22e-18) - 1 < 2.552e-15 < 2^-48 (= 3.55e-15).
// (Measured over all float inputs against expl: at most 2.497e-15.)
#define REE_CR_EXP2_TABLE_DATA                                                                  \
  {                                                                                             \
    0x1.0000000000000p+0, 0x1.059b0d3158574p+0, 0x1.0b5586cf9890fp+0, 0x1.11301d0125b51p+0,     \
        0x1.172b83c7d517bp+0, 0x1.1d4873168b9aap+0, 0x1.2387a6e756238p+0, 0x1.29e9df51fdee1p+0, \
        0x1.306fe0a31b715p+0, 0x1.371a7373aa9cbp+0, 0x1.3dea64c123422p+0, 0x1.44e086061892dp+0, \
        0x1.4bfdad5362a27p+0, 0x1.5342b569d4f82p+0, 0x1.5ab07dd485429p+0, 0x1.6247eb03a5585p+0, \
        0x1.6a09e667f3bcdp+0, 0x1.71f75e8ec5f74p+0, 0x1.7a11473eb0187p+0, 0x1.82589994cce13p+0, \
        0x1.8ace5422aa0dbp+0, 0x1.93737b0cdc5e5p+0, 0x1.9c49182a3f090p+0, 0x1.a5503b23e255dp+0, \
        0x1.ae89f995ad3adp+0, 0x1.b7f76f2fb5e47p+0, 0x1.c199bdd85529cp+0, 0x1.cb720dcef9069p+0, \
        0x1.d5818dcfba487p+0, 0x1.dfc97337b9b5fp+0, 0x1.ea4afa2a490dap+0, 0x1.f50765b6e4540p+0  \
  }
// kExp2Table[j] = RN(2^(j/32)), j = 0..31. Host code reads this one (an inline variable: one
// definition across translation units); device code reads its copy in global memory (each
// translation unit its own, as for the tables above) through the read-only cache: per-lane
// indices would serialise in __constant__ memory.
inline constexpr double kExp2Table[32] = REE_CR_EXP2_TABLE_DATA;
#if defined(__CUDACC__)
static __device__ __align__(256) const double kExp2TableDevice[32] = REE_CR_EXP2_TABLE_DATA;
#endif

// The constants of expTableScaled that need more than 21 significant bits, or a register (a DFMA
// takes at most one constant operand). Device code reads them from __constant__ memory, as
// operands or hoisted out of loops; a literal double would cost two register moves per use (one
// with at most 21 significant bits, like kExpTableInvStep, is an immediate operand).
struct ExpTableConstants {
  double shifter;      // 1.5 * 2^52
  double neg_step_lo;  // -RN(ln2/32 - kExpTableStepHi)
  double c3;           // RN(1/6)
  double c4;           // RN(1/24)
};
#define REE_CR_EXP_TABLE_CONSTANTS \
  { 0x1.8p+52, 0x1.05c610ca86c39p-34, 0x1.5555555555555p-3, 0x1.5555555555555p-5 }
inline constexpr ExpTableConstants kExpTableConstants = REE_CR_EXP_TABLE_CONSTANTS;
#if defined(__CUDACC__)
static __constant__ ExpTableConstants kExpTableConstantsDevice = REE_CR_EXP_TABLE_CONSTANTS;
#endif

REE_HD const ExpTableConstants& expTableConstants() {
#if defined(__CUDA_ARCH__)
  return kExpTableConstantsDevice;
#else
  return kExpTableConstants;
#endif
}

constexpr double kExpTableInvStep = 0x1.71547p+5;  // 32/ln2 to 21 bits (error 1.21e-5)
constexpr double kExpTableStepHi = 0x1.62e43p-6;   // ln2/32 to 21 bits (error 5.95e-11)
constexpr double kExpTableC5 = 0x1.11111p-7;       // 1/120 to 21 bits (error 5.0e-10)
constexpr double kExpTableEps = 0x1p-48;
// The range of crExp's inline path: e^x >= 2^-126 from kExpTableMin = 0xc2aeac4f on (one float
// lower, e^x < 2^-126) and e^x < 2^128 - 2^103 up to kExpTableMax = 0x42b17217 (one float
// higher, e^x > 2^128: +inf).
constexpr float kExpTableMin = -0x1.5d589ep+6f;
constexpr float kExpTableMax = 0x1.62e42ep+6f;

// Ts = 2^(j/32) 2^(m - bias) from the low 32 bits of t, n = 32 m + j (two's complement). The
// exponent field of 2^(j/32) (1023) becomes 1023 + m - bias: 127 + m in [1, 255] for bias 896
// (x in [kExpTableMin, kExpTableMax], m in [-126, 128]), 191 + m in [40, 65] for bias 832
// (x in [-104, kExpTableMin), m in [-151, -126]): always a normal double.
REE_HD double exp2TableScaled(uint32_t n, uint32_t bias) {
#if defined(__CUDA_ARCH__)
  // The table is 256-byte aligned: adding 8 j to its address is an OR into the low byte.
  uintptr_t base = reinterpret_cast<uintptr_t>(kExp2TableDevice);
  const double* entry = reinterpret_cast<const double*>(base | ((n << 3) & 0xf8u));
  uint64_t bits = doubleBits(__ldg(entry));
#else
  uint64_t bits = doubleBits(kExp2Table[n & 31u]);
#endif
  // (n & ~31) << 15 is m << 20 (mod 2^32): m added to the exponent field, bits 20..30.
  uint32_t high = static_cast<uint32_t>(bits >> 32) + ((n & ~31u) << 15) - (bias << 20);
  return bitsDouble((static_cast<uint64_t>(high) << 32) | static_cast<uint32_t>(bits));
}

// e^x 2^-bias for a float x in [-104, kExpTableMax], relative error < kExpTableEps (above).
REE_HD double expTableScaled(float xf, uint32_t bias) {
  const ExpTableConstants& k = expTableConstants();
  double x = xf;
  double t = fmaF64(x, kExpTableInvStep, k.shifter);  // 1.5 * 2^52 + n
  double n = t - k.shifter;
  double r = fmaF64(n, -kExpTableStepHi, x);  // exact
  r = fmaF64(n, k.neg_step_lo, r);
  double ts = exp2TableScaled(static_cast<uint32_t>(doubleBits(t)), bias);
  double p = fmaF64(r, kExpTableC5, k.c4);
  p = fmaF64(p, r, k.c3);
  p = fmaF64(p, r, 0.5);
  p = fmaF64(p, r, 1.0);
  return fmaF64(ts * r, p, ts);
}

// Rounding test and rounding of y = v 2^-896 > 0, v an approximation of a float-range value: y's
// exponent field is v's float exponent field (0 for subnormal floats: then y is a subnormal
// double and the float ulp 2^-149 is 2^29 double ulps 2^-1074, as for normal values), so the float
// rounding boundaries (midpoints) in y's binade are the doubles whose 29 low bits D are 2^28, and
// the nearest boundary outside the binade is at least 2^27 ulps away. If the exact value lies
// within E ulps of y and |D - 2^28| > E, no boundary separates them and RN(exact) = RN(y) = the
// float whose bits are (bits(y) + 2^28) >> 29 (no tie, D != 2^28; a carry moves to the next
// binade, or to +inf). E bound: expTableScaled's error is < eps' y with eps' = eps / (1 - eps),
// eps = kExpTableEps, and y < 2^53 ulps (2^52 for a subnormal y), so E < eps' 2^53 + 1/2 < 32.5
// (the 1/2: the extra rounding of a subnormal y, at most half an ulp). kExpTableMargin = 64 is
// about twice that.
constexpr uint32_t kExpTableMargin = 64;

REE_HD bool roundScaledToFloat(double y, float* out) {
  uint64_t bits = doubleBits(y);
  uint32_t low = static_cast<uint32_t>(bits);
  // (D + 2^28 + M) mod 2^29 <= 2M  <=>  |D - 2^28| <= M.
  if (((low + (0x10000000u + kExpTableMargin)) & 0x1fffffffu) <= 2u * kExpTableMargin) return false;
  *out = bitsFloat(static_cast<uint32_t>((bits + 0x10000000u) >> 29));
  return true;
}

// exp of a double-double argument, |x| <= 700, relative error < 2^-100 (degree-24 Taylor on
// |r| <= 0.347 with double-double coefficients).
REE_CR_SLOW DD expAccurate(DD x) {
  double k = roundToInt(x.hi * kInvLn2);
  double a = x.hi - k * kLn2Hi32;  // exact
  DD r = ddSub(ddFromD(a), twoProd(k, kLn2Mid));
  r = ddSub(r, ddFromD(k * kLn2Lo));
  r = ddAdd(r, ddFromD(x.lo));
  DD p = invFactorial(24);
  for (int i = 23; i >= 0; --i)
    p = ddAdd(ddMul(p, r), invFactorial(i));
  int ki = static_cast<int>(k);
  int k1 = ki / 2;
  double scale1 = pow2(k1), scale2 = pow2(ki - k1);
  return {p.hi * scale1 * scale2, p.lo * scale1 * scale2};
}

// expm1(x) for a double x with |x| < 0.36: degree-14 Taylor of (e^x - 1) / x.
REE_HD double expm1SmallFast(double x) {
  double p = 0x1.93974a8c07c9dp-37;  // 1/14!, the coefficient of x^13
  p = fmaF64(p, x, 0x1.6124613a86d09p-33);
  p = fmaF64(p, x, 0x1.1eed8eff8d898p-29);
  p = fmaF64(p, x, 0x1.ae64567f544e4p-26);
  p = fmaF64(p, x, 0x1.27e4fb7789f5cp-22);
  p = fmaF64(p, x, 0x1.71de3a556c734p-19);
  p = fmaF64(p, x, 0x1.a01a01a01a01ap-16);
  p = fmaF64(p, x, 0x1.a01a01a01a01ap-13);
  p = fmaF64(p, x, 0x1.6c16c16c16c17p-10);
  p = fmaF64(p, x, 0x1.1111111111111p-7);
  p = fmaF64(p, x, 0x1.5555555555555p-5);
  p = fmaF64(p, x, 0x1.5555555555555p-3);
  p = fmaF64(p, x, 0.5);
  p = fmaF64(p, x, 1.0);
  return p * x;
}

// expm1 of a double x, x in [-60, 710], relative error < 2^-49.
REE_HD double expm1Fast(double x) {
  if (x > -0.36 && x < 0.36) return expm1SmallFast(x);
  return expFast(x) - 1.0;
}

REE_CR_SLOW DD expm1Accurate(double x) {
  if (x > -0.36 && x < 0.36) {
    DD p = invFactorial(26);
    for (int i = 25; i >= 1; --i)
      p = ddAdd(ddMulD(p, x), invFactorial(i));
    return ddMulD(p, x);
  }
  return ddAdd(expAccurate(ddFromD(x)), ddFromD(-1.0));
}

// ---- log ----------------------------------------------------------------------------------------
constexpr double kLogEps = 0x1p-47;

// Splits a positive normal double v = 2^e * m with m in [sqrt(1/2), sqrt(2)).
REE_HD double splitLog(double v, int* e) {
  uint64_t bits = doubleBits(v);
  int exponent = static_cast<int>(bits >> 52) - 1023;
  double m = bitsDouble((bits & 0x000fffffffffffffull) | 0x3ff0000000000000ull);
  if (m > 0x1.6a09e667f3bcdp+0) {
    m = m * 0.5;
    exponent += 1;
  }
  *e = exponent;
  return m;
}

// 2 atanh(s) = log((1+s)/(1-s)) for |s| <= 0.172: degree 23 odd polynomial, tail < 2^-56.
REE_HD double atanh2Fast(double s) {
  double z = s * s;
  double p = 0x1.642c8590b2164p-5;  // 1/23
  p = fmaF64(p, z, 0x1.8618618618618p-5);
  p = fmaF64(p, z, 0x1.af286bca1af28p-5);
  p = fmaF64(p, z, 0x1.e1e1e1e1e1e1ep-5);
  p = fmaF64(p, z, 0x1.1111111111111p-4);
  p = fmaF64(p, z, 0x1.3b13b13b13b14p-4);
  p = fmaF64(p, z, 0x1.745d1745d1746p-4);
  p = fmaF64(p, z, 0x1.c71c71c71c71cp-4);
  p = fmaF64(p, z, 0x1.2492492492492p-3);
  p = fmaF64(p, z, 0x1.999999999999ap-3);
  p = fmaF64(p, z, 0x1.5555555555555p-2);
  double s2 = 2.0 * s;
  return fmaF64(s2 * z, p, s2);
}

// log(v) for a positive normal double v, relative error < 2^-49 (absolute < 2^-52 when e = 0).
REE_HD double logFast(double v) {
  int e;
  double m = splitLog(v, &e);
  double s = (m - 1.0) / (m + 1.0);  // m - 1 and m + 1 are exact
  double lm = atanh2Fast(s);
  double de = static_cast<double>(e);
  return de * kLn2Hi32 + (de * kLn2Mid + lm);
}

// 2 atanh(s) in double-double, |s| <= 0.172, relative error < 2^-102.
REE_CR_SLOW DD atanh2Accurate(DD s) {
  DD z = ddMul(s, s);
  DD p = ddDiv(ddFromD(1.0), ddFromD(47.0));
  for (int i = 22; i >= 0; --i) {
    p = ddAdd(ddMul(p, z), ddDiv(ddFromD(1.0), ddFromD(2.0 * i + 1.0)));
  }
  return ddMulD(ddMul(p, s), 2.0);
}

// log of a positive double-double v (v.hi normal), relative error < 2^-100.
REE_CR_SLOW DD logAccurate(DD v) {
  int e;
  double mh = splitLog(v.hi, &e);
  double ml = v.lo * pow2(-e);
  DD num = ddAdd(ddFromD(mh - 1.0), ddFromD(ml));
  DD den = ddAdd(twoSum(mh, 1.0), ddFromD(ml));
  DD lm = atanh2Accurate(ddDiv(num, den));
  double de = static_cast<double>(e);
  DD eln2 = ddAdd(ddFromD(de * kLn2Hi32), twoProd(de, kLn2Mid));
  eln2 = ddAdd(eln2, ddFromD(de * kLn2Lo));
  return ddAdd(eln2, lm);
}

// ---- trigonometric argument reduction -----------------------------------------------------------
// Bits [pos, pos + 32) of the little-endian 7-word integer p (zeros outside).
REE_HD uint32_t bitsAt(const uint32_t* p, int pos) {
  if (pos <= -32 || pos >= 224) return 0u;
  if (pos < 0) return p[0] << (-pos);
  int word = pos >> 5, shift = pos & 31;
  uint64_t low = p[word];
  uint64_t high = word + 1 < 7 ? p[word + 1] : 0u;
  return static_cast<uint32_t>(((high << 32) | low) >> shift);
}

// Payne-Hanek reduction of |x| >= 0.78125 (abs_bits = bits of |x|, finite): returns the quadrant
// q (mod 4) and r (double-double) with |x| = (q + F) pi/2, r = F pi/2, |F| <= 1/2. F is computed
// from an exact integer product with 192 bits of 2/pi, truncated at 2^-160: its absolute error is
// below 2^-134 so even the closest binary32 approach to a multiple of pi/2 keeps >= 2^-90
// relative accuracy.
REE_HD int reduceQuadrant(uint32_t abs_bits, DD* r) {
  int biased = static_cast<int>(abs_bits >> 23);
  uint32_t mantissa = (abs_bits & 0x7fffffu) | 0x800000u;
  int e = biased - 150;  // |x| = mantissa * 2^e, e >= -24
  int j0 = e >= 2 ? (e - 2) >> 5 : 0;
  uint32_t p[7];
  uint64_t carry = 0;
  for (int i = 0; i < 6; ++i) {
    uint64_t prod = static_cast<uint64_t>(mantissa) * twoOverPiWord(j0 + 5 - i) + carry;
    p[i] = static_cast<uint32_t>(prod);
    carry = prod >> 32;
  }
  p[6] = static_cast<uint32_t>(carry);
  int s = 32 * (j0 + 6) - e;  // number of fraction bits of p, 159..216
  uint32_t q = bitsAt(p, s) & 3u;
  uint32_t f[5];
  for (int i = 0; i < 5; ++i)
    f[i] = bitsAt(p, s - 32 * (i + 1));
  bool negative = (f[0] & 0x80000000u) != 0;
  if (negative) {  // F -= 1, q += 1: two's complement of the 160-bit fraction
    q += 1u;
    uint64_t c = 1;
    for (int i = 4; i >= 0; --i) {
      uint64_t v = static_cast<uint64_t>(~f[i]) + c;
      f[i] = static_cast<uint32_t>(v);
      c = v >> 32;
    }
  }
  DD frac = ddFromD(static_cast<double>(f[4]) * 0x1p-160);
  for (int i = 3; i >= 0; --i) {
    frac = ddAdd(frac, ddFromD(static_cast<double>(f[i]) * pow2(-32 * (i + 1))));
  }
  DD reduced = ddMul(frac, DD{kPiOver2Hi, kPiOver2Lo});
  *r = negative ? ddNeg(reduced) : reduced;
  return static_cast<int>(q & 3u);
}

// sin(r), cos(r) for |r| <= pi/4 in double: Taylor to r^19 / r^20, relative error < 2^-50.
REE_HD double sinPolyFast(double r) {
  double z = r * r;
  double p = -0x1.2f49b46814157p-57;
  p = fmaF64(p, z, 0x1.952c77030ad4ap-49);
  p = fmaF64(p, z, -0x1.ae7f3e733b81fp-41);
  p = fmaF64(p, z, 0x1.6124613a86d09p-33);
  p = fmaF64(p, z, -0x1.ae64567f544e4p-26);
  p = fmaF64(p, z, 0x1.71de3a556c734p-19);
  p = fmaF64(p, z, -0x1.a01a01a01a01ap-13);
  p = fmaF64(p, z, 0x1.1111111111111p-7);
  p = fmaF64(p, z, -0x1.5555555555555p-3);
  return fmaF64(r * z, p, r);
}

REE_HD double cosPolyFast(double r) {
  double z = r * r;
  double p = 0x1.e542ba4020225p-62;
  p = fmaF64(p, z, -0x1.6827863b97d97p-53);
  p = fmaF64(p, z, 0x1.ae7f3e733b81fp-45);
  p = fmaF64(p, z, -0x1.93974a8c07c9dp-37);
  p = fmaF64(p, z, 0x1.1eed8eff8d898p-29);
  p = fmaF64(p, z, -0x1.27e4fb7789f5cp-22);
  p = fmaF64(p, z, 0x1.a01a01a01a01ap-16);
  p = fmaF64(p, z, -0x1.6c16c16c16c17p-10);
  p = fmaF64(p, z, 0x1.5555555555555p-5);
  p = fmaF64(p, z, -0.5);
  return fmaF64(z, p, 1.0);
}

// sin / cos Taylor series of a double-double r, |r| <= pi/4, relative error < 2^-100.
REE_CR_SLOW DD sinPolyAccurate(DD r) {
  DD z = ddMul(r, r);
  DD p = invFactorial(29);
  for (int n = 13; n >= 0; --n) {
    DD c = invFactorial(2 * n + 1);
    if (n & 1) c = ddNeg(c);
    p = ddAdd(ddMul(p, z), c);
  }
  return ddMul(p, r);
}

REE_CR_SLOW DD cosPolyAccurate(DD r) {
  DD z = ddMul(r, r);
  DD p = invFactorial(28);
  for (int n = 13; n >= 0; --n) {
    DD c = invFactorial(2 * n);
    if (n & 1) c = ddNeg(c);
    p = ddAdd(ddMul(p, z), c);
  }
  return p;
}

}  // namespace crdetail
}  // namespace ree
