// Helpers of the C++ torch operators torch.ops.ree.* (torch_ops_*.cpp): argument checks that raise
// the same Python exceptions and one-line messages as ree/ops.py's checks, the RepOps dtype of a
// tensor, the CPU-or-CUDA choice of a call (the current CUDA stream of the tensors' device) and
// ree::Status -> c10::Error.
#pragma once

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/util/Exception.h>

#include <initializer_list>
#include <string>
#include <utility>

#include "ree/core/status.h"
#include "ree/kernels/numeric.h"

#if REE_WITH_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace ree::torch_ops {

// torch's name of a dtype without "torch." (float32, bfloat16, int64, ...), as Python prints it.
std::string dtypeText(at::ScalarType dtype);

// A shape as Python prints a tuple: (3, 4), (5,), ().
std::string shapeText(at::IntArrayRef shape);

// The RepOps dtype of `t` (f32/bf16/f16); TypeError "ree.ops.<op>: <name> has dtype ..." otherwise.
DType dtypeOf(const char* op, const char* name, const at::Tensor& t);

inline DType dtypeOf(at::ScalarType dtype) {
  return dtype == at::kBFloat16 ? DType::kBF16 : dtype == at::kHalf ? DType::kF16 : DType::kF32;
}

// The one device of an operator's tensors (undefined entries are absent inputs): ValueError naming
// each tensor's device when they differ, or when it is neither the CPU nor CUDA.
using NamedTensor = std::pair<const char*, const at::Tensor*>;
at::Device deviceOf(const char* op, std::initializer_list<NamedTensor> tensors);

// x's last dimension, at least 1 element (ValueError otherwise).
int64_t lastDim(const char* op, const at::Tensor& x);

// Raises the thread's last REE error: ValueError for bad arguments, RuntimeError otherwise.
inline void check(Status status) {
  if (status == Status::kSuccess) return;
  TORCH_CHECK_VALUE(status != Status::kInvalidArgument, lastErrorMessage());
  TORCH_CHECK(false, lastErrorMessage());
}

[[noreturn]] void cudaUnavailable();

// The Autograd kernel of every operator (torch_ops_library.cpp): runs it below autograd; outputs of
// inputs requiring grad get a backward that raises (the RepOps are forward only).
void forwardOnly(const c10::OperatorHandle& op, c10::DispatchKeySet keys, torch::jit::Stack* stack);

// x converted to `dtype` by the RepOps cast (one RNE rounding, NaN canonical); x contiguous.
at::Tensor castRaw(const at::Tensor& x, at::ScalarType dtype);

}  // namespace ree::torch_ops

// Runs CPU_CALL for a CPU `device`, else CUDA_CALL (which may use `cuda_stream`, the current stream
// of `device`, made the current device meanwhile), and raises on failure. Without CUDA the GPU
// branch raises.
#if REE_WITH_CUDA
#define REE_TORCH_RUN(device, CPU_CALL, CUDA_CALL)                    \
  do {                                                                \
    if ((device).is_cpu()) {                                          \
      ::ree::torch_ops::check(CPU_CALL);                              \
    } else {                                                          \
      c10::cuda::CUDAGuard device_guard(device);                      \
      [[maybe_unused]] cudaStream_t cuda_stream =                     \
          c10::cuda::getCurrentCUDAStream((device).index()).stream(); \
      ::ree::torch_ops::check(CUDA_CALL);                             \
    }                                                                 \
  } while (0)
#else
#define REE_TORCH_RUN(device, CPU_CALL, CUDA_CALL) \
  do {                                             \
    if ((device).is_cpu()) {                       \
      ::ree::torch_ops::check(CPU_CALL);           \
    } else {                                       \
      ::ree::torch_ops::cudaUnavailable();         \
    }                                              \
  } while (0)
#endif
