// Split and Trilu: exact copies of parts of a value.
#include <algorithm>
#include <cstring>

#include "ops.h"
#include "tensor_util.h"

namespace ree::compiler {

namespace {

// The sizes of the parts: the `split` input (opset >= 13) or attribute, else num_outputs (opset
// 18) or the node's output count, equal parts with a smaller last one.
Status splitSizes(OpContext& c, int64_t dim, std::vector<int64_t>* sizes) {
  if (const GraphTensor* split = c.input(1)) {
    REE_RETURN_IF_ERROR(intValues(*split, c.node.label() + " split", sizes));
  } else if (const Attribute* a = c.node.attribute("split")) {
    *sizes = a->ints;
  } else {
    const int64_t parts =
        c.node.intAttribute("num_outputs", static_cast<int64_t>(c.outputs.size()));
    REE_CHECK_ARG(parts >= 1 && parts == static_cast<int64_t>(c.outputs.size()),
                  "%s: num_outputs %lld for %zu outputs", c.node.label().c_str(),
                  static_cast<long long>(parts), c.outputs.size());
    const int64_t each = (dim + parts - 1) / parts;
    for (int64_t i = 0; i < parts; ++i)
      sizes->push_back(std::max<int64_t>(0, std::min(each, dim - i * each)));
  }
  int64_t total = 0;
  for (int64_t s : *sizes) {
    REE_CHECK_ARG(s >= 0 && s <= dim - total,
                  "%s: split sizes must be one per output and sum to %lld", c.node.label().c_str(),
                  static_cast<long long>(dim));
    total += s;
  }
  REE_CHECK_ARG(sizes->size() == c.outputs.size() && total == dim,
                "%s: split sizes must be one per output and sum to %lld", c.node.label().c_str(),
                static_cast<long long>(dim));
  return Status::kSuccess;
}

Status runSplit(OpContext& c) {
  const GraphTensor* x;
  REE_RETURN_IF_ERROR(c.required(0, &x));
  const int64_t rank = static_cast<int64_t>(x->shape.size());
  int64_t axis;
  REE_RETURN_IF_ERROR(normalizeAxis(c.node.intAttribute("axis", 0), rank, c.node.label(), &axis));
  std::vector<int64_t> sizes;
  REE_RETURN_IF_ERROR(splitSizes(c, x->shape[axis], &sizes));
  const int64_t outer = shapeProduct(x->shape, 0, axis);
  const int64_t inner = shapeProduct(x->shape, axis + 1) * elementTypeSize(x->type);
  const int64_t row = x->shape[axis] * inner;
  int64_t offset = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    Shape shape = x->shape;
    shape[axis] = sizes[i];
    REE_RETURN_IF_ERROR(GraphTensor::empty(x->type, shape, &c.outputs[i]));
    const int64_t chunk = sizes[i] * inner;
    // An empty part copies nothing: no loop over `outer` (2^34 rows of a [2^34, 0] input).
    for (int64_t o = 0; o < outer && chunk > 0; ++o) {
      std::memcpy(static_cast<char*>(c.outputs[i].data()) + o * chunk,
                  static_cast<const char*>(x->data()) + o * row + offset, chunk);
    }
    offset += chunk;
  }
  return Status::kSuccess;
}

Status runTrilu(OpContext& c) {
  const GraphTensor* x;
  REE_RETURN_IF_ERROR(c.required(0, &x));
  REE_CHECK_ARG(x->shape.size() >= 2, "%s: input rank must be >= 2", c.node.label().c_str());
  int64_t k = 0;
  if (const GraphTensor* kt = c.input(1)) {
    std::vector<int64_t> values;
    REE_RETURN_IF_ERROR(intValues(*kt, c.node.label() + " k", &values));
    REE_CHECK_ARG(values.size() == 1, "%s: k must be a scalar", c.node.label().c_str());
    k = values[0];
  }
  const bool upper = c.node.intAttribute("upper", 1) != 0;
  const int64_t rows = x->shape[x->shape.size() - 2], cols = x->shape.back();
  const int64_t size = elementTypeSize(x->type),
                matrices = x->numel() / std::max<int64_t>(1, rows * cols);
  GraphTensor& out = c.outputs[0];
  REE_RETURN_IF_ERROR(GraphTensor::empty(x->type, x->shape, &out));
  char* dst = static_cast<char*>(out.data());
  const char* src = static_cast<const char*>(x->data());
  for (int64_t m = 0; m < matrices; ++m)
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) {
        const int64_t at = ((m * rows + i) * cols + j) * size;
        const bool keep = upper ? j - i >= k : j - i <= k;
        if (keep) {
          std::memcpy(dst + at, src + at, size);
        } else {
          std::memset(dst + at, 0, size);
        }
      }
  return Status::kSuccess;
}

}  // namespace

void registerSplitOps(std::vector<OpDef>* table) {
  table->push_back({"Split", runSplit, "exact copies"});
  table->push_back({"Trilu", runTrilu, "exact copy with zeros"});
}

}  // namespace ree::compiler
