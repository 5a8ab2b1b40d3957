// CUDA linear layer (docs/repops-spec/linear.md): three kernels with the same bits.
//
// GEMV, M <= 4: a block owns up to 32 output features (one per lane; fewer with one row of x, so
// that every SM gets the same number of weight rows) and walks k in stages of 128-wide chunks;
// each warp computes one chunk of its rows for up to 4 rows of x, each lane running the chunk's
// fma chain in order. The stage's weights arrive in shared memory through a
// per-warp cp.async pipeline (coalesced 16-byte copies, each weight byte read once for all rows of
// x), and after each round one thread per output merges the warps' chunk partials into its running
// total, in chunk order, exactly as reduce.h's ChunkMerge.
//
// GEMV, 5 <= M <= 16 (and row blocks of 16 beyond): the same block and merge, but a lane owns four
// features and a warp four chunks, so that each x value read from shared memory serves four fmas.
//
// GEMM (large M): a 128x128 output tile per block, 8x8 outputs per thread, k tiles of 16 staged in
// shared memory as fp32 (double-buffered through registers). Every thread walks k in increasing
// order with one fma chain per output; at each 128 boundary the chunk partial is added to the
// output's total, which is kept in shared memory so that two blocks fit per SM. fp32 FFMA on CUDA
// cores only: tensor cores do not round like IEEE fma.
//
// This file holds the entry points (linear, linearWithKernel): argument checks, the device
// argument block and the choice of kernel. The kernels and their launches are in
// linear_common.cuh (argument block, output store, loads), linear_gemv.cuh (M <= 4),
// linear_gemv4.cuh (M >= 5), linear_gemv_launch.cuh (GEMV launch shapes) and linear_gemm.cuh,
// included here: one translation unit, as before the split.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <mutex>

#include "chained_launch.cuh"
#include "common/dtype_dispatch.h"
#include "grid.cuh"
#include "ree/core/cuda_check.h"
#include "ree/kernels/linear.h"
#include "ree/kernels/reduce.h"
#include "shared_memory.cuh"

// clang-format off
#include "linear_common.cuh"
#include "linear_gemv.cuh"
#include "linear_gemv4.cuh"
#include "linear_gemv_launch.cuh"
#include "linear_gemm.cuh"
// clang-format on

namespace ree::repops::cuda {
namespace {

// Up to this many rows of x, kAuto runs the GEMV (row blocks of 16, launched together, each
// streaming the weights through L2) rather than the GEMM, whose 128 x 128 tiles leave most SMs
// idle at decode batch sizes: at M = 64 and N = 4096 the GEMM has 32 blocks for 132 SMs, and a
// batch-64 decode step of the Llama-3-8B shape was 9x a batch-16 one (H100). Both kernels give the
// same bits (the spec fixes every output's order; tested against the CPU). Measured crossover:
// bench_gpu_linear_bench's "batched decode" rows (docs/benchmarks.md).
constexpr int kAutoGemvMaxRows = 64;

template <typename TW, typename TX>
Status dispatchKernel(const DeviceArgs& a, LinearKernel kernel, cudaStream_t stream) {
  bool gemv_ok = aligned16(a.x, a.x_stride, sizeof(TX)) && aligned16(a.w, a.w_stride, sizeof(TW));
  if (kernel == LinearKernel::kGemv) {
    if (!gemv_ok) {
      return REE_FAIL(Status::kUnsupported,
                      "linear: the GEMV kernel needs 16-byte aligned x and w rows (pointer and "
                      "row stride in bytes)");
    }
    return dispatchGemv<TW, TX>(a, stream);
  }
  if (kernel == LinearKernel::kAuto && gemv_ok && a.m <= kAutoGemvMaxRows) {
    return dispatchGemv<TW, TX>(a, stream);
  }
  return launchGemm<TW, TX>(a, stream);
}

template <typename TW>
Status dispatchX(const DeviceArgs& a, DType x_dtype, LinearKernel kernel, cudaStream_t stream) {
  if (x_dtype == DType::kBF16) return dispatchKernel<TW, bf16_t>(a, kernel, stream);
  return dispatchKernel<TW, float>(a, kernel, stream);
}

}  // namespace

Status linearWithKernel(const LinearArgs& args, LinearKernel kernel, cudaStream_t stream) {
  REE_RETURN_IF_ERROR(validateLinearArgs(args));
  REE_CHECK_ARG(kernel == LinearKernel::kAuto || kernel == LinearKernel::kGemv ||
                    kernel == LinearKernel::kGemm,
                "linear: unknown kernel %d", static_cast<int>(kernel));
  if (args.m == 0) return Status::kSuccess;
  DeviceArgs a;
  a.x = args.x;
  a.w = args.w;
  a.bias = args.bias;
  a.y = args.y;
  a.x_stride = args.x_row_stride ? args.x_row_stride : args.k;
  a.w_stride = args.w_row_stride ? args.w_row_stride : args.k;
  a.y_stride = args.y_row_stride ? args.y_row_stride : args.n;
  a.m = static_cast<int>(args.m);
  a.n = static_cast<int>(args.n);
  a.k = static_cast<int>(args.k);
  a.bias_kind = kNoBias;
  if (args.bias) {
    a.bias_kind = args.bias_dtype == DType::kF32    ? kBiasF32
                  : args.bias_dtype == DType::kBF16 ? kBiasBF16
                                                    : kBiasF16;
  }
  a.y_is_bf16 = args.y_dtype == DType::kBF16 ? 1 : 0;
  a.w_is_constant = args.w_is_constant ? 1 : 0;
  a.accumulate = args.accumulate ? 1 : 0;
  return dispatchStorageType(args.w_dtype, "linear", [&](auto w_tag) {
    return dispatchX<decltype(w_tag)>(a, args.x_dtype, kernel, stream);
  });
}

Status linear(const LinearArgs& args, cudaStream_t stream) {
  return linearWithKernel(args, LinearKernel::kAuto, stream);
}

}  // namespace ree::repops::cuda
