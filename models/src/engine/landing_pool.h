// Host buffers the last stage's logits land in, reused across steps.
//
// A step's logits rows (0.5 MB a row at a 128k vocabulary) are copied into a buffer of this pool,
// sampled or only hashed from there, and handed to the digester, which lets go of the buffer once
// its rows are hashed: no second host copy, and no allocation per step. From a GPU the buffers
// are page-locked (a copy into pageable memory goes through the driver's staging buffer and a
// second host copy; a page-locked allocation costs far more than a copy, hence the reuse).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "ree/core/status.h"
#include "ree/runtime/tensor.h"

namespace ree::models {

class LandingPool {
 public:
  // The most bytes kept between steps (default: a few steps' buffers at a 64-row batch and a 128k
  // vocabulary, 33.5 MB each). A buffer that would pass it (a long replay's rows) is freed when it
  // comes back, not held page-locked for the engine's life.
  static constexpr int64_t kDefaultMaxPooledBytes = int64_t{512} << 20;
  explicit LandingPool(int64_t max_pooled_bytes = kDefaultMaxPooledBytes);

  // *out: a free fp32 buffer of at least `floats` elements (page-locked when `pinned`). It goes
  // back to the pool when the last copy of *out is gone, on whichever thread drops it, unless the
  // pool would then hold more than its limit (then it is freed).
  Status take(int64_t floats, bool pinned, std::shared_ptr<Tensor>* out);

  // Buffers waiting in the pool (tests).
  size_t freeBuffers() const;

 private:
  struct Buffer {
    Tensor tensor;
    bool pinned = false;
  };
  struct State {
    mutable std::mutex mutex;
    std::vector<Buffer> free;
    int64_t free_bytes = 0;  // of the buffers in `free`
    int64_t max_bytes = 0;
  };
  std::shared_ptr<State> state_;  // shared with the handles' deleters, which may outlive the pool
};

}  // namespace ree::models
