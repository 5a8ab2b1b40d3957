#include "ree/runtime/pending_copy.h"

#include <utility>

#if defined(REE_WITH_CUDA)
#include <cuda_runtime.h>

#include "ree/core/cuda_check.h"
#include "scoped_device.h"
#endif

namespace ree {

PendingCopy::~PendingCopy() {
  wait();  // a failure was the copy's own; a destructor has no one to tell
}

PendingCopy::PendingCopy(PendingCopy&& other) noexcept
    : event_(std::exchange(other.event_, nullptr)),
      device_(other.device_),
      src_(std::move(other.src_)),
      dst_(std::move(other.dst_)) {}

PendingCopy& PendingCopy::operator=(PendingCopy&& other) noexcept {
  if (this != &other) {
    wait();
    event_ = std::exchange(other.event_, nullptr);
    device_ = other.device_;
    src_ = std::move(other.src_);
    dst_ = std::move(other.dst_);
  }
  return *this;
}

Status PendingCopy::start(const Tensor& src, const Tensor& dst, PendingCopy* out) {
  REE_CHECK_ARG(out != nullptr, "PendingCopy::start: out is null");
  REE_CHECK_ARG(!dst.device().isCuda(), "PendingCopy::start: the destination %s is not host memory",
                dst.describe().c_str());
  REE_RETURN_IF_ERROR(out->wait());
  if (!src.device().isCuda() || src.nbytes() == 0) return copyTensor(src, dst);
#if defined(REE_WITH_CUDA)
  REE_CHECK_ARG(src.dtype() == dst.dtype() && src.numel() == dst.numel(),
                "PendingCopy::start: %s into %s (dtype and element count must match)",
                src.describe().c_str(), dst.describe().c_str());
  ScopedDevice scope(src.device().index);
  cudaEvent_t event = nullptr;
  REE_CUDA_CHECK_MSG(cudaEventCreateWithFlags(&event, cudaEventDisableTiming),
                     "creating the event of a copy from %s", src.device().str().c_str());
  cudaError_t err = cudaMemcpyAsync(dst.data(), src.data(), src.nbytes(), cudaMemcpyDeviceToHost,
                                    cudaStreamLegacy);
  if (err == cudaSuccess) err = cudaEventRecord(event, cudaStreamLegacy);
  if (err != cudaSuccess) {
    cudaEventDestroy(event);
    REE_CUDA_CHECK_MSG(err, "copy %s -> %s", src.describe().c_str(), dst.describe().c_str());
  }
  out->event_ = event;
  out->device_ = src.device().index;
  out->src_ = src;
  out->dst_ = dst;
  return Status::kSuccess;
#else
  return REE_FAIL(Status::kUnsupported, "REE was built without CUDA");
#endif
}

Status PendingCopy::wait() {
  if (event_ == nullptr) return Status::kSuccess;
#if defined(REE_WITH_CUDA)
  ScopedDevice scope(device_);
  cudaEvent_t event = static_cast<cudaEvent_t>(event_);
  const cudaError_t err = cudaEventSynchronize(event);
  cudaEventDestroy(event);
  event_ = nullptr;
  const Tensor src = std::exchange(src_, Tensor());
  dst_ = Tensor();
  REE_CUDA_CHECK_MSG(err, "copy %s -> host", src.describe().c_str());
#endif
  return Status::kSuccess;
}

}  // namespace ree
