// Host integer vectors (token ids, positions, a step's batch layout) as ATen tensors on the
// operation set's device. The engine passes the same vectors to every layer of a step, so each
// distinct vector is uploaded once and reused; the upload goes through pinned memory with a
// non-blocking copy, because a copy from pageable memory makes the host wait for the GPU (ATen
// synchronises the stream after it), which would serialise the host and the GPU at every layer.
// Internal header of the ATen sets (LibTorch types).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

namespace ree {
namespace aten_ops {

// `values` as an int32 tensor on `device`, never waiting for the device.
at::Tensor uploadInts(const std::vector<int32_t>& values, const at::Device& device);

// The last upload, reused while the host vector is unchanged (one compare per call).
class UploadCache {
 public:
  explicit UploadCache(const at::Device& device) : device_(device) {}
  const at::Tensor& get(const std::vector<int32_t>& values);

 private:
  at::Device device_;
  bool valid_ = false;
  std::vector<int32_t> host_;
  at::Tensor uploaded_;
};

}  // namespace aten_ops
}  // namespace ree
