// Layout and shape operators: exact copies or views of whole values, and the integer shape
// computations exporters emit (Shape, Gather on shapes, Concat, Range, ...), exact on the host.
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "ops.h"
#include "tensor_limit.h"
#include "tensor_util.h"

namespace ree::compiler {

namespace {

constexpr int64_t kMaxElements = int64_t{1} << 36;

Status checkedShape(const OpContext& c, const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {  // a 0 dim counts as 1 (checkTensorBytes says why)
    REE_CHECK_ARG(d >= 0 && n <= kMaxElements / std::max<int64_t>(d, 1),
                  "%s: output shape %s is negative or beyond 2^36 elements", c.node.label().c_str(),
                  shapeText(shape).c_str());
    n *= std::max<int64_t>(d, 1);
  }
  return Status::kSuccess;
}

Status runReshape(OpContext& c) {
  const GraphTensor *x, *shape_input;
  REE_RETURN_IF_ERROR(c.required(0, &x));
  REE_RETURN_IF_ERROR(c.required(1, &shape_input));
  std::vector<int64_t> shape;
  REE_RETURN_IF_ERROR(intValues(*shape_input, c.node.label() + " shape", &shape));
  const bool allow_zero = c.node.intAttribute("allowzero", 0) != 0;
  int64_t infer = -1, known = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0 && !allow_zero) {
      REE_CHECK_ARG(i < x->shape.size(), "%s: 0 at dim %zu beyond the input's rank",
                    c.node.label().c_str(), i);
      shape[i] = x->shape[i];
    }
    if (shape[i] == -1) {
      REE_CHECK_ARG(infer < 0, "%s: more than one -1 in the shape", c.node.label().c_str());
      infer = static_cast<int64_t>(i);
      continue;
    }
    REE_RETURN_IF_ERROR(checkedShape(c, {shape[i]}));
  }
  Shape listed;  // the dims other than -1, bounded together before their product is formed
  for (int64_t d : shape)
    if (d != -1) listed.push_back(d);
  REE_RETURN_IF_ERROR(checkedShape(c, listed));
  known = shapeProduct(listed);
  if (infer >= 0) {
    REE_CHECK_ARG(known > 0 && x->numel() % known == 0, "%s: cannot reshape %s into %s",
                  c.node.label().c_str(), shapeText(x->shape).c_str(), shapeText(shape).c_str());
    shape[infer] = x->numel() / known;
  }
  REE_CHECK_ARG(shapeProduct(shape) == x->numel(), "%s: cannot reshape %s into %s",
                c.node.label().c_str(), shapeText(x->shape).c_str(), shapeText(shape).c_str());
  c.outputs[0] = reshapedView(*x, shape);
  return Status::kSuccess;
}

Status runFlatten(OpContext& c) {
  const GraphTensor* x;
  REE_RETURN_IF_ERROR(c.required(0, &x));
  const int64_t rank = static_cast<int64_t>(x->shape.size());
  int64_t axis = c.node.intAttribute("axis", 1);
  REE_CHECK_ARG(axis >= -rank && axis <= rank, "%s: axis %lld out of range", c.node.label().c_str(),
                static_cast<long long>(axis));
  if (axis < 0) axis += rank;
  c.outputs[0] = reshapedView(*x, {shapeProduct(x->shape, 0, axis), shapeProduct(x->shape, axis)});
  return Status::kSuccess;
}

Status runTranspose(OpContext& c) {
  const GraphTensor* x;
  REE_RETURN_IF_ERROR(c.required(0, &x));
  std::vector<int64_t> perm;
  if (const Attribute* a = c.node.attribute("perm")) perm = a->ints;
  if (perm.empty()) {
    for (size_t i = x->shape.size(); i-- > 0;)
      perm.push_back(static_cast<int64_t>(i));
  }
  return transposeTensor(*x, perm, &c.outputs[0]);
}

// Gather along `axis`: out[outer, idx..., inner] = data[outer, indices[idx...], inner].
Status runGather(OpContext& c) {
  const GraphTensor *data, *indices_tensor;
  REE_RETURN_IF_ERROR(c.required(0, &data));
  REE_RETURN_IF_ERROR(c.required(1, &indices_tensor));
  const int64_t rank = static_cast<int64_t>(data->shape.size());
  REE_CHECK_ARG(rank >= 1, "%s: scalar data", c.node.label().c_str());
  int64_t axis;
  REE_RETURN_IF_ERROR(normalizeAxis(c.node.intAttribute("axis", 0), rank, c.node.label(), &axis));
  std::vector<int64_t> indices;
  REE_RETURN_IF_ERROR(intValues(*indices_tensor, c.node.label() + " indices", &indices));
  const int64_t size = data->shape[axis];
  for (int64_t& i : indices) {
    REE_CHECK_ARG(i >= -size && i < size,
                  "%s: index %lld is out of range for dim %lld of size %lld",
                  c.node.label().c_str(), static_cast<long long>(i), static_cast<long long>(axis),
                  static_cast<long long>(size));
    if (i < 0) i += size;
  }
  Shape shape(data->shape.begin(), data->shape.begin() + axis);
  shape.insert(shape.end(), indices_tensor->shape.begin(), indices_tensor->shape.end());
  shape.insert(shape.end(), data->shape.begin() + axis + 1, data->shape.end());
  REE_RETURN_IF_ERROR(checkedShape(c, shape));
  REE_RETURN_IF_ERROR(checkTensorBytes(data->type, shape));
  REE_RETURN_IF_ERROR(checkIndexMap(shape));
  const int64_t outer = shapeProduct(data->shape, 0, axis),
                inner = shapeProduct(data->shape, axis + 1);
  std::vector<int64_t> index;
  index.reserve(static_cast<size_t>(outer * indices.size() * inner));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i : indices)
      for (int64_t k = 0; k < inner; ++k)
        index.push_back((o * size + i) * inner + k);
  return gatherFlat(*data, index, shape, 0.0f, &c.outputs[0]);
}

// Slice (opset >= 10: starts, ends, axes, steps inputs; before: attributes), ONNX clamping.
Status sliceParameters(OpContext& c, std::vector<int64_t>* starts, std::vector<int64_t>* ends,
                       std::vector<int64_t>* axes, std::vector<int64_t>* steps) {
  if (c.opset < 10) {
    const Attribute *s = c.node.attribute("starts"), *e = c.node.attribute("ends");
    REE_CHECK_ARG(s && e, "%s: starts and ends are required", c.node.label().c_str());
    *starts = s->ints;
    *ends = e->ints;
    if (const Attribute* a = c.node.attribute("axes")) *axes = a->ints;
  } else {
    const GraphTensor *s, *e;
    REE_RETURN_IF_ERROR(c.required(1, &s));
    REE_RETURN_IF_ERROR(c.required(2, &e));
    REE_RETURN_IF_ERROR(intValues(*s, c.node.label() + " starts", starts));
    REE_RETURN_IF_ERROR(intValues(*e, c.node.label() + " ends", ends));
    if (c.input(3)) REE_RETURN_IF_ERROR(intValues(*c.input(3), c.node.label() + " axes", axes));
    if (c.input(4)) REE_RETURN_IF_ERROR(intValues(*c.input(4), c.node.label() + " steps", steps));
  }
  if (axes->empty()) {
    for (size_t i = 0; i < starts->size(); ++i)
      axes->push_back(static_cast<int64_t>(i));
  }
  if (steps->empty()) steps->assign(starts->size(), 1);
  REE_CHECK_ARG(ends->size() == starts->size() && axes->size() == starts->size() &&
                    steps->size() == starts->size(),
                "%s: starts, ends, axes and steps differ in length", c.node.label().c_str());
  return Status::kSuccess;
}

Status runSlice(OpContext& c) {
  const GraphTensor* x;
  REE_RETURN_IF_ERROR(c.required(0, &x));
  std::vector<int64_t> starts, ends, axes, steps;
  REE_RETURN_IF_ERROR(sliceParameters(c, &starts, &ends, &axes, &steps));
  const int64_t rank = static_cast<int64_t>(x->shape.size());
  std::vector<int64_t> begin(rank, 0), step(rank, 1);
  Shape shape = x->shape;
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t axis;
    REE_RETURN_IF_ERROR(normalizeAxis(axes[i], rank, c.node.label(), &axis));
    const int64_t dim = x->shape[axis], st = steps[i];
    REE_CHECK_ARG(st != 0, "%s: step 0", c.node.label().c_str());
    int64_t s = starts[i] < 0 ? std::max<int64_t>(starts[i], -dim) + dim : starts[i];
    int64_t e = ends[i] < 0 ? std::max<int64_t>(ends[i], -dim - 1) + dim : ends[i];
    if (st > 0) {
      s = std::clamp<int64_t>(s, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
      shape[axis] = e > s ? (e - s - 1) / st + 1 : 0;
    } else if (dim == 0) {
      shape[axis] = 0;  // nothing to take (and no range to clamp into)
    } else {
      s = std::clamp<int64_t>(s, 0, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
      REE_CHECK_ARG(st != INT64_MIN, "%s: step %lld", c.node.label().c_str(),
                    static_cast<long long>(st));
      shape[axis] = s > e ? (s - e - 1) / (-st) + 1 : 0;
    }
    begin[axis] = s;
    step[axis] = st;
  }
  REE_RETURN_IF_ERROR(checkTensorBytes(x->type, shape));
  REE_RETURN_IF_ERROR(checkIndexMap(shape));
  std::vector<int64_t> strides(rank, 1);
  for (int64_t i = rank - 1; i > 0; --i)
    strides[i - 1] = strides[i] * x->shape[i];
  std::vector<int64_t> index;
  index.reserve(static_cast<size_t>(shapeProduct(shape)));
  std::vector<int64_t> position(rank, 0);
  for (int64_t n = 0; n < shapeProduct(shape); ++n) {
    int64_t source = 0;
    for (int64_t a = 0; a < rank; ++a)
      source += (begin[a] + position[a] * step[a]) * strides[a];
    index.push_back(source);
    for (int64_t a = rank - 1; a >= 0; --a) {
      if (++position[a] < shape[a]) break;
      position[a] = 0;
    }
  }
  return gatherFlat(*x, index, shape, 0.0f, &c.outputs[0]);
}

Status runConcat(OpContext& c) {
  REE_CHECK_ARG(!c.inputs.empty() && c.inputs[0] != nullptr, "%s: no inputs",
                c.node.label().c_str());
  const GraphTensor& first = *c.inputs[0];
  const int64_t rank = static_cast<int64_t>(first.shape.size());
  int64_t axis;
  REE_RETURN_IF_ERROR(normalizeAxis(c.node.intAttribute("axis", 0), rank, c.node.label(), &axis));
  Shape shape = first.shape;
  shape[axis] = 0;
  for (const GraphTensor* in : c.inputs) {
    REE_CHECK_ARG(
        in != nullptr && in->type == first.type && static_cast<int64_t>(in->shape.size()) == rank,
        "%s: inputs differ in type or rank", c.node.label().c_str());
    for (int64_t a = 0; a < rank; ++a) {
      REE_CHECK_ARG(a == axis || in->shape[a] == first.shape[a],
                    "%s: input shapes %s and %s differ outside axis %lld", c.node.label().c_str(),
                    shapeText(first.shape).c_str(), shapeText(in->shape).c_str(),
                    static_cast<long long>(axis));
    }
    shape[axis] += in->shape[axis];
  }
  REE_RETURN_IF_ERROR(checkedShape(c, shape));
  GraphTensor& out = c.outputs[0];
  REE_RETURN_IF_ERROR(GraphTensor::empty(first.type, shape, &out));
  if (out.numel() == 0) return Status::kSuccess;  // no loop over 2^34 rows of nothing
  const int64_t outer = shapeProduct(shape, 0, axis), size = elementTypeSize(first.type);
  char* dst = static_cast<char*>(out.data());
  for (int64_t o = 0; o < outer; ++o) {
    for (const GraphTensor* in : c.inputs) {
      const int64_t chunk = shapeProduct(in->shape, axis) * size;
      std::memcpy(dst, static_cast<const char*>(in->data()) + o * chunk, chunk);
      dst += chunk;
    }
  }
  return Status::kSuccess;
}

// Unsqueeze/Squeeze axes: the input (opset >= 13) or attribute.
Status listedAxes(OpContext& c, std::vector<int64_t>* axes) {
  if (const GraphTensor* a = c.input(1)) return intValues(*a, c.node.label() + " axes", axes);
  if (const Attribute* a = c.node.attribute("axes")) *axes = a->ints;
  return Status::kSuccess;
}

Status runUnsqueeze(OpContext& c) {
  const GraphTensor* x;
  REE_RETURN_IF_ERROR(c.required(0, &x));
  std::vector<int64_t> axes;
  REE_RETURN_IF_ERROR(listedAxes(c, &axes));
  const int64_t rank = static_cast<int64_t>(x->shape.size() + axes.size());
  std::vector<bool> inserted(rank, false);
  for (int64_t axis : axes) {
    int64_t a;
    REE_RETURN_IF_ERROR(normalizeAxis(axis, rank, c.node.label(), &a));
    REE_CHECK_ARG(!inserted[a], "%s: axis listed twice", c.node.label().c_str());
    inserted[a] = true;
  }
  Shape shape;
  size_t next = 0;
  for (int64_t i = 0; i < rank; ++i)
    shape.push_back(inserted[i] ? 1 : x->shape[next++]);
  c.outputs[0] = reshapedView(*x, shape);
  return Status::kSuccess;
}

Status runSqueeze(OpContext& c) {
  const GraphTensor* x;
  REE_RETURN_IF_ERROR(c.required(0, &x));
  std::vector<int64_t> axes;
  REE_RETURN_IF_ERROR(listedAxes(c, &axes));
  const int64_t rank = static_cast<int64_t>(x->shape.size());
  std::vector<bool> removed(rank, axes.empty());
  for (int64_t i = 0; i < rank && axes.empty(); ++i)
    removed[i] = x->shape[i] == 1;
  for (int64_t axis : axes) {
    int64_t a;
    REE_RETURN_IF_ERROR(normalizeAxis(axis, rank, c.node.label(), &a));
    REE_CHECK_ARG(x->shape[a] == 1, "%s: dim %lld has size %lld, not 1", c.node.label().c_str(),
                  static_cast<long long>(a), static_cast<long long>(x->shape[a]));
    removed[a] = true;
  }
  Shape shape;
  for (int64_t i = 0; i < rank; ++i)
    if (!removed[i]) shape.push_back(x->shape[i]);
  c.outputs[0] = reshapedView(*x, shape);
  return Status::kSuccess;
}

Status runExpand(OpContext& c) {
  const GraphTensor *x, *shape_input;
  REE_RETURN_IF_ERROR(c.required(0, &x));
  REE_RETURN_IF_ERROR(c.required(1, &shape_input));
  std::vector<int64_t> requested;
  REE_RETURN_IF_ERROR(intValues(*shape_input, c.node.label() + " shape", &requested));
  Shape shape;
  REE_RETURN_IF_ERROR(broadcastShapes(x->shape, requested, c.node.label(), &shape));
  REE_RETURN_IF_ERROR(checkedShape(c, shape));
  return broadcastTo(*x, shape, &c.outputs[0]);
}

Status runShape(OpContext& c) {
  const GraphTensor* x;
  REE_RETURN_IF_ERROR(c.required(0, &x));
  const int64_t rank = static_cast<int64_t>(x->shape.size());
  int64_t start = c.node.intAttribute("start", 0), end = c.node.intAttribute("end", rank);
  start = std::clamp<int64_t>(start < 0 ? start + rank : start, 0, rank);
  end = std::clamp<int64_t>(end < 0 ? end + rank : end, 0, rank);
  std::vector<int64_t> dims(x->shape.begin() + start, x->shape.begin() + std::max(start, end));
  return GraphTensor::fromHost(ElementType::kInt64, {static_cast<int64_t>(dims.size())},
                               dims.data(), &c.outputs[0]);
}

Status runSize(OpContext& c) {
  const GraphTensor* x;
  REE_RETURN_IF_ERROR(c.required(0, &x));
  int64_t n = x->numel();
  return GraphTensor::fromHost(ElementType::kInt64, {}, &n, &c.outputs[0]);
}

}  // namespace

Status runRange(OpContext& c);            // ops_constant.cpp
Status runConstantOfShape(OpContext& c);  // ops_constant.cpp
Status runConstant(OpContext& c);         // ops_constant.cpp

void registerLayoutOps(std::vector<OpDef>* table) {
  table->push_back({"Reshape", runReshape, "view"});
  table->push_back({"Flatten", runFlatten, "view"});
  table->push_back({"Unsqueeze", runUnsqueeze, "view"});
  table->push_back({"Squeeze", runSqueeze, "view"});
  table->push_back({"Transpose", runTranspose, "exact copy"});
  table->push_back({"Gather", runGather, "exact copy (indices checked)"});
  table->push_back({"Slice", runSlice, "exact copy"});
  table->push_back({"Concat", runConcat, "exact copy"});
  table->push_back({"Expand", runExpand, "exact copy (broadcast)"});
  table->push_back({"Shape", runShape, "host int64"});
  table->push_back({"Size", runSize, "host int64"});
  table->push_back({"Range", runRange, "host (int64 exact; float start + i * delta in fp32)"});
  table->push_back({"ConstantOfShape", runConstantOfShape, "host fill"});
  table->push_back({"Constant", runConstant, "constant"});
}

}  // namespace ree::compiler
