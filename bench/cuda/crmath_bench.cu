// Throughput of the correctly rounded functions (crmath.h) against CUDA's own single-precision
// math (expf, logf, ...; not reproducible, shown only for scale) on the same GPU in the same run.
// Each kernel maps n = 2^26 floats (a realistic input distribution per function) to n outputs;
// CUDA event timing, 3 warm-up launches, median of 11 timed launches. Prints Gelem/s.
// Then the library's batch call (repops::cuda::unaryMath, what ree.ops.sigmoid/exp launch) on
// fp32 4096 x 4096: kernel time, GB/s (read + write) and % of a cudaMemcpy D2D of the same bytes
// timed in the same run.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "ree/kernels/crmath.h"
#include "ree/kernels/math_ops.h"

namespace {

#define CHECK(call)                                                    \
  do {                                                                 \
    cudaError_t e_ = (call);                                           \
    if (e_ != cudaSuccess) {                                           \
      std::fprintf(stderr, "%s: %s\n", #call, cudaGetErrorString(e_)); \
      std::exit(1);                                                    \
    }                                                                  \
  } while (0)

template <typename Fn>
__global__ void mapKernel(const float* __restrict__ in, float* __restrict__ out, int64_t n, Fn fn) {
  int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    out[i] = fn(in[i]);
}

template <typename Fn>
double gelemPerSecond(const float* in, float* out, int64_t n, Fn fn) {
  int blocks = 0;
  CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, mapKernel<Fn>, 256, 0));
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  int grid = std::max(1, blocks) * prop.multiProcessorCount * 4;
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  for (int i = 0; i < 3; ++i)
    mapKernel<<<grid, 256>>>(in, out, n, fn);
  CHECK(cudaDeviceSynchronize());
  std::vector<float> ms;
  for (int i = 0; i < 11; ++i) {
    CHECK(cudaEventRecord(a));
    mapKernel<<<grid, 256>>>(in, out, n, fn);
    CHECK(cudaEventRecord(b));
    CHECK(cudaEventSynchronize(b));
    float t;
    CHECK(cudaEventElapsedTime(&t, a, b));
    ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return static_cast<double>(n) / (ms[ms.size() / 2] * 1e-3) / 1e9;
}

struct ExpCr {
  __device__ float operator()(float x) const { return ree::crExp(x); }
};
struct ExpCu {
  __device__ float operator()(float x) const { return expf(x); }
};
struct Expm1Cr {
  __device__ float operator()(float x) const { return ree::crExpm1(x); }
};
struct Expm1Cu {
  __device__ float operator()(float x) const { return expm1f(x); }
};
struct LogCr {
  __device__ float operator()(float x) const { return ree::crLog(x); }
};
struct LogCu {
  __device__ float operator()(float x) const { return logf(x); }
};
struct Log1pCr {
  __device__ float operator()(float x) const { return ree::crLog1p(x); }
};
struct Log1pCu {
  __device__ float operator()(float x) const { return log1pf(x); }
};
struct TanhCr {
  __device__ float operator()(float x) const { return ree::crTanh(x); }
};
struct TanhCu {
  __device__ float operator()(float x) const { return tanhf(x); }
};
struct ErfCr {
  __device__ float operator()(float x) const { return ree::crErf(x); }
};
struct ErfCu {
  __device__ float operator()(float x) const { return erff(x); }
};
struct SinCr {
  __device__ float operator()(float x) const { return ree::crSin(x); }
};
struct SinCu {
  __device__ float operator()(float x) const { return sinf(x); }
};
struct CosCr {
  __device__ float operator()(float x) const { return ree::crCos(x); }
};
struct CosCu {
  __device__ float operator()(float x) const { return cosf(x); }
};
struct RsqrtCr {
  __device__ float operator()(float x) const { return ree::crRsqrt(x); }
};
struct RsqrtCu {
  __device__ float operator()(float x) const { return rsqrtf(x); }
};
struct SiluCr {
  __device__ float operator()(float x) const { return ree::crSilu(x); }
};
struct SiluCu {
  __device__ float operator()(float x) const { return x / (1.0f + expf(-x)); }
};
struct GeluCr {
  __device__ float operator()(float x) const { return ree::crGeluTanh(x); }
};
struct GeluCu {
  __device__ float operator()(float x) const {
    return 0.5f * x * (1.0f + tanhf(0.7978845608f * (x + 0.044715f * x * x * x)));
  }
};
struct PowCr {
  __device__ float operator()(float x) const { return ree::crPow(x, 0.75f); }
};
struct PowCu {
  __device__ float operator()(float x) const { return powf(x, 0.75f); }
};

// Median milliseconds of `body` over 21 launches (3 warm-up), CUDA events around each.
template <typename Body>
double medianMs(Body body) {
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  for (int i = 0; i < 3; ++i)
    body();
  CHECK(cudaDeviceSynchronize());
  std::vector<float> ms;
  for (int i = 0; i < 21; ++i) {
    CHECK(cudaEventRecord(a));
    body();
    CHECK(cudaEventRecord(b));
    CHECK(cudaEventSynchronize(b));
    float t;
    CHECK(cudaEventElapsedTime(&t, a, b));
    ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return ms[ms.size() / 2];
}

// repops::cuda::unaryMath on 4096 x 4096 fp32 inputs against a copy of the same bytes.
void batchTable(const float* in, float* out) {
  const int64_t n = int64_t{4096} * 4096;
  const double bytes = 2.0 * n * 4;  // read + write
  const double copy_ms =
      medianMs([&] { CHECK(cudaMemcpyAsync(out, in, n * 4, cudaMemcpyDeviceToDevice)); });
  const double copy_gbs = bytes / (copy_ms * 1e-3) / 1e9;
  std::printf("\nrepops::cuda::unaryMath, fp32 4096 x 4096 (N(0,3) inputs)\n");
  std::printf("%-10s %10s %10s %8s\n", "op", "us", "GB/s", "of copy");
  std::printf("%-10s %10.1f %10.1f %7.0f%%\n", "D2D copy", copy_ms * 1e3, copy_gbs, 100.0);
  const struct {
    const char* name;
    ree::UnaryMathOp op;
  } ops[] = {{"sigmoid", ree::UnaryMathOp::kSigmoid}, {"exp", ree::UnaryMathOp::kExp},
             {"silu", ree::UnaryMathOp::kSilu},       {"tanh", ree::UnaryMathOp::kTanh},
             {"rsqrt", ree::UnaryMathOp::kRsqrt},     {"gelu_erf", ree::UnaryMathOp::kGeluErf}};
  for (const auto& op : ops) {
    const double ms = medianMs([&] {
      if (ree::repops::cuda::unaryMath(op.op, in, out, n, nullptr) != ree::Status::kSuccess) {
        std::fprintf(stderr, "unaryMath %s failed\n", op.name);
        std::exit(1);
      }
    });
    const double gbs = bytes / (ms * 1e-3) / 1e9;
    std::printf("%-10s %10.1f %10.1f %7.0f%%\n", op.name, ms * 1e3, gbs, 100.0 * gbs / copy_gbs);
  }
}

}  // namespace

int main() {
  const int64_t n = int64_t{1} << 26;
  std::vector<float> normal(n), positive(n), wide(n);
  std::mt19937_64 rng(1);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  std::uniform_real_distribution<float> logu(-20.0f, 20.0f);
  for (int64_t i = 0; i < n; ++i) {
    normal[i] = dist(rng);
    positive[i] = std::exp2(logu(rng));  // host-side input generation only
    wide[i] = dist(rng) * 100.0f;
  }
  float *d_normal, *d_positive, *d_wide, *d_out;
  CHECK(cudaMalloc(&d_normal, n * 4));
  CHECK(cudaMalloc(&d_positive, n * 4));
  CHECK(cudaMalloc(&d_wide, n * 4));
  CHECK(cudaMalloc(&d_out, n * 4));
  CHECK(cudaMemcpy(d_normal, normal.data(), n * 4, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(d_positive, positive.data(), n * 4, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(d_wide, wide.data(), n * 4, cudaMemcpyHostToDevice));
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s, n = 2^26, median of 11\n", prop.name);
  std::printf("%-10s %-22s %12s %12s %8s\n", "function", "inputs", "cr Gelem/s", "cuda Gelem/s",
              "ratio");
  auto row = [&](const char* name, const char* inputs, double cr, double cu) {
    std::printf("%-10s %-22s %12.2f %12.2f %8.2f\n", name, inputs, cr, cu, cu / cr);
  };
  row("exp", "N(0,3)", gelemPerSecond(d_normal, d_out, n, ExpCr{}),
      gelemPerSecond(d_normal, d_out, n, ExpCu{}));
  row("expm1", "N(0,3)", gelemPerSecond(d_normal, d_out, n, Expm1Cr{}),
      gelemPerSecond(d_normal, d_out, n, Expm1Cu{}));
  row("log", "2^U(-20,20)", gelemPerSecond(d_positive, d_out, n, LogCr{}),
      gelemPerSecond(d_positive, d_out, n, LogCu{}));
  row("log1p", "2^U(-20,20)", gelemPerSecond(d_positive, d_out, n, Log1pCr{}),
      gelemPerSecond(d_positive, d_out, n, Log1pCu{}));
  row("tanh", "N(0,3)", gelemPerSecond(d_normal, d_out, n, TanhCr{}),
      gelemPerSecond(d_normal, d_out, n, TanhCu{}));
  row("erf", "N(0,3)", gelemPerSecond(d_normal, d_out, n, ErfCr{}),
      gelemPerSecond(d_normal, d_out, n, ErfCu{}));
  row("sin", "N(0,300)", gelemPerSecond(d_wide, d_out, n, SinCr{}),
      gelemPerSecond(d_wide, d_out, n, SinCu{}));
  row("cos", "N(0,300)", gelemPerSecond(d_wide, d_out, n, CosCr{}),
      gelemPerSecond(d_wide, d_out, n, CosCu{}));
  row("rsqrt", "2^U(-20,20)", gelemPerSecond(d_positive, d_out, n, RsqrtCr{}),
      gelemPerSecond(d_positive, d_out, n, RsqrtCu{}));
  row("silu", "N(0,3)", gelemPerSecond(d_normal, d_out, n, SiluCr{}),
      gelemPerSecond(d_normal, d_out, n, SiluCu{}));
  row("gelu_tanh", "N(0,3)", gelemPerSecond(d_normal, d_out, n, GeluCr{}),
      gelemPerSecond(d_normal, d_out, n, GeluCu{}));
  row("pow(x,.75)", "2^U(-20,20)", gelemPerSecond(d_positive, d_out, n, PowCr{}),
      gelemPerSecond(d_positive, d_out, n, PowCu{}));
  std::printf("(memory-bound copy of 2^26 floats reads+writes 512 MiB: ~1.5 ms at 3.35 TB/s)\n");
  batchTable(d_normal, d_out);
  cudaFree(d_normal);
  cudaFree(d_positive);
  cudaFree(d_wide);
  cudaFree(d_out);
  return 0;
}
