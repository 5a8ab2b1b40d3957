// Helpers shared by the binding files of ree._C: Status -> Python exception, raw tensor pointers
// from Python integers, and the CPU-or-CUDA choice of a call.
#pragma once

#include <nanobind/nanobind.h>

#include <cstdint>
#include <stdexcept>

#include "ree/core/status.h"
#include "ree/kernels/numeric.h"

namespace ree::python {

// Raises the thread's last REE error as a Python exception: ValueError for bad arguments (the
// message names the argument and its limit), RuntimeError otherwise.
inline void check(Status status) {
  if (status == Status::kSuccess) return;
  if (status == Status::kInvalidArgument) throw nanobind::value_error(lastErrorMessage());
  throw std::runtime_error(lastErrorMessage());
}

// A tensor's data_ptr() as passed from Python (0 means absent).
template <typename T = void>
inline T* pointer(uint64_t address) {
  return reinterpret_cast<T*>(static_cast<uintptr_t>(address));
}

inline DType dtypeFromCode(int code) {
  if (code < 0 || code > 2)
    throw nanobind::value_error("ree._C: dtype code must be 0 (f32), 1 (bf16) or 2 (f16)");
  return static_cast<DType>(code);
}

// `stream` < 0: the call runs on the CPU (host pointers); otherwise the value of a cudaStream_t
// (torch.cuda.current_stream().cuda_stream) and device pointers of the current device.
inline bool onCpu(int64_t stream) {
  return stream < 0;
}

inline cudaStream_t cudaStream(int64_t stream) {
  return reinterpret_cast<cudaStream_t>(static_cast<uintptr_t>(stream));
}

// For builds without CUDA: what a CUDA tensor gets.
[[noreturn]] inline void cudaUnavailable() {
  throw std::runtime_error(
      "ree: this build of ree._C has no CUDA kernels (rebuild with nvcc "
      "available, REE_CUDA=AUTO or ON)");
}

}  // namespace ree::python

// Runs CPU_CALL on the CPU or CUDA_CALL (which may use `cuda_stream`) on the GPU and raises on
// failure. Without CUDA the GPU branch is compiled out.
#if REE_WITH_CUDA
#define REE_PY_RUN(stream, CPU_CALL, CUDA_CALL)                                      \
  do {                                                                               \
    if (::ree::python::onCpu(stream)) {                                              \
      ::ree::python::check(CPU_CALL);                                                \
    } else {                                                                         \
      [[maybe_unused]] cudaStream_t cuda_stream = ::ree::python::cudaStream(stream); \
      ::ree::python::check(CUDA_CALL);                                               \
    }                                                                                \
  } while (0)
#else
#define REE_PY_RUN(stream, CPU_CALL, CUDA_CALL) \
  do {                                          \
    if (::ree::python::onCpu(stream)) {         \
      ::ree::python::check(CPU_CALL);           \
    } else {                                    \
      ::ree::python::cudaUnavailable();         \
    }                                           \
  } while (0)
#endif
