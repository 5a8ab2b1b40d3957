#include "device_ops.h"

#include <algorithm>

#include "tensor_limit.h"

#if defined(REE_WITH_CUDA)
#define REE_COMPILER_CUDA(call) (call)
#else
#define REE_COMPILER_CUDA(call) \
  REE_FAIL(Status::kUnsupported, "REE was built without CUDA: the graph cannot run on a GPU")
#endif

namespace ree::compiler {

Status emptyOn(Device device, ElementType type, std::vector<int64_t> shape, GraphTensor* out) {
  if (!device.isCuda()) return GraphTensor::empty(type, std::move(shape), out);
  REE_RETURN_IF_ERROR(checkTensorBytes(type, shape));
  GraphTensor result;
  result.type = type;
  result.shape = std::move(shape);
  const int64_t words = std::max<int64_t>(1, (static_cast<int64_t>(result.nbytes()) + 3) / 4);
  REE_RETURN_IF_ERROR(Tensor::empty(device, DType::kF32, {words}, &result.storage));
  *out = std::move(result);
  return Status::kSuccess;
}

Status moveTo(const GraphTensor& in, Device device, GraphTensor* out) {
  if (in.storage.device() == device) {
    *out = in;
    return Status::kSuccess;
  }
  GraphTensor result = in;
  REE_RETURN_IF_ERROR(toDevice(in.storage, device, &result.storage));
  *out = std::move(result);
  return Status::kSuccess;
}

namespace dev {

Status binary(Device device, BinaryOp op, const float* a, const float* b, float* out, int64_t n) {
  if (!device.isCuda()) return repops::cpu::binary(op, a, b, out, n);
  return REE_COMPILER_CUDA(repops::cuda::binary(op, a, b, out, n, nullptr));
}

Status simpleUnary(Device device, SimpleUnaryOp op, const float* x, float* out, int64_t n) {
  if (!device.isCuda()) return repops::cpu::simpleUnary(op, x, out, n);
  return REE_COMPILER_CUDA(repops::cuda::simpleUnary(op, x, out, n, nullptr));
}

Status unaryMath(Device device, UnaryMathOp op, const float* x, float* out, int64_t n) {
  if (!device.isCuda()) return repops::cpu::unaryMath(op, x, out, n);
  return REE_COMPILER_CUDA(repops::cuda::unaryMath(op, x, out, n, nullptr));
}

Status where(Device device, const uint8_t* condition, const float* a, const float* b, float* out,
             int64_t n) {
  if (!device.isCuda()) return repops::cpu::where(condition, a, b, out, n);
  return REE_COMPILER_CUDA(repops::cuda::where(condition, a, b, out, n, nullptr));
}

Status softmax(Device device, bool log, repops::RowsIn x, repops::RowsOut y, int64_t rows,
               int64_t cols) {
  if (!device.isCuda()) {
    return log ? repops::cpu::logSoftmax(x, y, rows, cols) : repops::cpu::softmax(x, y, rows, cols);
  }
  return REE_COMPILER_CUDA(log ? repops::cuda::logSoftmax(x, y, rows, cols, nullptr)
                               : repops::cuda::softmax(x, y, rows, cols, nullptr));
}

Status reduceRows(Device device, repops::ReduceOp op, repops::RowsIn x, void* out, DType out_dtype,
                  int64_t rows, int64_t cols) {
  if (!device.isCuda()) return repops::cpu::reduceRows(op, x, out, out_dtype, rows, cols);
  return REE_COMPILER_CUDA(repops::cuda::reduceRows(op, x, out, out_dtype, rows, cols, nullptr));
}

Status gather(Device device, int elem_bytes, const void* in, const std::vector<int64_t>& index,
              void* out, uint64_t fill) {
  const int64_t n = static_cast<int64_t>(index.size());
  if (n == 0) return Status::kSuccess;
  if (!device.isCuda()) return repops::cpu::gather(elem_bytes, in, index.data(), out, n, fill);
  Tensor device_index;
  REE_RETURN_IF_ERROR(toDevice(
      Tensor::wrap(const_cast<int64_t*>(index.data()), Device::cpu(), DType::kF32, {2 * n}), device,
      &device_index));
  return REE_COMPILER_CUDA(
      repops::cuda::gather(elem_bytes, in, device_index.as<int64_t>(), out, n, fill, nullptr));
}

}  // namespace dev
}  // namespace ree::compiler
