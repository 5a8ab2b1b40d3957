// GraphTensor: typed elements in a ree::Tensor of fp32 words.
#include <algorithm>
#include <cstring>

#include "ree/compiler/compile.h"
#include "tensor_limit.h"

namespace ree {

namespace compiler {

namespace {
constexpr uint64_t kMaxTensorBytes = uint64_t{1} << 40;
thread_local uint64_t t_tensor_byte_limit = kMaxTensorBytes;
}  // namespace

ScopedTensorByteLimit::ScopedTensorByteLimit(uint64_t bytes) : previous_(t_tensor_byte_limit) {
  t_tensor_byte_limit = bytes < kMaxTensorBytes ? bytes : kMaxTensorBytes;
}

ScopedTensorByteLimit::~ScopedTensorByteLimit() {
  t_tensor_byte_limit = previous_;
}

Status checkTensorBytes(ElementType type, const std::vector<int64_t>& shape) {
  // A 0 dim counts as 1: every dim and every partial product stays within the limit, so code
  // that multiplies some of the dims (strides, rows) never overflows when another dim is 0.
  uint64_t bytes = static_cast<uint64_t>(elementTypeSize(type));
  for (int64_t d : shape) {
    REE_CHECK_ARG(d >= 0, "tensor dim %lld is negative", static_cast<long long>(d));
    const uint64_t factor = d == 0 ? 1 : static_cast<uint64_t>(d);
    REE_CHECK_ARG(bytes <= t_tensor_byte_limit / factor,
                  "a %s tensor of %zu dims is larger than the limit of %llu bytes",
                  elementTypeName(type), shape.size(),
                  static_cast<unsigned long long>(t_tensor_byte_limit));
    bytes *= factor;
  }
  return Status::kSuccess;
}

}  // namespace compiler

const char* elementTypeName(ElementType type) {
  switch (type) {
    case ElementType::kFloat32:
      return "float32";
    case ElementType::kInt64:
      return "int64";
    case ElementType::kBool:
      return "bool";
  }
  return "?";
}

int elementTypeSize(ElementType type) {
  switch (type) {
    case ElementType::kFloat32:
      return 4;
    case ElementType::kInt64:
      return 8;
    case ElementType::kBool:
      return 1;
  }
  return 1;
}

int64_t GraphTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

std::string GraphTensor::describe() const {
  std::string text = std::string(elementTypeName(type)) + "[";
  for (size_t i = 0; i < shape.size(); ++i)
    text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

Status GraphTensor::empty(ElementType type, std::vector<int64_t> shape, GraphTensor* out) {
  REE_RETURN_IF_ERROR(compiler::checkTensorBytes(type, shape));
  int64_t bytes = elementTypeSize(type);
  for (int64_t d : shape)
    bytes *= d;
  int64_t words = std::max<int64_t>(1, (bytes + 3) / 4);
  GraphTensor result;
  result.type = type;
  result.shape = std::move(shape);
  REE_RETURN_IF_ERROR(Tensor::empty(Device::cpu(), DType::kF32, {words}, &result.storage));
  *out = std::move(result);
  return Status::kSuccess;
}

Status GraphTensor::fromHost(ElementType type, std::vector<int64_t> shape, const void* bytes,
                             GraphTensor* out) {
  REE_RETURN_IF_ERROR(empty(type, std::move(shape), out));
  if (out->nbytes() != 0) std::memcpy(out->data(), bytes, out->nbytes());
  return Status::kSuccess;
}

}  // namespace ree
