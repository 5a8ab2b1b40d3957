// Correctly rounded math on the GPU.
// (a) repops::cuda::unaryMath == repops::cpu::unaryMath bitwise on random inputs of odd sizes.
// (b) Exhaustive sweep: every one of the 2^32 float inputs for every unary function, computed on
//     the GPU in chunks of 2^28 (the GPU computes chunk i+1 while the host checks chunk i). The CR
//     functions are checked on all host cores against an oracle that is not our code: glibc's
//     double-precision function gives a candidate; when it lies within 2^-40 (relative) of a float
//     rounding boundary, or the case is special, MPFR decides. The composites are compared with
//     the CPU implementation on every 16th input. Prints misrounded counts (must be 0) and a hash
//     of the full GPU output per function (compare H100 and H200 runs). REE_CRMATH_SWEEP=0 skips.
// (c) crExpN (batched) == crExp on all 2^32 inputs, on the GPU; so are the batch exp, sigmoid and
//     silu (crmath.cu's own fast path) == the scalar crExp, crSigmoid and crSilu.
// The hash: FNV-1a (64-bit, over 32-bit words) of each block of 2^20 outputs, then FNV-1a over
// those block hashes in order.
#include <cuda_runtime.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "cuda_test_util.h"
#include "ree/kernels/crmath.h"
#include "ree/kernels/math_ops.h"

#if defined(REE_TEST_HAVE_MPFR)
#include <mpfr.h>
#endif

namespace ree {
namespace {

TEST(CrMathCuda, BatchMatchesCpuBitwise) {
  REE_SKIP_WITHOUT_GPU();
  // 2053 = 4 x 513 + 1: the vector kernel's second block holds one float4 group (its other
  // threads' groups and second halves are out of range) and one trailing float.
  for (int64_t n :
       {int64_t{1}, int64_t{7}, int64_t{1000}, int64_t{2053}, int64_t{65537}, int64_t{1000003}}) {
    std::vector<float> xs(n);
    std::mt19937_64 rng(n);
    for (int64_t i = 0; i < n; ++i) {
      uint32_t b = static_cast<uint32_t>(rng());
      if (i % 3 == 0) b = (b & 0x807fffffu) | ((110u + static_cast<uint32_t>(rng() % 40)) << 23);
      xs[i] = bitsFloat(b);
    }
    float *d_in = nullptr, *d_out = nullptr;
    REE_CUDA_OK(cudaMalloc(&d_in, n * sizeof(float)));
    REE_CUDA_OK(cudaMalloc(&d_out, n * sizeof(float)));
    REE_CUDA_OK(cudaMemcpy(d_in, xs.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    for (int op = 0; op < kUnaryMathOpCount; ++op) {
      auto mop = static_cast<UnaryMathOp>(op);
      std::vector<float> cpu(n), gpu(n);
      ASSERT_EQ(repops::cpu::unaryMath(mop, xs.data(), cpu.data(), n), Status::kSuccess);
      ASSERT_EQ(repops::cuda::unaryMath(mop, d_in, d_out, n, nullptr), Status::kSuccess);
      REE_CUDA_OK(cudaMemcpy(gpu.data(), d_out, n * sizeof(float), cudaMemcpyDeviceToHost));
      long long diff = test::firstBitDifference(cpu, gpu);
      EXPECT_EQ(diff, -1) << unaryMathOpName(mop) << " n=" << n << " x=" << xs[diff < 0 ? 0 : diff];
    }
    REE_CUDA_OK(cudaFree(d_in));
    REE_CUDA_OK(cudaFree(d_out));
  }
}

// The batch kernel takes 16-byte accesses only when both arrays are 16-byte aligned: shift them by
// 1..3 floats (one float per thread), and run in place (out == in), against the CPU bitwise.
TEST(CrMathCuda, BatchUnalignedAndInPlaceMatchCpuBitwise) {
  REE_SKIP_WITHOUT_GPU();
  const int64_t n = 4099;
  std::vector<float> xs(n + 3);
  std::mt19937_64 rng(5);
  for (float& x : xs)
    x = bitsFloat((static_cast<uint32_t>(rng()) & 0x807fffffu) |
                  ((112u + static_cast<uint32_t>(rng() % 36)) << 23));
  float *d_in = nullptr, *d_out = nullptr;
  REE_CUDA_OK(cudaMalloc(&d_in, (n + 3) * sizeof(float)));
  REE_CUDA_OK(cudaMalloc(&d_out, (n + 3) * sizeof(float)));
  for (int op = 0; op < kUnaryMathOpCount; ++op) {
    auto mop = static_cast<UnaryMathOp>(op);
    for (int in_shift = 0; in_shift < 4; ++in_shift) {
      const int out_shift = (in_shift * 3) % 4;  // 0, 3, 2, 1
      std::vector<float> cpu(n), gpu(n);
      ASSERT_EQ(repops::cpu::unaryMath(mop, xs.data() + in_shift, cpu.data(), n), Status::kSuccess);
      REE_CUDA_OK(cudaMemcpy(d_in, xs.data(), xs.size() * sizeof(float), cudaMemcpyHostToDevice));
      ASSERT_EQ(repops::cuda::unaryMath(mop, d_in + in_shift, d_out + out_shift, n, nullptr),
                Status::kSuccess);
      REE_CUDA_OK(
          cudaMemcpy(gpu.data(), d_out + out_shift, n * sizeof(float), cudaMemcpyDeviceToHost));
      EXPECT_EQ(test::firstBitDifference(cpu, gpu), -1)
          << unaryMathOpName(mop) << " in+" << in_shift << " out+" << out_shift;
      ASSERT_EQ(repops::cuda::unaryMath(mop, d_in + in_shift, d_in + in_shift, n, nullptr),
                Status::kSuccess);
      REE_CUDA_OK(
          cudaMemcpy(gpu.data(), d_in + in_shift, n * sizeof(float), cudaMemcpyDeviceToHost));
      EXPECT_EQ(test::firstBitDifference(cpu, gpu), -1)
          << unaryMathOpName(mop) << " in place +" << in_shift;
    }
  }
  REE_CUDA_OK(cudaFree(d_in));
  REE_CUDA_OK(cudaFree(d_out));
}

__global__ void powKernel(const float* x, const float* y, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = crPow(x[i], y[i]);
}

TEST(CrMathCuda, PowMatchesCpuBitwise) {
  REE_SKIP_WITHOUT_GPU();
  const int n = 1 << 20;
  std::vector<float> xs(n), ys(n), cpu(n), gpu(n);
  std::mt19937_64 rng(11);
  for (int i = 0; i < n; ++i) {
    xs[i] = bitsFloat(static_cast<uint32_t>(rng()));
    ys[i] = bitsFloat(static_cast<uint32_t>(rng()));
    if (i % 2) {
      xs[i] = bitsFloat((floatBits(xs[i]) & 0x807fffffu) | (120u + (i % 16)) << 23);
      ys[i] = bitsFloat((floatBits(ys[i]) & 0x807fffffu) | (122u + (i % 10)) << 23);
    }
    if (i % 7 == 0) ys[i] = static_cast<float>(static_cast<int>(rng() % 31) - 15) * 0.5f;
    cpu[i] = crPow(xs[i], ys[i]);
  }
  float *dx, *dy, *dout;
  REE_CUDA_OK(cudaMalloc(&dx, n * 4));
  REE_CUDA_OK(cudaMalloc(&dy, n * 4));
  REE_CUDA_OK(cudaMalloc(&dout, n * 4));
  REE_CUDA_OK(cudaMemcpy(dx, xs.data(), n * 4, cudaMemcpyHostToDevice));
  REE_CUDA_OK(cudaMemcpy(dy, ys.data(), n * 4, cudaMemcpyHostToDevice));
  powKernel<<<(n + 255) / 256, 256>>>(dx, dy, dout, n);
  REE_CUDA_OK(cudaGetLastError());
  REE_CUDA_OK(cudaMemcpy(gpu.data(), dout, n * 4, cudaMemcpyDeviceToHost));
  EXPECT_EQ(test::firstBitDifference(cpu, gpu), -1);
  cudaFree(dx);
  cudaFree(dy);
  cudaFree(dout);
}

// crExpN in batches of 8 consecutive bit patterns against crExp, on the GPU, over all 2^32 inputs
// (crExp is checked against MPFR by the sweep below).
__global__ void batchedVsScalarKernel(uint64_t first_batch, unsigned long long* mismatches,
                                      unsigned int* first_bad) {
  const uint64_t batch = first_batch + blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x;
  float x[8], e[8];
  for (int i = 0; i < 8; ++i)
    x[i] = bitsFloat(static_cast<uint32_t>(batch * 8 + i));
  crExpN(x, e);
  for (int i = 0; i < 8; ++i) {
    if (floatBits(e[i]) != floatBits(crExp(x[i]))) {
      atomicAdd(mismatches, 1ull);
      atomicMin(first_bad, floatBits(x[i]));
    }
  }
}

TEST(CrMathCuda, BatchedExpMatchesScalarOnAllInputs) {
  REE_SKIP_WITHOUT_GPU();
  unsigned long long* d_mismatches = nullptr;
  unsigned int* d_first = nullptr;
  REE_CUDA_OK(cudaMalloc(&d_mismatches, sizeof(unsigned long long)));
  REE_CUDA_OK(cudaMalloc(&d_first, sizeof(unsigned int)));
  REE_CUDA_OK(cudaMemset(d_mismatches, 0, sizeof(unsigned long long)));
  REE_CUDA_OK(cudaMemset(d_first, 0xff, sizeof(unsigned int)));
  const uint64_t batches = (uint64_t{1} << 32) / 8;
  const unsigned threads = 256, blocks = 1u << 20;  // 2^28 batches per launch
  for (uint64_t first = 0; first < batches; first += uint64_t{threads} * blocks) {
    batchedVsScalarKernel<<<blocks, threads>>>(first, d_mismatches, d_first);
    REE_CUDA_OK(cudaGetLastError());
  }
  unsigned long long mismatches = 0;
  unsigned int first_bad = 0;
  REE_CUDA_OK(cudaMemcpy(&mismatches, d_mismatches, sizeof(mismatches), cudaMemcpyDeviceToHost));
  REE_CUDA_OK(cudaMemcpy(&first_bad, d_first, sizeof(first_bad), cudaMemcpyDeviceToHost));
  EXPECT_EQ(mismatches, 0ull) << "first mismatching input 0x" << std::hex << first_bad;
  cudaFree(d_mismatches);
  cudaFree(d_first);
}

// The batch API's exp, sigmoid and silu (crmath.cu's own fast path: one slow flag per four values,
// and for sigmoid and silu its own reciprocal sequence) against the scalar crExp / crSigmoid /
// crSilu (IEEE division) on the GPU, on all 2^32 inputs.
__global__ void fillBitPatterns(float* x, int64_t n, uint32_t first) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x)
    x[i] = bitsFloat(first + static_cast<uint32_t>(i));
}

__global__ void countScalarMismatches(const float* x, const float* y, int64_t n, UnaryMathOp op,
                                      unsigned long long* mismatches, unsigned int* first_bad) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float want = op == UnaryMathOp::kExp       ? crExp(x[i])
                       : op == UnaryMathOp::kSigmoid ? crSigmoid(x[i])
                                                     : crSilu(x[i]);
    if (floatBits(y[i]) != floatBits(want)) {
      atomicAdd(mismatches, 1ull);
      atomicMin(first_bad, floatBits(x[i]));
    }
  }
}

TEST(CrMathCuda, BatchExpSigmoidSiluMatchScalarOnAllInputs) {
  REE_SKIP_WITHOUT_GPU();
  const int64_t chunk = int64_t{1} << 28;
  float *d_x = nullptr, *d_y = nullptr;
  unsigned long long* d_mismatches = nullptr;
  unsigned int* d_first = nullptr;
  REE_CUDA_OK(cudaMalloc(&d_x, chunk * sizeof(float)));
  REE_CUDA_OK(cudaMalloc(&d_y, chunk * sizeof(float)));
  REE_CUDA_OK(cudaMalloc(&d_mismatches, sizeof(unsigned long long)));
  REE_CUDA_OK(cudaMalloc(&d_first, sizeof(unsigned int)));
  for (const UnaryMathOp op : {UnaryMathOp::kExp, UnaryMathOp::kSigmoid, UnaryMathOp::kSilu}) {
    REE_CUDA_OK(cudaMemset(d_mismatches, 0, sizeof(unsigned long long)));
    REE_CUDA_OK(cudaMemset(d_first, 0xff, sizeof(unsigned int)));
    for (int64_t first = 0; first < (int64_t{1} << 32); first += chunk) {
      fillBitPatterns<<<4096, 256>>>(d_x, chunk, static_cast<uint32_t>(first));
      ASSERT_EQ(repops::cuda::unaryMath(op, d_x, d_y, chunk, nullptr), Status::kSuccess);
      countScalarMismatches<<<4096, 256>>>(d_x, d_y, chunk, op, d_mismatches, d_first);
      REE_CUDA_OK(cudaGetLastError());
    }
    unsigned long long mismatches = 0;
    unsigned int first_bad = 0;
    REE_CUDA_OK(cudaMemcpy(&mismatches, d_mismatches, sizeof(mismatches), cudaMemcpyDeviceToHost));
    REE_CUDA_OK(cudaMemcpy(&first_bad, d_first, sizeof(first_bad), cudaMemcpyDeviceToHost));
    EXPECT_EQ(mismatches, 0ull) << unaryMathOpName(op) << ": first mismatching input 0x" << std::hex
                                << first_bad;
  }
  cudaFree(d_x);
  cudaFree(d_y);
  cudaFree(d_mismatches);
  cudaFree(d_first);
}

#if defined(REE_TEST_HAVE_MPFR)

template <int Op>
__global__ void sweepKernel(uint64_t base, int64_t n, float* out) {
  int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    float x = bitsFloat(static_cast<uint32_t>(base + i));
    float y;
    switch (static_cast<UnaryMathOp>(Op)) {
      case UnaryMathOp::kExp:
        y = crExp(x);
        break;
      case UnaryMathOp::kExpm1:
        y = crExpm1(x);
        break;
      case UnaryMathOp::kLog:
        y = crLog(x);
        break;
      case UnaryMathOp::kLog1p:
        y = crLog1p(x);
        break;
      case UnaryMathOp::kTanh:
        y = crTanh(x);
        break;
      case UnaryMathOp::kErf:
        y = crErf(x);
        break;
      case UnaryMathOp::kSin:
        y = crSin(x);
        break;
      case UnaryMathOp::kCos:
        y = crCos(x);
        break;
      case UnaryMathOp::kRsqrt:
        y = crRsqrt(x);
        break;
      case UnaryMathOp::kSigmoid:
        y = crSigmoid(x);
        break;
      case UnaryMathOp::kSilu:
        y = crSilu(x);
        break;
      case UnaryMathOp::kGeluErf:
        y = crGeluErf(x);
        break;
      case UnaryMathOp::kGeluTanh:
        y = crGeluTanh(x);
        break;
      default:
        y = crSoftplus(x);
        break;
    }
    out[i] = y;
  }
}

template <int Op>
void launchSweep(uint64_t base, int64_t n, float* out, cudaStream_t stream) {
  sweepKernel<Op><<<4096, 256, 0, stream>>>(base, n, out);
}

void launchSweepOp(int op, uint64_t base, int64_t n, float* out, cudaStream_t stream) {
  switch (op) {
    case 0:
      launchSweep<0>(base, n, out, stream);
      break;
    case 1:
      launchSweep<1>(base, n, out, stream);
      break;
    case 2:
      launchSweep<2>(base, n, out, stream);
      break;
    case 3:
      launchSweep<3>(base, n, out, stream);
      break;
    case 4:
      launchSweep<4>(base, n, out, stream);
      break;
    case 5:
      launchSweep<5>(base, n, out, stream);
      break;
    case 6:
      launchSweep<6>(base, n, out, stream);
      break;
    case 7:
      launchSweep<7>(base, n, out, stream);
      break;
    case 8:
      launchSweep<8>(base, n, out, stream);
      break;
    case 9:
      launchSweep<9>(base, n, out, stream);
      break;
    case 10:
      launchSweep<10>(base, n, out, stream);
      break;
    case 11:
      launchSweep<11>(base, n, out, stream);
      break;
    case 12:
      launchSweep<12>(base, n, out, stream);
      break;
    default:
      launchSweep<13>(base, n, out, stream);
      break;
  }
}

// ---- oracle (independent of crmath.h) ----
float mpfrUnary(int op, float x) {
  mpfr_set_emin(-148);
  mpfr_set_emax(128);
  mpfr_t a, r;
  mpfr_init2(a, 24);
  mpfr_init2(r, 24);
  mpfr_set_flt(a, x, MPFR_RNDN);
  int t = 0;
  switch (static_cast<UnaryMathOp>(op)) {
    case UnaryMathOp::kExp:
      t = mpfr_exp(r, a, MPFR_RNDN);
      break;
    case UnaryMathOp::kExpm1:
      t = mpfr_expm1(r, a, MPFR_RNDN);
      break;
    case UnaryMathOp::kLog:
      t = mpfr_log(r, a, MPFR_RNDN);
      break;
    case UnaryMathOp::kLog1p:
      t = mpfr_log1p(r, a, MPFR_RNDN);
      break;
    case UnaryMathOp::kTanh:
      t = mpfr_tanh(r, a, MPFR_RNDN);
      break;
    case UnaryMathOp::kErf:
      t = mpfr_erf(r, a, MPFR_RNDN);
      break;
    case UnaryMathOp::kSin:
      t = mpfr_sin(r, a, MPFR_RNDN);
      break;
    case UnaryMathOp::kCos:
      t = mpfr_cos(r, a, MPFR_RNDN);
      break;
    default:
      t = mpfr_rec_sqrt(r, a, MPFR_RNDN);
      break;
  }
  t = mpfr_subnormalize(r, t, MPFR_RNDN);
  float out = mpfr_get_flt(r, MPFR_RNDN);
  mpfr_clear(a);
  mpfr_clear(r);
  if (op == static_cast<int>(UnaryMathOp::kRsqrt) && x == 0.0f && std::signbit(x)) out = -INFINITY;
  return out;
}

double candidate(int op, double x) {
  switch (static_cast<UnaryMathOp>(op)) {
    case UnaryMathOp::kExp:
      return std::exp(x);
    case UnaryMathOp::kExpm1:
      return std::expm1(x);
    case UnaryMathOp::kLog:
      return std::log(x);
    case UnaryMathOp::kLog1p:
      return std::log1p(x);
    case UnaryMathOp::kTanh:
      return std::tanh(x);
    case UnaryMathOp::kErf:
      return std::erf(x);
    case UnaryMathOp::kSin:
      return std::sin(x);
    case UnaryMathOp::kCos:
      return std::cos(x);
    default:
      return 1.0 / std::sqrt(x);
  }
}

float oracle(int op, float x) {
  if (!std::isfinite(x) || x == 0.0f) return mpfrUnary(op, x);
  double v = candidate(op, static_cast<double>(x));
  if (std::isnan(v)) return NAN;
  double av = std::fabs(v);
  if (av > 0x1.ffffffp127 * (1.0 + 0x1p-40)) return std::copysign(INFINITY, v);  // overflow
  if (av < 0x1p-150 * (1.0 - 0x1p-40)) return std::copysign(0.0f, v);            // underflow
  float f = static_cast<float>(v);
  if (!std::isfinite(f) || f == 0.0f) return mpfrUnary(op, x);
  double up = 0.5 * (static_cast<double>(f) + static_cast<double>(std::nextafter(f, INFINITY)));
  double down = 0.5 * (static_cast<double>(f) + static_cast<double>(std::nextafter(f, -INFINITY)));
  double margin = av * 0x1p-40;
  if (std::fabs(v - up) <= margin || std::fabs(v - down) <= margin) return mpfrUnary(op, x);
  return f;
}

// The CPU build of the composites (crmath.h compiled for the host).
float cpuComposite(int op, float x) {
  switch (static_cast<UnaryMathOp>(op)) {
    case UnaryMathOp::kSigmoid:
      return crSigmoid(x);
    case UnaryMathOp::kSilu:
      return crSilu(x);
    case UnaryMathOp::kGeluErf:
      return crGeluErf(x);
    case UnaryMathOp::kGeluTanh:
      return crGeluTanh(x);
    default:
      return crSoftplus(x);
  }
}

uint64_t fnvWords(const uint32_t* p, int64_t n) {
  uint64_t h = 1469598103934665603ull;
  for (int64_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}

bool envSweepEnabled() {
  const char* v = std::getenv("REE_CRMATH_SWEEP");
  return !(v != nullptr && v[0] == '0');
}

TEST(CrMathCuda, ExhaustiveSweepIsCorrectlyRounded) {
  REE_SKIP_WITHOUT_GPU();
  if (!envSweepEnabled()) GTEST_SKIP() << "REE_CRMATH_SWEEP=0";
  constexpr int64_t kChunk = int64_t{1} << 28;
  constexpr int kChunks = 16;
  constexpr int64_t kBlock = int64_t{1} << 20;
  int threads = static_cast<int>(std::thread::hardware_concurrency());
  if (threads < 1) threads = 1;
  float* d_out[2];
  float* h_out[2];
  cudaStream_t stream;
  cudaEvent_t done[2];
  REE_CUDA_OK(cudaStreamCreate(&stream));
  for (int b = 0; b < 2; ++b) {
    REE_CUDA_OK(cudaMalloc(&d_out[b], kChunk * sizeof(float)));
    REE_CUDA_OK(cudaMallocHost(&h_out[b], kChunk * sizeof(float)));
    REE_CUDA_OK(cudaEventCreate(&done[b]));
  }
  auto total_start = std::chrono::steady_clock::now();
  for (int op = 0; op < kUnaryMathOpCount; ++op) {
    auto start = std::chrono::steady_clock::now();
    bool is_cr = op <= static_cast<int>(UnaryMathOp::kRsqrt);
    std::atomic<uint64_t> misrounded{0};
    std::vector<uint64_t> block_hashes(static_cast<size_t>(kChunks) * (kChunk / kBlock));
    auto enqueue = [&](int chunk) {
      int b = chunk & 1;
      launchSweepOp(op, static_cast<uint64_t>(chunk) * kChunk, kChunk, d_out[b], stream);
      cudaMemcpyAsync(h_out[b], d_out[b], kChunk * sizeof(float), cudaMemcpyDeviceToHost, stream);
      cudaEventRecord(done[b], stream);
    };
    enqueue(0);
    for (int chunk = 0; chunk < kChunks; ++chunk) {
      int b = chunk & 1;
      REE_CUDA_OK(cudaEventSynchronize(done[b]));
      REE_CUDA_OK(cudaGetLastError());
      if (chunk + 1 < kChunks) enqueue(chunk + 1);  // overlaps with the host check below
      const float* out = h_out[b];
      uint64_t base = static_cast<uint64_t>(chunk) * kChunk;
      std::vector<std::thread> pool;
      for (int t = 0; t < threads; ++t) {
        pool.emplace_back([&, t] {
          int64_t blocks = kChunk / kBlock;
          for (int64_t blk = blocks * t / threads; blk < blocks * (t + 1) / threads; ++blk) {
            const float* p = out + blk * kBlock;
            block_hashes[chunk * blocks + blk] =
                fnvWords(reinterpret_cast<const uint32_t*>(p), kBlock);
            uint64_t bad = 0;
            for (int64_t i = 0; i < kBlock; ++i) {
              uint32_t xb = static_cast<uint32_t>(base + blk * kBlock + i);
              float x = bitsFloat(xb);
              float ref;
              if (is_cr) {
                ref = oracle(op, x);
              } else {
                if ((xb & 15u) != 0u) continue;
                ref = cpuComposite(op, x);
              }
              bool ok = std::isnan(ref) ? floatBits(p[i]) == 0x7fc00000u
                                        : floatBits(p[i]) == floatBits(ref);
              if (!ok) {
                if (bad < 3) {
                  std::printf("  %s(%a) [0x%08x] = %a, expected %a\n",
                              unaryMathOpName(static_cast<UnaryMathOp>(op)), x, xb, p[i], ref);
                }
                ++bad;
              }
            }
            misrounded += bad;
          }
        });
      }
      for (auto& th : pool)
        th.join();
    }
    uint64_t hash = fnvWords(reinterpret_cast<const uint32_t*>(block_hashes.data()),
                             static_cast<int64_t>(block_hashes.size() * 2));
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("sweep %-9s %s misrounded=%llu output_hash=0x%s (%.1f s)\n",
                unaryMathOpName(static_cast<UnaryMathOp>(op)),
                is_cr ? "all 2^32 vs oracle   " : "every 16th vs CPU ",
                static_cast<unsigned long long>(misrounded.load()), test::hex64(hash).c_str(),
                seconds);
    std::fflush(stdout);
    EXPECT_EQ(misrounded.load(), 0u) << unaryMathOpName(static_cast<UnaryMathOp>(op));
  }
  std::printf(
      "sweep total %.1f s\n",
      std::chrono::duration<double>(std::chrono::steady_clock::now() - total_start).count());
  for (int b = 0; b < 2; ++b) {
    cudaFree(d_out[b]);
    cudaFreeHost(h_out[b]);
    cudaEventDestroy(done[b]);
  }
  cudaStreamDestroy(stream);
}

#else  // !REE_TEST_HAVE_MPFR

// Without MPFR the exhaustive sweep above is not built; this case says so in every run (a skip).
TEST(CrMathCuda, MpfrOracleChecks) {
  GTEST_SKIP() << "MPFR was not found at build time (cmake/ReeDependencies.cmake, REE_HAVE_MPFR): "
                  "the exhaustive sweep against the MPFR oracle is not built";
}

#endif  // REE_TEST_HAVE_MPFR

}  // namespace
}  // namespace ree
