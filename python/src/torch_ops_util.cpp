// Argument checks and plumbing shared by the C++ torch operators (torch_ops_util.h).
#include "torch_ops_util.h"

#include <algorithm>

#include "ree/kernels/rowops.h"

namespace ree::torch_ops {

std::string dtypeText(at::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat:
      return "float32";
    case at::kDouble:
      return "float64";
    case at::kHalf:
      return "float16";
    case at::kBFloat16:
      return "bfloat16";
    case at::kLong:
      return "int64";
    case at::kInt:
      return "int32";
    case at::kShort:
      return "int16";
    case at::kChar:
      return "int8";
    case at::kByte:
      return "uint8";
    case at::kBool:
      return "bool";
    default:
      return c10::toString(dtype);
  }
}

std::string shapeText(at::IntArrayRef shape) {
  std::string text = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) text += ", ";
    text += std::to_string(shape[i]);
  }
  return text + (shape.size() == 1 ? ",)" : ")");
}

DType dtypeOf(const char* op, const char* name, const at::Tensor& t) {
  const at::ScalarType dtype = t.scalar_type();
  TORCH_CHECK_TYPE(dtype == at::kFloat || dtype == at::kBFloat16 || dtype == at::kHalf, "ree.ops.",
                   op, ": ", name, " has dtype ", dtypeText(dtype),
                   "; supported: float32, bfloat16, float16");
  return dtypeOf(dtype);
}

at::Device deviceOf(const char* op, std::initializer_list<NamedTensor> tensors) {
  const at::Tensor* first = nullptr;
  bool mixed = false;
  for (const NamedTensor& named : tensors) {
    if (!named.second->defined()) continue;
    if (first == nullptr) {
      first = named.second;
    } else if (named.second->device() != first->device()) {
      mixed = true;
    }
  }
  if (mixed) {
    std::string where;
    for (const NamedTensor& named : tensors) {
      if (!named.second->defined()) continue;
      if (!where.empty()) where += ", ";
      where += std::string(named.first) + " on " + named.second->device().str();
    }
    TORCH_CHECK_VALUE(false, "ree.ops.", op, ": tensors must be on one device (", where, ")");
  }
  const at::Device device = first->device();
  TORCH_CHECK_VALUE(device.is_cpu() || device.is_cuda(), "ree.ops.", op, ": device ", device.str(),
                    " is not supported (cpu, cuda)");
  return device;
}

int64_t lastDim(const char* op, const at::Tensor& x) {
  TORCH_CHECK_VALUE(x.dim() > 0 && x.size(-1) >= 1, "ree.ops.", op,
                    ": x needs a last dimension of at least 1 element (shape ",
                    shapeText(x.sizes()), ")");
  return x.size(-1);
}

void cudaUnavailable() {
  TORCH_CHECK(false, "ree: this build has no CUDA kernels (build on a machine with nvcc)");
}

namespace {

// n elements from `in` to `out` as rows of at most kRowOpsMaxCols elements (as ree._C.cast).
void castElements(const at::Device& device, const void* in, DType from, void* out, DType to,
                  int64_t n) {
  const int64_t cols = std::min<int64_t>(n, repops::kRowOpsMaxCols);
  const int64_t rows = n / cols, tail = n - rows * cols;
  repops::RowsIn body_in{in, from, cols};
  repops::RowsOut body_out{out, to, cols};
  REE_TORCH_RUN(device, repops::cpu::cast(body_in, body_out, rows, cols),
                repops::cuda::cast(body_in, body_out, rows, cols, cuda_stream));
  if (tail == 0) return;
  const int64_t done = rows * cols;
  repops::RowsIn tail_in{static_cast<const char*>(in) + done * dtypeSize(from), from, tail};
  repops::RowsOut tail_out{static_cast<char*>(out) + done * dtypeSize(to), to, tail};
  REE_TORCH_RUN(device, repops::cpu::cast(tail_in, tail_out, 1, tail),
                repops::cuda::cast(tail_in, tail_out, 1, tail, cuda_stream));
}

}  // namespace

at::Tensor castRaw(const at::Tensor& x, at::ScalarType dtype) {
  at::Tensor in = x.contiguous();
  if (in.scalar_type() == dtype) return in;
  at::Tensor out = at::empty(in.sizes(), in.options().dtype(dtype));
  if (in.numel() > 0) {
    castElements(in.device(), in.data_ptr(), dtypeOf(in.scalar_type()), out.data_ptr(),
                 dtypeOf(dtype), in.numel());
  }
  return out;
}

}  // namespace ree::torch_ops
