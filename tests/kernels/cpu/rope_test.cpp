// RoPE (rope.h) against fp64 references: the inverse frequencies against 1/base^(2i/d) and a
// double-precision transcription of transformers' _compute_llama3_parameters, the values torch
// 2.11 / transformers 5.23 produce on CPU, and the rotation against the fp64 formula.
#include "ree/kernels/rope.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "test_util.h"

namespace ree {
namespace {

using repops::cpu::rope;
using repops::cpu::ropeInvFreq;

// transformers' _compute_llama3_parameters, every operation in double.
std::vector<double> llama3InvFreqFp64(double base, int dim, const RopeLlama3Scaling& s) {
  std::vector<double> result(dim / 2);
  const double low_wavelen = s.original_max_position_embeddings / s.low_freq_factor;
  const double high_wavelen = s.original_max_position_embeddings / s.high_freq_factor;
  for (int i = 0; i < dim / 2; ++i) {
    const double inv = 1.0 / std::pow(base, (2.0 * i) / dim);
    const double wavelen = 2.0 * M_PI / inv;
    double value = wavelen > low_wavelen ? inv / s.factor : inv;
    if (!(wavelen < high_wavelen) && !(wavelen > low_wavelen)) {
      const double smooth = (s.original_max_position_embeddings / wavelen - s.low_freq_factor) /
                            (s.high_freq_factor - s.low_freq_factor);
      value = (1.0 - smooth) * value / s.factor + smooth * value;
    }
    result[i] = value;
  }
  return result;
}

// Distance in units in the last place of fp32 (same sign, finite).
int64_t ulpDistance(float a, float b) {
  return std::llabs(static_cast<int64_t>(floatBits(a)) - static_cast<int64_t>(floatBits(b)));
}

TEST(RopeInvFreq, DefaultMatchesFp64) {
  // The exponent 2i/d is rounded to fp32 before pow: relative error <= ln(base) * 2^-24 plus two
  // roundings, so 1.5e-6 covers bases up to 1e6.
  for (float base : {10000.0f, 500000.0f, 1000000.0f}) {
    for (int dim : {32, 64, 80, 128, 256}) {
      std::vector<float> inv(dim / 2);
      ASSERT_EQ(ropeInvFreq(base, dim, nullptr, inv.data()), Status::kSuccess);
      for (int i = 0; i < dim / 2; ++i) {
        const double ref = 1.0 / std::pow(static_cast<double>(base), (2.0 * i) / dim);
        EXPECT_NEAR(inv[i] / ref, 1.0, 1.5e-6) << "base " << base << " dim " << dim << " i " << i;
      }
      EXPECT_EQ(floatBits(inv[0]), floatBits(1.0f));
    }
  }
}

TEST(RopeInvFreq, Llama3MatchesFp64Transcription) {
  struct Case {
    float base;
    int dim;
    RopeLlama3Scaling scaling;
  };
  const Case cases[] = {
      {500000.0f, 128, {8.0, 1.0, 4.0, 8192}},   // Llama 3.1
      {500000.0f, 64, {32.0, 1.0, 4.0, 8192}},   // Llama 3.2 1B
      {500000.0f, 128, {32.0, 1.0, 4.0, 8192}},  // Llama 3.2 3B
      {10000.0f, 96, {4.0, 2.0, 8.0, 4096}},
  };
  for (const Case& c : cases) {
    std::vector<float> inv(c.dim / 2);
    ASSERT_EQ(ropeInvFreq(c.base, c.dim, &c.scaling, inv.data()), Status::kSuccess);
    std::vector<double> ref = llama3InvFreqFp64(c.base, c.dim, c.scaling);
    for (int i = 0; i < c.dim / 2; ++i) {
      // fp32 evaluation of a short formula over a pow with a rounded exponent: 4e-6 relative.
      EXPECT_NEAR(inv[i] / ref[i], 1.0, 4e-6) << "dim " << c.dim << " i " << i;
    }
  }
}

TEST(RopeInvFreq, Llama3MatchesTorchCpu) {
  // transformers 5.23 _compute_llama3_parameters on torch 2.11 CPU, Llama 3.1 config (theta 5e5,
  // head_dim 128, factor 8, low 1, high 4, original 8192), fp32 bits. torch's pow is not
  // correctly rounded, so a difference of up to 2 ulp is allowed (at most a handful of them).
  const uint32_t torch_bits[64] = {
      0x3f800000, 0x3f508ac1, 0x3f29e1c6, 0x3f0a6384, 0x3ee177bc, 0x3eb7ab7d, 0x3e959ee3,
      0x3e73c461, 0x3e4693b0, 0x3e21c3a0, 0x3e03c6a0, 0x3dd6b19c, 0x3daee4ad, 0x3d8e7898,
      0x3d681e67, 0x3d3d1684, 0x3d1a08c8, 0x3cfaf53f, 0x3ccc6f49, 0x3ca68939, 0x3c87a9c3,
      0x3c5d06ec, 0x3c340d6d, 0x3c12ac7f, 0x3beef74f, 0x3bc2aa76, 0x3b9e9402, 0x3b812e35,
      0x3b527720, 0x3b0dfd06, 0x3ab3d11d, 0x3a60979e, 0x3a0995d2, 0x39a3f108, 0x393b2dd2,
      0x38c86886, 0x38a3418d, 0x3884fdbf, 0x3858ac81, 0x38308199, 0x380fc8f8, 0x37ea426f,
      0x37bed4f4, 0x379b7475, 0x377d45c3, 0x374e51f5, 0x3728126b, 0x3708ea0f, 0x36df10c4,
      0x36b5b687, 0x369406cb, 0x36712b80, 0x36447610, 0x36200a69, 0x36025f34, 0x35d46808,
      0x35ad07a7, 0x358cf400, 0x3565a54d, 0x353b12c7, 0x351864a7, 0x34f848c2, 0x34ca41b0,
      0x34a4c2ff};
  RopeLlama3Scaling scaling{8.0, 1.0, 4.0, 8192};
  std::vector<float> inv(64);
  ASSERT_EQ(ropeInvFreq(500000.0f, 128, &scaling, inv.data()), Status::kSuccess);
  int differing = 0;
  for (int i = 0; i < 64; ++i) {
    const float torch_value = bitsFloat(torch_bits[i]);
    EXPECT_LE(ulpDistance(inv[i], torch_value), 2) << "i " << i;
    differing += inv[i] != torch_value;
  }
  EXPECT_LE(differing, 8);
}

TEST(RopeInvFreq, RejectsBadConfig) {
  std::vector<float> inv(64);
  EXPECT_EQ(ropeInvFreq(10000.0f, 7, nullptr, inv.data()), Status::kInvalidArgument);
  EXPECT_EQ(ropeInvFreq(10000.0f, 0, nullptr, inv.data()), Status::kInvalidArgument);
  EXPECT_EQ(ropeInvFreq(NAN, 64, nullptr, inv.data()), Status::kInvalidArgument);
  RopeLlama3Scaling bad{8.0, 4.0, 1.0, 8192};
  EXPECT_EQ(ropeInvFreq(10000.0f, 64, &bad, inv.data()), Status::kInvalidArgument);
  EXPECT_NE(std::string(lastErrorMessage()).find("low_freq_factor"), std::string::npos);
}

struct Shape {
  int64_t tokens;
  int heads;
  int head_dim;
  int rotary_dim;
  int64_t token_stride;
};

std::vector<int32_t> randomPositions(int64_t tokens, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> positions(tokens);
  for (auto& p : positions)
    p = static_cast<int32_t>(rng() % 131072);
  if (tokens > 0) positions[0] = 131071;
  return positions;
}

// fp64 rotation of one pair with the fp32 angle of the spec (float(position) * inv_freq).
void referencePair(double x0, double x1, float angle, double* y0, double* y1) {
  const double c = std::cos(static_cast<double>(angle)), s = std::sin(static_cast<double>(angle));
  *y0 = x0 * c - x1 * s;
  *y1 = x1 * c + x0 * s;
}

template <typename T>
void checkRotationAgainstFp64(const Shape& shape, RopeLayout layout, double tolerance) {
  std::vector<float> inv(shape.rotary_dim / 2);
  RopeLlama3Scaling scaling;
  ASSERT_EQ(ropeInvFreq(500000.0f, shape.rotary_dim, &scaling, inv.data()), Status::kSuccess);
  const int64_t n = shape.tokens * shape.token_stride;
  std::vector<T> x = test::randomValues<T>(n, 1234 + shape.head_dim);
  std::vector<T> original = x;
  std::vector<int32_t> positions = randomPositions(shape.tokens, 99);
  ASSERT_EQ(rope(std::is_same_v<T, float>    ? DType::kF32
                 : std::is_same_v<T, bf16_t> ? DType::kBF16
                                             : DType::kF16,
                 x.data(), shape.tokens, shape.heads, shape.head_dim, shape.token_stride,
                 positions.data(), inv.data(), shape.rotary_dim, layout),
            Status::kSuccess);
  double worst = 0;
  for (int64_t t = 0; t < shape.tokens; ++t) {
    for (int h = 0; h < shape.heads; ++h) {
      const int64_t base = t * shape.token_stride + static_cast<int64_t>(h) * shape.head_dim;
      for (int i = 0; i < shape.rotary_dim / 2; ++i) {
        int first, second;
        ropePairOffsets(layout, i, shape.rotary_dim, &first, &second);
        const double x0 = loadFloat(original[base + first]);
        const double x1 = loadFloat(original[base + second]);
        const float angle = static_cast<float>(positions[t]) * inv[i];
        double y0, y1;
        referencePair(x0, x1, angle, &y0, &y1);
        const double scale = std::fabs(x0) + std::fabs(x1);
        const double e0 = std::fabs(loadFloat(x[base + first]) - y0) / scale;
        const double e1 = std::fabs(loadFloat(x[base + second]) - y1) / scale;
        worst = std::max(worst, std::max(e0, e1));
      }
      for (int k = shape.rotary_dim; k < shape.head_dim; ++k) {  // pass-through dims
        ASSERT_EQ(std::memcmp(&x[base + k], &original[base + k], sizeof(T)), 0);
      }
    }
    for (int64_t k = static_cast<int64_t>(shape.heads) * shape.head_dim; k < shape.token_stride;
         ++k) {  // bytes between rows are not touched
      ASSERT_EQ(std::memcmp(&x[t * shape.token_stride + k], &original[t * shape.token_stride + k],
                            sizeof(T)),
                0);
    }
  }
  EXPECT_LE(worst, tolerance) << "worst error relative to |x0| + |x1|";
}

const Shape kShapes[] = {
    {7, 3, 128, 128, 3 * 128},
    {5, 2, 64, 32, 2 * 64 + 17},
    {1, 1, 2, 2, 2},
    {13, 4, 80, 40, 4 * 80},
};

TEST(Rope, F32MatchesFp64) {
  // cos/sin are correctly rounded, then 4 products/sums round: <= 3 * 2^-24 of |x0| + |x1|.
  for (const Shape& s : kShapes) {
    checkRotationAgainstFp64<float>(s, RopeLayout::kHalfSplit, 2.5e-7);
    checkRotationAgainstFp64<float>(s, RopeLayout::kInterleaved, 2.5e-7);
  }
}

TEST(Rope, BF16MatchesFp64) {
  // cos/sin, the products and the sum each round to bf16 (2^-9 relative): <= 4 * 2^-9.
  for (const Shape& s : kShapes) {
    checkRotationAgainstFp64<bf16_t>(s, RopeLayout::kHalfSplit, 4 * 0.001953125);
    checkRotationAgainstFp64<bf16_t>(s, RopeLayout::kInterleaved, 4 * 0.001953125);
  }
}

TEST(Rope, F16MatchesFp64) {
  for (const Shape& s : kShapes) {
    checkRotationAgainstFp64<f16_t>(s, RopeLayout::kHalfSplit, 4 * 0.00048828125);
  }
}

TEST(Rope, LayoutsArePermutationsOfEachOther) {
  // Interleaved RoPE of x equals half-split RoPE of x with pairs (2i, 2i+1) moved to (i, i+d/2),
  // bit for bit: the same pairs see the same operations.
  const int tokens = 9, heads = 3, dim = 64;
  std::vector<float> inv(dim / 2);
  ASSERT_EQ(ropeInvFreq(10000.0f, dim, nullptr, inv.data()), Status::kSuccess);
  std::vector<bf16_t> interleaved = test::randomValues<bf16_t>(tokens * heads * dim, 5);
  std::vector<bf16_t> split(interleaved.size());
  for (int v = 0; v < tokens * heads; ++v) {
    for (int i = 0; i < dim / 2; ++i) {
      split[v * dim + i] = interleaved[v * dim + 2 * i];
      split[v * dim + i + dim / 2] = interleaved[v * dim + 2 * i + 1];
    }
  }
  std::vector<int32_t> positions = randomPositions(tokens, 7);
  ASSERT_EQ(rope(DType::kBF16, interleaved.data(), tokens, heads, dim, heads * dim,
                 positions.data(), inv.data(), dim, RopeLayout::kInterleaved),
            Status::kSuccess);
  ASSERT_EQ(rope(DType::kBF16, split.data(), tokens, heads, dim, heads * dim, positions.data(),
                 inv.data(), dim, RopeLayout::kHalfSplit),
            Status::kSuccess);
  for (int v = 0; v < tokens * heads; ++v) {
    for (int i = 0; i < dim / 2; ++i) {
      ASSERT_EQ(split[v * dim + i].bits, interleaved[v * dim + 2 * i].bits);
      ASSERT_EQ(split[v * dim + i + dim / 2].bits, interleaved[v * dim + 2 * i + 1].bits);
    }
  }
}

TEST(Rope, PositionZeroIsIdentity) {
  std::vector<float> inv(32);
  ASSERT_EQ(ropeInvFreq(10000.0f, 64, nullptr, inv.data()), Status::kSuccess);
  std::vector<float> x = test::randomValues<float>(2 * 64, 3);
  std::vector<float> original = x;
  std::vector<int32_t> positions = {0, 0};
  ASSERT_EQ(rope(DType::kF32, x.data(), 2, 1, 64, 64, positions.data(), inv.data(), 64,
                 RopeLayout::kHalfSplit),
            Status::kSuccess);
  EXPECT_EQ(test::firstBitDifference(x, original), -1);
}

// NaN results (from NaN inputs of either sign and any payload, and from inf * 0 at position 0,
// where sin is 0 and x86 makes a negative NaN) are stored as the canonical quiet NaN; the other
// pair members follow the formula with storeAs at every rounding point.
template <typename T>
void checkRopeNanResults(DType dtype, uint16_t canonical_bits) {
  const int dim = 8, pairs = dim / 2;
  std::vector<float> inv(pairs);
  ASSERT_EQ(ropeInvFreq(10000.0f, dim, nullptr, inv.data()), Status::kSuccess);
  const std::vector<int32_t> positions = {0, 3, 70000};
  const float nan_neg = bitsFloat(0xffc01234u), nan_pos = bitsFloat(0x7fa00001u);
  const float specials[] = {nan_neg, nan_pos, INFINITY, -INFINITY};
  std::vector<T> x(positions.size() * dim);
  for (size_t t = 0; t < positions.size(); ++t) {
    for (int i = 0; i < dim; ++i)
      x[t * dim + i] = storeAs<T>(0.25f * static_cast<float>(i + 1) - 1.0f);
    for (int i = 0; i < pairs; ++i)  // pair i: first member special, second finite
      x[t * dim + i] = storeAs<T>(specials[i]);
  }
  std::vector<T> y = x;
  ASSERT_EQ(rope(dtype, y.data(), static_cast<int64_t>(positions.size()), 1, dim, dim,
                 positions.data(), inv.data(), dim, RopeLayout::kHalfSplit),
            Status::kSuccess);
  int nan_outputs = 0;
  for (size_t t = 0; t < positions.size(); ++t) {
    for (int i = 0; i < pairs; ++i) {
      float c = 0.0f, s = 0.0f;
      ropeCosSin<T>(positions[t], inv[i], &c, &s);
      const float x0 = loadFloat(x[t * dim + i]), x1 = loadFloat(x[t * dim + i + pairs]);
      auto r = [](float v) { return loadFloat(storeAs<T>(v)); };
      const float expected[2] = {r(x0 * c) - r(x1 * s), r(x1 * c) + r(x0 * s)};
      const T got[2] = {y[t * dim + i], y[t * dim + i + pairs]};
      for (int k = 0; k < 2; ++k) {
        if (std::isnan(expected[k])) {
          ++nan_outputs;
          uint16_t bits = 0;
          if constexpr (sizeof(T) == 2) {
            bits = got[k].bits;
          } else {
            bits = static_cast<uint16_t>(floatBits(got[k]) >> 16);
          }
          EXPECT_EQ(bits, canonical_bits) << "token " << t << " pair " << i << " member " << k;
          if constexpr (sizeof(T) == 4) {
            EXPECT_EQ(floatBits(got[k]) & 0xffffu, 0u);
          }
        } else {
          EXPECT_EQ(std::memcmp(&got[k], &(const T&)storeAs<T>(expected[k]), sizeof(T)), 0)
              << "token " << t << " pair " << i << " member " << k;
        }
      }
    }
  }
  EXPECT_GE(nan_outputs, 10);  // NaN inputs, and inf * 0 (sin 0 at position 0)
}

TEST(Rope, NanResultsAreCanonical) {
  checkRopeNanResults<bf16_t>(DType::kBF16, 0x7fc0u);
  checkRopeNanResults<f16_t>(DType::kF16, 0x7e00u);
  checkRopeNanResults<float>(DType::kF32, 0x7fc0u);  // 0x7fc00000
}

// Golden hash of repops-1 RoPE bits (llama3 frequencies, bf16 and f32, both layouts).
TEST(Rope, GoldenPins) {
  const int tokens = 11, heads = 4, dim = 128;
  RopeLlama3Scaling scaling;
  std::vector<float> inv(dim / 2);
  ASSERT_EQ(ropeInvFreq(500000.0f, dim, &scaling, inv.data()), Status::kSuccess);
  std::vector<int32_t> positions = randomPositions(tokens, 17);
  std::vector<bf16_t> xb = test::randomValues<bf16_t>(tokens * heads * dim, 18);
  std::vector<float> xf = test::randomValues<float>(tokens * heads * dim, 19);
  ASSERT_EQ(rope(DType::kBF16, xb.data(), tokens, heads, dim, heads * dim, positions.data(),
                 inv.data(), dim, RopeLayout::kHalfSplit),
            Status::kSuccess);
  ASSERT_EQ(rope(DType::kF32, xf.data(), tokens, heads, dim, heads * dim, positions.data(),
                 inv.data(), dim, RopeLayout::kInterleaved),
            Status::kSuccess);
  EXPECT_EQ(test::hex64(test::hashOf(inv)), "0efa2d5d1c205977");
  EXPECT_EQ(test::hex64(test::hashOf(xb)), "956ba48f48b3af9a");
  EXPECT_EQ(test::hex64(test::hashOf(xf)), "dc73d43de20710b3");
}

TEST(Rope, RejectsBadArguments) {
  std::vector<float> inv(32), x(64);
  std::vector<int32_t> positions(1);
  EXPECT_EQ(rope(DType::kF32, x.data(), 1, 1, 64, 64, positions.data(), inv.data(), 66,
                 RopeLayout::kHalfSplit),
            Status::kInvalidArgument);
  EXPECT_EQ(rope(DType::kF32, x.data(), 1, 1, 64, 32, positions.data(), inv.data(), 64,
                 RopeLayout::kHalfSplit),
            Status::kInvalidArgument);
  EXPECT_NE(std::string(lastErrorMessage()).find("token_stride"), std::string::npos);
  EXPECT_EQ(rope(DType::kF32, nullptr, 1, 1, 64, 64, positions.data(), inv.data(), 64,
                 RopeLayout::kHalfSplit),
            Status::kInvalidArgument);
}

}  // namespace
}  // namespace ree
