// Tensors of the runtime: a dense row-major array on one device (CPU or a CUDA GPU).
//
// Deliberately small: the models need contiguous activations, weights and caches, views of row
// ranges, and copies between devices. Storage is reference counted; views share it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ree/core/status.h"
#include "ree/kernels/numeric.h"

namespace ree {

struct Device {
  enum class Kind : int { kCpu = 0, kCuda = 1 };
  Kind kind = Kind::kCpu;
  int index = 0;

  static Device cpu() { return Device{}; }
  static Device cuda(int index) { return Device{Kind::kCuda, index}; }
  bool isCuda() const { return kind == Kind::kCuda; }
  bool operator==(const Device& other) const {
    return kind == other.kind && (kind == Kind::kCpu || index == other.index);
  }
  bool operator!=(const Device& other) const { return !(*this == other); }
  // "cpu" or "cuda:N".
  std::string str() const;
};

// Parses "cpu", "cuda" (= cuda:0) or "cuda:N"; checks N against the visible GPUs.
Status parseDevice(const std::string& text, Device* out);

// Makes `device` the calling thread's current CUDA device (a no-op for the CPU). Operation sets
// launch on the current device, so a process running stages on several GPUs switches per stage.
Status setCurrentDevice(Device device);

// Total memory of a device: the GPU's global memory, or the host's physical memory for the CPU.
Status deviceMemoryBytes(Device device, int64_t* total);
// Memory an allocation can still get: a GPU's free memory now (cudaMemGetInfo); for the CPU, the
// host's available memory (core/device.h hostAvailableMemoryBytes: MemAvailable and the cgroup
// limit).
Status deviceFreeMemoryBytes(Device device, int64_t* free);

class Tensor {
 public:
  Tensor() = default;

  // New uninitialised storage (CPU: 64-byte aligned). CUDA: from device.index's default memory
  // pool, allocated and freed in the order of the legacy default stream (cudaMallocAsync /
  // cudaFreeAsync on cudaStreamLegacy), so it needs no device-wide synchronisation; work on a
  // non-blocking stream must wait for the legacy stream before it uses a new tensor.
  static Status empty(Device device, DType dtype, std::vector<int64_t> shape, Tensor* out);
  // Uninitialised host (CPU) storage in page-locked memory (cudaMallocHost) when REE has CUDA, so
  // that a copy from a GPU lands in it directly instead of through the driver's staging buffer and
  // a second host copy; plain host memory without CUDA. For buffers reused across steps: a
  // page-locked allocation costs far more than a copy.
  static Status pinnedHost(DType dtype, std::vector<int64_t> shape, Tensor* out);
  // Same, filled with zero bytes.
  static Status zeros(Device device, DType dtype, std::vector<int64_t> shape, Tensor* out);
  // A non-owning view of memory the caller keeps alive.
  static Tensor wrap(void* data, Device device, DType dtype, std::vector<int64_t> shape);

  // False for a default-constructed tensor (and for views of nothing).
  bool defined() const { return data_ != nullptr; }
  void* data() const { return data_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  int rank() const { return static_cast<int>(shape_.size()); }
  int64_t dim(int i) const { return shape_[i < 0 ? shape_.size() + i : i]; }
  int64_t numel() const;
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtypeSize(dtype_); }
  // "bf16[4096, 128] on cuda:0"
  std::string describe() const;

  // View of rows [begin, begin + count) along dimension 0 (shares storage).
  Tensor rows(int64_t begin, int64_t count) const;
  // View with another shape of the same number of elements (shares storage).
  Tensor reshaped(std::vector<int64_t> shape) const;

 private:
  std::shared_ptr<void> storage_;
  void* data_ = nullptr;
  DType dtype_ = DType::kF32;
  Device device_;
  std::vector<int64_t> shape_;
};

// Copies all bytes of `src` into `dst` (same dtype and element count, any devices). With CUDA
// involved the copy is ordered on `stream`; nullptr means the legacy default stream of the GPU
// whose work the copy must follow (the source's when it is on a GPU, else the destination's).
// Synchronous for device-to-host copies and, on the legacy stream, for copies between GPUs.
Status copyTensor(const Tensor& src, const Tensor& dst, cudaStream_t stream = nullptr);

// Copies columns [col_begin, col_begin + dst.dim(1)) of every row of the 2-D `src` into the dense
// 2-D `dst` (same dtype, device and row count): splits the output of a fused projection. Ordered
// on `stream` like copyTensor (both tensors on the same device).
Status copyColumns(const Tensor& src, int64_t col_begin, const Tensor& dst,
                   cudaStream_t stream = nullptr);

// Copies `src` to a new tensor on `device`.
Status toDevice(const Tensor& src, Device device, Tensor* out, cudaStream_t stream = nullptr);

}  // namespace ree
