// CUDA repops-2 linear == CPU repops-2 linear, bitwise (the CPU is checked against the spec's
// brute-force form in tests/kernels/cpu/int_linear_test.cpp): randomised odd shapes (M up to 300,
// K up to 4096 + odd, odd N, strides, every dtype combination, bias, accumulate), special values
// (NaN/inf in a block, subnormals, huge and tiny values together, zeros), and row invariance on
// the GPU (a row alone and inside batches of other sizes).
#include <cuda_runtime.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "ree/kernels/int_linear.h"

namespace ree::repops {
namespace {

// Host bytes of one tensor, with a device copy made by upload().
struct Tensor {
  DType dtype = DType::kF32;
  std::vector<uint8_t> host;
  void* device = nullptr;

  Tensor() = default;
  Tensor(const Tensor&) = delete;
  Tensor& operator=(const Tensor&) = delete;
  ~Tensor() {
    if (device) cudaFree(device);
  }
  void resize(DType type, size_t count) {
    dtype = type;
    host.assign(count * dtypeSize(type), 0);
  }
  void set(size_t i, float value) {
    switch (dtype) {
      case DType::kF32:
        reinterpret_cast<float*>(host.data())[i] = value;
        break;
      case DType::kBF16:
        reinterpret_cast<bf16_t*>(host.data())[i] = toBF16(value);
        break;
      case DType::kF16:
        reinterpret_cast<f16_t*>(host.data())[i] = toF16(value);
        break;
    }
  }
  void upload() {
    if (device) cudaFree(device);
    device = test::toDevice(host);
  }
};

// Normal(0, scale), with the hard cases mixed in when `hostile` (as in the CPU test).
float randomValue(std::mt19937_64& rng, float scale, bool hostile) {
  std::normal_distribution<float> normal(0.0f, scale);
  if (!hostile) return normal(rng);
  switch (rng() % 16) {
    case 0:
      return 0.0f;
    case 1:
      return -0.0f;
    case 2:
      return bitsFloat(static_cast<uint32_t>(rng() % 0x800000u) | ((rng() & 1) << 31));
    case 3:
      return normal(rng) * 1e30f;
    case 4:
      return normal(rng) * 1e-30f;
    case 5:
      return std::ldexp(1.0f, static_cast<int>(rng() % 40) - 20);
    case 6:
      return normal(rng) * 3e38f / 4.0f;
    default:
      return normal(rng);
  }
}

struct Problem {
  int64_t m = 1, n = 1, k = 1;
  int64_t x_stride = 0, w_stride = 0, y_stride = 0;
  DType x_dtype = DType::kF32, w_dtype = DType::kBF16, y_dtype = DType::kF32;
  bool has_bias = false, accumulate = false;
  DType bias_dtype = DType::kF32;
  Tensor x, w, bias, y_init;

  int64_t xs() const { return x_stride ? x_stride : k; }
  int64_t ws() const { return w_stride ? w_stride : k; }
  int64_t ys() const { return y_stride ? y_stride : n; }

  void fill(uint64_t seed, bool hostile, bool non_finite) {
    std::mt19937_64 rng(seed);
    x.resize(x_dtype, static_cast<size_t>(m * xs()));
    w.resize(w_dtype, static_cast<size_t>(n * ws()));
    for (int64_t r = 0; r < m; ++r) {
      bool row_hostile = hostile && rng() % 3 == 0;
      for (int64_t i = 0; i < k; ++i)
        x.set(static_cast<size_t>(r * xs() + i), randomValue(rng, 1.0f, row_hostile));
    }
    for (int64_t r = 0; r < n; ++r) {
      bool row_hostile = hostile && rng() % 3 == 0;
      for (int64_t i = 0; i < k; ++i)
        w.set(static_cast<size_t>(r * ws() + i), randomValue(rng, 0.05f, row_hostile));
    }
    if (non_finite) {
      const float specials[] = {NAN, -NAN, INFINITY, -INFINITY};
      for (int t = 0; t < 3; ++t) {
        x.set(static_cast<size_t>((rng() % m) * xs() + rng() % k), specials[rng() % 4]);
        w.set(static_cast<size_t>((rng() % n) * ws() + rng() % k), specials[rng() % 4]);
      }
    }
    bias.resize(bias_dtype, static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
      bias.set(static_cast<size_t>(i), randomValue(rng, 0.5f, false));
    y_init.resize(y_dtype, static_cast<size_t>(m * ys()));
    for (size_t i = 0; i < static_cast<size_t>(m * ys()); ++i)
      y_init.set(i, randomValue(rng, 1.0f, false));
  }

  LinearArgs args(const void* xp, const void* wp, const void* bp, void* yp) const {
    LinearArgs a;
    a.x = xp;
    a.x_dtype = x_dtype;
    a.x_row_stride = x_stride;
    a.w = wp;
    a.w_dtype = w_dtype;
    a.w_row_stride = w_stride;
    a.bias = has_bias ? bp : nullptr;
    a.bias_dtype = bias_dtype;
    a.y = yp;
    a.y_dtype = y_dtype;
    a.y_row_stride = y_stride;
    a.m = m;
    a.n = n;
    a.k = k;
    a.accumulate = accumulate;
    return a;
  }

  std::vector<uint8_t> runCpu() const {
    std::vector<uint8_t> y = y_init.host;
    Status s = cpu::intLinear(args(x.host.data(), w.host.data(), bias.host.data(), y.data()));
    EXPECT_EQ(s, Status::kSuccess) << lastErrorMessage();
    return y;
  }

  std::vector<uint8_t> runCuda() {
    x.upload();
    w.upload();
    bias.upload();
    uint8_t* y = test::toDevice(y_init.host);
    Status s = cuda::intLinear(args(x.device, w.device, bias.device, y), nullptr);
    EXPECT_EQ(s, Status::kSuccess) << lastErrorMessage();
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<uint8_t> out = test::toHost(y, y_init.host.size());
    cudaFree(y);
    return out;
  }
};

std::string describe(const Problem& p) {
  char buf[240];
  std::snprintf(buf, sizeof(buf), "m=%lld n=%lld k=%lld x=%s w=%s y=%s bias=%s acc=%d",
                static_cast<long long>(p.m), static_cast<long long>(p.n),
                static_cast<long long>(p.k), dtypeName(p.x_dtype), dtypeName(p.w_dtype),
                dtypeName(p.y_dtype), p.has_bias ? dtypeName(p.bias_dtype) : "none",
                p.accumulate ? 1 : 0);
  return buf;
}

void expectSameBits(Problem& p) {
  std::vector<uint8_t> cpu_y = p.runCpu();
  std::vector<uint8_t> gpu_y = p.runCuda();
  long long at = test::firstBitDifference(cpu_y, gpu_y);
  EXPECT_EQ(at, -1) << describe(p) << " first differing byte " << at;
}

const DType kXTypes[] = {DType::kF32, DType::kBF16};
const DType kWTypes[] = {DType::kF32, DType::kBF16, DType::kF16};
const DType kYTypes[] = {DType::kF32, DType::kBF16};

TEST(IntLinearCuda, RandomShapesMatchCpuBitwise) {
  REE_SKIP_WITHOUT_GPU();
  std::mt19937_64 rng(2323);
  for (DType x_dtype : kXTypes) {
    for (DType w_dtype : kWTypes) {
      for (DType y_dtype : kYTypes) {
        for (int rep = 0; rep < 3; ++rep) {
          Problem p;
          p.x_dtype = x_dtype;
          p.w_dtype = w_dtype;
          p.y_dtype = y_dtype;
          p.m = 1 + static_cast<int64_t>(rng() % (rep == 0 ? 300 : 20));
          p.n = 1 + 2 * static_cast<int64_t>(rng() % 100);
          p.k = 1 + static_cast<int64_t>(rng() % (rep == 2 ? 4200 : 900));
          if (p.k % 128 == 0) ++p.k;
          if (rng() % 3 == 0) p.x_stride = p.k + static_cast<int64_t>(rng() % 5);
          if (rng() % 3 == 0) p.w_stride = p.k + static_cast<int64_t>(rng() % 5);
          if (rng() % 3 == 0) p.y_stride = p.n + static_cast<int64_t>(rng() % 5);
          p.has_bias = rng() % 2 == 0;
          p.bias_dtype = rng() % 2 == 0 ? DType::kF32 : w_dtype;
          p.accumulate = rng() % 4 == 0;
          p.fill(rng(), /*hostile=*/rep != 2, /*non_finite=*/rep == 1);
          expectSameBits(p);
          if (HasFailure()) return;
        }
      }
    }
  }
}

// Model-like shapes: K = 4096 + 3, a few hundred outputs, M across the tile boundaries.
TEST(IntLinearCuda, LargeKAndTileEdgesMatchCpu) {
  REE_SKIP_WITHOUT_GPU();
  for (int64_t m : {int64_t{1}, int64_t{63}, int64_t{64}, int64_t{65}, int64_t{300}}) {
    Problem p;
    p.m = m;
    p.n = 129;
    p.k = 4099;
    p.x_dtype = DType::kF32;
    p.w_dtype = DType::kBF16;
    p.fill(static_cast<uint64_t>(m), false, false);
    expectSameBits(p);
  }
}

TEST(IntLinearCuda, SpecialValuesMatchCpu) {
  REE_SKIP_WITHOUT_GPU();
  Problem p;
  p.m = 5;
  p.n = 7;
  p.k = 300;
  p.w_dtype = DType::kF32;
  p.has_bias = true;
  p.fill(77, false, false);
  p.x.set(0 * 300 + 3, NAN);
  p.x.set(1 * 300 + 299, INFINITY);
  p.w.set(2 * 300 + 128, -INFINITY);
  for (int i = 0; i < 300; ++i) {
    p.x.set(static_cast<size_t>(2 * 300 + i), bitsFloat(1u + static_cast<uint32_t>(i)));
    p.x.set(static_cast<size_t>(3 * 300 + i), i == 5 ? 3e38f : (i % 2 ? 1e-38f : 0.0f));
    p.x.set(static_cast<size_t>(4 * 300 + i), i % 2 ? -0.0f : 0.0f);
  }
  std::vector<uint8_t> gpu_y = p.runCuda();
  std::vector<uint8_t> cpu_y = p.runCpu();
  EXPECT_EQ(test::firstBitDifference(cpu_y, gpu_y), -1);
  uint32_t first;
  std::memcpy(&first, gpu_y.data(), 4);
  EXPECT_EQ(first, 0x7fc00000u);
}

// A row's bits do not depend on the batch it is in (M = 1, 7, 64, 65, 200: different tiles).
TEST(IntLinearCuda, RowsAreInvariantToBatch) {
  REE_SKIP_WITHOUT_GPU();
  Problem full;
  full.m = 200;
  full.n = 97;
  full.k = 1000;
  full.x_dtype = DType::kBF16;
  full.has_bias = true;
  full.fill(5, true, false);
  std::vector<uint8_t> y_full = full.runCuda();
  for (int64_t rows : {int64_t{1}, int64_t{7}, int64_t{64}, int64_t{65}}) {
    for (int64_t first : {int64_t{0}, int64_t{200} - rows}) {
      Problem part;
      part.m = rows;
      part.n = full.n;
      part.k = full.k;
      part.x_dtype = full.x_dtype;
      part.has_bias = true;
      part.fill(5, true, false);  // sizes the tensors; x rows, w and bias are copied below
      part.w.host = full.w.host;
      part.bias.host = full.bias.host;
      part.x.host.assign(full.x.host.begin() + first * full.k * 2,
                         full.x.host.begin() + (first + rows) * full.k * 2);
      std::vector<uint8_t> y = part.runCuda();
      // Not accumulating: y_init is overwritten, so only the rows' outputs matter.
      EXPECT_EQ(std::memcmp(y.data(), y_full.data() + first * full.n * 4, rows * full.n * 4), 0)
          << rows << " rows from " << first;
    }
  }
}

TEST(IntLinearCuda, BadArguments) {
  REE_SKIP_WITHOUT_GPU();
  LinearArgs a;
  a.m = 1;
  a.n = 1;
  a.k = 0;
  EXPECT_EQ(cuda::intLinear(a, nullptr), Status::kInvalidArgument);
  a.k = 1;
  a.m = 0;
  int dummy = 0;
  a.w = &dummy;
  EXPECT_EQ(cuda::intLinear(a, nullptr), Status::kSuccess);
}

}  // namespace
}  // namespace ree::repops
