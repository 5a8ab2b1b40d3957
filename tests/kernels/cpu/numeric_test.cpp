// Storage conversions (numeric.h) against independent references: GCC's _Float16 conversion for
// binary16, and an exact nearest-value search in double for bfloat16.
#include <cmath>
#include <limits>

#include "ree/kernels/numeric.h"
#include "test_util.h"

namespace ree {
namespace {

// Reference bf16 rounding: pick the nearer of the two bf16 neighbours in exact double arithmetic,
// ties to the even one. Works from the float value, not from its bits.
uint16_t referenceBF16(float value) {
  if (std::isnan(value)) return std::signbit(value) ? 0xffc0 : 0x7fc0;
  uint32_t bits = floatBits(value);
  uint16_t down = static_cast<uint16_t>(bits >> 16);  // truncation toward zero in magnitude
  uint16_t up = static_cast<uint16_t>(down + 1);
  double x = value;
  double lo = static_cast<double>(toFloat(bf16_t{down}));
  if (x == lo) return down;
  // The magnitude-larger neighbour; 0x7f80 is infinity, which counts as 2^128 for rounding.
  double hi = ((up & 0x7fff) == 0x7f80) ? std::copysign(std::ldexp(1.0, 128), x)
                                        : static_cast<double>(toFloat(bf16_t{up}));
  double dlo = std::fabs(x - lo), dhi = std::fabs(hi - x);
  if (dlo < dhi) return down;
  if (dhi < dlo) return up;
  return (down & 1) ? up : down;
}

TEST(Numeric, BF16RoundTripIsExact) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    bf16_t v{static_cast<uint16_t>(h)};
    float f = toFloat(v);
    if (std::isnan(f)) continue;
    EXPECT_EQ(toBF16(f).bits, h) << "bf16 bits " << h;
  }
}

TEST(Numeric, BF16RoundingMatchesExactReference) {
  // Every 97th float bit pattern (44 million inputs) plus every bf16 midpoint and its neighbours.
  uint64_t mismatches = 0;
  for (uint64_t b = 0; b <= 0xffffffffull; b += 97) {
    float f = bitsFloat(static_cast<uint32_t>(b));
    if (toBF16(f).bits != referenceBF16(f)) ++mismatches;
  }
  for (uint32_t h = 0; h < 0x10000; ++h) {
    uint32_t mid = (h << 16) | 0x8000u;
    for (uint32_t b : {mid - 1, mid, mid + 1}) {
      float f = bitsFloat(b);
      if (toBF16(f).bits != referenceBF16(f)) ++mismatches;
    }
  }
  EXPECT_EQ(mismatches, 0u);
}

TEST(Numeric, F16MatchesCompilerConversion) {
  // GCC implements float -> _Float16 with IEEE RNE (libgcc soft-float or F16C); independent of us.
  uint64_t mismatches = 0;
  auto check = [&](uint32_t b) {
    float f = bitsFloat(b);
    _Float16 ref = static_cast<_Float16>(f);
    uint16_t ref_bits;
    std::memcpy(&ref_bits, &ref, 2);
    uint16_t ours = toF16(f).bits;
    if (std::isnan(f)) {
      if ((ours & 0x7c00) != 0x7c00 || (ours & 0x3ff) == 0) ++mismatches;
      return;
    }
    if (ours != ref_bits) ++mismatches;
  };
  for (uint64_t b = 0; b <= 0xffffffffull; b += 89)
    check(static_cast<uint32_t>(b));
  // All exponents near the binary16 range, every mantissa pattern of the 13 dropped bits' edges.
  for (uint32_t e = 100; e <= 145; ++e) {
    for (uint32_t m = 0; m < (1u << 23); m += 0x1000 - 1) {
      check((e << 23) | m);
      check(0x80000000u | (e << 23) | m);
      check((e << 23) | (m | 0xfff));
      check((e << 23) | (m & ~0x1fffu) | 0x1000);
    }
  }
  EXPECT_EQ(mismatches, 0u);
  // Every half converts back exactly.
  for (uint32_t h = 0; h < 0x10000; ++h) {
    _Float16 ref;
    uint16_t hb = static_cast<uint16_t>(h);
    std::memcpy(&ref, &hb, 2);
    float expected = static_cast<float>(ref);
    float ours = toFloat(f16_t{hb});
    if (std::isnan(expected)) {
      EXPECT_TRUE(std::isnan(ours));
    } else {
      EXPECT_EQ(floatBits(ours), floatBits(expected)) << "half bits " << h;
    }
  }
}

// storeCanonical<T>(v) against its definition, storeAs<T> of v with any NaN replaced by the
// canonical float NaN 0x7fc00000: every 61st bit pattern plus every NaN-boundary pattern.
TEST(Numeric, StoreCanonicalIsStoreOfTheCanonicalNan) {
  uint64_t mismatches = 0, nans = 0;
  auto check = [&](uint32_t b) {
    const float v = bitsFloat(b);
    const float canonical = std::isnan(v) ? bitsFloat(0x7fc00000u) : v;
    mismatches += floatBits(storeCanonical<float>(v)) != floatBits(canonical);
    mismatches += storeCanonical<bf16_t>(v).bits != toBF16(canonical).bits;
    mismatches += storeCanonical<f16_t>(v).bits != toF16(canonical).bits;
    nans += std::isnan(v);
  };
  for (uint64_t b = 0; b <= 0xffffffffull; b += 61)
    check(static_cast<uint32_t>(b));
  for (uint32_t sign : {0u, 0x80000000u}) {
    for (uint32_t b : {0x7f7fffffu, 0x7f800000u, 0x7f800001u, 0x7fc00000u, 0x7fffffffu, 0u, 1u})
      check(sign | b);
  }
  EXPECT_EQ(mismatches, 0u);
  EXPECT_GT(nans, 100000u);  // both NaN signs and many payloads were stored
  EXPECT_EQ(storeCanonical<bf16_t>(bitsFloat(0xffc01234u)).bits, 0x7fc0u);
  EXPECT_EQ(storeCanonical<f16_t>(bitsFloat(0xff812345u)).bits, 0x7e00u);
}

}  // namespace
}  // namespace ree
