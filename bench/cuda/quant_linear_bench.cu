// GEMV over GGUF-quantised weights (quant_linear.h: Q4_0, Q4_1, Q4_K, Q5_K, Q6_K, Q8_0, fp32 x)
// beside repops-1 linear with bf16 weights (bf16 x) and fp32 weights (fp32 x), all fp32 y, at M =
// 1, 16 and 64 on K x N = 4096 x 4096, 4096 x 14336 and 14336 x 4096: mean time, and GB/s of the
// weight bytes read (each weight byte once), beside the device-to-device copy bandwidth measured in
// the same run (bytes read + written); then the sum over the linear layers of one Llama-3-8B decode
// token per format (an end-to-end model needs a tokenizer and a 4.5 GB file). Weights rotate
// through copies worth more than L2, so they stream from memory as in decode. Usage:
// bench_gpu_quant_linear_bench [iterations]
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "cuda/linear_bench_util.cuh"
#include "ree/kernels/linear.h"
#include "ree/kernels/quant_linear.h"

namespace {

using ree::bench::timeMs;
using ree::repops::QuantType;

constexpr size_t kRotationBytes = 512ull << 20;  // weight copies per problem: > 10x L2

// Random code bytes; every block's fp16 fields set to small finite scales.
__global__ void fillBlocks(unsigned char* w, size_t bytes, int block_bytes, int field0, int field1,
                           uint32_t seed) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < bytes; i += gridDim.x * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    const int at = static_cast<int>(i % block_bytes);
    unsigned char v = static_cast<unsigned char>(h);
    if (at == field0 || at == field1) v = 0x00;          // low byte of 0x2Cxx
    if (at == field0 + 1 || at == field1 + 1) v = 0x2C;  // 2^-4
    w[i] = v;
  }
}

int copiesFor(size_t bytes) {
  return static_cast<int>(std::max<size_t>(2, (kRotationBytes + bytes - 1) / bytes));
}

float copyBandwidthGBs() {
  const size_t bytes = 256ull << 20;
  void *a = nullptr, *b = nullptr;
  CHECK_CUDA(cudaMalloc(&a, bytes));
  CHECK_CUDA(cudaMalloc(&b, bytes));
  CHECK_CUDA(cudaMemset(a, 1, bytes));
  float ms = timeMs(10, [&](int) { CHECK_CUDA(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDefault)); });
  CHECK_CUDA(cudaFree(a));
  CHECK_CUDA(cudaFree(b));
  return static_cast<float>(2.0 * bytes / (ms * 1e-3) / 1e9);
}

struct Row {
  const char* name;
  float ms;
  double bytes;
};

void print(int m, int k, int n, const std::vector<Row>& rows, float copy_gbs) {
  std::printf("M=%-3d K=%-6d N=%-6d", m, k, n);
  const float bf16_ms = rows[1].ms;
  for (const Row& r : rows) {
    const double gbs = r.bytes / (r.ms * 1e-3) / 1e9;
    std::printf(" | %s %8.2f us %6.0f GB/s (%3.0f%% copy, %4.2fx bf16)", r.name, r.ms * 1e3, gbs,
                100.0 * gbs / copy_gbs, bf16_ms / r.ms);
  }
  std::printf("\n");
  std::fflush(stdout);
}

float timeQuant(QuantType type, int m, int k, int n, const float* x, float* y, int iterations) {
  const size_t row_bytes = static_cast<size_t>(k) / ree::repops::quantBlockElems(type) *
                           ree::repops::quantBlockBytes(type);
  const size_t bytes = row_bytes * n;
  const int copies = copiesFor(bytes);
  std::vector<unsigned char*> w(copies);
  const int block_bytes = ree::repops::quantBlockBytes(type);
  const int field0 = type == QuantType::kQ6_K ? 208 : 0;
  const int field1 = (type == QuantType::kQ4_1 || type == QuantType::kQ5_1 ||
                      type == QuantType::kQ4_K || type == QuantType::kQ5_K)
                         ? 2
                         : -10;
  for (int c = 0; c < copies; ++c) {
    CHECK_CUDA(cudaMalloc(&w[c], bytes));
    fillBlocks<<<1024, 256>>>(w[c], bytes, block_bytes, field0, field1, 17 + c);
  }
  CHECK_CUDA(cudaDeviceSynchronize());
  ree::repops::QuantLinearArgs a;
  a.w_type = type;
  a.linear.x = x;
  a.linear.x_dtype = ree::DType::kF32;
  a.linear.y = y;
  a.linear.y_dtype = ree::DType::kF32;
  a.linear.m = m, a.linear.n = n, a.linear.k = k;
  a.linear.w_is_constant = true;  // model parameters, as in decode
  float ms = timeMs(iterations, [&](int i) {
    a.linear.w = w[i % copies];
    CHECK_REE(ree::repops::cuda::quantLinear(a, nullptr));
  });
  for (auto* p : w)
    CHECK_CUDA(cudaFree(p));
  return ms;
}

std::vector<Row> run(int m, int k, int n, int iterations, float copy_gbs) {
  const size_t elems = static_cast<size_t>(n) * k;
  ree::bench::DeviceLinearProblem dense(m, n, k, copiesFor(elems * 2), copiesFor(elems * 4));
  ree::repops::LinearArgs bf16 = dense.args();
  ree::repops::LinearArgs f32 = dense.args();
  f32.x = dense.x_f32, f32.x_dtype = ree::DType::kF32, f32.w_dtype = ree::DType::kF32;
  bf16.w_is_constant = f32.w_is_constant = true;
  const int bf16_copies = static_cast<int>(dense.w_bf16.size());
  const int f32_copies = static_cast<int>(dense.w_f32.size());
  std::vector<Row> rows;
  rows.push_back({"fp32",
                  timeMs(iterations,
                         [&](int i) {
                           f32.w = dense.w_f32[i % f32_copies];
                           CHECK_REE(ree::repops::cuda::linear(f32, nullptr));
                         }),
                  4.0 * elems});
  rows.push_back({"bf16",
                  timeMs(iterations,
                         [&](int i) {
                           bf16.w = dense.w_bf16[i % bf16_copies];
                           CHECK_REE(ree::repops::cuda::linear(bf16, nullptr));
                         }),
                  2.0 * elems});
  const struct {
    QuantType type;
    const char* name;
  } types[] = {{QuantType::kQ4_0, "Q4_0"}, {QuantType::kQ4_1, "Q4_1"}, {QuantType::kQ4_K, "Q4_K"},
               {QuantType::kQ5_K, "Q5_K"}, {QuantType::kQ6_K, "Q6_K"}, {QuantType::kQ8_0, "Q8_0"}};
  for (const auto& t : types) {
    const double bytes = static_cast<double>(elems) / ree::repops::quantBlockElems(t.type) *
                         ree::repops::quantBlockBytes(t.type);
    rows.push_back({t.name, timeQuant(t.type, m, k, n, dense.x_f32, dense.y, iterations), bytes});
  }
  print(m, k, n, rows, copy_gbs);
  return rows;
}

// The linear layers of one Llama-3-8B decode token at batch 1, as the GPU models run them (fused
// q|k|v and gate|up): the sum of the projections' GEMV times per weight format.
void decodeStepEstimate(int iterations, float copy_gbs) {
  const struct {
    int k, n, count;
  } layers[] = {
      {4096, 6144, 32}, {4096, 4096, 32}, {4096, 28672, 32}, {14336, 4096, 32}, {4096, 128256, 1}};
  std::vector<Row> total;
  for (const auto& l : layers) {
    const std::vector<Row> rows = run(1, l.k, l.n, iterations, copy_gbs);
    if (total.empty()) {
      total = rows;
      for (Row& r : total)
        r.ms = 0, r.bytes = 0;
    }
    for (size_t i = 0; i < rows.size(); ++i) {
      total[i].ms += rows[i].ms * l.count;
      total[i].bytes += rows[i].bytes * l.count;
    }
  }
  std::printf(
      "Llama-3-8B shape, linear layers of one decode token (M=1, fused q|k|v and gate|up, "
      "lm_head):");
  for (const Row& r : total) {
    std::printf(" | %s %.2f ms (%.0f tok/s bound, %.2fx bf16)", r.name, r.ms, 1e3 / r.ms,
                total[1].ms / r.ms);
  }
  std::printf("\n");
}

}  // namespace

int main(int argc, char** argv) {
  int iterations = argc > 1 ? std::atoi(argv[1]) : 50;
  cudaDeviceProp prop{};
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  const float copy_gbs = copyBandwidthGBs();
  std::printf(
      "device %s, %d SMs; copy bandwidth %.0f GB/s (read + write); fp32 y; quantised and "
      "fp32 weights with fp32 x, bf16 weights with bf16 x; GB/s of weight bytes\n",
      prop.name, prop.multiProcessorCount, copy_gbs);
  for (int m : {1, 16, 64}) {
    for (auto& shape : ree::bench::kLlamaProjections)
      run(m, shape[0], shape[1], iterations, copy_gbs);
  }
  decodeStepEstimate(iterations, copy_gbs);
  return 0;
}
