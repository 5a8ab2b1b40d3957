// A quantised-linear problem shared by the CPU and CUDA tests: random GGUF blocks of one type
// (finite fp16 scales of varied magnitude and sign, random code bytes, so every code value
// appears), random x, bias and y, and the reference bits: the weights dequantised to fp32
// (quant_blocks.h, the values of gguf-dequant.md) and repops-1's cpu::linear on them.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "ree/kernels/linear.h"
#include "ree/kernels/quant_linear.h"

namespace ree::test {

constexpr repops::QuantType kAllQuantTypes[] = {repops::QuantType::kQ8_0, repops::QuantType::kQ4_0,
                                                repops::QuantType::kQ4_1, repops::QuantType::kQ5_0,
                                                repops::QuantType::kQ5_1, repops::QuantType::kQ4_K,
                                                repops::QuantType::kQ5_K, repops::QuantType::kQ6_K};

// The byte offsets of a block's fp16 fields (scales, mins).
inline std::vector<int> halfFields(repops::QuantType type) {
  switch (type) {
    case repops::QuantType::kQ8_0:
    case repops::QuantType::kQ4_0:
    case repops::QuantType::kQ5_0:
      return {0};
    case repops::QuantType::kQ6_K:
      return {208};
    default:
      return {0, 2};
  }
}

// A finite binary16 with a random sign and an exponent in [2^-14 - ..., 2^3]: subnormals sometimes.
inline uint16_t randomFiniteHalf(std::mt19937_64& rng) {
  const uint16_t sign = (rng() & 1) ? 0x8000 : 0;
  const uint16_t exponent = static_cast<uint16_t>(rng() % 18);  // 0 (subnormal) .. 17 (2^2)
  const uint16_t mantissa = static_cast<uint16_t>(rng() & 0x3ff);
  return static_cast<uint16_t>(sign | (exponent << 10) | mantissa);
}

struct QuantProblem {
  repops::QuantType type = repops::QuantType::kQ4_0;
  int64_t m = 1, n = 1, k = 32;
  int64_t w_pad = 0;  // extra bytes per weight row
  int64_t x_pad = 0, y_pad = 0;
  DType x_dtype = DType::kF32, y_dtype = DType::kF32;
  bool bias = false, accumulate = false;
  std::vector<unsigned char> w;  // n rows of wRowBytes()
  std::vector<unsigned char> x, bias_bytes, y_init;

  int64_t rowBytes() const {
    return k / repops::quantBlockElems(type) * repops::quantBlockBytes(type);
  }
  int64_t wRowBytes() const { return rowBytes() + w_pad; }
  int64_t xs() const { return k + x_pad; }
  int64_t ys() const { return n + y_pad; }

  std::string describe() const {
    std::ostringstream s;
    s << repops::quantTypeName(type) << " m=" << m << " n=" << n << " k=" << k << " w_pad=" << w_pad
      << " x=" << dtypeName(x_dtype) << "+" << x_pad << " y=" << dtypeName(y_dtype) << "+" << y_pad
      << " bias=" << bias << " accumulate=" << accumulate;
    return s.str();
  }

  void fill(uint64_t seed) {
    std::mt19937_64 rng(seed);
    const int block_bytes = repops::quantBlockBytes(type);
    w.assign(static_cast<size_t>(n * wRowBytes()), 0);
    for (auto& byte : w)
      byte = static_cast<unsigned char>(rng());
    for (int64_t row = 0; row < n; ++row) {
      for (int64_t b = 0; b < rowBytes() / block_bytes; ++b) {
        unsigned char* block = w.data() + row * wRowBytes() + b * block_bytes;
        for (int field : halfFields(type)) {
          const uint16_t h = randomFiniteHalf(rng);
          block[field] = static_cast<unsigned char>(h & 0xff);
          block[field + 1] = static_cast<unsigned char>(h >> 8);
        }
      }
    }
    std::normal_distribution<float> normal(0.0f, 1.0f);
    auto fillValues = [&](std::vector<unsigned char>& out, DType dtype, int64_t count) {
      out.assign(static_cast<size_t>(count * dtypeSize(dtype)), 0);
      for (int64_t i = 0; i < count; ++i) {
        const float v = normal(rng);
        if (dtype == DType::kF32) {
          std::memcpy(out.data() + 4 * i, &v, 4);
        } else {
          const bf16_t b = toBF16(v);
          std::memcpy(out.data() + 2 * i, &b, 2);
        }
      }
    };
    fillValues(x, x_dtype, m * xs());
    fillValues(bias_bytes, DType::kF32, n);
    fillValues(y_init, y_dtype, m * ys());
  }

  // Args over the given buffers (host or device copies of w, x, bias and y).
  repops::QuantLinearArgs args(const void* w_ptr, const void* x_ptr, const void* bias_ptr,
                               void* y_ptr) const {
    repops::QuantLinearArgs a;
    a.w_type = type;
    a.w_row_bytes = w_pad ? wRowBytes() : 0;
    a.linear.x = x_ptr;
    a.linear.x_dtype = x_dtype;
    a.linear.x_row_stride = x_pad ? xs() : 0;
    a.linear.w = w_ptr;
    a.linear.bias = bias ? bias_ptr : nullptr;
    a.linear.bias_dtype = DType::kF32;
    a.linear.y = y_ptr;
    a.linear.y_dtype = y_dtype;
    a.linear.y_row_stride = y_pad ? ys() : 0;
    a.linear.m = m, a.linear.n = n, a.linear.k = k;
    a.linear.accumulate = accumulate;
    return a;
  }

  // The reference: W dequantised to fp32, then repops-1's cpu::linear.
  std::vector<unsigned char> reference() const {
    std::vector<float> dense(static_cast<size_t>(n * k));
    for (int64_t row = 0; row < n; ++row)
      repops::dequantizeBlocks(type, w.data() + row * wRowBytes(), k, dense.data() + row * k);
    std::vector<unsigned char> y = y_init;
    repops::LinearArgs a = args(nullptr, x.data(), bias_bytes.data(), y.data()).linear;
    a.w = dense.data();
    a.w_dtype = DType::kF32;
    a.w_row_stride = 0;
    if (repops::cpu::linear(a) != Status::kSuccess) y.clear();
    return y;
  }
};

}  // namespace ree::test
