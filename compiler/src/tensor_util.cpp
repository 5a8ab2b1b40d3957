#include "tensor_util.h"

#include "device_ops.h"
#include "tensor_limit.h"

#include <cstring>

namespace ree::compiler {

int64_t shapeProduct(const Shape& shape, size_t begin, size_t end) {
  int64_t n = 1;
  for (size_t i = begin; i < shape.size() && i < end; ++i)
    n *= shape[i];
  return n;
}

std::string shapeText(const Shape& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

Status broadcastShapes(const Shape& a, const Shape& b, const std::string& what, Shape* out) {
  const size_t rank = std::max(a.size(), b.size());
  Shape result(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    REE_CHECK_ARG(da == db || da == 1 || db == 1,
                  "%s: shapes %s and %s do not broadcast (dim %zu: %lld vs %lld)", what.c_str(),
                  shapeText(a).c_str(), shapeText(b).c_str(), i, static_cast<long long>(da),
                  static_cast<long long>(db));
    result[i] = da == 1 ? db : da;
  }
  *out = std::move(result);
  return Status::kSuccess;
}

namespace {

// Row-major strides of `shape`, with 0 for broadcast (size-1 or missing leading) input dims.
std::vector<int64_t> broadcastStrides(const Shape& in, const Shape& out) {
  std::vector<int64_t> strides(out.size(), 0);
  int64_t stride = 1;
  for (size_t k = 0; k < in.size(); ++k) {
    size_t i = in.size() - 1 - k, o = out.size() - 1 - k;
    strides[o] = in[i] == 1 ? 0 : stride;
    stride *= in[i];
  }
  return strides;
}

// Flat source index of every output element for per-axis source strides.
std::vector<int64_t> stridedIndex(const Shape& out, const std::vector<int64_t>& strides) {
  const int64_t n = shapeProduct(out);
  std::vector<int64_t> index(static_cast<size_t>(n));
  std::vector<int64_t> position(out.size(), 0);
  int64_t source = 0;
  for (int64_t i = 0; i < n; ++i) {
    index[static_cast<size_t>(i)] = source;
    for (size_t axis = out.size(); axis-- > 0;) {
      if (++position[axis] < out[axis]) {
        source += strides[axis];
        break;
      }
      source -= strides[axis] * (out[axis] - 1);
      position[axis] = 0;
    }
  }
  return index;
}

}  // namespace

Status broadcastTo(const GraphTensor& in, const Shape& shape, GraphTensor* out) {
  if (in.shape == shape) {
    *out = in;
    return Status::kSuccess;
  }
  REE_RETURN_IF_ERROR(checkTensorBytes(in.type, shape));
  REE_RETURN_IF_ERROR(checkIndexMap(shape));
  Shape check;
  REE_RETURN_IF_ERROR(broadcastShapes(in.shape, shape, "broadcast", &check));
  REE_CHECK_ARG(check == shape, "broadcast: %s does not broadcast to %s",
                shapeText(in.shape).c_str(), shapeText(shape).c_str());
  return gatherFlat(in, stridedIndex(shape, broadcastStrides(in.shape, shape)), shape, 0.0f, out);
}

Status transposeTensor(const GraphTensor& in, const std::vector<int64_t>& perm, GraphTensor* out) {
  const size_t rank = in.shape.size();
  REE_CHECK_ARG(perm.size() == rank, "transpose: perm has %zu entries for rank %zu", perm.size(),
                rank);
  std::vector<int64_t> in_strides(rank, 1);
  for (size_t i = rank; i-- > 1;)
    in_strides[i - 1] = in_strides[i] * in.shape[i];
  Shape shape(rank);
  std::vector<int64_t> strides(rank);
  std::vector<bool> seen(rank, false);
  for (size_t i = 0; i < rank; ++i) {
    REE_CHECK_ARG(perm[i] >= 0 && perm[i] < static_cast<int64_t>(rank) && !seen[perm[i]],
                  "transpose: perm is not a permutation of 0..%zu", rank - 1);
    seen[perm[i]] = true;
    shape[i] = in.shape[perm[i]];
    strides[i] = in_strides[perm[i]];
  }
  REE_RETURN_IF_ERROR(checkTensorBytes(in.type, shape));
  REE_RETURN_IF_ERROR(checkIndexMap(shape));
  return gatherFlat(in, stridedIndex(shape, strides), shape, 0.0f, out);
}

Status gatherFlat(const GraphTensor& in, const std::vector<int64_t>& index, const Shape& shape,
                  float fill, GraphTensor* out) {
  GraphTensor result;
  const Device device = in.storage.device();
  REE_RETURN_IF_ERROR(emptyOn(device, in.type, shape, &result));
  REE_CHECK_ARG(static_cast<int64_t>(index.size()) == result.numel(),
                "gather: %zu indices for %lld elements", index.size(),
                static_cast<long long>(result.numel()));
  uint32_t fill_bits = 0;  // padding: `fill` for floats, zero otherwise
  if (in.type == ElementType::kFloat32) std::memcpy(&fill_bits, &fill, 4);
  REE_RETURN_IF_ERROR(
      dev::gather(device, elementTypeSize(in.type), in.data(), index, result.data(), fill_bits));
  *out = std::move(result);
  return Status::kSuccess;
}

Status checkIndexMap(const Shape& shape) {
  return checkTensorBytes(ElementType::kInt64, shape);
}

GraphTensor reshapedView(const GraphTensor& in, const Shape& shape) {
  GraphTensor view = in;
  view.shape = shape;
  return view;
}

Status normalizeAxis(int64_t axis, int64_t rank, const std::string& what, int64_t* out) {
  // A scalar has no axis: every caller indexes the shape with the result.
  REE_CHECK_ARG(axis >= -rank && axis < rank, "%s: axis %lld is out of range for rank %lld",
                what.c_str(), static_cast<long long>(axis), static_cast<long long>(rank));
  *out = axis < 0 ? axis + rank : axis;
  return Status::kSuccess;
}

Status intValues(const GraphTensor& tensor, const std::string& what, std::vector<int64_t>* out) {
  REE_CHECK_ARG(tensor.type == ElementType::kInt64, "%s: expected int64 values, got %s",
                what.c_str(), tensor.describe().c_str());
  out->assign(tensor.as<int64_t>(), tensor.as<int64_t>() + tensor.numel());
  return Status::kSuccess;
}

Tensor floatView(const GraphTensor& tensor, const Shape& shape) {
  return Tensor::wrap(tensor.data(), tensor.storage.device(), DType::kF32, shape);
}

Tensor floatView(const GraphTensor& tensor) {
  return floatView(tensor, tensor.shape);
}

}  // namespace ree::compiler
