// CUDA linear layer == CPU linear layer, bitwise, for randomised shapes (odd M, N, K, strides,
// every dtype combination, with and without bias) through every kernel (GEMV, GEMM, auto), plus
// row invariance on the GPU and the special values (-0 partials, infinities, NaN).
#include <cuda_runtime.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "kernels/linear_problem.h"
#include "ree/kernels/linear.h"

namespace ree::repops {
namespace {

using Tensor = test::MirroredBuffer;

struct Case : test::LinearShape {
  size_t x_offset = 0, w_offset = 0;  // bytes; non-multiples of 16 misalign the rows

  Case() { x_dtype = DType::kBF16; }
  std::string str() const {
    return describe() + " xo=" + std::to_string(x_offset) + " wo=" + std::to_string(w_offset);
  }
};

struct Inputs {
  Tensor x, w, bias;
  void make(const Case& c, uint64_t seed) {
    x.fillRandom(c.x_dtype, static_cast<size_t>(c.m * c.xs()), seed * 7 + 1, 1.0f);
    w.fillRandom(c.w_dtype, static_cast<size_t>(c.n * c.ws()), seed * 7 + 2, 0.05f);
    if (c.has_bias) bias.fillRandom(c.bias_dtype, static_cast<size_t>(c.n), seed * 7 + 3, 0.5f);
  }
  void upload(const Case& c) {
    x.upload(c.x_offset);
    w.upload(c.w_offset);
    if (c.has_bias) bias.upload();
  }
  LinearArgs args(const Case& c, bool device, void* y) const {
    if (device) return c.args(x.device, w.device, bias.device, y);
    return c.args(x.data(), w.data(), bias.data(), y);
  }
};

size_t outputBytes(const Case& c) {
  return static_cast<size_t>(c.m * c.ys() * dtypeSize(c.y_dtype));
}

std::vector<uint8_t> runCpu(const Case& c, const Inputs& in) {
  std::vector<uint8_t> y(outputBytes(c), 0xAB);
  Status status = cpu::linear(in.args(c, false, y.data()));
  EXPECT_EQ(status, Status::kSuccess) << lastErrorMessage();
  return y;
}

// Returns false (and records a failure) when the kernel could not run.
bool runGpu(const Case& c, const Inputs& in, cuda::LinearKernel kernel, std::vector<uint8_t>* y,
            bool w_is_constant = false) {
  void* device_y = nullptr;
  size_t bytes = outputBytes(c);
  EXPECT_EQ(cudaMalloc(&device_y, bytes), cudaSuccess);
  EXPECT_EQ(cudaMemset(device_y, 0xAB, bytes), cudaSuccess);
  LinearArgs args = in.args(c, true, device_y);
  args.w_is_constant = w_is_constant;
  Status status = cuda::linearWithKernel(args, kernel, nullptr);
  EXPECT_EQ(status, Status::kSuccess) << c.str() << ": " << lastErrorMessage();
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess) << c.str();
  y->assign(bytes, 0);
  EXPECT_EQ(cudaMemcpy(y->data(), device_y, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
  cudaFree(device_y);
  return status == Status::kSuccess;
}

bool gemvEligible(const Case& c) {
  auto ok = [](size_t offset, int64_t stride, DType dtype) {
    return offset % 16 == 0 && (stride * dtypeSize(dtype)) % 16 == 0;
  };
  return ok(c.x_offset, c.xs(), c.x_dtype) && ok(c.w_offset, c.ws(), c.w_dtype);
}

void checkAllKernels(const Case& c, uint64_t seed) {
  Inputs in;
  in.make(c, seed);
  in.upload(c);
  auto expected = runCpu(c, in);
  // (kernel, w_is_constant): the GEMV runs both with and without its early weight loads.
  std::vector<std::pair<cuda::LinearKernel, bool>> runs = {{cuda::LinearKernel::kAuto, true},
                                                           {cuda::LinearKernel::kGemm, false}};
  if (gemvEligible(c)) {
    runs.push_back({cuda::LinearKernel::kGemv, false});
    runs.push_back({cuda::LinearKernel::kGemv, true});
  }
  for (auto [kernel, w_is_constant] : runs) {
    std::vector<uint8_t> got;
    if (!runGpu(c, in, kernel, &got, w_is_constant)) return;
    ASSERT_EQ(got.size(), expected.size());
    size_t elem = dtypeSize(c.y_dtype);
    for (size_t i = 0; i < got.size(); i += elem) {
      ASSERT_EQ(0, std::memcmp(&got[i], &expected[i], elem))
          << c.str() << " kernel=" << static_cast<int>(kernel) << " w_is_constant=" << w_is_constant
          << " first difference at row " << (i / elem) / c.ys() << " col " << (i / elem) % c.ys();
    }
  }
}

TEST(LinearCuda, RandomShapesMatchCpuBitwise) {
  REE_SKIP_WITHOUT_GPU();
  std::mt19937_64 rng(42);
  const int iterations = std::getenv("REE_TEST_FULL") ? 400 : 120;
  for (int iter = 0; iter < iterations; ++iter) {
    Case c;
    c.m = (rng() % 4 == 0) ? 1 + rng() % 16 : 1 + rng() % 300;
    c.n = 1 + rng() % 400;
    int64_t k_choices[] = {1, 7, 8, 127, 128, 129, 255, 256, 257, 520, 1000, 1031, 2048};
    c.k = rng() % 3 == 0 ? k_choices[rng() % 13] : 1 + rng() % 1500;
    c.x_dtype = test::kLinearXTypes[rng() % 2];
    c.w_dtype = test::kLinearWTypes[rng() % 3];
    c.y_dtype = test::kLinearYTypes[rng() % 2];
    c.has_bias = rng() % 2;
    c.bias_dtype = rng() % 2 ? DType::kF32 : c.w_dtype;
    switch (rng() % 4) {
      case 0:
        break;  // dense
      case 1:   // padded, 16-byte aligned rows: exercises the GEMV path with odd k
        c.x_stride = (c.k + 7) / 8 * 8 + 8;
        c.w_stride = (c.k + 7) / 8 * 8 + 16;
        break;
      case 2:  // arbitrary strides and misaligned base pointers
        c.x_stride = c.k + rng() % 5;
        c.w_stride = c.k + rng() % 5;
        c.x_offset = 2 * (rng() % 8);
        c.w_offset = 2 * (rng() % 8) + (c.w_dtype == DType::kF32 ? 2 : 0);
        if (c.x_dtype == DType::kF32) c.x_offset = 4 * (rng() % 4);
        if (c.w_dtype == DType::kF32) c.w_offset = 4 * (rng() % 4);
        break;
      case 3:
        c.y_stride = c.n + 1 + rng() % 3;
        break;
    }
    SCOPED_TRACE(c.str());
    checkAllKernels(c, 100 + iter);
    if (HasFatalFailure()) return;
  }
}

TEST(LinearCuda, DecodeAndPrefillLikeShapesMatchCpu) {
  REE_SKIP_WITHOUT_GPU();
  int seed = 1;
  for (int64_t m : {1, 3, 8, 16, 17, 48, 64, 65, 131}) {
    Case c;
    c.m = m;
    c.n = 4096 + 32 + 1;  // a partial 32-row and a partial 128-row tile
    c.k = 4096;
    c.has_bias = m % 2;
    c.y_dtype = m % 2 ? DType::kBF16 : DType::kF32;
    SCOPED_TRACE(c.str());
    checkAllKernels(c, seed++);
    if (HasFatalFailure()) return;
  }
}

// The GEMV's launch shapes: several merge rounds per block (K beyond one round of chunks), one to
// eight warps per block (chosen by the number of output tiles), every row-block size, a short
// last chunk and a partial last tile of 32 features.
TEST(LinearCuda, GemvRoundsAndBlockShapesMatchCpu) {
  REE_SKIP_WITHOUT_GPU();
  struct Shape {
    int64_t m, n, k;
    DType x, w;
  };
  const Shape shapes[] = {
      {5, 20000, 1100, DType::kBF16, DType::kBF16},  // many tiles: two warps, two rounds
      {1, 100, 9000, DType::kF32, DType::kBF16},     // eight warps, three rounds, short tail
      {16, 70, 4500, DType::kF32, DType::kF32},      // 16-row block, fp32 weights
      {12, 33, 16387, DType::kBF16, DType::kF16},    // four rounds, a 3-element last chunk
      {2, 8000, 300, DType::kF32, DType::kF16},      // two rows
      {9, 4133, 4096, DType::kF32, DType::kBF16},    // decode-like, 16-row block with 9 rows
      {40, 50, 700, DType::kBF16, DType::kBF16},     // three row blocks
      // One row: blocks of fewer than 32 features, balanced over the SMs (24 and 28 features on
      // a 132-SM H100), the last block partial.
      {1, 6150, 600, DType::kBF16, DType::kBF16},
      {1, 14339, 260, DType::kF32, DType::kBF16},
      {1, 1000, 1030, DType::kF32, DType::kF16},  // small N: 8 features per block (H100)
  };
  int seed = 11;
  for (const Shape& shape : shapes) {
    Case c;
    c.m = shape.m;
    c.n = shape.n;
    c.k = shape.k;
    c.x_dtype = shape.x;
    c.w_dtype = shape.w;
    c.x_stride = (c.k + 7) / 8 * 8;  // 16-byte aligned rows for every dtype
    c.w_stride = (c.k + 7) / 8 * 8;
    c.has_bias = seed % 2;
    c.y_dtype = seed % 3 ? DType::kF32 : DType::kBF16;
    SCOPED_TRACE(c.str());
    checkAllKernels(c, seed++);
    if (HasFatalFailure()) return;
  }
}

// Rows of a large batch (GEMM path) equal the same rows computed alone (GEMV, M = 1) and in
// other batch sizes.
TEST(LinearCuda, RowsAreInvariantToBatchAndKernel) {
  REE_SKIP_WITHOUT_GPU();
  Case big;
  big.m = 299;
  big.n = 333;
  big.k = 1000;
  big.has_bias = true;
  big.bias_dtype = DType::kBF16;
  Inputs in;
  in.make(big, 5);
  in.upload(big);
  std::vector<uint8_t> reference;
  ASSERT_TRUE(runGpu(big, in, cuda::LinearKernel::kGemm, &reference));
  ASSERT_EQ(0, std::memcmp(reference.data(), runCpu(big, in).data(), reference.size()));
  const size_t row_bytes = static_cast<size_t>(big.n * dtypeSize(big.y_dtype));
  for (int64_t m : {1, 2, 5, 16, 33, 128, 129}) {
    for (auto kernel :
         {cuda::LinearKernel::kAuto, cuda::LinearKernel::kGemv, cuda::LinearKernel::kGemm}) {
      // Rows [start, start + m) of the big batch.
      int64_t start = (big.m - m) / 2;
      Case part = big;
      part.m = m;
      Inputs sub;
      sub.x.fillRandom(big.x_dtype, 1, 0, 1.0f);
      sub.x.bytes.assign(in.x.bytes.begin() + start * big.xs() * dtypeSize(big.x_dtype),
                         in.x.bytes.begin() + (start + m) * big.xs() * dtypeSize(big.x_dtype));
      sub.w.dtype = in.w.dtype;
      sub.w.bytes = in.w.bytes;
      sub.bias.dtype = in.bias.dtype;
      sub.bias.bytes = in.bias.bytes;
      sub.upload(part);
      std::vector<uint8_t> got;
      ASSERT_TRUE(runGpu(part, sub, kernel, &got));
      ASSERT_EQ(0, std::memcmp(got.data(), reference.data() + start * row_bytes, got.size()))
          << "m=" << m << " kernel=" << static_cast<int>(kernel);
    }
  }
}

// -0 chunk partials (underflow), infinities and NaN inputs through every kernel.
TEST(LinearCuda, SpecialValuesMatchCpu) {
  REE_SKIP_WITHOUT_GPU();
  for (int64_t m : {1, 20}) {
    Case c;
    c.m = m;
    c.n = 5;
    c.k = 136;  // 16-byte aligned fp32 rows, a 128-chunk and a short chunk
    c.x_dtype = DType::kF32;
    c.w_dtype = DType::kF32;
    Inputs in;
    in.make(c, 3);
    for (int64_t row = 0; row < c.m; ++row) {
      for (int64_t i = 0; i < c.k; ++i)
        in.x.set(static_cast<size_t>(row * c.k + i), -0.0f);
      in.x.set(static_cast<size_t>(row * c.k + 0), -1e-30f);
      in.x.set(static_cast<size_t>(row * c.k + 128), 1e-30f);
      in.x.set(static_cast<size_t>(row * c.k + 5), 3e38f);
      in.x.set(static_cast<size_t>(row * c.k + 6), 3e38f);
    }
    for (int64_t i = 0; i < c.n * c.k; ++i)
      in.w.set(static_cast<size_t>(i), 0.0f);
    in.w.set(0 * c.k + 0, 1e-30f);
    in.w.set(0 * c.k + 128, -1e-30f);
    in.w.set(0 * c.k + 5, -0.0f);
    in.w.set(0 * c.k + 6, -0.0f);
    in.w.set(1 * c.k + 5, 1e10f);
    in.w.set(2 * c.k + 5, INFINITY);
    in.w.set(2 * c.k + 6, -INFINITY);
    in.w.set(4 * c.k + 9, bitsFloat(0xffc12345u));
    in.upload(c);
    auto expected = runCpu(c, in);
    EXPECT_EQ(floatBits(reinterpret_cast<const float*>(expected.data())[0]), 0x80000000u);
    for (auto kernel :
         {cuda::LinearKernel::kAuto, cuda::LinearKernel::kGemv, cuda::LinearKernel::kGemm}) {
      std::vector<uint8_t> got;
      ASSERT_TRUE(runGpu(c, in, kernel, &got));
      EXPECT_EQ(0, std::memcmp(got.data(), expected.data(), got.size()))
          << "m=" << m << " kernel=" << static_cast<int>(kernel);
    }
  }
}

// A GEMV with early weight loads may start while its predecessor runs; its x must still be read
// only after the predecessor wrote it. Chain: h = x0 W0^T (a long GEMV writing h last), then
// y = h W1^T with w_is_constant, back to back on one stream, several times with fresh h.
TEST(LinearCuda, EarlyWeightLoadsReadXAfterThePredecessor) {
  REE_SKIP_WITHOUT_GPU();
  Case first;  // [1, 32768] x [2048, 32768]^T: long enough that a racing read would see stale h
  first.m = 1;
  first.n = 2048;
  first.k = 32768;
  first.x_dtype = DType::kF32;
  first.y_dtype = DType::kF32;
  Case second;  // [1, 2048] x [4096, 2048]^T
  second.m = 1;
  second.n = 4096;
  second.k = 2048;
  second.x_dtype = DType::kF32;
  second.y_dtype = DType::kF32;
  Inputs a, b;
  a.make(first, 11);
  b.make(second, 12);
  a.upload(first);
  b.upload(second);
  std::vector<uint8_t> h = runCpu(first, a);
  b.x.bytes = h;
  std::vector<uint8_t> expected = runCpu(second, b);
  void *device_h = nullptr, *device_y = nullptr;
  REE_CUDA_OK(cudaMalloc(&device_h, h.size()));
  REE_CUDA_OK(cudaMalloc(&device_y, expected.size()));
  cudaStream_t stream = nullptr;
  REE_CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  for (int round = 0; round < 20; ++round) {
    REE_CUDA_OK(cudaMemsetAsync(device_h, 0xFF, h.size(), stream));  // NaN until written
    REE_CUDA_OK(cudaMemsetAsync(device_y, 0xAB, expected.size(), stream));
    LinearArgs producer = a.args(first, true, device_h);
    producer.w_is_constant = true;
    ASSERT_EQ(cuda::linearWithKernel(producer, cuda::LinearKernel::kGemv, stream), Status::kSuccess)
        << lastErrorMessage();
    LinearArgs consumer = b.args(second, true, device_y);
    consumer.x = device_h;
    consumer.w_is_constant = true;
    ASSERT_EQ(cuda::linearWithKernel(consumer, cuda::LinearKernel::kGemv, stream), Status::kSuccess)
        << lastErrorMessage();
    std::vector<uint8_t> got(expected.size());
    REE_CUDA_OK(cudaMemcpyAsync(got.data(), device_y, got.size(), cudaMemcpyDeviceToHost, stream));
    REE_CUDA_OK(cudaStreamSynchronize(stream));
    ASSERT_EQ(0, std::memcmp(got.data(), expected.data(), got.size())) << "round " << round;
  }
  cudaStreamDestroy(stream);
  cudaFree(device_h);
  cudaFree(device_y);
}

// accumulate (Y = add(Y, output)) on the GPU == on the CPU, bitwise, through every kernel.
TEST(LinearCuda, AccumulateMatchesCpu) {
  REE_SKIP_WITHOUT_GPU();
  int seed = 40;
  for (int64_t m : {1, 5, 40}) {
    for (DType y_dtype : {DType::kF32, DType::kBF16}) {
      Case c;
      c.m = m;
      c.n = 300;
      c.k = 520;
      c.y_dtype = y_dtype;
      c.has_bias = m != 5;
      Inputs in;
      in.make(c, seed++);
      in.upload(c);
      Tensor old_y;
      old_y.fillRandom(y_dtype, static_cast<size_t>(c.m * c.n), seed * 13, 2.0f);
      old_y.set(0, INFINITY);
      old_y.set(1, bitsFloat(0xffc12345u));
      std::vector<uint8_t> expected = old_y.bytes;
      LinearArgs cpu_args = in.args(c, false, expected.data());
      cpu_args.accumulate = true;
      ASSERT_EQ(cpu::linear(cpu_args), Status::kSuccess) << lastErrorMessage();
      for (auto kernel :
           {cuda::LinearKernel::kAuto, cuda::LinearKernel::kGemv, cuda::LinearKernel::kGemm}) {
        old_y.upload();
        LinearArgs args = in.args(c, true, old_y.device);
        args.accumulate = true;
        args.w_is_constant = true;
        ASSERT_EQ(cuda::linearWithKernel(args, kernel, nullptr), Status::kSuccess)
            << lastErrorMessage();
        std::vector<uint8_t> got(expected.size());
        REE_CUDA_OK(cudaMemcpy(got.data(), old_y.device, got.size(), cudaMemcpyDeviceToHost));
        EXPECT_EQ(0, std::memcmp(got.data(), expected.data(), got.size()))
            << c.str() << " kernel=" << static_cast<int>(kernel);
      }
    }
  }
}

TEST(LinearCuda, BadArguments) {
  REE_SKIP_WITHOUT_GPU();
  LinearArgs a;
  a.m = 1;
  a.n = 1;
  a.k = 0;
  EXPECT_EQ(cuda::linear(a, nullptr), Status::kInvalidArgument);
  Case c;
  c.m = 2;
  c.n = 3;
  c.k = 5;  // bf16 rows of 10 bytes: not 16-byte aligned
  Inputs in;
  in.make(c, 1);
  in.upload(c);
  void* y = nullptr;
  REE_CUDA_OK(cudaMalloc(&y, 64));
  EXPECT_EQ(cuda::linearWithKernel(in.args(c, true, y), cuda::LinearKernel::kGemv, nullptr),
            Status::kUnsupported);
  EXPECT_EQ(
      cuda::linearWithKernel(in.args(c, true, y), static_cast<cuda::LinearKernel>(9), nullptr),
      Status::kInvalidArgument);
  cudaFree(y);
}

}  // namespace
}  // namespace ree::repops
