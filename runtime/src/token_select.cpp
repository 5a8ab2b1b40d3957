#include "ree/runtime/token_select.h"

#include <algorithm>
#include <cstring>

#if defined(REE_WITH_CUDA)
#include <cuda_runtime.h>

#include "scoped_device.h"
#endif

namespace ree {
namespace {

// int32 ids in a tensor of 4-byte elements on `device`, grown to at least `rows`.
Status ensureIdBuffer(Device device, int64_t rows, bool pinned, Tensor* buffer) {
  static_assert(sizeof(float) == sizeof(int32_t), "ids are stored in 4-byte elements");
  if (buffer->defined() && buffer->numel() >= rows && buffer->device() == device) {
    return Status::kSuccess;
  }
  *buffer = Tensor();
  return pinned ? Tensor::pinnedHost(DType::kF32, {rows}, buffer)
                : Tensor::empty(device, DType::kF32, {rows}, buffer);
}

}  // namespace

Status TokenSelection::prepare(const Tensor& logits) {
  REE_CHECK_ARG(
      logits.rank() == 2 && logits.dtype() == DType::kF32 && logits.dim(0) > 0 && logits.dim(1) > 0,
      "TokenSelection: logits must be fp32 [rows >= 1, vocab >= 1], got %s",
      logits.describe().c_str());
  rows_ = 0;                          // until this start has queued or computed its ids
  REE_RETURN_IF_ERROR(copy_.wait());  // the last start's ids, if never waited for
  const int64_t rows = logits.dim(0);
  on_cpu_ = !logits.device().isCuda();
  if (on_cpu_) {
    cpu_ids_.resize(static_cast<size_t>(rows));
    return Status::kSuccess;
  }
  REE_RETURN_IF_ERROR(ensureIdBuffer(logits.device(), rows, false, &device_ids_));
  return ensureIdBuffer(Device::cpu(), rows, true, &host_ids_);
}

Status TokenSelection::queueCopy(int64_t rows) {
  REE_RETURN_IF_ERROR(
      PendingCopy::start(device_ids_.rows(0, rows), host_ids_.rows(0, rows), &copy_));
  rows_ = rows;
  return Status::kSuccess;
}

Status TokenSelection::startArgmax(const Tensor& logits) {
  REE_RETURN_IF_ERROR(prepare(logits));
  const int64_t rows = logits.dim(0), vocab = logits.dim(1);
  if (on_cpu_) {
    REE_RETURN_IF_ERROR(repops::cpu::argmax(logits.as<float>(), rows, vocab, cpu_ids_.data()));
    rows_ = rows;
    return Status::kSuccess;
  }
#if defined(REE_WITH_CUDA)
  {
    ScopedDevice scope(logits.device().index);
    REE_RETURN_IF_ERROR(repops::cuda::argmax(logits.as<float>(), rows, vocab,
                                             device_ids_.as<int32_t>(), cudaStreamLegacy));
  }
  return queueCopy(rows);
#else
  return REE_FAIL(Status::kUnsupported, "REE was built without CUDA");
#endif
}

Status TokenSelection::startSample(const Tensor& logits,
                                   const std::vector<repops::SamplingParams>& params) {
  REE_RETURN_IF_ERROR(prepare(logits));
  const int64_t rows = logits.dim(0), vocab = logits.dim(1);
  REE_CHECK_ARG(static_cast<int64_t>(params.size()) == rows,
                "TokenSelection: %zu sampling parameters for %lld rows", params.size(),
                static_cast<long long>(rows));
  if (on_cpu_) {
    REE_RETURN_IF_ERROR(
        repops::cpu::sample(logits.as<float>(), rows, vocab, params.data(), cpu_ids_.data()));
    rows_ = rows;
    return Status::kSuccess;
  }
#if defined(REE_WITH_CUDA)
  {
    // Row chunks of at most 2^26 logits (a long replay's rows): the CUDA sampler takes at most
    // 2^31 - 1 a call and needs about 28 bytes of scratch per logit (keys, sorted keys, weights
    // and the sort's buffer), so a chunk's scratch stays under 2 GB. Rows are independent: the
    // chunking never changes a token.
    ScopedDevice scope(logits.device().index);
    constexpr int64_t kChunkLogits = int64_t{1} << 26;
    const int64_t chunk = std::max<int64_t>(1, kChunkLogits / vocab);
    for (int64_t begin = 0; begin < rows; begin += chunk) {
      const int64_t count = std::min(chunk, rows - begin);
      REE_RETURN_IF_ERROR(repops::cuda::sample(
          logits.as<float>() + begin * vocab, count, vocab, params.data() + begin,
          device_ids_.as<int32_t>() + begin, cudaStreamLegacy));
    }
  }
  return queueCopy(rows);
#else
  return REE_FAIL(Status::kUnsupported, "REE was built without CUDA");
#endif
}

Status TokenSelection::wait(std::vector<int32_t>* tokens) {
  REE_CHECK_ARG(tokens != nullptr, "TokenSelection::wait: tokens is null");
  REE_CHECK_ARG(rows_ > 0, "TokenSelection::wait: no start");
  REE_RETURN_IF_ERROR(copy_.wait());
  if (on_cpu_) {
    *tokens = cpu_ids_;
  } else {
    tokens->resize(static_cast<size_t>(rows_));
    std::memcpy(tokens->data(), host_ids_.data(), static_cast<size_t>(rows_) * sizeof(int32_t));
  }
  return Status::kSuccess;
}

const int32_t* TokenSelection::ids() const {
  if (rows_ == 0) return nullptr;
  return on_cpu_ ? cpu_ids_.data() : device_ids_.as<int32_t>();
}

}  // namespace ree
