// Pieces shared by the linear tests (repops-1 linear and repops-2 intLinear, CPU and CUDA): host
// bytes of any storage dtype, the shape/strides/dtypes of one call with its LinearArgs, the
// random layouts and the hostile inputs of the intLinear tests. One copy, so that a CPU test and
// the CUDA test that compares against it build their problems the same way.
#pragma once

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ree/kernels/linear.h"
#include "test_util.h"

#if defined(__CUDACC__)
#include <cuda_runtime.h>
#endif

namespace ree::test {

// Host bytes of one tensor of any storage dtype (f32, bf16, f16), read and written as float.
struct HostBuffer {
  DType dtype = DType::kF32;
  std::vector<uint8_t> bytes;

  HostBuffer() = default;
  HostBuffer(DType type, size_t count) { reset(type, count); }
  // Normal(0, scale) values rounded to the dtype (test::randomValues).
  HostBuffer(DType type, size_t count, uint64_t seed, float scale) {
    fillRandom(type, count, seed, scale);
  }

  void reset(DType type, size_t count) {
    dtype = type;
    bytes.assign(count * dtypeSize(type), 0);
  }
  void fillRandom(DType type, size_t count, uint64_t seed, float scale) {
    reset(type, count);
    switch (type) {
      case DType::kF32:
        copyFrom(randomValues<float>(count, seed, scale));
        break;
      case DType::kBF16:
        copyFrom(randomValues<bf16_t>(count, seed, scale));
        break;
      case DType::kF16:
        copyFrom(randomValues<f16_t>(count, seed, scale));
        break;
    }
  }
  template <typename T>
  void copyFrom(const std::vector<T>& values) {
    std::memcpy(bytes.data(), values.data(), values.size() * sizeof(T));
  }
  float at(size_t i) const { return loadElement(bytes.data(), dtype, static_cast<int64_t>(i)); }
  void set(size_t i, float value) {
    storeElement(bytes.data(), dtype, static_cast<int64_t>(i), value);
  }
  // The stored bits of element i (16-bit dtypes zero-extended).
  uint32_t bitsAt(size_t i) const {
    if (dtype == DType::kF32) return floatBits(at(i));
    return reinterpret_cast<const uint16_t*>(bytes.data())[i];
  }
  const void* data() const { return bytes.data(); }
  void* data() { return bytes.data(); }
};

#if defined(__CUDACC__)
// A HostBuffer with a device copy made by upload(); `offset_bytes` shifts the data inside the
// allocation (misaligned rows), and 16 bytes of slack follow it (a kernel's last vector load).
struct MirroredBuffer : HostBuffer {
  void* device = nullptr;

  MirroredBuffer() = default;
  MirroredBuffer(const MirroredBuffer&) = delete;
  MirroredBuffer& operator=(const MirroredBuffer&) = delete;
  ~MirroredBuffer() {
    if (allocation_) cudaFree(allocation_);
  }
  void upload(size_t offset_bytes = 0) {
    if (allocation_) cudaFree(allocation_);
    allocation_ = nullptr;
    device = nullptr;
    char* base = nullptr;
    ASSERT_EQ(cudaMalloc(&base, bytes.size() + offset_bytes + 16), cudaSuccess);
    allocation_ = base;
    device = base + offset_bytes;
    ASSERT_EQ(cudaMemcpy(device, bytes.data(), bytes.size(), cudaMemcpyHostToDevice), cudaSuccess);
  }

 private:
  void* allocation_ = nullptr;
};
#endif

// The shape, strides (0: dense) and dtypes of one linear call.
struct LinearShape {
  int64_t m = 1, n = 1, k = 1;
  int64_t x_stride = 0, w_stride = 0, y_stride = 0;
  DType x_dtype = DType::kF32, w_dtype = DType::kBF16, y_dtype = DType::kF32;
  bool has_bias = false, accumulate = false;
  DType bias_dtype = DType::kF32;

  void setDtypes(DType x, DType w, DType y) {
    x_dtype = x;
    w_dtype = w;
    y_dtype = y;
  }
  int64_t xs() const { return x_stride ? x_stride : k; }
  int64_t ws() const { return w_stride ? w_stride : k; }
  int64_t ys() const { return y_stride ? y_stride : n; }

  // The arguments for these tensors; `bias` is passed only when has_bias.
  repops::LinearArgs args(const void* x, const void* w, const void* bias, void* y) const {
    repops::LinearArgs a;
    a.x = x;
    a.x_dtype = x_dtype;
    a.x_row_stride = x_stride;
    a.w = w;
    a.w_dtype = w_dtype;
    a.w_row_stride = w_stride;
    a.bias = has_bias ? bias : nullptr;
    a.bias_dtype = bias_dtype;
    a.y = y;
    a.y_dtype = y_dtype;
    a.y_row_stride = y_stride;
    a.m = m;
    a.n = n;
    a.k = k;
    a.accumulate = accumulate;
    return a;
  }

  std::string describe() const {
    char buf[256];
    std::snprintf(buf, sizeof(buf),
                  "m=%lld n=%lld k=%lld xs=%lld ws=%lld ys=%lld x=%s w=%s y=%s bias=%s acc=%d",
                  static_cast<long long>(m), static_cast<long long>(n), static_cast<long long>(k),
                  static_cast<long long>(xs()), static_cast<long long>(ws()),
                  static_cast<long long>(ys()), dtypeName(x_dtype), dtypeName(w_dtype),
                  dtypeName(y_dtype), has_bias ? dtypeName(bias_dtype) : "none",
                  accumulate ? 1 : 0);
    return buf;
  }
};

// The dtypes linear accepts for x, w and y.
inline constexpr DType kLinearXTypes[] = {DType::kF32, DType::kBF16};
inline constexpr DType kLinearWTypes[] = {DType::kF32, DType::kBF16, DType::kF16};
inline constexpr DType kLinearYTypes[] = {DType::kF32, DType::kBF16};

// Calls f(x_dtype, w_dtype, y_dtype) for each of the 12 combinations linear accepts (x outermost,
// then w, then y) until f returns false.
template <typename F>
void forEachLinearDtypes(F&& f) {
  for (DType x : kLinearXTypes) {
    for (DType w : kLinearWTypes) {
      for (DType y : kLinearYTypes) {
        if (!f(x, w, y)) return;
      }
    }
  }
}

// For a shape whose m, n, k and dtypes are set: K moved off a multiple of 128 (a short last
// block), then random strides, bias, bias dtype and accumulate, in this order of draws from rng.
inline void randomizeIntLinearLayout(std::mt19937_64& rng, LinearShape& s) {
  if (s.k % 128 == 0) ++s.k;
  if (rng() % 3 == 0) s.x_stride = s.k + static_cast<int64_t>(rng() % 5);
  if (rng() % 3 == 0) s.w_stride = s.k + static_cast<int64_t>(rng() % 5);
  if (rng() % 3 == 0) s.y_stride = s.n + static_cast<int64_t>(rng() % 5);
  s.has_bias = rng() % 2 == 0;
  s.bias_dtype = rng() % 2 == 0 ? DType::kF32 : s.w_dtype;
  s.accumulate = rng() % 4 == 0;
}

// A value for one element: mostly Normal(0, scale), with the hard cases mixed in when `hostile`:
// zeros, subnormals, huge and tiny values in the same block, exact powers of two.
inline float hostileValue(std::mt19937_64& rng, float scale, bool hostile) {
  std::normal_distribution<float> normal(0.0f, scale);
  if (!hostile) return normal(rng);
  switch (rng() % 16) {
    case 0:
      return 0.0f;
    case 1:
      return -0.0f;
    case 2:
      return bitsFloat(static_cast<uint32_t>(rng() % 0x800000u) |
                       ((rng() & 1) << 31));  // subnormal
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

// x (scale 1) and w (scale 0.05) of the intLinear tests, drawn from rng: about a third of the rows
// hostile when `hostile`, and NaN/inf at three places of each when `non_finite`.
inline void fillHostileInputs(std::mt19937_64& rng, const LinearShape& s, bool hostile,
                              bool non_finite, HostBuffer& x, HostBuffer& w) {
  x.reset(s.x_dtype, static_cast<size_t>(s.m * s.xs()));
  w.reset(s.w_dtype, static_cast<size_t>(s.n * s.ws()));
  for (int64_t r = 0; r < s.m; ++r) {
    bool row_hostile = hostile && rng() % 3 == 0;
    for (int64_t i = 0; i < s.k; ++i)
      x.set(static_cast<size_t>(r * s.xs() + i), hostileValue(rng, 1.0f, row_hostile));
  }
  for (int64_t r = 0; r < s.n; ++r) {
    bool row_hostile = hostile && rng() % 3 == 0;
    for (int64_t i = 0; i < s.k; ++i)
      w.set(static_cast<size_t>(r * s.ws() + i), hostileValue(rng, 0.05f, row_hostile));
  }
  if (non_finite) {
    const float specials[] = {NAN, -NAN, INFINITY, -INFINITY};
    for (int t = 0; t < 3; ++t) {
      x.set(static_cast<size_t>((rng() % s.m) * s.xs() + rng() % s.k), specials[rng() % 4]);
      w.set(static_cast<size_t>((rng() % s.n) * s.ws() + rng() % s.k), specials[rng() % 4]);
    }
  }
}

}  // namespace ree::test
