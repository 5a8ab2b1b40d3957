// The calling thread's current CUDA device for one scope (runtime sources built with CUDA only).
#pragma once

#include <cuda_runtime.h>

namespace ree {

// Makes `device` current for the scope (a negative index leaves the current device alone), so
// legacy-stream work lands on that device's legacy stream.
class ScopedDevice {
 public:
  explicit ScopedDevice(int device) : device_(device) {
    if (device_ < 0) return;
    cudaGetDevice(&previous_);
    if (previous_ != device_) cudaSetDevice(device_);
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
