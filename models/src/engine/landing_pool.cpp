#include "landing_pool.h"

#include <utility>

namespace ree::models {

LandingPool::LandingPool() : state_(std::make_shared<State>()) {}

Status LandingPool::take(int64_t floats, bool pinned, std::shared_ptr<Tensor>* out) {
  REE_CHECK_ARG(out != nullptr && floats > 0, "LandingPool::take: %lld floats",
                static_cast<long long>(floats));
  Buffer buffer;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    std::vector<Buffer>& free = state_->free;
    while (!free.empty() && !buffer.tensor.defined()) {
      Buffer candidate = std::move(free.back());
      free.pop_back();
      // A buffer too small for this step (the batch grew) or of the other kind is dropped.
      if (candidate.pinned == pinned && candidate.tensor.numel() >= floats) {
        buffer = std::move(candidate);
      }
    }
  }
  if (!buffer.tensor.defined()) {
    buffer.pinned = pinned;
    REE_RETURN_IF_ERROR(
        pinned ? Tensor::pinnedHost(::ree::DType::kF32, {floats}, &buffer.tensor)
               : Tensor::empty(Device::cpu(), ::ree::DType::kF32, {floats}, &buffer.tensor));
  }
  const bool kind = buffer.pinned;
  std::shared_ptr<State> state = state_;
  *out = std::shared_ptr<Tensor>(new Tensor(std::move(buffer.tensor)), [state, kind](Tensor* t) {
    std::lock_guard<std::mutex> lock(state->mutex);
    state->free.push_back({std::move(*t), kind});
    delete t;
  });
  return Status::kSuccess;
}

size_t LandingPool::freeBuffers() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->free.size();
}

}  // namespace ree::models
