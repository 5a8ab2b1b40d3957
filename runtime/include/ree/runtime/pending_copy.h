// Device-to-host copies the host waits for only when it reads the bytes.
//
// The engine's last stage copies a step's sampled tokens and its logits rows to the host. The
// tokens gate the next step; the logits are only hashed (and read for log-probabilities), so
// their copy need not hold the host back: it completes on the GPU while the host schedules the
// next step.
#pragma once

#include "ree/core/status.h"
#include "ree/runtime/tensor.h"

namespace ree {

class PendingCopy {
 public:
  PendingCopy() = default;
  ~PendingCopy();  // waits for a copy still in flight (its errors are dropped)
  PendingCopy(PendingCopy&& other) noexcept;
  PendingCopy& operator=(PendingCopy&& other) noexcept;
  PendingCopy(const PendingCopy&) = delete;
  PendingCopy& operator=(const PendingCopy&) = delete;

  // Copies `src` into the host tensor `dst` (same dtype and element count). From a GPU the copy
  // is queued on the legacy default stream of src's device, after the work queued there, and an
  // event marks its end; `dst` should be page-locked (Tensor::pinnedHost), else the driver
  // stages the bytes and the copy may finish before start() returns. From the CPU it is done at
  // once. Both tensors are kept alive until the copy is waited for.
  static Status start(const Tensor& src, const Tensor& dst, PendingCopy* out);

  // Blocks until the bytes are in `dst`; then nothing is pending. At once when nothing is.
  Status wait();
  bool pending() const { return event_ != nullptr; }

 private:
  void* event_ = nullptr;  // cudaEvent_t recorded after the copy; null: complete
  int device_ = -1;
  Tensor src_, dst_;
};

}  // namespace ree
