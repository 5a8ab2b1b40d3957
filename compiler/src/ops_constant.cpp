// Constant-producing operators: Constant, ConstantOfShape, Range.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "ops.h"
#include "tensor_util.h"

namespace ree::compiler {

namespace {
constexpr int64_t kMaxRangeElements = int64_t{1} << 32;
}

Status runConstant(OpContext& c) {
  if (const Attribute* a = c.node.attribute("value")) {
    REE_CHECK_ARG(a->kind == Attribute::Kind::kTensor, "%s: value must be a tensor",
                  c.node.label().c_str());
    c.outputs[0] = a->tensor;
    return Status::kSuccess;
  }
  if (const Attribute* a = c.node.attribute("value_float")) {
    return GraphTensor::fromHost(ElementType::kFloat32, {}, &a->f, &c.outputs[0]);
  }
  if (const Attribute* a = c.node.attribute("value_int")) {
    return GraphTensor::fromHost(ElementType::kInt64, {}, &a->i, &c.outputs[0]);
  }
  if (const Attribute* a = c.node.attribute("value_floats")) {
    return GraphTensor::fromHost(ElementType::kFloat32, {static_cast<int64_t>(a->floats.size())},
                                 a->floats.data(), &c.outputs[0]);
  }
  if (const Attribute* a = c.node.attribute("value_ints")) {
    return GraphTensor::fromHost(ElementType::kInt64, {static_cast<int64_t>(a->ints.size())},
                                 a->ints.data(), &c.outputs[0]);
  }
  return REE_FAIL(Status::kUnsupported,
                  "%s: needs value, value_float(s) or value_int(s) (sparse and string values are "
                  "not supported)",
                  c.node.label().c_str());
}

Status runConstantOfShape(OpContext& c) {
  const GraphTensor* shape_input;
  REE_RETURN_IF_ERROR(c.required(0, &shape_input));
  std::vector<int64_t> shape;
  REE_RETURN_IF_ERROR(intValues(*shape_input, c.node.label() + " shape", &shape));
  GraphTensor value;
  float zero = 0.0f;
  REE_RETURN_IF_ERROR(GraphTensor::fromHost(ElementType::kFloat32, {1}, &zero, &value));
  if (const Attribute* a = c.node.attribute("value")) {
    REE_CHECK_ARG(a->kind == Attribute::Kind::kTensor && a->tensor.numel() == 1,
                  "%s: value must be a one-element tensor", c.node.label().c_str());
    value = a->tensor;
  }
  int64_t bound = 1;
  for (int64_t d : shape) {  // a 0 dim counts as 1 (checkTensorBytes says why)
    REE_CHECK_ARG(d >= 0 && bound <= (int64_t{1} << 36) / std::max<int64_t>(d, 1),
                  "%s: shape %s is negative or beyond 2^36 elements", c.node.label().c_str(),
                  shapeText(shape).c_str());
    bound *= std::max<int64_t>(d, 1);
  }
  GraphTensor& out = c.outputs[0];
  REE_RETURN_IF_ERROR(GraphTensor::empty(value.type, shape, &out));
  const int64_t n = out.numel();
  const int size = elementTypeSize(value.type);
  for (int64_t i = 0; i < n; ++i)
    std::memcpy(static_cast<char*>(out.data()) + i * size, value.data(), size);
  return Status::kSuccess;
}

Status runRange(OpContext& c) {
  const GraphTensor *start, *limit, *delta;
  REE_RETURN_IF_ERROR(c.required(0, &start));
  REE_RETURN_IF_ERROR(c.required(1, &limit));
  REE_RETURN_IF_ERROR(c.required(2, &delta));
  REE_CHECK_ARG(start->numel() == 1 && limit->numel() == 1 && delta->numel() == 1 &&
                    start->type == limit->type && start->type == delta->type &&
                    start->type != ElementType::kBool,
                "%s: start, limit and delta must be scalars of one numeric type",
                c.node.label().c_str());
  GraphTensor& out = c.outputs[0];
  if (start->type == ElementType::kInt64) {
    const int64_t s = *start->as<int64_t>(), l = *limit->as<int64_t>(), d = *delta->as<int64_t>();
    REE_CHECK_ARG(d != 0, "%s: delta is 0", c.node.label().c_str());
    const double count = std::ceil((static_cast<double>(l) - s) / static_cast<double>(d));
    REE_CHECK_ARG(count <= static_cast<double>(kMaxRangeElements), "%s: %g elements exceed 2^32",
                  c.node.label().c_str(), count);
    const int64_t n = count > 0 ? static_cast<int64_t>(count) : 0;
    REE_CHECK_ARG(n <= kMaxRangeElements, "%s: %lld elements exceed 2^32", c.node.label().c_str(),
                  static_cast<long long>(n));
    REE_RETURN_IF_ERROR(GraphTensor::empty(ElementType::kInt64, {n}, &out));
    for (int64_t i = 0; i < n; ++i)
      out.as<int64_t>()[i] = static_cast<int64_t>(
          static_cast<uint64_t>(s) + static_cast<uint64_t>(i) * static_cast<uint64_t>(d));
    return Status::kSuccess;
  }
  const float s = *start->as<float>(), l = *limit->as<float>(), d = *delta->as<float>();
  REE_CHECK_ARG(d != 0.0f && std::isfinite(s) && std::isfinite(l) && std::isfinite(d),
                "%s: start, limit and delta must be finite, delta non-zero",
                c.node.label().c_str());
  const double count = std::ceil((static_cast<double>(l) - s) / d);
  const int64_t n = count > 0 ? static_cast<int64_t>(std::min(count, 1e18)) : 0;
  REE_CHECK_ARG(n <= kMaxRangeElements, "%s: %lld elements exceed 2^32", c.node.label().c_str(),
                static_cast<long long>(n));
  REE_RETURN_IF_ERROR(GraphTensor::empty(ElementType::kFloat32, {n}, &out));
  for (int64_t i = 0; i < n; ++i)
    out.as<float>()[i] = s + static_cast<float>(i) * d;  // ONNX: start + i * delta, fp32
  return Status::kSuccess;
}

}  // namespace ree::compiler
