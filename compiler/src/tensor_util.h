// Helpers of the operator implementations: broadcasting, exact copies (transpose, gathers),
// integer views, and wrapping GraphTensors as runtime Tensors.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "graph.h"
#include "ree/runtime/tensor.h"

namespace ree::compiler {

using Shape = std::vector<int64_t>;

int64_t shapeProduct(const Shape& shape, size_t begin = 0, size_t end = SIZE_MAX);
std::string shapeText(const Shape& shape);

// The index map of a gather into `shape` (one int64 per output element, up to 8x the output's
// bytes) within the tensor limit, checked before it is built.
Status checkIndexMap(const Shape& shape);

// The numpy broadcast of a and b; fails naming `what` on a conflict.
Status broadcastShapes(const Shape& a, const Shape& b, const std::string& what, Shape* out);
// `in` broadcast to `shape` (a view when the shapes are equal, else an exact copy).
Status broadcastTo(const GraphTensor& in, const Shape& shape, GraphTensor* out);
// out = in with its axes permuted (perm[i] = the input axis of output axis i).
Status transposeTensor(const GraphTensor& in, const std::vector<int64_t>& perm, GraphTensor* out);
// out[i] = in.flat[index[i]] (index[i] < 0: `fill`, a float value, for padding); out's shape is
// `shape`, its type in's.
Status gatherFlat(const GraphTensor& in, const std::vector<int64_t>& index, const Shape& shape,
                  float fill, GraphTensor* out);
// A view with another shape of the same element count.
GraphTensor reshapedView(const GraphTensor& in, const Shape& shape);

// Normalises a possibly negative axis against `rank`; fails naming `what`.
Status normalizeAxis(int64_t axis, int64_t rank, const std::string& what, int64_t* out);
// The int64 values of an int64 tensor (any shape).
Status intValues(const GraphTensor& tensor, const std::string& what, std::vector<int64_t>* out);
// A float32 CPU Tensor view of a float GraphTensor, with `shape` (default: its own).
Tensor floatView(const GraphTensor& tensor, const Shape& shape);
Tensor floatView(const GraphTensor& tensor);

}  // namespace ree::compiler
