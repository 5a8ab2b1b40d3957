// Correctly rounded binary32 math for RepOps (docs/repops-spec/crmath.md).
//
// Every crX below returns RN(f(x)): the float nearest to the exact value of f at the float input,
// ties to even, for EVERY input, including subnormal inputs and results, overflow and underflow.
// A correctly rounded result is unique, so any correct implementation (this one on x86, this one
// on H100/H200, CORE-MATH, MPFR) gives the same bits. Any NaN result is the canonical quiet NaN
// 0x7fc00000 (positive sign, no payload), whatever NaN went in.
//
// Recipe: a fast double evaluation with a proven relative error bound, a rounding test that checks
// the whole error interval rounds to one float, and a rare double-double (about 2^-100) path
// otherwise. Only IEEE add/sub/mul/div/sqrt/fma and integer operations: no libm, no intrinsics.
//
// Composites (crSigmoid, crSilu, crGeluErf, crGeluTanh, crSoftplus) are NOT correctly rounded
// functions: they are fixed sequences of the CR functions above and IEEE float operations, listed
// beside each one, which makes them just as reproducible.
#pragma once

#include <cstdint>

#include "ree/kernels/crmath_detail.h"
#include "ree/kernels/numeric.h"

#if !defined(__CUDA_ARCH__)
#include <cmath>
#endif

namespace ree {

namespace crdetail {

constexpr uint32_t kCanonicalNanBits = 0x7fc00000u;
constexpr double kAccurateEps = 0x1p-88;

REE_HD float canonicalNan() {
  return bitsFloat(kCanonicalNanBits);
}
REE_HD float infinity() {
  return bitsFloat(0x7f800000u);
}
REE_HD bool isNan(float x) {
  return (floatBits(x) & 0x7fffffffu) > 0x7f800000u;
}
// IEEE operations may give different NaN payloads on CPU and GPU: composites end with this.
REE_HD float canonicalize(float x) {
  return isNan(x) ? canonicalNan() : x;
}
REE_HD float negateIf(bool negate, float x) {
  return negate ? -x : x;
}

REE_HD double sqrtF64(double x) {
#if defined(__CUDA_ARCH__)
  return __dsqrt_rn(x);
#else
  return std::sqrt(x);  // IEEE correctly rounded square root (an IEEE basic operation)
#endif
}

REE_CR_SLOW float finishAccurate(DD v, double eps) {
  float out;
  if (roundAccurate(v, eps, &out)) return out;
  // Not reached for any binary32 input of the univariate functions (their hardest cases need far
  // less than 2^-88); kept as a defined result.
  return roundNearest(v);
}

REE_CR_SLOW float expSlow(float x) {
  return finishAccurate(expAccurate(ddFromD(x)), kAccurateEps);
}

// crExp outside [kExpTableMin, kExpTableMax]: NaN, overflow, underflow and subnormal results.
REE_CR_SLOW float expOutsideTableRange(float x) {
  if (!(x >= -104.0f)) return isNan(x) ? canonicalNan() : 0.0f;  // e^-104 < 2^-150, also -inf
  if (x > 0.0f) return infinity();  // x > kExpTableMax: e^x > 2^128 - 2^103, also +inf
  // x in [-104, kExpTableMin): e^x 2^-832 is a normal double (relative error < kExpTableEps);
  // times 2^-64 it approximates e^x 2^-896 < 2^-1022 (a subnormal double: the bits
  // roundScaledToFloat reads), with one more rounding of at most half an ulp (2^-1075).
  float out;
  if (roundScaledToFloat(expTableScaled(x, 832) * 0x1p-64, &out)) return out;
  return expSlow(x);
}

REE_CR_SLOW float expm1Slow(float x) {
  return finishAccurate(expm1Accurate(x), kAccurateEps);
}
REE_CR_SLOW float logSlow(float x) {
  return finishAccurate(logAccurate(ddFromD(x)), kAccurateEps);
}

REE_CR_SLOW float log1pSlow(float x) {
  double xd = x;
  DD v;
  if (xd > -0.25 && xd < 0.25) {
    v = atanh2Accurate(ddDiv(ddFromD(xd), twoSum(2.0, xd)));
  } else {
    v = logAccurate(twoSum(1.0, xd));
  }
  return finishAccurate(v, kAccurateEps);
}

// tanh(a) for a > 0: expm1(2a) / (expm1(2a) + 2).
REE_CR_SLOW float tanhSlow(float a) {
  DD e = expm1Accurate(2.0 * static_cast<double>(a));
  return finishAccurate(ddDiv(e, ddAdd(e, ddFromD(2.0))), kAccurateEps);
}

// erf(a) for 0 < a < 4.
REE_CR_SLOW float erfSlow(float a) {
  double ad = a;
  double z = ad * ad;  // exact: a has 24 bits
  DD sum;
  if (ad < 1.0) {
    // Maclaurin: erf(a) = 2/sqrt(pi) * a * sum (-z)^n / (n! (2n+1)).
    sum = ddFromD(0.0);
    for (int n = 29; n >= 0; --n) {
      DD c = ddDiv(invFactorial(n), ddFromD(2.0 * n + 1.0));
      if (n & 1) c = ddNeg(c);
      sum = ddAdd(ddMulD(sum, z), c);
    }
    sum = ddMulD(sum, ad);
  } else {
    // erf(a) = 2/sqrt(pi) * exp(-z) * sum a (2z)^n / (2n+1)!!: positive terms, no cancellation.
    DD term = ddFromD(ad);
    sum = term;
    for (int n = 1; n < 400; ++n) {
      term = ddDiv(ddMulD(term, 2.0 * z), ddFromD(2.0 * n + 1.0));
      sum = ddAdd(sum, term);
      if (term.hi < sum.hi * 0x1p-112) break;
    }
    sum = ddMul(sum, expAccurate(ddFromD(-z)));
  }
  return finishAccurate(ddMul(sum, DD{kTwoOverSqrtPiHi, kTwoOverSqrtPiLo}), kAccurateEps);
}

// |x| = (q + F) pi/2 with r = F pi/2; small |x| skips the reduction.
REE_HD int reduceTrig(uint32_t abs_bits, DD* r) {
  if (abs_bits < 0x3f480000u) {  // |x| < 0.78125 < pi/4
    *r = ddFromD(static_cast<double>(bitsFloat(abs_bits)));
    return 0;
  }
  return reduceQuadrant(abs_bits, r);
}

REE_CR_SLOW float sinSlow(float x) {
  DD r;
  int q = reduceTrig(floatBits(x) & 0x7fffffffu, &r);
  DD v = (q & 1) ? cosPolyAccurate(r) : sinPolyAccurate(r);
  if ((q & 2) != (x < 0.0f ? 2 : 0)) v = ddNeg(v);
  return finishAccurate(v, kAccurateEps);
}

REE_CR_SLOW float cosSlow(float x) {
  DD r;
  int q = reduceTrig(floatBits(x) & 0x7fffffffu, &r);
  DD v = (q & 1) ? sinPolyAccurate(r) : cosPolyAccurate(r);
  if (((q + 1) & 2) != 0) v = ddNeg(v);
  return finishAccurate(v, kAccurateEps);
}

// 1/sqrt(x) near a float midpoint: decide exactly which side with one fma. m = the midpoint
// (25 bits, so m*m is exact); sign(m^2 x - 1) is the sign of the correctly rounded fma.
REE_CR_SLOW float rsqrtSlow(float x, double y) {
  float f = static_cast<float>(y);
  uint32_t fb = floatBits(f);
  uint32_t lower_bits = y > static_cast<double>(f) ? fb : fb - 1u;
  float lower = bitsFloat(lower_bits), upper = bitsFloat(lower_bits + 1u);
  double m = 0.5 * (static_cast<double>(lower) + static_cast<double>(upper));  // exact
  double t = fmaF64(m * m, static_cast<double>(x), -1.0);
  if (t < 0.0) return upper;  // m^2 x < 1: 1/sqrt(x) > m
  if (t > 0.0) return lower;
  return (lower_bits & 1u) ? upper : lower;
}

// x = odd * 2^exponent for a positive finite float.
REE_HD uint32_t oddPart(float x, int* exponent) {
  uint32_t bits = floatBits(x) & 0x7fffffffu;
  uint32_t biased = bits >> 23;
  uint32_t sig = bits & 0x7fffffu;
  int e;
  if (biased == 0) {
    e = -149;
  } else {
    sig |= 0x800000u;
    e = static_cast<int>(biased) - 150;
  }
  while ((sig & 1u) == 0u) {
    sig >>= 1;
    ++e;
  }
  *exponent = e;
  return sig;
}

// If x^y (x > 0 finite, y finite nonzero) is a dyadic number g^c 2^E with g^c < 2^53, stores it
// (exactly, as a double) and returns true. Those are the only inputs whose x^y can be a float or
// a float midpoint; everything else is irrational or needs more than 53 bits.
REE_CR_SLOW bool powExact(float x, float y, double* exact) {
  int ex, ey;
  uint32_t a = oddPart(x, &ex);
  uint32_t c_abs = oddPart(y, &ey);
  int64_t c = y < 0.0f ? -static_cast<int64_t>(c_abs) : static_cast<int64_t>(c_abs);
  // y = c * 2^ey. Bring it to y = n / 2^k with n odd-or-integer and k >= 0.
  int k = ey < 0 ? -ey : 0;
  if (ey > 30) return false;  // |y| >= 2^30 with x != 1: x^y is far outside the float range
  if (ey > 0) c = c * (int64_t{1} << ey);
  uint64_t g = a;
  for (int i = 0; i < k; ++i) {  // g = a^(1/2^k) if that is an integer
    if (i >= 5 && g != 1u) return false;
    uint64_t root = static_cast<uint64_t>(sqrtF64(static_cast<double>(g)));
    if (root * root != g) return false;
    g = root;
  }
  // 2-part exponent ex * c / 2^k must be an integer.
  int64_t two_exp_num = static_cast<int64_t>(ex) * c;
  if (two_exp_num % (int64_t{1} << k) != 0) return false;
  int64_t two_exp = two_exp_num / (int64_t{1} << k);
  uint64_t odd = 1;
  if (g != 1u) {
    if (c < 0 || c > 64) return false;  // 1/g^|c| is not dyadic; g^c for c > 64 exceeds 2^53
    for (int64_t i = 0; i < c; ++i) {
      odd *= g;
      if (odd > (uint64_t{1} << 53)) return false;
    }
  }
  if (two_exp < -1000 || two_exp > 1000) return false;
  *exact = static_cast<double>(odd) * pow2(static_cast<int>(two_exp));
  return true;
}

// x^y for x > 0 finite, y finite nonzero.
REE_CR_SLOW float powPositive(float x, float y) {
  DD t = ddMulD(logAccurate(ddFromD(x)), static_cast<double>(y));
  if (t.hi > 89.5) return infinity();
  if (t.hi < -104.5) return 0.0f;
  DD v = expAccurate(t);
  float out;
  if (roundAccurate(v, 0x1p-85, &out)) return out;
  double exact;
  if (powExact(x, y, &exact)) return static_cast<float>(exact);
  return roundNearest(v);
}

// 0: not an integer, 1: odd integer, 2: even integer (y finite, nonzero).
REE_HD int integerClass(float y) {
  uint32_t bits = floatBits(y) & 0x7fffffffu;
  int e = static_cast<int>(bits >> 23) - 127;
  if (e < 0) return 0;
  if (e >= 24) return 2;
  uint32_t sig = (bits & 0x7fffffu) | 0x800000u;
  uint32_t frac_mask = (1u << (23 - e)) - 1u;
  if (sig & frac_mask) return 0;
  return ((sig >> (23 - e)) & 1u) ? 1 : 2;
}

}  // namespace crdetail

// ---- correctly rounded functions ----------------------------------------------------------------

// e^x.
REE_HD float crExp(float x) {
  using namespace crdetail;
  if (!(x >= kExpTableMin && x <= kExpTableMax)) return expOutsideTableRange(x);  // NaN too
  float out;
  if (roundScaledToFloat(expTableScaled(x, 896), &out)) return out;
  return expSlow(x);
}

namespace crdetail {

// crExp's table path without a branch: sets *out to crExp(x) and returns true, or returns false
// (x outside [kExpTableMin, kExpTableMax], NaN included, or e^x within kExpTableMargin of a
// rounding boundary: then *out is meaningless). An x outside the range is replaced by 0 before the
// arithmetic, so every operation stays defined; the result is then discarded.
REE_HD bool expTableTry(float x, float* out) {
  const bool in_range = (x >= kExpTableMin) & (x <= kExpTableMax);
  const double y = expTableScaled(in_range ? x : 0.0f, 896);
  const uint64_t bits = doubleBits(y);
  const uint32_t low = static_cast<uint32_t>(bits);
  const bool decided =
      ((low + (0x10000000u + kExpTableMargin)) & 0x1fffffffu) > 2u * kExpTableMargin;
  *out = bitsFloat(static_cast<uint32_t>((bits + 0x10000000u) >> 29));
  return in_range & decided;
}

}  // namespace crdetail

// crExp of N values: y[i] = crExp(x[i]), the same bits. The table paths of all N values are
// computed first, without branches, so that their latencies overlap and their constants are
// loaded once (N separate crExp calls each sit behind their own branches and run one after
// another); only the values the table path cannot round (outside its range, or rare values near
// a rounding boundary) then take crExp.
template <int N>
REE_HD void crExpN(const float (&x)[N], float (&y)[N]) {
  uint32_t undecided = 0;
  for (int i = 0; i < N; ++i)
    undecided |= static_cast<uint32_t>(!crdetail::expTableTry(x[i], &y[i])) << i;
  if (undecided != 0) {
    for (int i = 0; i < N; ++i) {
      if ((undecided >> i) & 1u) y[i] = crExp(x[i]);
    }
  }
}

// e^x - 1.
REE_HD float crExpm1(float x) {
  using namespace crdetail;
  if (isNan(x)) return canonicalNan();
  if (x == 0.0f) return x;  // keeps the sign of zero
  if (x > 89.0f) return infinity();
  if (x < -40.0f) return -1.0f;  // e^x < 2^-57: rounds to -1
  float out;
  if (roundFast(expm1Fast(x), 0x1p-46, &out)) return out;
  return expm1Slow(x);
}

// Natural logarithm: log(+-0) = -inf, log(x < 0) = NaN, log(+inf) = +inf, log(1) = +0.
REE_HD float crLog(float x) {
  using namespace crdetail;
  uint32_t bits = floatBits(x);
  if (isNan(x)) return canonicalNan();
  if ((bits & 0x7fffffffu) == 0u) return -infinity();
  if (bits >> 31) return canonicalNan();
  if (bits == 0x7f800000u) return x;
  float out;
  if (roundFast(logFast(x), kLogEps, &out)) return out;
  return logSlow(x);
}

// log(1 + x): log1p(-1) = -inf, log1p(x < -1) = NaN, log1p(+-0) = +-0.
REE_HD float crLog1p(float x) {
  using namespace crdetail;
  if (isNan(x)) return canonicalNan();
  if (x == 0.0f) return x;
  if (x == -1.0f) return -infinity();
  if (x < -1.0f) return canonicalNan();
  if (floatBits(x) == 0x7f800000u) return x;
  double xd = x;
  double y = (xd > -0.25 && xd < 0.25) ? atanh2Fast(xd / (2.0 + xd)) : logFast(1.0 + xd);
  float out;
  if (roundFast(y, kLogEps, &out)) return out;
  return log1pSlow(x);
}

// Hyperbolic tangent: odd, tanh(+-0) = +-0, tanh(+-inf) = +-1.
REE_HD float crTanh(float x) {
  using namespace crdetail;
  if (isNan(x)) return canonicalNan();
  if (x == 0.0f) return x;
  bool negative = x < 0.0f;
  float a = negative ? -x : x;
  if (a > 10.0f) return negative ? -1.0f : 1.0f;  // 1 - tanh(10) < 2^-27
  double e = expm1Fast(2.0 * static_cast<double>(a));
  float out;
  if (!roundFast(e / (e + 2.0), 0x1p-45, &out)) out = tanhSlow(a);
  return negateIf(negative, out);
}

// Error function: odd, erf(+-0) = +-0, erf(+-inf) = +-1.
REE_HD float crErf(float x) {
  using namespace crdetail;
  if (isNan(x)) return canonicalNan();
  if (x == 0.0f) return x;
  bool negative = x < 0.0f;
  float a = negative ? -x : x;
  if (a >= 4.0f) return negative ? -1.0f : 1.0f;  // erfc(4) < 2^-25: rounds to 1
  double ad = a;
  double z = ad * ad;  // exact
  double y;
  if (ad < 1.0) {
    double p = -0x1.f1b4073b34a68p-63;
    p = fmaF64(p, z, 0x1.377c2110f2083p-58);
    p = fmaF64(p, z, -0x1.7271cbe5863ecp-54);
    p = fmaF64(p, z, 0x1.a173a167fba4dp-50);
    p = fmaF64(p, z, -0x1.bc6250fb14231p-46);
    p = fmaF64(p, z, 0x1.bd577e658d020p-42);
    p = fmaF64(p, z, -0x1.a289ee7e40f74p-38);
    p = fmaF64(p, z, 0x1.6f448e13e85e1p-34);
    p = fmaF64(p, z, -0x1.2b67310aa9f3ap-30);
    p = fmaF64(p, z, 0x1.c2e3054870b38p-27);
    p = fmaF64(p, z, -0x1.3777c55568ccdp-23);
    p = fmaF64(p, z, 0x1.87a00187a0018p-20);
    p = fmaF64(p, z, -0x1.bbd779334ef0bp-17);
    p = fmaF64(p, z, 0x1.c01c01c01c01cp-14);
    p = fmaF64(p, z, -0x1.8d3018d3018d3p-11);
    p = fmaF64(p, z, 0x1.2f684bda12f68p-8);
    p = fmaF64(p, z, -0x1.8618618618618p-6);
    p = fmaF64(p, z, 0x1.999999999999ap-4);
    p = fmaF64(p, z, -0x1.5555555555555p-2);
    p = fmaF64(p, z, 1.0);
    y = (p * ad) * kTwoOverSqrtPiHi;
  } else {
    double term = ad, sum = ad, two_z = 2.0 * z;
    for (int n = 1; n < 200; ++n) {
      term = (term * two_z) / (2.0 * n + 1.0);
      sum = sum + term;
      if (term < sum * 0x1p-57) break;
    }
    y = (sum * expFast(-z)) * kTwoOverSqrtPiHi;
  }
  float out;
  if (!roundFast(y, 0x1p-42, &out)) out = erfSlow(a);
  return negateIf(negative, out);
}

// Sine: sin(+-0) = +-0, sin(+-inf) = NaN. Exact Payne-Hanek reduction for every |x|.
REE_HD float crSin(float x) {
  using namespace crdetail;
  uint32_t abs_bits = floatBits(x) & 0x7fffffffu;
  if (abs_bits >= 0x7f800000u) return canonicalNan();
  if (abs_bits == 0u) return x;
  DD r;
  int q = reduceTrig(abs_bits, &r);
  double y = (q & 1) ? cosPolyFast(r.hi) : sinPolyFast(r.hi);
  if ((q & 2) != (x < 0.0f ? 2 : 0)) y = -y;
  float out;
  if (roundFast(y, 0x1p-46, &out)) return out;
  return sinSlow(x);
}

// Cosine: cos(+-0) = 1, cos(+-inf) = NaN.
REE_HD float crCos(float x) {
  using namespace crdetail;
  uint32_t abs_bits = floatBits(x) & 0x7fffffffu;
  if (abs_bits >= 0x7f800000u) return canonicalNan();
  DD r;
  int q = reduceTrig(abs_bits, &r);
  double y = (q & 1) ? sinPolyFast(r.hi) : cosPolyFast(r.hi);
  if (((q + 1) & 2) != 0) y = -y;
  float out;
  if (roundFast(y, 0x1p-46, &out)) return out;
  return cosSlow(x);
}

// RN(1/sqrt(x)): rsqrt(+0) = +inf, rsqrt(-0) = -inf, rsqrt(x < 0) = NaN, rsqrt(+inf) = +0.
REE_HD float crRsqrt(float x) {
  using namespace crdetail;
  uint32_t bits = floatBits(x);
  if (isNan(x)) return canonicalNan();
  if ((bits & 0x7fffffffu) == 0u) return (bits >> 31) ? -infinity() : infinity();
  if (bits >> 31) return canonicalNan();
  if (bits == 0x7f800000u) return 0.0f;
  double y = 1.0 / sqrtF64(static_cast<double>(x));  // two IEEE roundings: error < 2^-52
  float out;
  if (roundFast(y, 0x1p-51, &out)) return out;
  return rsqrtSlow(x, y);
}

// x^y with the special values of IEEE 754-2019 pow (C Annex F): pow(x, +-0) = 1 and pow(1, y) = 1
// even for NaN; pow(-1, +-inf) = 1; x < 0 with non-integer finite y gives NaN; pow(+-0, y) and
// pow(+-inf, y) as in Annex F. Correctly rounded as stated in docs/repops-spec/crmath.md.
REE_HD float crPow(float x, float y) {
  using namespace crdetail;
  uint32_t bx = floatBits(x), by = floatBits(y);
  uint32_t ax = bx & 0x7fffffffu, ay = by & 0x7fffffffu;
  if (ay == 0u || bx == 0x3f800000u) return 1.0f;
  if (ax > 0x7f800000u || ay > 0x7f800000u) return canonicalNan();
  bool x_negative = (bx >> 31) != 0;
  bool y_negative = (by >> 31) != 0;
  if (ay == 0x7f800000u) {
    if (ax == 0x3f800000u) return 1.0f;
    return ((ax > 0x3f800000u) != y_negative) ? infinity() : 0.0f;
  }
  bool odd_y = integerClass(y) == 1;
  bool negative_result = x_negative && odd_y;
  if (ax == 0u) return negateIf(negative_result, y_negative ? infinity() : 0.0f);
  if (ax == 0x7f800000u) return negateIf(negative_result, y_negative ? 0.0f : infinity());
  if (x_negative && integerClass(y) == 0) return canonicalNan();
  return negateIf(negative_result, powPositive(bitsFloat(ax), y));
}

// ---- composites: fixed sequences of CR functions and IEEE binary32 operations -------------------

// sigmoid(x) = 1 / (1 + crExp(-x)), float add and float div.
REE_HD float crSigmoid(float x) {
  float e = crExp(-x);
  return crdetail::canonicalize(1.0f / (1.0f + e));
}

namespace crdetail {

// The composites below before their final canonicalize: the same value, except that a NaN may
// have any sign and payload. For callers that canonicalise NaN as they store (pointwise.h), so
// that a value is tested for NaN once.
//
// silu: x * crSigmoid(x) without crSigmoid's own canonicalize, which cannot change the result: a
// NaN quotient makes the product NaN, and the final canonicalize erases its payload either way.
REE_HD float siluBeforeCanonical(float x) {
  return x * (1.0f / (1.0f + crExp(-x)));
}
REE_HD float geluErfBeforeCanonical(float x) {
  float e = crErf(x * 0x1.6a09e6p-1f);
  return (0.5f * x) * (1.0f + e);
}
REE_HD float geluTanhBeforeCanonical(float x) {
  float cube = (x * x) * x;
  float inner = 0x1.988454p-1f * (x + 0x1.6e4e26p-5f * cube);
  float t = crTanh(inner);
  return (0.5f * x) * (1.0f + t);
}

}  // namespace crdetail

// silu(x) = x * crSigmoid(x) (float mul).
REE_HD float crSilu(float x) {
  return crdetail::canonicalize(crdetail::siluBeforeCanonical(x));
}

// gelu(x) = (0.5f * x) * (1.0f + crErf(x * 0x1.6a09e6p-1f)); 0x1.6a09e6p-1f = RN(1/sqrt(2)).
REE_HD float crGeluErf(float x) {
  return crdetail::canonicalize(crdetail::geluErfBeforeCanonical(x));
}

// gelu_tanh(x) = (0.5f * x) * (1.0f + crTanh(b * (x + k * ((x * x) * x)))) with b = RN(sqrt(2/pi))
// = 0x1.988454p-1f and k = RN(0.044715) = 0x1.6e4e26p-5f, all float operations left to right.
REE_HD float crGeluTanh(float x) {
  return crdetail::canonicalize(crdetail::geluTanhBeforeCanonical(x));
}

// softplus(x) = x if x > 20 (PyTorch's threshold), else crLog1p(crExp(x)).
REE_HD float crSoftplus(float x) {
  if (x > 20.0f) return x;
  return crLog1p(crExp(x));
}

}  // namespace ree
