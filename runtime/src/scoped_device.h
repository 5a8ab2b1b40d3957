// The calling thread's current CUDA device for one scope (runtime sources built with CUDA only).
#pragma once

#include <cuda_runtime.h>

namespace ree {

// Makes `device` current for the scope (a negative index leaves the current device alone), so
// legacy-stream work lands on that device's legacy stream. A failure here leaves the device as
// it was and is cleared from the thread's last error (so that no later launch check reports it
// as its own); the calls made under the scope then fail or land where they would have anyway.
class ScopedDevice {
 public:
  explicit ScopedDevice(int device) : device_(device) {
    if (device_ < 0) return;
    if (cudaGetDevice(&previous_) != cudaSuccess) {
      cudaGetLastError();
      device_ = -1;
    } else if (previous_ != device_ && cudaSetDevice(device_) != cudaSuccess) {
      cudaGetLastError();
      device_ = -1;
    }
  }
  ~ScopedDevice() {
    if (device_ >= 0 && previous_ != device_) cudaSetDevice(previous_);
  }
  ScopedDevice(const ScopedDevice&) = delete;
  ScopedDevice& operator=(const ScopedDevice&) = delete;

 private:
  int device_;
  int previous_ = -1;
};

}  // namespace ree
