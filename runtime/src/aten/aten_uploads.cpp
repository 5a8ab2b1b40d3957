// Uploads of host integer vectors for the ATen operation sets (see aten_uploads.h).
#if defined(REE_WITH_TORCH)

#include "aten_uploads.h"

#include <cstring>

namespace ree {
namespace aten_ops {

at::Tensor uploadInts(const std::vector<int32_t>& values, const at::Device& device) {
  const int64_t count = static_cast<int64_t>(values.size());
  if (device.is_cpu()) {
    return at::from_blob(const_cast<int32_t*>(values.data()), {count}, at::kInt).clone();
  }
  // The caching host allocator keeps the pinned block alive until the copy that reads it has
  // finished on the stream, so the host may return at once.
  at::Tensor pinned = at::empty({count}, at::TensorOptions().dtype(at::kInt).pinned_memory(true));
  if (count > 0) std::memcpy(pinned.data_ptr<int32_t>(), values.data(), values.size() * 4);
  return pinned.to(device, /*non_blocking=*/true);
}

const at::Tensor& UploadCache::get(const std::vector<int32_t>& values) {
  if (!valid_ || values != host_) {
    uploaded_ = uploadInts(values, device_);
    host_ = values;
    valid_ = true;
  }
  return uploaded_;
}

}  // namespace aten_ops
}  // namespace ree

#endif  // REE_WITH_TORCH
