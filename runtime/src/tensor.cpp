#include "ree/runtime/tensor.h"

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sstream>

#include "ree/core/device.h"

#if defined(REE_WITH_CUDA)
#include <cuda_runtime.h>

#include "ree/core/cuda_check.h"
#include "scoped_device.h"
#endif

namespace ree {

#if defined(REE_WITH_CUDA)
namespace {

// Device tensors come from the device's default memory pool, allocated and freed in the order of
// the legacy default stream. Every operation set and copy in REE queues its work on that stream
// or on a blocking stream (ordered with it), so a free is ordered after the work queued before
// it without a device-wide synchronisation (cudaFree imposes one per tensor), and freed blocks
// are reused from the pool instead of going back to the driver (release threshold: unlimited).
// The NCCL transport's own streams wait for the legacy stream before they touch a tensor.
Status configureDevicePool(int device) {
  static std::mutex mutex;
  static uint64_t configured = 0;
  std::lock_guard<std::mutex> lock(mutex);
  if (device < 64 && (configured & (1ull << device))) return Status::kSuccess;
  cudaMemPool_t pool = nullptr;
  cudaError_t err = cudaDeviceGetDefaultMemPool(&pool, device);
  uint64_t threshold = UINT64_MAX;
  if (err == cudaSuccess) {
    err = cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold);
  }
  // Peers may read and write this device's tensors (copies between the stages of one process).
  int count = 0;
  if (err == cudaSuccess) err = cudaGetDeviceCount(&count);
  for (int peer = 0; err == cudaSuccess && peer < count; ++peer) {
    int can_access = 0;
    if (peer == device) continue;
    if (cudaDeviceCanAccessPeer(&can_access, peer, device) != cudaSuccess || !can_access) {
      cudaGetLastError();
      continue;
    }
    cudaMemAccessDesc access{};
    access.location.type = cudaMemLocationTypeDevice;
    access.location.id = peer;
    access.flags = cudaMemAccessFlagsProtReadWrite;
    if (cudaMemPoolSetAccess(pool, &access, 1) != cudaSuccess) cudaGetLastError();
  }
  if (err != cudaSuccess) {
    cudaGetLastError();
    return REE_FAIL(Status::kCudaError, "cannot configure the memory pool of cuda:%d: %s", device,
                    cudaGetErrorString(err));
  }
  if (device < 64) configured |= 1ull << device;
  return Status::kSuccess;
}

void freeDeviceMemory(int device, void* pointer) {
  ScopedDevice scope(device);
  cudaFreeAsync(pointer, cudaStreamLegacy);
}

}  // namespace
#endif

std::string Device::str() const {
  return kind == Kind::kCpu ? std::string("cpu") : "cuda:" + std::to_string(index);
}

Status parseDevice(const std::string& text, Device* out) {
  REE_CHECK_ARG(out != nullptr, "parseDevice: out is null");
  if (text == "cpu") {
    *out = Device::cpu();
    return Status::kSuccess;
  }
  int index = 0;
  if (text == "cuda") {
    index = 0;
  } else if (text.rfind("cuda:", 0) == 0 && text.size() > 5 &&
             text.find_first_not_of("0123456789", 5) == std::string::npos && text.size() < 9) {
    index = std::atoi(text.c_str() + 5);
  } else {
    return REE_FAIL(Status::kInvalidArgument, "--device '%s' is not one of cpu, cuda, cuda:N",
                    text.c_str());
  }
  const char* why = "";
  int count = cudaDeviceCount(&why);
  if (count == 0) {
    return REE_FAIL(Status::kUnsupported, "--device %s: no CUDA device available (%s)",
                    text.c_str(), why);
  }
  if (index >= count) {
    return REE_FAIL(Status::kInvalidArgument, "--device %s: only %d CUDA device(s) visible",
                    text.c_str(), count);
  }
  *out = Device::cuda(index);
  return Status::kSuccess;
}

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape_)
    n *= d;
  return n;
}

std::string Tensor::describe() const {
  std::ostringstream os;
  os << dtypeName(dtype_) << "[";
  for (size_t i = 0; i < shape_.size(); ++i)
    os << (i ? ", " : "") << shape_[i];
  os << "] on " << device_.str();
  return os.str();
}

Status Tensor::empty(Device device, DType dtype, std::vector<int64_t> shape, Tensor* out) {
  REE_CHECK_ARG(out != nullptr, "Tensor::empty: out is null");
  int64_t n = 1;
  for (int64_t d : shape) {
    REE_CHECK_ARG(d >= 0, "Tensor::empty: negative dimension %lld", static_cast<long long>(d));
    n *= d;
  }
  size_t bytes = static_cast<size_t>(n) * dtypeSize(dtype);
  Tensor t;
  t.dtype_ = dtype;
  t.device_ = device;
  t.shape_ = std::move(shape);
  if (bytes == 0) {
    *out = t;
    return Status::kSuccess;
  }
  if (!device.isCuda()) {
    size_t rounded = (bytes + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, rounded);
    if (p == nullptr) {
      return REE_FAIL(Status::kOutOfMemory, "cannot allocate %zu bytes of host memory", bytes);
    }
    t.storage_ = std::shared_ptr<void>(p, [](void* q) { std::free(q); });
  } else {
#if defined(REE_WITH_CUDA)
    REE_RETURN_IF_ERROR(configureDevicePool(device.index));
    void* p = nullptr;
    cudaError_t err;
    {
      ScopedDevice scope(device.index);
      err = cudaMallocAsync(&p, bytes, cudaStreamLegacy);
    }
    REE_CUDA_CHECK_MSG(err, "allocating %zu bytes on %s", bytes, device.str().c_str());
    const int index = device.index;
    t.storage_ = std::shared_ptr<void>(p, [index](void* q) { freeDeviceMemory(index, q); });
#else
    return REE_FAIL(Status::kUnsupported, "REE was built without CUDA: cannot allocate on %s",
                    device.str().c_str());
#endif
  }
  t.data_ = t.storage_.get();
  *out = t;
  return Status::kSuccess;
}

Status Tensor::pinnedHost(DType dtype, std::vector<int64_t> shape, Tensor* out) {
#if defined(REE_WITH_CUDA)
  REE_CHECK_ARG(out != nullptr, "Tensor::pinnedHost: out is null");
  for (int64_t d : shape) {
    REE_CHECK_ARG(d >= 0, "Tensor::pinnedHost: negative dimension %lld", static_cast<long long>(d));
  }
  Tensor t;
  t.dtype_ = dtype;
  t.device_ = Device::cpu();
  t.shape_ = std::move(shape);
  const size_t bytes = t.nbytes();
  if (bytes == 0) {
    *out = t;
    return Status::kSuccess;
  }
  void* p = nullptr;
  REE_CUDA_CHECK_MSG(cudaMallocHost(&p, bytes), "allocating %zu bytes of page-locked host memory",
                     bytes);
  t.storage_ = std::shared_ptr<void>(p, [](void* q) { cudaFreeHost(q); });
  t.data_ = p;
  *out = t;
  return Status::kSuccess;
#else
  return empty(Device::cpu(), dtype, std::move(shape), out);
#endif
}

Status Tensor::zeros(Device device, DType dtype, std::vector<int64_t> shape, Tensor* out) {
  REE_RETURN_IF_ERROR(empty(device, dtype, std::move(shape), out));
  if (out->nbytes() == 0) return Status::kSuccess;
  if (!device.isCuda()) {
    std::memset(out->data(), 0, out->nbytes());
    return Status::kSuccess;
  }
#if defined(REE_WITH_CUDA)
  ScopedDevice scope(device.index);  // the tensor's legacy stream
  cudaError_t err = cudaMemset(out->data(), 0, out->nbytes());
  if (err != cudaSuccess) {
    return REE_FAIL(Status::kCudaError, "cudaMemset on %s failed", device.str().c_str());
  }
#endif
  return Status::kSuccess;
}

Tensor Tensor::wrap(void* data, Device device, DType dtype, std::vector<int64_t> shape) {
  Tensor t;
  t.data_ = data;
  t.device_ = device;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::rows(int64_t begin, int64_t count) const {
  Tensor t = *this;
  int64_t row_elems = shape_.empty() ? 1 : numel() / (shape_[0] == 0 ? 1 : shape_[0]);
  t.data_ = static_cast<char*>(data_) + begin * row_elems * dtypeSize(dtype_);
  if (!t.shape_.empty()) t.shape_[0] = count;
  return t;
}

Tensor Tensor::reshaped(std::vector<int64_t> shape) const {
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

#if defined(REE_WITH_CUDA)
namespace {

// Makes the current device's legacy stream wait for the work queued so far on `device`'s. A
// copy between GPUs is queued on the source's stream, but its destination was allocated on the
// destination's stream, whose pool may hand back a block that kernels queued there still use
// (another micro-batch's step, queued without waiting): the copy must follow them.
Status followDeviceWork(int device) {
  cudaEvent_t queued = nullptr;
  cudaError_t err;
  {
    ScopedDevice scope(device);
    err = cudaEventCreateWithFlags(&queued, cudaEventDisableTiming);
    if (err == cudaSuccess) err = cudaEventRecord(queued, cudaStreamLegacy);
  }
  if (err == cudaSuccess) err = cudaStreamWaitEvent(cudaStreamLegacy, queued, 0);
  if (queued != nullptr) cudaEventDestroy(queued);  // released once the wait is done
  REE_CUDA_CHECK_MSG(err, "ordering a copy into cuda:%d after its queued work", device);
  return Status::kSuccess;
}

}  // namespace
#endif

Status copyTensor(const Tensor& src, const Tensor& dst, cudaStream_t stream) {
  REE_CHECK_ARG(src.dtype() == dst.dtype() && src.numel() == dst.numel(),
                "copyTensor: %s into %s (dtype and element count must match)",
                src.describe().c_str(), dst.describe().c_str());
  size_t bytes = src.nbytes();
  if (bytes == 0) return Status::kSuccess;
  if (!src.device().isCuda() && !dst.device().isCuda()) {
    std::memmove(dst.data(), src.data(), bytes);
    return Status::kSuccess;
  }
#if defined(REE_WITH_CUDA)
  // On the legacy stream, the copy is queued on the device whose work it must follow: the
  // source's for reads from a GPU (device-to-host, and between GPUs, which then also waits for
  // the destination's queued work and completes before returning: the destination device's
  // streams are not otherwise ordered with it), else the destination's. Tensors are allocated in
  // the order of their device's legacy stream.
  const bool cross_device =
      src.device().isCuda() && dst.device().isCuda() && src.device() != dst.device();
  ScopedDevice scope(stream != nullptr       ? -1
                     : src.device().isCuda() ? src.device().index
                                             : dst.device().index);
  if (cross_device && stream == nullptr) {
    REE_RETURN_IF_ERROR(followDeviceWork(dst.device().index));
  }
  cudaMemcpyKind kind = cudaMemcpyDefault;
  cudaError_t err = cudaMemcpyAsync(dst.data(), src.data(), bytes, kind, stream);
  if (err == cudaSuccess && (!dst.device().isCuda() || (cross_device && stream == nullptr))) {
    err = cudaStreamSynchronize(stream);
  }
  REE_CUDA_CHECK_MSG(err, "copy %s -> %s", src.describe().c_str(), dst.describe().c_str());
  return Status::kSuccess;
#else
  (void)stream;
  return REE_FAIL(Status::kUnsupported, "REE was built without CUDA");
#endif
}

Status copyColumns(const Tensor& src, int64_t col_begin, const Tensor& dst, cudaStream_t stream) {
  REE_CHECK_ARG(src.rank() == 2 && dst.rank() == 2 && src.dtype() == dst.dtype() &&
                    src.device() == dst.device() && src.dim(0) == dst.dim(0) && col_begin >= 0 &&
                    col_begin + dst.dim(1) <= src.dim(1),
                "copyColumns: columns [%lld, +%lld) of %s into %s",
                static_cast<long long>(col_begin),
                static_cast<long long>(dst.rank() == 2 ? dst.dim(1) : -1), src.describe().c_str(),
                dst.describe().c_str());
  const size_t elem = dtypeSize(src.dtype());
  const size_t src_pitch = static_cast<size_t>(src.dim(1)) * elem;
  const size_t width = static_cast<size_t>(dst.dim(1)) * elem;
  const char* from = static_cast<const char*>(src.data()) + static_cast<size_t>(col_begin) * elem;
  char* to = static_cast<char*>(dst.data());
  if (width == 0 || dst.dim(0) == 0) return Status::kSuccess;
  if (!src.device().isCuda()) {
    for (int64_t r = 0; r < dst.dim(0); ++r)
      std::memcpy(to + r * width, from + r * src_pitch, width);
    return Status::kSuccess;
  }
#if defined(REE_WITH_CUDA)
  ScopedDevice scope(stream == nullptr ? src.device().index : -1);
  cudaError_t err =
      cudaMemcpy2DAsync(to, width, from, src_pitch, width, static_cast<size_t>(dst.dim(0)),
                        cudaMemcpyDeviceToDevice, stream);
  REE_CUDA_CHECK_MSG(err, "copyColumns %s -> %s", src.describe().c_str(), dst.describe().c_str());
  return Status::kSuccess;
#else
  (void)stream;
  return REE_FAIL(Status::kUnsupported, "REE was built without CUDA");
#endif
}

Status toDevice(const Tensor& src, Device device, Tensor* out, cudaStream_t stream) {
  Tensor t;
  REE_RETURN_IF_ERROR(Tensor::empty(device, src.dtype(), src.shape(), &t));
  REE_RETURN_IF_ERROR(copyTensor(src, t, stream));
  *out = t;
  return Status::kSuccess;
}

}  // namespace ree

namespace ree {

Status setCurrentDevice(Device device) {
  if (!device.isCuda()) return Status::kSuccess;
#if defined(REE_WITH_CUDA)
  REE_CUDA_CHECK_MSG(cudaSetDevice(device.index), "cudaSetDevice(%d)", device.index);
  return Status::kSuccess;
#else
  return REE_FAIL(Status::kUnsupported, "device %s: this build has no CUDA support",
                  device.str().c_str());
#endif
}

Status deviceFreeMemoryBytes(Device device, int64_t* free) {
  REE_CHECK_ARG(free != nullptr, "deviceFreeMemoryBytes: free is null");
  if (!device.isCuda()) {
    *free = hostAvailableMemoryBytes();
    return Status::kSuccess;
  }
#if defined(REE_WITH_CUDA)
  REE_RETURN_IF_ERROR(setCurrentDevice(device));
  size_t available = 0, total = 0;
  REE_CUDA_CHECK_MSG(cudaMemGetInfo(&available, &total), "cudaMemGetInfo(%d)", device.index);
  *free = static_cast<int64_t>(available);
  return Status::kSuccess;
#else
  return REE_FAIL(Status::kUnsupported, "device %s: this build has no CUDA support",
                  device.str().c_str());
#endif
}

Status deviceMemoryBytes(Device device, int64_t* total) {
  REE_CHECK_ARG(total != nullptr, "deviceMemoryBytes: total is null");
  if (!device.isCuda()) {
    long pages = sysconf(_SC_PHYS_PAGES);
    long page_size = sysconf(_SC_PAGE_SIZE);
    if (pages <= 0 || page_size <= 0) {
      return REE_FAIL(Status::kInternal, "cannot read the host's physical memory size");
    }
    *total = static_cast<int64_t>(pages) * page_size;
    return Status::kSuccess;
  }
#if defined(REE_WITH_CUDA)
  cudaDeviceProp prop;
  REE_CUDA_CHECK_MSG(cudaGetDeviceProperties(&prop, device.index), "cudaGetDeviceProperties(%d)",
                     device.index);
  *total = static_cast<int64_t>(prop.totalGlobalMem);
  return Status::kSuccess;
#else
  return REE_FAIL(Status::kUnsupported, "device %s: this build has no CUDA support",
                  device.str().c_str());
#endif
}

}  // namespace ree
