// CUDA embedding and elementwise operators == CPU, bit for bit, on random sizes (odd included).
#include <cuda_runtime.h>

#include <algorithm>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "ree/kernels/pointwise.h"

namespace ree {
namespace {

namespace cpu = repops::cpu;
namespace gpu = repops::cuda;
using test::dtypeOf;
using test::toDevice;
using test::toHost;

const Activation kActivations[] = {Activation::kSilu, Activation::kGeluErf, Activation::kGeluTanh};

// Random values plus special ones (zeros, infinities, NaN, subnormals, huge).
template <typename T>
std::vector<T> inputs(int64_t n, uint64_t seed) {
  std::vector<T> v = test::randomValues<T>(n, seed, 6.0f);
  const float specials[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1e-40f, -3e38f, 88.5f, -104.0f};
  for (int64_t i = 0; i < n && i < 9; ++i)
    v[(i * 7919) % n] = storeAs<T>(specials[i]);
  return v;
}

template <typename T>
void checkElementwise(uint64_t seed) {
  std::mt19937_64 rng(seed);
  const int64_t n = 1 + rng() % 200000;
  const DType dtype = dtypeOf<T>();
  std::vector<T> a = inputs<T>(n, seed), b = inputs<T>(n, seed + 1);
  T* da = toDevice(a);
  T* db = toDevice(b);
  T* dout = toDevice(std::vector<T>(n));
  std::vector<T> out(n);
  ASSERT_EQ(cpu::add(dtype, a.data(), b.data(), out.data(), n), Status::kSuccess);
  ASSERT_EQ(gpu::add(dtype, da, db, dout, n, nullptr), Status::kSuccess);
  EXPECT_EQ(test::firstBitDifference(toHost(dout, n), out), -1) << "add n " << n;
  ASSERT_EQ(cpu::mul(dtype, a.data(), b.data(), out.data(), n), Status::kSuccess);
  ASSERT_EQ(gpu::mul(dtype, da, db, dout, n, nullptr), Status::kSuccess);
  EXPECT_EQ(test::firstBitDifference(toHost(dout, n), out), -1) << "mul n " << n;
  for (Activation activation : kActivations) {
    ASSERT_EQ(cpu::activation(activation, dtype, a.data(), out.data(), n), Status::kSuccess);
    ASSERT_EQ(gpu::activation(activation, dtype, da, dout, n, nullptr), Status::kSuccess);
    EXPECT_EQ(test::firstBitDifference(toHost(dout, n), out), -1)
        << activationName(activation) << " n " << n;
    // Gated over a [rows, cols] view with strides: gate from a, up from b.
    const int64_t cols = 1 + rng() % 700;
    const int64_t rows = n / (cols + 3);
    if (rows == 0) continue;
    ASSERT_EQ(cpu::gated(activation, dtype, a.data(), cols + 3, b.data(), cols + 1, out.data(),
                         cols, rows, cols),
              Status::kSuccess);
    ASSERT_EQ(
        gpu::gated(activation, dtype, da, cols + 3, db, cols + 1, dout, cols, rows, cols, nullptr),
        Status::kSuccess);
    std::vector<T> got = toHost(dout, rows * cols);
    EXPECT_EQ(test::firstBitDifference(got, std::vector<T>(out.begin(), out.begin() + rows * cols)),
              -1)
        << "gated " << activationName(activation) << " rows " << rows << " cols " << cols;
  }
  cudaFree(da);
  cudaFree(db);
  cudaFree(dout);
}

TEST(PointwiseCuda, ElementwiseMatchesCpuBitwise) {
  REE_SKIP_WITHOUT_GPU();
  for (uint64_t seed = 0; seed < 12; ++seed) {
    checkElementwise<float>(seed);
    checkElementwise<bf16_t>(seed + 100);
    checkElementwise<f16_t>(seed + 200);
  }
}

// The elementwise operators off their 16-byte path: an operand or the output not 16-byte
// aligned (the scalar kernels), beside the aligned calls of checkElementwise (16-byte groups and
// a tail of n % (16 / sizeof(T)) elements).
template <typename T>
void checkElementwiseUnaligned(uint64_t seed) {
  const int64_t n = 1000 + static_cast<int64_t>(seed % 17);
  const DType dtype = dtypeOf<T>();
  std::vector<T> a = inputs<T>(n + 1, seed), b = inputs<T>(n + 1, seed + 1);
  T* da = toDevice(a);
  T* db = toDevice(b);
  T* dout = toDevice(std::vector<T>(n + 1));
  std::vector<T> out(n);
  const int64_t offsets[][3] = {{1, 1, 1}, {0, 0, 1}, {1, 0, 0}, {0, 1, 0}};  // a, b, out
  for (const auto& o : offsets) {
    ASSERT_EQ(cpu::add(dtype, a.data() + o[0], b.data() + o[1], out.data(), n), Status::kSuccess);
    ASSERT_EQ(gpu::add(dtype, da + o[0], db + o[1], dout + o[2], n, nullptr), Status::kSuccess);
    EXPECT_EQ(test::firstBitDifference(toHost(dout + o[2], n), out), -1) << "add " << o[2];
    ASSERT_EQ(cpu::mul(dtype, a.data() + o[0], b.data() + o[1], out.data(), n), Status::kSuccess);
    ASSERT_EQ(gpu::mul(dtype, da + o[0], db + o[1], dout + o[2], n, nullptr), Status::kSuccess);
    EXPECT_EQ(test::firstBitDifference(toHost(dout + o[2], n), out), -1) << "mul " << o[2];
    for (Activation activation : kActivations) {
      ASSERT_EQ(cpu::activation(activation, dtype, a.data() + o[0], out.data(), n),
                Status::kSuccess);
      ASSERT_EQ(gpu::activation(activation, dtype, da + o[0], dout + o[2], n, nullptr),
                Status::kSuccess);
      EXPECT_EQ(test::firstBitDifference(toHost(dout + o[2], n), out), -1)
          << activationName(activation) << " offsets " << o[0] << " " << o[2];
    }
  }
  // In place (out aliases a), as the runtime's residual add.
  std::vector<T> sum(n);
  ASSERT_EQ(cpu::add(dtype, a.data(), b.data(), sum.data(), n), Status::kSuccess);
  ASSERT_EQ(gpu::add(dtype, da, db, da, n, nullptr), Status::kSuccess);
  EXPECT_EQ(test::firstBitDifference(toHost(da, n), sum), -1) << "add in place";
  cudaFree(da);
  cudaFree(db);
  cudaFree(dout);
}

TEST(PointwiseCuda, ElementwiseUnalignedMatchesCpuBitwise) {
  REE_SKIP_WITHOUT_GPU();
  for (uint64_t seed = 0; seed < 3; ++seed) {
    checkElementwiseUnaligned<float>(seed);
    checkElementwiseUnaligned<bf16_t>(seed + 100);
    checkElementwiseUnaligned<f16_t>(seed + 200);
  }
}

// Gated over an MLP's fused [rows, 2 * row_half] projection: gate = columns [0, cols), up =
// columns [row_half, row_half + cols) of each row, out [rows, out_stride] starting out_offset
// elements into its buffer. 16-byte path when every row start is 16-byte aligned (with a scalar
// tail when cols is not a multiple of 16 / sizeof(T)), scalar path otherwise.
template <typename T>
void checkGatedFused(int64_t rows, int64_t cols, int64_t row_half, int64_t out_stride,
                     int64_t out_offset, uint64_t seed) {
  const DType dtype = dtypeOf<T>();
  const int64_t stride = 2 * row_half;
  std::vector<T> fused = inputs<T>(rows * stride, seed);
  T* dfused = toDevice(fused);
  T* dout = toDevice(std::vector<T>(out_offset + rows * out_stride));
  for (Activation activation : kActivations) {
    std::vector<T> out(rows * out_stride);
    ASSERT_EQ(cudaMemset(dout, 0, (out_offset + rows * out_stride) * sizeof(T)), cudaSuccess);
    ASSERT_EQ(cpu::gated(activation, dtype, fused.data(), stride, fused.data() + row_half, stride,
                         out.data(), out_stride, rows, cols),
              Status::kSuccess);
    ASSERT_EQ(gpu::gated(activation, dtype, dfused, stride, dfused + row_half, stride,
                         dout + out_offset, out_stride, rows, cols, nullptr),
              Status::kSuccess);
    EXPECT_EQ(test::firstBitDifference(toHost(dout + out_offset, rows * out_stride), out), -1)
        << "gated " << activationName(activation) << " rows " << rows << " cols " << cols
        << " half " << row_half << " out stride " << out_stride << " offset " << out_offset;
  }
  cudaFree(dfused);
  cudaFree(dout);
}

TEST(PointwiseCuda, GatedFusedLayoutMatchesCpuBitwise) {
  REE_SKIP_WITHOUT_GPU();
  // 16-byte path, whole rows of vectors.
  checkGatedFused<bf16_t>(37, 1024, 1024, 1024, 0, 1);
  checkGatedFused<float>(5, 1024, 1024, 1024, 0, 2);
  checkGatedFused<f16_t>(7, 512, 512, 512, 0, 3);
  // 16-byte path with a scalar tail of each row (101 = 12 * 8 + 5 = 25 * 4 + 1).
  checkGatedFused<bf16_t>(33, 101, 104, 104, 0, 4);
  checkGatedFused<float>(33, 101, 104, 104, 0, 5);
  checkGatedFused<f16_t>(33, 101, 104, 112, 0, 6);
  // Rows shorter than a vector: several rows per block, all tail.
  checkGatedFused<bf16_t>(300, 3, 8, 8, 0, 7);
  // Scalar path: misaligned output, odd strides.
  checkGatedFused<bf16_t>(33, 101, 104, 104, 1, 8);
  checkGatedFused<float>(17, 64, 67, 65, 0, 9);
  // More row groups than the grid holds (65535 along y): blocks loop over rows, on both paths.
  checkGatedFused<bf16_t>(600000, 3, 8, 8, 0, 10);
  checkGatedFused<f16_t>(600000, 1, 1, 1, 0, 11);
}

TEST(PointwiseCuda, ActivationsExhaustiveBF16) {
  // Every bf16 bit pattern through each activation and SwiGLU-style gating.
  REE_SKIP_WITHOUT_GPU();
  const int64_t n = 65536;
  std::vector<bf16_t> x(n), up(n);
  for (int64_t i = 0; i < n; ++i) {
    x[i].bits = static_cast<uint16_t>(i);
    up[i].bits = static_cast<uint16_t>((i * 40503) & 0xffff);
  }
  bf16_t* dx = toDevice(x);
  bf16_t* dup = toDevice(up);
  bf16_t* dout = toDevice(std::vector<bf16_t>(n));
  std::vector<bf16_t> out(n);
  for (Activation activation : kActivations) {
    ASSERT_EQ(cpu::activation(activation, DType::kBF16, x.data(), out.data(), n), Status::kSuccess);
    ASSERT_EQ(gpu::activation(activation, DType::kBF16, dx, dout, n, nullptr), Status::kSuccess);
    EXPECT_EQ(test::firstBitDifference(toHost(dout, n), out), -1) << activationName(activation);
    ASSERT_EQ(cpu::gated(activation, DType::kBF16, x.data(), n, up.data(), n, out.data(), n, 1, n),
              Status::kSuccess);
    ASSERT_EQ(gpu::gated(activation, DType::kBF16, dx, n, dup, n, dout, n, 1, n, nullptr),
              Status::kSuccess);
    EXPECT_EQ(test::firstBitDifference(toHost(dout, n), out), -1) << activationName(activation);
  }
  cudaFree(dx);
  cudaFree(dup);
  cudaFree(dout);
}

// The table path of large 16-bit calls (kActivationTableMinElements elements or more): every
// input bit pattern, each many times with different up values, against the CPU's computed
// results. Gated over a fused [rows, 2 * half] layout whose rows end in a partial 16-byte group
// (cols % 8 == 4), and the plain activation over a flat range with a tail.
template <typename T>
void checkTablePath(uint64_t seed) {
  const DType dtype = dtypeOf<T>();
  const int64_t cols = 8100, half = 8104, rows = gpu::kActivationTableMinElements / cols + 3;
  ASSERT_GE(rows * cols, gpu::kActivationTableMinElements);
  std::vector<T> fused = test::randomValues<T>(rows * 2 * half, seed, 6.0f);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c)  // 40503 is odd: any 65536 consecutive items cover all
      fused[r * 2 * half + c].bits = static_cast<uint16_t>(((r * cols + c) * 40503) & 0xffff);
  }
  const int64_t n = gpu::kActivationTableMinElements + 5;
  std::vector<T> x(n);
  for (int64_t i = 0; i < n; ++i)
    x[i].bits = static_cast<uint16_t>((i * 13) & 0xffff);
  T* dfused = toDevice(fused);
  T* dx = toDevice(x);
  T* dout = toDevice(std::vector<T>(std::max(rows * half, n)));
  for (Activation activation : kActivations) {
    std::vector<T> out(rows * half);
    ASSERT_EQ(cudaMemset(dout, 0, rows * half * sizeof(T)), cudaSuccess);
    ASSERT_EQ(cpu::gated(activation, dtype, fused.data(), 2 * half, fused.data() + half, 2 * half,
                         out.data(), half, rows, cols),
              Status::kSuccess);
    ASSERT_EQ(gpu::gated(activation, dtype, dfused, 2 * half, dfused + half, 2 * half, dout, half,
                         rows, cols, nullptr),
              Status::kSuccess);
    EXPECT_EQ(test::firstBitDifference(toHost(dout, rows * half), out), -1)
        << "gated " << activationName(activation) << " rows " << rows << " cols " << cols;
    std::vector<T> act(n);
    ASSERT_EQ(cpu::activation(activation, dtype, x.data(), act.data(), n), Status::kSuccess);
    ASSERT_EQ(gpu::activation(activation, dtype, dx, dout, n, nullptr), Status::kSuccess);
    EXPECT_EQ(test::firstBitDifference(toHost(dout, n), act), -1)
        << activationName(activation) << " n " << n;
  }
  cudaFree(dfused);
  cudaFree(dx);
  cudaFree(dout);
}

TEST(PointwiseCuda, LargeSixteenBitCallsMatchCpuBitwise) {
  REE_SKIP_WITHOUT_GPU();
  checkTablePath<bf16_t>(21);
  checkTablePath<f16_t>(22);
}

template <typename T>
void checkEmbedding(int64_t vocab, int64_t dim, int64_t count, uint64_t seed) {
  std::vector<T> table = test::randomValues<T>(vocab * dim, seed);
  std::vector<int32_t> ids(count);
  std::mt19937_64 rng(seed);
  for (auto& id : ids)
    id = static_cast<int32_t>(rng() % vocab);
  std::vector<T> out(count * dim);
  ASSERT_EQ(cpu::embedding(dtypeOf<T>(), table.data(), vocab, dim, ids.data(), count, out.data()),
            Status::kSuccess);
  T* dtable = toDevice(table);
  int32_t* dids = toDevice(ids);
  T* dout = toDevice(std::vector<T>(count * dim));
  ASSERT_EQ(gpu::embedding(dtypeOf<T>(), dtable, vocab, dim, dids, count, dout, nullptr),
            Status::kSuccess);
  EXPECT_EQ(test::firstBitDifference(toHost(dout, count * dim), out), -1)
      << "vocab " << vocab << " dim " << dim;
  // The host-checked variant (no synchronisation) gathers the same bits.
  ASSERT_EQ(cudaMemset(dout, 0, count * dim * sizeof(T)), cudaSuccess);
  ASSERT_EQ(gpu::embeddingHostChecked(dtypeOf<T>(), dtable, vocab, dim, dids, ids.data(), count,
                                      dout, nullptr),
            Status::kSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(test::firstBitDifference(toHost(dout, count * dim), out), -1)
      << "host-checked, vocab " << vocab << " dim " << dim;
  // The variant for ids the device produced (a decode step's argmax) gathers the same bits.
  ASSERT_EQ(cudaMemset(dout, 0, count * dim * sizeof(T)), cudaSuccess);
  ASSERT_EQ(gpu::embeddingOfDeviceIds(dtypeOf<T>(), dtable, vocab, dim, dids, count, dout, nullptr),
            Status::kSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(test::firstBitDifference(toHost(dout, count * dim), out), -1)
      << "device ids, vocab " << vocab << " dim " << dim;
  cudaFree(dtable);
  cudaFree(dids);
  cudaFree(dout);
}

TEST(PointwiseCuda, EmbeddingMatchesCpuBitwise) {
  REE_SKIP_WITHOUT_GPU();
  checkEmbedding<bf16_t>(1000, 4096, 37, 1);  // 16-byte path
  checkEmbedding<bf16_t>(333, 2050, 19, 2);   // 4-byte path
  checkEmbedding<bf16_t>(77, 33, 101, 3);     // 2-byte path
  checkEmbedding<float>(500, 1, 1000, 4);
  checkEmbedding<f16_t>(129, 7, 3, 5);
  checkEmbedding<bf16_t>(20, 8200, 5, 6);  // rows wider than one block's tile
  // More rows than the grid holds (65535 along y): blocks loop over positions.
  checkEmbedding<f16_t>(129, 1, 600000, 7);
  checkEmbedding<bf16_t>(50, 8, 600000, 8);
}

TEST(PointwiseCuda, EmbeddingReportsFirstBadPosition) {
  REE_SKIP_WITHOUT_GPU();
  const int64_t vocab = 100, dim = 64;
  std::vector<bf16_t> table = test::randomValues<bf16_t>(vocab * dim, 9);
  std::vector<int32_t> ids = {3, 99, 100, 5, -1, 250};
  bf16_t* dtable = toDevice(table);
  int32_t* dids = toDevice(ids);
  bf16_t* dout = toDevice(std::vector<bf16_t>(ids.size() * dim));
  EXPECT_EQ(gpu::embedding(DType::kBF16, dtable, vocab, dim, dids, ids.size(), dout, nullptr),
            Status::kInvalidArgument);
  const std::string message = lastErrorMessage();
  EXPECT_NE(message.find("ids[2] = 100"), std::string::npos) << message;
  std::vector<bf16_t> out = toHost(dout, ids.size() * dim);
  for (int64_t k = 0; k < dim; ++k) {
    EXPECT_EQ(out[2 * dim + k].bits, 0);  // the bad row is zeroed
    EXPECT_EQ(out[1 * dim + k].bits, table[99 * dim + k].bits);
  }
  // Host-checked: the first bad id is named before anything is queued.
  EXPECT_EQ(gpu::embeddingHostChecked(DType::kBF16, dtable, vocab, dim, dids, ids.data(),
                                      ids.size(), dout, nullptr),
            Status::kInvalidArgument);
  const std::string host_message = lastErrorMessage();
  EXPECT_NE(host_message.find("ids[2] = 100"), std::string::npos) << host_message;
  cudaFree(dtable);
  cudaFree(dids);
  cudaFree(dout);
}

}  // namespace
}  // namespace ree
