// Embedding gather and elementwise operators (pointwise.h) against fp64 references and exact
// copies; golden hashes pin the bits of repops-1.
#include "ree/kernels/pointwise.h"

#include <cmath>
#include <string>
#include <vector>

#include "test_util.h"

namespace ree {
namespace {

namespace cpu = repops::cpu;

template <typename T>
DType dtypeOf() {
  if (std::is_same_v<T, float>) return DType::kF32;
  if (std::is_same_v<T, bf16_t>) return DType::kBF16;
  return DType::kF16;
}

// Relative half-ulp of the storage type: the largest error of one rounding to it.
template <typename T>
double unitRoundoff() {
  if (std::is_same_v<T, float>) return std::ldexp(1.0, -24);
  if (std::is_same_v<T, bf16_t>) return std::ldexp(1.0, -8);
  return std::ldexp(1.0, -11);
}

double activationFp64(Activation activation, double x) {
  switch (activation) {
    case Activation::kSilu:
      return x / (1.0 + std::exp(-x));
    case Activation::kGeluErf:
      return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
    case Activation::kGeluTanh:
      return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
  }
  return 0;
}

// Half the smallest subnormal of T: the absolute error of rounding a tiny value to T.
template <typename T>
double underflowFloor() {
  if (std::is_same_v<T, float>) return std::ldexp(1.0, -150);
  if (std::is_same_v<T, bf16_t>) return std::ldexp(1.0, -134);
  return std::ldexp(1.0, -25);
}

const Activation kActivations[] = {Activation::kSilu, Activation::kGeluErf, Activation::kGeluTanh};

template <typename T>
void checkEmbedding() {
  const int64_t vocab = 37, dim = 19, count = 23;
  std::vector<T> table = test::randomValues<T>(vocab * dim, 11);
  std::vector<int32_t> ids(count);
  for (int64_t i = 0; i < count; ++i)
    ids[i] = static_cast<int32_t>((i * 7 + 3) % vocab);
  ids[5] = 0;
  ids[6] = vocab - 1;
  std::vector<T> out(count * dim);
  ASSERT_EQ(cpu::embedding(dtypeOf<T>(), table.data(), vocab, dim, ids.data(), count, out.data()),
            Status::kSuccess);
  for (int64_t i = 0; i < count; ++i) {
    ASSERT_EQ(std::memcmp(&out[i * dim], &table[ids[i] * dim], dim * sizeof(T)), 0) << i;
  }
}

TEST(Embedding, CopiesRowsExactly) {
  checkEmbedding<float>();
  checkEmbedding<bf16_t>();
  checkEmbedding<f16_t>();
}

TEST(Embedding, RejectsOutOfRangeIdsBeforeWriting) {
  std::vector<float> table(10 * 4, 1.0f), out(5 * 4, -7.0f);
  for (int32_t bad : {-1, 10, 1 << 30}) {
    std::vector<int32_t> ids = {0, 1, 2, bad, 11};
    EXPECT_EQ(cpu::embedding(DType::kF32, table.data(), 10, 4, ids.data(), 5, out.data()),
              Status::kInvalidArgument);
    const std::string message = lastErrorMessage();
    EXPECT_NE(message.find("ids[3] = " + std::to_string(bad)), std::string::npos) << message;
    for (float v : out)
      ASSERT_EQ(v, -7.0f);
  }
}

template <typename T, typename Op, typename Ref>
void checkBinary(Op op, Ref ref) {
  const int64_t n = 10007;
  std::vector<T> a = test::randomValues<T>(n, 1), b = test::randomValues<T>(n, 2, 3.0f);
  std::vector<T> out(n);
  ASSERT_EQ(op(dtypeOf<T>(), a.data(), b.data(), out.data(), n), Status::kSuccess);
  for (int64_t i = 0; i < n; ++i) {
    const double exact = ref(static_cast<double>(loadFloat(a[i])), loadFloat(b[i]));
    // One rounding to fp32 then one to T: within 1.01 units of roundoff of T.
    ASSERT_LE(std::fabs(loadFloat(out[i]) - exact), 1.01 * unitRoundoff<T>() * std::fabs(exact))
        << i;
  }
  std::vector<T> in_place = a;  // out aliasing a gives the same bits
  ASSERT_EQ(op(dtypeOf<T>(), in_place.data(), b.data(), in_place.data(), n), Status::kSuccess);
  EXPECT_EQ(test::firstBitDifference(in_place, out), -1);
}

TEST(Elementwise, AddAndMulMatchFp64) {
  auto add = [](double x, double y) { return x + y; };
  auto mul = [](double x, double y) { return x * y; };
  checkBinary<float>(cpu::add, add);
  checkBinary<bf16_t>(cpu::add, add);
  checkBinary<float>(cpu::mul, mul);
  checkBinary<bf16_t>(cpu::mul, mul);
  checkBinary<f16_t>(cpu::mul, mul);
}

// Error bound of the crmath composites (crmath.h: fixed sequences of CR functions and float ops,
// not correctly rounded): a few fp32 roundings relative to the result, plus the cancellation in
// 1 + erf / 1 + tanh for negative x, which is relative to |x / 2| (torch's float formulas have
// the same), then one rounding to T.
template <typename T>
double activationBound(double x, double exact) {
  const double u32 = std::ldexp(1.0, -24);
  return 1.01 * unitRoundoff<T>() * std::fabs(exact) + 6 * u32 * std::fabs(exact) +
         3 * u32 * std::fabs(0.5 * x) + 1.01 * underflowFloor<T>();
}

template <typename T>
void checkActivation(Activation activation) {
  const int64_t n = 20001;
  std::vector<T> x = test::randomValues<T>(n, 21, 4.0f);
  std::vector<T> out(n);
  ASSERT_EQ(cpu::activation(activation, dtypeOf<T>(), x.data(), out.data(), n), Status::kSuccess);
  for (int64_t i = 0; i < n; ++i) {
    const double xi = loadFloat(x[i]);
    const double exact = activationFp64(activation, xi);
    ASSERT_LE(std::fabs(loadFloat(out[i]) - exact), activationBound<T>(xi, exact))
        << activationName(activation) << " x=" << xi;
  }
}

TEST(Elementwise, ActivationsMatchFp64) {
  for (Activation activation : kActivations) {
    checkActivation<float>(activation);
    checkActivation<bf16_t>(activation);
    checkActivation<f16_t>(activation);
  }
}

TEST(Elementwise, ActivationSpecialValues) {
  const float inf = INFINITY;
  std::vector<float> x = {0.0f, -0.0f, inf, -inf, NAN};
  for (Activation activation : kActivations) {
    std::vector<float> out(x.size());
    ASSERT_EQ(cpu::activation(activation, DType::kF32, x.data(), out.data(), x.size()),
              Status::kSuccess);
    EXPECT_EQ(out[0], 0.0f);
    EXPECT_EQ(out[2], inf) << activationName(activation);
    // -inf * 0 inside the formulas: NaN, as torch's float silu/gelu give.
    EXPECT_TRUE(std::isnan(out[3])) << activationName(activation);
    EXPECT_TRUE(std::isnan(out[4]));
  }
}

template <typename T>
void checkGated(Activation activation) {
  const int64_t rows = 13, cols = 301;
  std::vector<T> fused = test::randomValues<T>(rows * 2 * cols, 31, 3.0f);  // [gate | up] rows
  std::vector<T> gate(rows * cols), up(rows * cols);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      gate[r * cols + c] = fused[r * 2 * cols + c];
      up[r * cols + c] = fused[r * 2 * cols + cols + c];
    }
  }
  std::vector<T> out(rows * cols), out_fused(rows * cols);
  ASSERT_EQ(cpu::gated(activation, dtypeOf<T>(), gate.data(), cols, up.data(), cols, out.data(),
                       cols, rows, cols),
            Status::kSuccess);
  ASSERT_EQ(cpu::gated(activation, dtypeOf<T>(), fused.data(), 2 * cols, fused.data() + cols,
                       2 * cols, out_fused.data(), cols, rows, cols),
            Status::kSuccess);
  EXPECT_EQ(test::firstBitDifference(out, out_fused), -1);
  for (int64_t i = 0; i < rows * cols; ++i) {
    const double g = loadFloat(gate[i]), u = loadFloat(up[i]);
    const double exact = activationFp64(activation, g) * u;
    // The activation's bound scaled by |u|, then one more rounding to T.
    const double bound = activationBound<T>(g, activationFp64(activation, g)) * std::fabs(u) +
                         1.01 * unitRoundoff<T>() * std::fabs(exact) + underflowFloor<T>();
    ASSERT_LE(std::fabs(loadFloat(out[i]) - exact), bound)
        << activationName(activation) << " " << i;
    // The activation is rounded to T before the product (torch's rounding point).
    const float activated = loadFloat(storeAs<T>(activationF32(activation, loadFloat(gate[i]))));
    ASSERT_EQ(std::memcmp(&out[i], &(const T&)storeAs<T>(activated * loadFloat(up[i])), sizeof(T)),
              0);
  }
}

// The element functions (one NaN test per stored value) against the spec's sequence written out
// step by step (canonicalise, then store, after every rounding point): every 16-bit gate / input
// pattern, NaNs of both signs with payloads included, against a set of up / second operands.
template <typename T>
void checkElementsFollowSpecSequence() {
  auto store = [](float v) { return storeAs<T>(canonicalNaNF32(v)); };
  auto same = [](T a, T b) { return std::memcmp(&a, &b, sizeof(T)) == 0; };
  std::vector<T> others;
  for (uint32_t b : {0x0000u, 0x8000u, 0x0001u, 0x3f80u, 0xbf80u, 0x4049u, 0x7f80u, 0xff80u,
                     0x7fc0u, 0xffc1u, 0x7f81u, 0x3c00u, 0x7bffu, 0x7e01u, 0xfe00u, 0x1234u})
    others.push_back(T{static_cast<uint16_t>(b)});
  int64_t mismatches = 0;
  for (uint32_t g = 0; g < 0x10000u; ++g) {
    const T gate{static_cast<uint16_t>(g)};
    for (Activation activation : kActivations) {
      const T activated = store(activationF32(activation, loadFloat(gate)));
      mismatches += !same(activationElement(activation, gate), activated);
      for (T up : others) {
        mismatches +=
            !same(gatedElement(activation, gate, up), store(loadFloat(activated) * loadFloat(up)));
      }
    }
    for (T other : others) {
      mismatches += !same(addElement(gate, other), store(loadFloat(gate) + loadFloat(other)));
      mismatches += !same(mulElement(gate, other), store(loadFloat(gate) * loadFloat(other)));
    }
  }
  EXPECT_EQ(mismatches, 0);
}

TEST(Elementwise, ElementFunctionsFollowTheSpecSequence) {
  checkElementsFollowSpecSequence<bf16_t>();
  checkElementsFollowSpecSequence<f16_t>();
}

TEST(Elementwise, GatedMatchesFp64AndFusedLayout) {
  for (Activation activation : kActivations) {
    checkGated<float>(activation);
    checkGated<bf16_t>(activation);
  }
}

TEST(Elementwise, RejectsBadArguments) {
  std::vector<float> x(8);
  EXPECT_EQ(cpu::add(static_cast<DType>(9), x.data(), x.data(), x.data(), 8),
            Status::kInvalidArgument);
  EXPECT_EQ(cpu::gated(Activation::kSilu, DType::kF32, x.data(), 2, x.data(), 4, x.data(), 4, 2, 4),
            Status::kInvalidArgument);
  EXPECT_NE(std::string(lastErrorMessage()).find("strides"), std::string::npos);
  EXPECT_EQ(cpu::activation(static_cast<Activation>(7), DType::kF32, x.data(), x.data(), 8),
            Status::kInvalidArgument);
}

// Golden hashes of repops-1 bits on fixed inputs (FNV-1a of the outputs).
TEST(Elementwise, GoldenPins) {
  const int64_t n = 4099;
  std::vector<bf16_t> a = test::randomValues<bf16_t>(n, 41), b = test::randomValues<bf16_t>(n, 42);
  std::vector<bf16_t> sum(n), product(n);
  ASSERT_EQ(cpu::add(DType::kBF16, a.data(), b.data(), sum.data(), n), Status::kSuccess);
  ASSERT_EQ(cpu::mul(DType::kBF16, a.data(), b.data(), product.data(), n), Status::kSuccess);
  EXPECT_EQ(test::hex64(test::hashOf(sum)), "71d688449f5d560f");
  EXPECT_EQ(test::hex64(test::hashOf(product)), "68d7d0f6a256c6d3");
  std::vector<bf16_t> x = test::randomValues<bf16_t>(n, 43, 4.0f);
  const char* expected[] = {"b9a48d526eb8e1f1", "b44593c23e2e6bd1", "a9ac793ed77600d9"};
  int k = 0;
  for (Activation activation : kActivations) {
    std::vector<bf16_t> activated(n), gated(n);
    ASSERT_EQ(cpu::activation(activation, DType::kBF16, x.data(), activated.data(), n),
              Status::kSuccess);
    ASSERT_EQ(cpu::gated(activation, DType::kBF16, x.data(), n, a.data(), n, gated.data(), n, 1, n),
              Status::kSuccess);
    EXPECT_EQ(test::hex64(test::fnv1a(gated.data(), n * 2, test::hashOf(activated))), expected[k++])
        << activationName(activation);
  }
}

}  // namespace
}  // namespace ree
