#include "landing_pool.h"

#include <utility>

namespace ree::models {

LandingPool::LandingPool(int64_t max_pooled_bytes) : state_(std::make_shared<State>()) {
  state_->max_bytes = max_pooled_bytes;
}

Status LandingPool::take(int64_t floats, bool pinned, std::shared_ptr<Tensor>* out) {
  REE_CHECK_ARG(out != nullptr && floats > 0, "LandingPool::take: %lld floats",
                static_cast<long long>(floats));
  Buffer buffer;
  std::vector<Buffer> dropped;  // freed after the lock (freeing page-locked memory is slow)
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    std::vector<Buffer>& free = state_->free;
    while (!free.empty() && !buffer.tensor.defined()) {
      Buffer candidate = std::move(free.back());
      free.pop_back();
      state_->free_bytes -= candidate.tensor.nbytes();
      // A buffer too small for this step (the batch grew) or of the other kind is dropped.
      if (candidate.pinned == pinned && candidate.tensor.numel() >= floats) {
        buffer = std::move(candidate);
      } else {
        dropped.push_back(std::move(candidate));
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
    {
      std::lock_guard<std::mutex> lock(state->mutex);
      const int64_t bytes = static_cast<int64_t>(t->nbytes());
      if (state->free_bytes + bytes <= state->max_bytes) {
        state->free_bytes += bytes;
        state->free.push_back({std::move(*t), kind});
      }
    }
    delete t;  // frees the buffer unless the pool kept it
  });
  return Status::kSuccess;
}

size_t LandingPool::freeBuffers() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->free.size();
}

}  // namespace ree::models
