// repops-3 linear for many rows of x (prefill): the four shift-class sums as four plain int8
// GEMMs on cuBLASLt, then an epilogue kernel. Included by int_linear_row.cu; not a header of its
// own.
//
// With the plane layout of int_linear_row_quantize.cuh (x rows [d0 | d1 | d2 | d3], w rows
// [e2 | e1 | e0], each plane k_padded bytes), every class is one GEMM C[m, n] = sum_k' A[m, k']
// B[n, k'] over a contiguous range of both rows:
//     c0  = x[kp, 4 kp) . w[0, 3 kp)     (d1 e2 + d2 e1 + d3 e0)
//     c7  = x[0, 3 kp)  . w[0, 3 kp)     (d0 e2 + d1 e1 + d2 e0)
//     c14 = x[0, 2 kp)  . w[kp, 3 kp)    (d0 e1 + d1 e0)
//     c21 = x[0, kp)    . w[2 kp, 3 kp)  (d0 e0)
// nine K-products in all. Integer GEMMs are exact (int8 products, int32 sums that never exceed
// 2^31 for k <= kMaxK), so whatever algorithm, tiling, split-K or GPU cuBLASLt picks, the sums and
// therefore the bits are the same: the heuristic's choice cannot change a result.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <tuple>

namespace ree::repops::cuda {
namespace {

constexpr int64_t kGemmRowPad = 16;  // m and n padded to this (int8 alignment)
// Rows of x per class GEMM at least (cuBLASLt's int8 kernels are not offered for every tiny n;
// x's planes hold whole 64-row chunks, so the padding rows exist and are zero).
constexpr int64_t kGemmMinRows = 32;
constexpr int64_t kGemmChunkMultiple = 64;
constexpr int64_t kClassScratchBytes = int64_t{512} << 20;  // four int32 class planes per M chunk
constexpr int64_t kMaxChunkRows = 32768;
constexpr size_t kLtWorkspaceBytes = size_t{32} << 20;

#define REE_CUBLASLT_CHECK(call)                                                         \
  do {                                                                                   \
    cublasStatus_t ree_lt_status_ = (call);                                              \
    if (ree_lt_status_ != CUBLAS_STATUS_SUCCESS) {                                       \
      return REE_FAIL(Status::kCudaError, "int linear row (cuda): %s failed: %s", #call, \
                      cublasLtGetStatusString(ree_lt_status_));                          \
    }                                                                                    \
  } while (0)

// One cuBLASLt handle per device, made on first use (thread-safe) and kept for the process.
Status ltHandle(cublasLtHandle_t* out) {
  int device = 0;
  REE_CUDA_CHECK(cudaGetDevice(&device));
  static std::mutex mutex;
  static std::map<int, cublasLtHandle_t> handles;
  std::lock_guard<std::mutex> lock(mutex);
  auto found = handles.find(device);
  if (found == handles.end()) {
    cublasLtHandle_t handle = nullptr;
    REE_CUBLASLT_CHECK(cublasLtCreate(&handle));
    found = handles.emplace(device, handle).first;
  }
  *out = found->second;
  return Status::kSuccess;
}

// The descriptors of one class GEMM, destroyed with it.
struct LtGemm {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  ~LtGemm() {
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

// Column-major view: C^T [n_padded x rows] = W^T [n_padded x depth] X [depth x rows] ("TN"),
// A = w planes (lda = 3 kp), B = x planes (ldb = 4 kp), C int32 (ldc = n_padded).
Status describeGemm(int64_t n_padded, int64_t rows, int64_t depth, int64_t kp, LtGemm* g) {
  REE_CUBLASLT_CHECK(cublasLtMatmulDescCreate(&g->op, CUBLAS_COMPUTE_32I, CUDA_R_32I));
  const cublasOperation_t transpose = CUBLAS_OP_T;
  REE_CUBLASLT_CHECK(cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_TRANSA, &transpose,
                                                    sizeof(transpose)));
  REE_CUBLASLT_CHECK(cublasLtMatrixLayoutCreate(&g->a, CUDA_R_8I, depth, n_padded, 3 * kp));
  REE_CUBLASLT_CHECK(cublasLtMatrixLayoutCreate(&g->b, CUDA_R_8I, depth, rows, 4 * kp));
  REE_CUBLASLT_CHECK(cublasLtMatrixLayoutCreate(&g->c, CUDA_R_32I, n_padded, rows, n_padded));
  return Status::kSuccess;
}

// The heuristic's first algorithm for a shape, asked once per (device, shape) and cached.
Status gemmAlgorithm(cublasLtHandle_t handle, const LtGemm& g, int64_t n_padded, int64_t rows,
                     int64_t depth, int64_t kp, cublasLtMatmulAlgo_t* out) {
  int device = 0;
  REE_CUDA_CHECK(cudaGetDevice(&device));
  using Key = std::tuple<int, int64_t, int64_t, int64_t, int64_t>;
  static std::mutex mutex;
  static std::map<Key, cublasLtMatmulAlgo_t> cache;
  const Key key{device, n_padded, rows, depth, kp};
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto found = cache.find(key);
    if (found != cache.end()) {
      *out = found->second;
      return Status::kSuccess;
    }
  }
  cublasLtMatmulPreference_t preference = nullptr;
  REE_CUBLASLT_CHECK(cublasLtMatmulPreferenceCreate(&preference));
  const uint64_t workspace = kLtWorkspaceBytes;
  cublasStatus_t status = cublasLtMatmulPreferenceSetAttribute(
      preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof(workspace));
  cublasLtMatmulHeuristicResult_t result{};
  int found_count = 0;
  if (status == CUBLAS_STATUS_SUCCESS) {
    status = cublasLtMatmulAlgoGetHeuristic(handle, g.op, g.a, g.b, g.c, g.c, preference, 1,
                                            &result, &found_count);
  }
  cublasLtMatmulPreferenceDestroy(preference);
  REE_CUBLASLT_CHECK(status);
  if (found_count < 1) {
    return REE_FAIL(Status::kUnsupported,
                    "int linear row (cuda): cublasLtMatmulAlgoGetHeuristic found no int8 "
                    "algorithm for n=%lld rows=%lld k'=%lld",
                    static_cast<long long>(n_padded), static_cast<long long>(rows),
                    static_cast<long long>(depth));
  }
  std::lock_guard<std::mutex> lock(mutex);
  cache.emplace(key, result.algo);
  *out = result.algo;
  return Status::kSuccess;
}

// The rows a class GEMM computes for `real` rows of x (padding rows give zeros, never stored).
int64_t gemmRowsOf(int64_t real) {
  const int64_t rows = (real + kGemmRowPad - 1) / kGemmRowPad * kGemmRowPad;
  return rows < kGemmMinRows ? kGemmMinRows : rows;
}

// The planes and scratch of one GEMM-path call.
struct RowGemmArgs {
  const int8_t* x_planes;  // [m_padded][4 kp]
  const int8_t* w_planes;  // [n_padded][3 kp]
  int32_t* classes;        // [4][chunk_rows][n_padded]: c21, c14, c7, c0
  void* workspace;         // kLtWorkspaceBytes
  int64_t n_padded, kp, chunk_rows;
};

// C = x rows [row0, row0 + rows) . w over the class's ranges (offsets and depth in planes).
Status classGemm(cublasLtHandle_t handle, const RowGemmArgs& r, int64_t row0, int64_t rows,
                 int x_plane, int w_plane, int planes, int32_t* c, cudaStream_t stream) {
  const int64_t depth = planes * r.kp;
  LtGemm g;
  REE_RETURN_IF_ERROR(describeGemm(r.n_padded, rows, depth, r.kp, &g));
  cublasLtMatmulAlgo_t algo;
  REE_RETURN_IF_ERROR(gemmAlgorithm(handle, g, r.n_padded, rows, depth, r.kp, &algo));
  const int32_t alpha = 1, beta = 0;
  const int8_t* a = r.w_planes + w_plane * r.kp;
  const int8_t* b = r.x_planes + row0 * 4 * r.kp + x_plane * r.kp;
  REE_CUBLASLT_CHECK(cublasLtMatmul(handle, g.op, &alpha, a, g.a, b, g.b, &beta, c, g.c, c, g.c,
                                    &algo, r.workspace, kLtWorkspaceBytes, stream));
  return Status::kSuccess;
}

// The outputs of x rows [row0, row0 + rows) from the chunk's four class planes.
__global__ void classEpilogueKernel(RowOutputArgs out, const int32_t* __restrict__ classes,
                                    int64_t n_padded, int64_t chunk_rows, int row0, int rows) {
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  if (col >= out.n) return;
  const int64_t plane = chunk_rows * n_padded;
  for (int r = blockIdx.y; r < rows; r += gridDim.y) {
    const int32_t* c = classes + r * n_padded + col;
    storeRowOutput(out, row0 + r, col, c[0], c[plane], c[2 * plane], c[3 * plane]);
  }
}

// x rows per chunk (a multiple of 64): the four int32 class planes stay within
// kClassScratchBytes.
int64_t gemmChunkRows(int64_t m_padded, int64_t n_padded) {
  int64_t rows = kClassScratchBytes / (16 * n_padded) / kGemmChunkMultiple * kGemmChunkMultiple;
  rows = rows < kGemmChunkMultiple ? kGemmChunkMultiple : rows;
  rows = rows > kMaxChunkRows ? kMaxChunkRows : rows;
  return rows < m_padded ? rows : m_padded;
}

// Whether cuBLASLt can run every class GEMM of a call with m rows of x (a handle, and an
// algorithm for each shape: the full chunk and the last one), asked before anything is enqueued.
Status checkRowGemm(const RowGemmArgs& r, int64_t m) {
  cublasLtHandle_t handle = nullptr;
  REE_RETURN_IF_ERROR(ltHandle(&handle));
  const int64_t full = m < r.chunk_rows ? 0 : r.chunk_rows;
  const int64_t last_real = m % r.chunk_rows;
  const int64_t last = last_real == 0 ? 0 : gemmRowsOf(last_real);
  for (int64_t rows : {full, last}) {
    if (rows == 0) continue;
    for (int planes = 1; planes <= 3; ++planes) {
      LtGemm g;
      REE_RETURN_IF_ERROR(describeGemm(r.n_padded, rows, planes * r.kp, r.kp, &g));
      cublasLtMatmulAlgo_t algo;
      REE_RETURN_IF_ERROR(gemmAlgorithm(handle, g, r.n_padded, rows, planes * r.kp, r.kp, &algo));
    }
  }
  return Status::kSuccess;
}

// The four class GEMMs and the epilogue, chunk by chunk over the rows of x.
Status launchRowGemm(const RowGemmArgs& r, const RowOutputArgs& out, cudaStream_t stream) {
  cublasLtHandle_t handle = nullptr;
  REE_RETURN_IF_ERROR(ltHandle(&handle));
  const int64_t plane = r.chunk_rows * r.n_padded;
  for (int64_t row0 = 0; row0 < out.m; row0 += r.chunk_rows) {
    const int64_t real = out.m - row0 < r.chunk_rows ? out.m - row0 : r.chunk_rows;
    const int64_t rows = gemmRowsOf(real);
    // (x plane, w plane, planes) per class c21, c14, c7, c0.
    const int ranges[kClasses][3] = {{0, 2, 1}, {0, 1, 2}, {0, 0, 3}, {1, 0, 3}};
    for (int c = 0; c < kClasses; ++c) {
      REE_RETURN_IF_ERROR(classGemm(handle, r, row0, rows, ranges[c][0], ranges[c][1], ranges[c][2],
                                    r.classes + c * plane, stream));
    }
    constexpr int kThreads = 256;
    dim3 grid(static_cast<unsigned>((out.n + kThreads - 1) / kThreads),
              static_cast<unsigned>(real < 65535 ? real : 65535));
    classEpilogueKernel<<<grid, kThreads, 0, stream>>>(
        out, r.classes, r.n_padded, r.chunk_rows, static_cast<int>(row0), static_cast<int>(real));
    REE_CUDA_CHECK_LAUNCH();
  }
  return Status::kSuccess;
}

}  // namespace
}  // namespace ree::repops::cuda
