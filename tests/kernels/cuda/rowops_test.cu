// Row-wise RepOps: CUDA output must equal the CPU implementation bit for bit, for random shapes
// (odd lengths, strides, misaligned pointers that force the scalar path), every dtype pair and
// rows holding special values.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdlib>
#include <functional>

#include "cuda_test_util.h"
#include "ree/kernels/rowops.h"

namespace ree::repops {
namespace {

// Device bytes with 64 bytes of slack after them, freed on scope exit.
struct DeviceBuffer : test::DeviceBuffer {
  explicit DeviceBuffer(size_t n) : test::DeviceBuffer(n, /*slack_bytes=*/64) {}
};

// Random bytes that decode to Normal(0, scale) values of `dtype`, with a sprinkling of specials.
std::vector<char> randomRows(DType dtype, size_t count, uint64_t seed, float scale, bool specials) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<char> bytes(count * dtypeSize(dtype));
  const float special_values[] = {NAN, INFINITY, -INFINITY, -0.0f, 0.0f, 1e-40f, 3e38f, -3e38f};
  for (size_t i = 0; i < count; ++i) {
    float v = dist(rng);
    if (specials && rng() % 97 == 0) v = special_values[rng() % 8];
    repops::rowmath::storeAt(bytes.data(), dtype, static_cast<int64_t>(i), v);
  }
  return bytes;
}

struct Case {
  int64_t rows, cols, x_stride, y_stride;
  DType in, out, weight;
  int x_offset, y_offset;  // elements; non-zero misaligns and forces the scalar path
  bool specials;
};

// Runs `cpu_fn` on host buffers and `gpu_fn` on device buffers with the same layout, compares the
// output bytes. The functions receive (x, y, weight, bias) as RowsIn/RowsOut/VecIn.
using RowFn = std::function<Status(RowsIn, RowsOut, VecIn, VecIn)>;

void compareRowOp(const char* name, const Case& c, const RowFn& cpu_fn, const RowFn& gpu_fn,
                  uint64_t seed) {
  SCOPED_TRACE(::testing::Message()
               << name << " rows=" << c.rows << " cols=" << c.cols << " in=" << dtypeName(c.in)
               << " out=" << dtypeName(c.out) << " xoff=" << c.x_offset << " yoff=" << c.y_offset);
  const size_t x_count = c.x_offset + (c.rows - 1) * c.x_stride + c.cols;
  const size_t y_count = c.y_offset + (c.rows - 1) * c.y_stride + c.cols;
  std::vector<char> x = randomRows(c.in, x_count, seed, 3.0f, c.specials);
  std::vector<char> w = randomRows(c.weight, c.cols, seed + 1, 1.0f, false);
  std::vector<char> b = randomRows(c.weight, c.cols, seed + 2, 1.0f, false);
  std::vector<char> y_cpu(y_count * dtypeSize(c.out), 0x5a), y_gpu(y_cpu.size());
  const int in_size = dtypeSize(c.in), out_size = dtypeSize(c.out);
  ASSERT_EQ(cpu_fn(RowsIn{x.data() + c.x_offset * in_size, c.in, c.x_stride},
                   RowsOut{y_cpu.data() + c.y_offset * out_size, c.out, c.y_stride},
                   VecIn{w.data(), c.weight}, VecIn{b.data(), c.weight}),
            Status::kSuccess)
      << lastErrorMessage();
  DeviceBuffer dx(x.size()), dy(y_cpu.size()), dw(w.size()), db(b.size());
  REE_CUDA_OK(cudaMemcpy(dx.ptr, x.data(), x.size(), cudaMemcpyHostToDevice));
  REE_CUDA_OK(cudaMemcpy(dw.ptr, w.data(), w.size(), cudaMemcpyHostToDevice));
  REE_CUDA_OK(cudaMemcpy(db.ptr, b.data(), b.size(), cudaMemcpyHostToDevice));
  REE_CUDA_OK(cudaMemset(dy.ptr, 0x5a, y_gpu.size()));
  ASSERT_EQ(gpu_fn(RowsIn{dx.at(c.x_offset * in_size), c.in, c.x_stride},
                   RowsOut{dy.at(c.y_offset * out_size), c.out, c.y_stride},
                   VecIn{dw.ptr, c.weight}, VecIn{db.ptr, c.weight}),
            Status::kSuccess)
      << lastErrorMessage();
  REE_CUDA_OK(cudaDeviceSynchronize());
  REE_CUDA_OK(cudaMemcpy(y_gpu.data(), dy.ptr, y_gpu.size(), cudaMemcpyDeviceToHost));
  long long diff = test::firstBitDifference(y_cpu, y_gpu);
  EXPECT_EQ(diff, -1) << "first differing byte " << diff;
}

std::vector<Case> randomCases(uint64_t seed, int count) {
  std::mt19937_64 rng(seed);
  const int64_t fixed_cols[] = {1, 7, 127, 128, 129, 4095, 4096, 4097, 8192, 128256};
  const DType types[] = {DType::kF32, DType::kBF16, DType::kF16};
  std::vector<Case> cases;
  for (int i = 0; i < count; ++i) {
    Case c;
    c.cols = (rng() % 3 == 0) ? static_cast<int64_t>(1 + rng() % 20000) : fixed_cols[rng() % 10];
    c.rows = 1 + static_cast<int64_t>(rng() % (c.cols > 10000 ? 9 : 300));
    bool aligned = rng() % 2 == 0;
    c.x_stride = c.cols + (aligned ? 0 : static_cast<int64_t>(rng() % 9));
    c.y_stride = c.cols + (aligned ? 0 : static_cast<int64_t>(rng() % 9));
    c.in = types[rng() % 3];
    c.out = types[rng() % 3];
    c.weight = types[rng() % 3];
    c.x_offset = aligned ? 0 : static_cast<int>(rng() % 3);
    c.y_offset = aligned ? 0 : static_cast<int>(rng() % 3);
    c.specials = rng() % 4 == 0;
    cases.push_back(c);
  }
  // The LLM shapes, aligned (16-byte path).
  for (int64_t cols : {4096, 8192, 128256}) {
    cases.push_back(Case{cols == 128256 ? 3 : 257, cols, cols, cols, DType::kBF16, DType::kBF16,
                         DType::kBF16, 0, 0, false});
    cases.push_back(Case{5, cols, cols, cols, DType::kF32, DType::kF32, DType::kF32, 0, 0, true});
  }
  return cases;
}

int caseCount() {
  return std::getenv("REE_TEST_FULL") ? 400 : 60;
}

// Every row-wise normalising operator (RMSNorm both variants, with and without weight; LayerNorm
// with weight and bias, weight only, neither; softmax; log-softmax; cast) on one case.
void compareAllRowOps(const Case& c, uint64_t* seed) {
  const int64_t rows = c.rows, cols = c.cols;
  for (RmsNormVariant variant : {RmsNormVariant::kF32, RmsNormVariant::kCastBeforeWeight}) {
    compareRowOp(
        "rmsNorm", c,
        [&](RowsIn x, RowsOut y, VecIn w, VecIn) {
          return repops::cpu::rmsNorm(x, w, y, rows, cols, 1e-6f, variant);
        },
        [&](RowsIn x, RowsOut y, VecIn w, VecIn) {
          return repops::cuda::rmsNorm(x, w, y, rows, cols, 1e-6f, variant, nullptr);
        },
        (*seed)++);
  }
  compareRowOp(
      "rmsNorm(no weight)", c,
      [&](RowsIn x, RowsOut y, VecIn, VecIn) {
        return repops::cpu::rmsNorm(x, VecIn{}, y, rows, cols, 1e-5f, RmsNormVariant::kF32);
      },
      [&](RowsIn x, RowsOut y, VecIn, VecIn) {
        return repops::cuda::rmsNorm(x, VecIn{}, y, rows, cols, 1e-5f, RmsNormVariant::kF32,
                                     nullptr);
      },
      (*seed)++);
  for (int affine = 0; affine < 3; ++affine) {  // weight+bias, weight only, neither
    compareRowOp(
        "layerNorm", c,
        [&](RowsIn x, RowsOut y, VecIn w, VecIn b) {
          return repops::cpu::layerNorm(x, affine < 2 ? w : VecIn{}, affine == 0 ? b : VecIn{}, y,
                                        rows, cols, 1e-5f);
        },
        [&](RowsIn x, RowsOut y, VecIn w, VecIn b) {
          return repops::cuda::layerNorm(x, affine < 2 ? w : VecIn{}, affine == 0 ? b : VecIn{}, y,
                                         rows, cols, 1e-5f, nullptr);
        },
        (*seed)++);
  }
  compareRowOp(
      "softmax", c,
      [&](RowsIn x, RowsOut y, VecIn, VecIn) { return repops::cpu::softmax(x, y, rows, cols); },
      [&](RowsIn x, RowsOut y, VecIn, VecIn) {
        return repops::cuda::softmax(x, y, rows, cols, nullptr);
      },
      (*seed)++);
  compareRowOp(
      "logSoftmax", c,
      [&](RowsIn x, RowsOut y, VecIn, VecIn) { return repops::cpu::logSoftmax(x, y, rows, cols); },
      [&](RowsIn x, RowsOut y, VecIn, VecIn) {
        return repops::cuda::logSoftmax(x, y, rows, cols, nullptr);
      },
      (*seed)++);
  compareRowOp(
      "cast", c,
      [&](RowsIn x, RowsOut y, VecIn, VecIn) { return repops::cpu::cast(x, y, rows, cols); },
      [&](RowsIn x, RowsOut y, VecIn, VecIn) {
        return repops::cuda::cast(x, y, rows, cols, nullptr);
      },
      (*seed)++);
}

TEST(RowOpsCuda, NormsAndSoftmaxEqualCpuBitwise) {
  REE_SKIP_WITHOUT_GPU();
  uint64_t seed = 1;
  for (const Case& c : randomCases(42, caseCount())) {
    compareAllRowOps(c, &seed);
    if (HasFatalFailure()) return;
  }
}

int multiprocessorCount() {
  int device = 0, sms = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
    return 132;
  }
  return sms;
}

// The launch shapes of rowops.cu, each with aligned and unaligned (strided, offset) rows, 16-bit
// and f32 types, and special values. The kernel picks its shape from the row count relative to
// the multiprocessor count P and from the row length (chunks of 128 elements):
// - warp mode: at most 8 chunks and at least 2P rows; a warp holds up to 32 / L rows (L = chunks
//   rounded up to a power of two) while that still leaves 8P warps, so 8P * 32 rows of 128
//   elements give 32 rows per warp and fewer rows fewer;
// - CTA mode: fewer than 2P rows (all lengths that fit one block), or longer rows;
// - cluster mode (8 blocks per row, sm_90): rows too long for one block's 96 KiB, e.g. 20000 f32
//   RMSNorm with few rows or any 128256 softmax; many such rows of the norms and log-softmax go to
//   the two-pass rowKernel.
std::vector<Case> residentCases() {
  const int64_t p = multiprocessorCount();
  const DType kBF16 = DType::kBF16, kF16 = DType::kF16, kF32 = DType::kF32;
  std::vector<Case> cases;
  auto add = [&](int64_t rows, int64_t cols, DType in, DType out, DType weight) {
    cases.push_back(Case{rows, cols, cols, cols, in, out, weight, 0, 0, false});
    // Unaligned: odd strides and offsets force element-wise loads and stores.
    cases.push_back(Case{rows, cols, cols + 3, cols + 1, in, out, weight, 1, 2, true});
    // Aligned with specials (NaN, inf, -0, subnormals, huge values in some rows).
    cases.push_back(Case{rows, cols, cols + 8, cols + 8, in, out, weight, 0, 0, true});
  };
  // Warp mode around its lower row bound: 8 chunks (four rows per warp), a partial last chunk,
  // two chunks.
  for (int64_t rows : {2 * p - 1, 2 * p, 2 * p + 5}) {
    add(rows, 1024, kBF16, kBF16, kBF16);
    add(rows, 1000, kF32, kBF16, kF32);
    add(rows, 129, kF16, kF32, kBF16);
  }
  // Several rows per warp (L = 1, 1, 4, 8), with the row count not a multiple of the rows per
  // block, and the rows-per-warp reduction at its boundaries.
  add(8 * p * 32 + 7, 128, kBF16, kBF16, kBF16);
  add(8 * p * 32 - 1, 100, kF32, kF32, kF32);
  add(8 * p * 4 + 3, 384, kF16, kF16, kF32);
  add(8 * p * 4 + 1, 900, kF32, kBF16, kBF16);
  add(3 * p, 1, kBF16, kF32, kF16);
  add(3 * p, 7, kF32, kF16, kBF16);
  // CTA mode: few rows of any length, and many rows longer than warp mode's.
  for (int64_t rows : {int64_t{1}, int64_t{2}, int64_t{63}, int64_t{64}, int64_t{65}, 2 * p - 1}) {
    add(rows, 4096, kBF16, kBF16, kBF16);
  }
  add(2 * p + 1, 1025, kF16, kBF16, kF32);
  add(2 * p + 1, 3000, kF32, kBF16, kF32);
  add(2 * p + 1, 4097, kBF16, kBF16, kBF16);
  add(2 * p + 1, 8192, kF32, kF32, kBF16);
  add(5, 12000, kF16, kBF16, kF32);
  // Cluster mode: slices with a partial last chunk and a short last block; many long rows.
  add(3, 20000, kF32, kF32, kF32);
  add(2, 30001, kBF16, kF32, kF32);
  add(2 * p + 3, 50000, kBF16, kBF16, kBF16);
  add(2, 128256, kF32, kBF16, kF32);
  return cases;
}

TEST(RowOpsCuda, LaunchShapesEqualCpuBitwise) {
  REE_SKIP_WITHOUT_GPU();
  uint64_t seed = 500;
  for (const Case& c : residentCases()) {
    compareAllRowOps(c, &seed);
    if (HasFatalFailure()) return;
  }
}

// Sum, mean, max, min, var and argmax of one case against the CPU, bitwise.
void compareReductions(const Case& c, uint64_t* seed) {
  const int64_t rows = c.rows, cols = c.cols;
  for (ReduceOp op :
       {ReduceOp::kSum, ReduceOp::kMean, ReduceOp::kMax, ReduceOp::kMin, ReduceOp::kVar}) {
    SCOPED_TRACE(repops::reduceOpName(op));
    std::vector<char> x =
        randomRows(c.in, c.x_offset + (rows - 1) * c.x_stride + cols, (*seed)++, 3.0f, c.specials);
    const int in_size = dtypeSize(c.in);
    std::vector<char> ref(rows * dtypeSize(c.out)), got(ref.size());
    ASSERT_EQ(repops::cpu::reduceRows(op, RowsIn{x.data() + c.x_offset * in_size, c.in, c.x_stride},
                                      ref.data(), c.out, rows, cols),
              Status::kSuccess);
    DeviceBuffer dx(x.size()), dout(got.size());
    REE_CUDA_OK(cudaMemcpy(dx.ptr, x.data(), x.size(), cudaMemcpyHostToDevice));
    ASSERT_EQ(repops::cuda::reduceRows(op, RowsIn{dx.at(c.x_offset * in_size), c.in, c.x_stride},
                                       dout.ptr, c.out, rows, cols, nullptr),
              Status::kSuccess);
    REE_CUDA_OK(cudaMemcpy(got.data(), dout.ptr, got.size(), cudaMemcpyDeviceToHost));
    EXPECT_EQ(test::firstBitDifference(ref, got), -1)
        << "rows=" << rows << " cols=" << cols << " in=" << dtypeName(c.in);
    std::vector<int32_t> idx_ref(rows), idx_got(rows);
    ASSERT_EQ(repops::cpu::argmaxRows(RowsIn{x.data() + c.x_offset * in_size, c.in, c.x_stride},
                                      idx_ref.data(), rows, cols),
              Status::kSuccess);
    DeviceBuffer didx(rows * 4);
    ASSERT_EQ(repops::cuda::argmaxRows(RowsIn{dx.at(c.x_offset * in_size), c.in, c.x_stride},
                                       static_cast<int32_t*>(didx.ptr), rows, cols, nullptr),
              Status::kSuccess);
    REE_CUDA_OK(cudaMemcpy(idx_got.data(), didx.ptr, rows * 4, cudaMemcpyDeviceToHost));
    EXPECT_EQ(idx_ref, idx_got) << "rows=" << rows << " cols=" << cols;
  }
}

TEST(RowOpsCuda, ReductionsAndArgmaxEqualCpuBitwise) {
  REE_SKIP_WITHOUT_GPU();
  uint64_t seed = 1000;
  for (const Case& c : randomCases(43, caseCount())) {
    compareReductions(c, &seed);
    if (HasFatalFailure()) return;
  }
}

// Sum, mean, var, max and min run in the row-resident kernel (warp and CTA modes), few long rows
// in reduceKernel: every launch shape of the norms, with unaligned rows and specials.
TEST(RowOpsCuda, ReductionLaunchShapesEqualCpuBitwise) {
  REE_SKIP_WITHOUT_GPU();
  uint64_t seed = 2000;
  for (const Case& c : residentCases()) {
    compareReductions(c, &seed);
    if (HasFatalFailure()) return;
  }
}

// Max and min of at least 8P rows longer than 1024 elements with 16-byte loads stream a warp per
// row (rowops_select_stream.cuh); 8P - 1 rows, rows of 1024 and unaligned rows take the resident
// kernel. Batches of eight loads and a remainder (4104 f16: two batches and a piece), the
// remainder alone (1032 f16), more rows than the grid's warps (66P + 3: warps loop), strided rows,
// every input dtype, with and without specials. (compareReductions also checks the other
// reductions on these shapes.)
TEST(RowOpsCuda, SelectStreamEqualsCpuBitwise) {
  REE_SKIP_WITHOUT_GPU();
  const int64_t p = multiprocessorCount();
  uint64_t seed = 3000;
  struct Shape {
    int64_t rows, cols;
    DType in, out;
  };
  const DType kBF16 = DType::kBF16, kF16 = DType::kF16, kF32 = DType::kF32;
  const Shape shapes[] = {
      {8 * p - 1, 4096, kF32, kF32},  {8 * p, 4096, kF32, kBF16},
      {8 * p + 3, 1024, kBF16, kF32}, {8 * p + 5, 1032, kF16, kF16},
      {16 * p + 7, 4104, kF16, kF32}, {8 * p + 2, 8192, kBF16, kF32},
      {66 * p + 3, 1040, kF32, kF32},
  };
  for (const Shape& shape : shapes) {
    // Dense; strided with specials; for the first two shapes also unaligned (resident kernel).
    const int variants = &shape - shapes < 2 ? 3 : 2;
    for (int variant = 0; variant < variants; ++variant) {
      const int64_t stride = shape.cols + (variant == 0 ? 0 : 8);
      compareReductions(Case{shape.rows, shape.cols, stride, stride, shape.in, shape.out, kF32,
                             variant == 2 ? 1 : 0, 0, variant == 1},
                        &seed);
      if (HasFatalFailure()) return;
    }
  }
}

// Rows of signed zeros on the streaming path, some with a +0, subnormals, an infinity or a NaN of
// either sign (with a payload): max prefers +0 and min -0 wherever they meet, whatever lane holds
// them; an infinity is selected; any NaN gives the canonical +qNaN.
TEST(RowOpsCuda, SelectStreamKeepsZeroSignsAndSpecials) {
  REE_SKIP_WITHOUT_GPU();
  const int64_t rows = 8 * multiprocessorCount() + 1, cols = 4100;
  std::vector<float> x(rows * cols, -0.0f);
  auto put = [&](int64_t r, int64_t salt, float v) { x[r * cols + (r * salt) % cols] = v; };
  for (int64_t r = 0; r < rows; ++r) {
    if (r % 3 == 0) put(r, 37, 0.0f);
    if (r % 5 == 0) put(r, 101, 1e-45f * static_cast<float>(r % 2 ? 1 : -1));
    if (r % 7 == 0) put(r, 211, -INFINITY);
    if (r % 11 == 0) put(r, 307, INFINITY);
    if (r % 13 == 0) put(r, 401, bitsFloat(0x7fc12345u));
    if (r % 17 == 0) put(r, 503, bitsFloat(0xffc00001u));
  }
  DeviceBuffer dx(x.size() * 4), dout(rows * 4);
  REE_CUDA_OK(cudaMemcpy(dx.ptr, x.data(), x.size() * 4, cudaMemcpyHostToDevice));
  for (ReduceOp op : {ReduceOp::kMax, ReduceOp::kMin, ReduceOp::kSum, ReduceOp::kMean}) {
    SCOPED_TRACE(repops::reduceOpName(op));
    std::vector<float> ref(rows), got(rows);
    ASSERT_EQ(repops::cpu::reduceRows(op, RowsIn{x.data(), DType::kF32, cols}, ref.data(),
                                      DType::kF32, rows, cols),
              Status::kSuccess);
    ASSERT_EQ(repops::cuda::reduceRows(op, RowsIn{dx.ptr, DType::kF32, cols}, dout.ptr, DType::kF32,
                                       rows, cols, nullptr),
              Status::kSuccess);
    REE_CUDA_OK(cudaMemcpy(got.data(), dout.ptr, rows * 4, cudaMemcpyDeviceToHost));
    EXPECT_EQ(test::firstBitDifference(ref, got), -1);
  }
}

// y == x (same dtype and stride): every row is read completely before any of it is written.
TEST(RowOpsCuda, InPlaceEqualsCpu) {
  REE_SKIP_WITHOUT_GPU();
  const int64_t p = multiprocessorCount();
  struct Shape {
    int64_t rows, cols;
    DType dtype;
  };
  // CTA mode (few rows, then many longer rows), warp mode with several rows per warp, cluster
  // mode, and many long rows (rowKernel for the norms, clusters for softmax).
  const Shape shapes[] = {{9, 4096, DType::kBF16},       {2 * p + 1, 4096, DType::kBF16},
                          {8 * p * 8, 512, DType::kF32}, {2 * p + 1, 8192, DType::kF16},
                          {3, 40000, DType::kF32},       {2, 128256, DType::kBF16},
                          {2 * p, 30000, DType::kBF16}};
  for (const Shape& shape : shapes) {
    const int64_t rows = shape.rows, cols = shape.cols;
    const DType dt = shape.dtype;
    SCOPED_TRACE(::testing::Message()
                 << "rows=" << rows << " cols=" << cols << " " << dtypeName(dt));
    std::vector<char> x = randomRows(dt, rows * cols, 5 + rows, 2.0f, false);
    std::vector<char> w = randomRows(dt, cols, 6, 1.0f, false);
    std::vector<char> b = randomRows(dt, cols, 7, 1.0f, false);
    DeviceBuffer dx(x.size()), dw(w.size()), db(b.size());
    REE_CUDA_OK(cudaMemcpy(dw.ptr, w.data(), w.size(), cudaMemcpyHostToDevice));
    REE_CUDA_OK(cudaMemcpy(db.ptr, b.data(), b.size(), cudaMemcpyHostToDevice));
    using InPlaceFn = std::function<Status(void* data, const void* weight, const void* bias)>;
    auto check = [&](const char* name, const InPlaceFn& cpu_fn, const InPlaceFn& gpu_fn) {
      SCOPED_TRACE(name);
      std::vector<char> ref = x, got(x.size());
      ASSERT_EQ(cpu_fn(ref.data(), w.data(), b.data()), Status::kSuccess) << lastErrorMessage();
      REE_CUDA_OK(cudaMemcpy(dx.ptr, x.data(), x.size(), cudaMemcpyHostToDevice));
      ASSERT_EQ(gpu_fn(dx.ptr, dw.ptr, db.ptr), Status::kSuccess) << lastErrorMessage();
      REE_CUDA_OK(cudaMemcpy(got.data(), dx.ptr, got.size(), cudaMemcpyDeviceToHost));
      EXPECT_EQ(test::firstBitDifference(ref, got), -1);
    };
    check(
        "rmsNorm",
        [&](void* d, const void* wp, const void*) {
          return repops::cpu::rmsNorm(RowsIn{d, dt, cols}, VecIn{wp, dt}, RowsOut{d, dt, cols},
                                      rows, cols, 1e-6f, RmsNormVariant::kCastBeforeWeight);
        },
        [&](void* d, const void* wp, const void*) {
          return repops::cuda::rmsNorm(RowsIn{d, dt, cols}, VecIn{wp, dt}, RowsOut{d, dt, cols},
                                       rows, cols, 1e-6f, RmsNormVariant::kCastBeforeWeight,
                                       nullptr);
        });
    check(
        "layerNorm",
        [&](void* d, const void* wp, const void* bp) {
          return repops::cpu::layerNorm(RowsIn{d, dt, cols}, VecIn{wp, dt}, VecIn{bp, dt},
                                        RowsOut{d, dt, cols}, rows, cols, 1e-5f);
        },
        [&](void* d, const void* wp, const void* bp) {
          return repops::cuda::layerNorm(RowsIn{d, dt, cols}, VecIn{wp, dt}, VecIn{bp, dt},
                                         RowsOut{d, dt, cols}, rows, cols, 1e-5f, nullptr);
        });
    check(
        "softmax",
        [&](void* d, const void*, const void*) {
          return repops::cpu::softmax(RowsIn{d, dt, cols}, RowsOut{d, dt, cols}, rows, cols);
        },
        [&](void* d, const void*, const void*) {
          return repops::cuda::softmax(RowsIn{d, dt, cols}, RowsOut{d, dt, cols}, rows, cols,
                                       nullptr);
        });
    check(
        "logSoftmax",
        [&](void* d, const void*, const void*) {
          return repops::cpu::logSoftmax(RowsIn{d, dt, cols}, RowsOut{d, dt, cols}, rows, cols);
        },
        [&](void* d, const void*, const void*) {
          return repops::cuda::logSoftmax(RowsIn{d, dt, cols}, RowsOut{d, dt, cols}, rows, cols,
                                          nullptr);
        });
    if (HasFatalFailure()) return;
  }
}

TEST(RowOpsCuda, BadArgumentsAreRejected) {
  // Validation happens before any CUDA call, so this runs without a GPU too.
  float dummy = 0;
  EXPECT_EQ(repops::cuda::softmax(RowsIn{&dummy, DType::kF32, 1}, RowsOut{nullptr, DType::kF32, 1},
                                  1, 1, nullptr),
            Status::kInvalidArgument);
  EXPECT_EQ(repops::cuda::reduceRows(ReduceOp::kSum, RowsIn{&dummy, DType::kF32, 1}, &dummy,
                                     DType::kF32, 1, 0, nullptr),
            Status::kInvalidArgument);
  EXPECT_EQ(repops::cuda::rmsNorm(RowsIn{&dummy, DType::kF32, 1}, VecIn{},
                                  RowsOut{&dummy, DType::kF32, 1}, 1, 1, -1.0f,
                                  RmsNormVariant::kF32, nullptr),
            Status::kInvalidArgument);
  EXPECT_EQ(repops::cuda::argmaxRows(RowsIn{&dummy, DType::kF32, 1}, nullptr, 1, 1, nullptr),
            Status::kInvalidArgument);
}

}  // namespace
}  // namespace ree::repops
