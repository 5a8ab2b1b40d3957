// Row operators: softmax, log-softmax, reductions, LayerNorm and RMSNorm, pooling. The axes an
// operator works on are moved last by an exact transpose, so each becomes a RepOp over rows x cols
// (rowops.md: a row's result never depends on the other rows).
#include <algorithm>
#include <cmath>

#include "device_ops.h"
#include "ops.h"
#include "ops_window.h"
#include "ree/kernels/rowops.h"
#include "tensor_limit.h"
#include "tensor_util.h"

namespace ree::compiler {

namespace {

using repops::ReduceOp;
using repops::RowsIn;
using repops::RowsOut;

// x with `axes` (sorted, distinct) moved last: out [rows, cols], kept = the other dims.
Status axesLast(const GraphTensor& x, const std::vector<int64_t>& axes, GraphTensor* out,
                Shape* kept, int64_t* cols) {
  std::vector<int64_t> perm;
  for (int64_t i = 0; i < static_cast<int64_t>(x.shape.size()); ++i) {
    if (!std::binary_search(axes.begin(), axes.end(), i)) {
      perm.push_back(i);
      kept->push_back(x.shape[i]);
    }
  }
  *cols = 1;
  for (int64_t axis : axes) {
    perm.push_back(axis);
    *cols *= x.shape[axis];
  }
  bool identity = true;
  for (size_t i = 0; i < perm.size(); ++i)
    identity = identity && perm[i] == static_cast<int64_t>(i);
  if (identity) {
    *out = x;
    return Status::kSuccess;
  }
  return transposeTensor(x, perm, out);
}

// Softmax axis: opset >= 13 one axis (default -1); earlier, the dims from `axis` (default 1) on
// are flattened into one row.
Status runSoftmax(OpContext& c) {
  const GraphTensor* x;
  REE_RETURN_IF_ERROR(c.floatInput(0, &x));
  const int64_t rank = static_cast<int64_t>(x->shape.size());
  REE_CHECK_ARG(rank >= 1, "%s: scalar input", c.node.label().c_str());
  const bool legacy = c.opset < 13;
  int64_t axis;
  REE_RETURN_IF_ERROR(
      normalizeAxis(c.node.intAttribute("axis", legacy ? 1 : -1), rank, c.node.label(), &axis));
  std::vector<int64_t> axes;
  for (int64_t i = axis; i < (legacy ? rank : axis + 1); ++i)
    axes.push_back(i);
  GraphTensor rows_in;
  Shape kept;
  int64_t cols;
  REE_RETURN_IF_ERROR(axesLast(*x, axes, &rows_in, &kept, &cols));
  REE_CHECK_ARG(cols >= 1, "%s: empty softmax axis", c.node.label().c_str());
  const int64_t rows = shapeProduct(kept);
  GraphTensor result;
  REE_RETURN_IF_ERROR(emptyOn(c.device, ElementType::kFloat32, rows_in.shape, &result));
  RowsIn in{rows_in.data(), DType::kF32, cols};
  RowsOut y{result.data(), DType::kF32, cols};
  REE_RETURN_IF_ERROR(dev::softmax(c.device, c.node.op_type != "Softmax", in, y, rows, cols));
  if (legacy || axis == rank - 1) {
    c.outputs[0] = reshapedView(result, x->shape);
    return Status::kSuccess;
  }
  std::vector<int64_t> back(rank);  // inverse of moving `axis` last
  for (int64_t i = 0; i < rank; ++i)
    back[i] = i < axis ? i : (i == axis ? rank - 1 : i - 1);
  return transposeTensor(result, back, &c.outputs[0]);
}

// Reduction axes: the `axes` input (ReduceSum from opset 13, all from 18) or attribute.
Status reduceAxes(OpContext& c, int64_t rank, std::vector<int64_t>* axes) {
  std::vector<int64_t> listed;
  const GraphTensor* input = c.input(1);
  if (input != nullptr) {
    REE_RETURN_IF_ERROR(intValues(*input, c.node.label() + " axes", &listed));
  } else if (const Attribute* a = c.node.attribute("axes")) {
    listed = a->ints;
  }
  if (listed.empty() && c.node.intAttribute("noop_with_empty_axes", 0) == 0) {
    for (int64_t i = 0; i < rank; ++i)
      listed.push_back(i);
  }
  for (int64_t axis : listed) {
    int64_t normalized;
    REE_RETURN_IF_ERROR(normalizeAxis(axis, rank, c.node.label(), &normalized));
    axes->push_back(normalized);
  }
  std::sort(axes->begin(), axes->end());
  REE_CHECK_ARG(std::adjacent_find(axes->begin(), axes->end()) == axes->end(),
                "%s: an axis is listed twice", c.node.label().c_str());
  return Status::kSuccess;
}

Status runReduce(OpContext& c) {
  const GraphTensor* x;
  REE_RETURN_IF_ERROR(c.floatInput(0, &x));
  std::vector<int64_t> axes;
  REE_RETURN_IF_ERROR(reduceAxes(c, static_cast<int64_t>(x->shape.size()), &axes));
  if (axes.empty()) {
    c.outputs[0] = *x;  // noop_with_empty_axes
    return Status::kSuccess;
  }
  GraphTensor rows_in;
  Shape kept;
  int64_t cols;
  REE_RETURN_IF_ERROR(axesLast(*x, axes, &rows_in, &kept, &cols));
  REE_CHECK_ARG(cols >= 1, "%s: reduction over an empty axis", c.node.label().c_str());
  Shape out_shape = x->shape;
  for (int64_t axis : axes)
    out_shape[axis] = 1;
  if (c.node.intAttribute("keepdims", 1) == 0) out_shape = kept;
  const std::string& op = c.node.op_type;
  ReduceOp reduce = op == "ReduceMean"  ? ReduceOp::kMean
                    : op == "ReduceMax" ? ReduceOp::kMax
                    : op == "ReduceMin" ? ReduceOp::kMin
                                        : ReduceOp::kSum;
  GraphTensor& out = c.outputs[0];
  REE_RETURN_IF_ERROR(emptyOn(c.device, ElementType::kFloat32, out_shape, &out));
  return dev::reduceRows(c.device, reduce, RowsIn{rows_in.data(), DType::kF32, cols}, out.data(),
                         DType::kF32, shapeProduct(kept), cols);
}

// LayerNormalization / SimplifiedLayerNormalization / RMSNormalization: normalised over the dims
// from `axis` (default -1) on, through the operation set's layerNorm / rmsNorm.
Status runNorm(OpContext& c) {
  const GraphTensor *x, *scale;
  REE_RETURN_IF_ERROR(c.floatInput(0, &x));
  REE_RETURN_IF_ERROR(c.floatInput(1, &scale));
  for (size_t i = 1; i < c.outputs.size(); ++i) {
    REE_CHECK_ARG(c.node.outputs[i] < 0, "%s: only the first output (Y) is supported",
                  c.node.label().c_str());
  }
  const int64_t rank = static_cast<int64_t>(x->shape.size());
  int64_t axis;
  REE_RETURN_IF_ERROR(normalizeAxis(c.node.intAttribute("axis", -1), rank, c.node.label(), &axis));
  const Shape normalized(x->shape.begin() + axis, x->shape.end());
  const int64_t cols = shapeProduct(normalized), rows = shapeProduct(x->shape, 0, axis);
  REE_CHECK_ARG(cols >= 1, "%s: empty normalised dims", c.node.label().c_str());
  GraphTensor w, b;
  REE_RETURN_IF_ERROR(broadcastTo(*scale, normalized, &w));
  const float eps = c.node.floatAttribute("epsilon", 1e-5f);
  REE_RETURN_IF_ERROR(emptyOn(c.device, ElementType::kFloat32, x->shape, &c.outputs[0]));
  Tensor y = floatView(c.outputs[0], {rows, cols});
  if (c.node.op_type != "LayerNormalization") {
    return c.ops->rmsNorm(floatView(*x, {rows, cols}), floatView(w, {cols}), eps, y);
  }
  Tensor bias;
  if (const GraphTensor* b0 = c.input(2)) {
    REE_CHECK_ARG(b0->type == ElementType::kFloat32, "%s: bias must be float",
                  c.node.label().c_str());
    REE_RETURN_IF_ERROR(broadcastTo(*b0, normalized, &b));
    bias = floatView(b, {cols});
  }
  return c.ops->layerNorm(floatView(*x, {rows, cols}), floatView(w, {cols}), bias, eps, y);
}

Status runGlobalAveragePool(OpContext& c) {
  const GraphTensor* x;
  REE_RETURN_IF_ERROR(c.floatInput(0, &x));
  REE_CHECK_ARG(x->shape.size() >= 3, "%s: input must be N x C x spatial", c.node.label().c_str());
  const int64_t rows = x->shape[0] * x->shape[1], cols = shapeProduct(x->shape, 2);
  REE_CHECK_ARG(cols >= 1, "%s: empty spatial dims", c.node.label().c_str());
  Shape out_shape(x->shape.size(), 1);
  out_shape[0] = x->shape[0];
  out_shape[1] = x->shape[1];
  REE_RETURN_IF_ERROR(emptyOn(c.device, ElementType::kFloat32, out_shape, &c.outputs[0]));
  return dev::reduceRows(c.device, ReduceOp::kMean, RowsIn{x->data(), DType::kF32, cols},
                         c.outputs[0].data(), DType::kF32, rows, cols);
}

// MaxPool 2-D: the windows gathered into rows (n, c, oh, ow) x cols (kh, kw), padding -inf, then
// the RepOp row max.
Status runMaxPool(OpContext& c) {
  const GraphTensor* x;
  REE_RETURN_IF_ERROR(c.floatInput(0, &x));
  REE_CHECK_ARG(x->shape.size() == 4, "%s: only 2-D pooling (NCHW) is supported",
                c.node.label().c_str());
  REE_CHECK_ARG(c.node.outputs.size() < 2 || c.node.outputs[1] < 0,
                "%s: the Indices output is not supported", c.node.label().c_str());
  REE_CHECK_ARG(c.node.intAttribute("storage_order", 0) == 0,
                "%s: storage_order = 1 is not supported", c.node.label().c_str());
  REE_CHECK_ARG(c.node.attribute("kernel_shape") != nullptr, "%s: kernel_shape is required",
                c.node.label().c_str());
  const int64_t in_hw[2] = {x->shape[2], x->shape[3]}, none[2] = {1, 1};
  Window2d w;
  REE_RETURN_IF_ERROR(readWindow2d(c.node, in_hw, none, &w));
  const int64_t batch = x->shape[0], channels = x->shape[1];
  const int64_t rows = batch * channels * w.out[0] * w.out[1], cols = w.kernel[0] * w.kernel[1];
  REE_RETURN_IF_ERROR(checkTensorBytes(ElementType::kInt64, {rows, cols}));  // the index map
  GraphTensor windows;
  REE_RETURN_IF_ERROR(gatherFlat(*x, windowIndex(w, batch, channels, in_hw, true), {rows, cols},
                                 -INFINITY, &windows));
  REE_RETURN_IF_ERROR(emptyOn(c.device, ElementType::kFloat32,
                              {batch, channels, w.out[0], w.out[1]}, &c.outputs[0]));
  return dev::reduceRows(c.device, ReduceOp::kMax, RowsIn{windows.data(), DType::kF32, cols},
                         c.outputs[0].data(), DType::kF32, rows, cols);
}

// AveragePool 2-D: the windows gathered into rows (n, c, oh, ow) x cols (kh, kw) with zeros for
// padding, the RepOp row sum, then one IEEE division by the window's count: kh * kw, or with
// count_include_pad = 0 (the default) the number of positions inside the input.
Status runAveragePool(OpContext& c) {
  const GraphTensor* x;
  REE_RETURN_IF_ERROR(c.floatInput(0, &x));
  REE_CHECK_ARG(x->shape.size() == 4, "%s: only 2-D pooling (NCHW) is supported",
                c.node.label().c_str());
  REE_CHECK_ARG(c.node.attribute("kernel_shape") != nullptr, "%s: kernel_shape is required",
                c.node.label().c_str());
  const int64_t in_hw[2] = {x->shape[2], x->shape[3]}, none[2] = {1, 1};
  Window2d w;
  REE_RETURN_IF_ERROR(readWindow2d(c.node, in_hw, none, &w));
  const int64_t batch = x->shape[0], channels = x->shape[1];
  const int64_t rows = batch * channels * w.out[0] * w.out[1], cols = w.kernel[0] * w.kernel[1];
  REE_RETURN_IF_ERROR(checkTensorBytes(ElementType::kInt64, {rows, cols}));  // the index map
  const std::vector<int64_t> index = windowIndex(w, batch, channels, in_hw, true);
  const bool include_pad = c.node.intAttribute("count_include_pad", 0) != 0;
  GraphTensor windows, counts, device_counts, sums;
  REE_RETURN_IF_ERROR(gatherFlat(*x, index, {rows, cols}, 0.0f, &windows));
  REE_RETURN_IF_ERROR(GraphTensor::empty(ElementType::kFloat32, {rows}, &counts));
  for (int64_t r = 0; r < rows; ++r) {
    int64_t inside = 0;
    for (int64_t j = 0; j < cols; ++j)
      inside += index[r * cols + j] >= 0 ? 1 : 0;
    counts.as<float>()[r] = static_cast<float>(include_pad ? cols : inside);
  }
  REE_RETURN_IF_ERROR(moveTo(counts, c.device, &device_counts));
  REE_RETURN_IF_ERROR(emptyOn(c.device, ElementType::kFloat32, {rows}, &sums));
  REE_RETURN_IF_ERROR(dev::reduceRows(c.device, ReduceOp::kSum,
                                      RowsIn{windows.data(), DType::kF32, cols}, sums.data(),
                                      DType::kF32, rows, cols));
  REE_RETURN_IF_ERROR(emptyOn(c.device, ElementType::kFloat32,
                              {batch, channels, w.out[0], w.out[1]}, &c.outputs[0]));
  return dev::binary(c.device, BinaryOp::kDiv, sums.as<float>(), device_counts.as<float>(),
                     c.outputs[0].as<float>(), rows);
}

// A per-channel parameter [C] of BatchNormalization, broadcast to x's shape (channel axis 1).
Status channelParameter(const OpContext& c, size_t i, const Shape& x_shape, GraphTensor* out) {
  const GraphTensor* p;
  REE_RETURN_IF_ERROR(c.floatInput(i, &p));
  REE_CHECK_ARG(p->numel() == x_shape[1], "%s: input %zu must hold %lld channel values, got %s",
                c.node.label().c_str(), i, static_cast<long long>(x_shape[1]),
                p->describe().c_str());
  Shape shape(x_shape.size(), 1);
  shape[1] = x_shape[1];
  return broadcastTo(reshapedView(*p, shape), x_shape, out);
}

// BatchNormalization (inference): Y = (X - mean) / sqrt(var + epsilon) * scale + B, the spec's
// formula, each step one RepOp over the whole tensor (per-channel values broadcast by exact
// copies).
Status runBatchNorm(OpContext& c) {
  const GraphTensor* x;
  REE_RETURN_IF_ERROR(c.floatInput(0, &x));
  REE_CHECK_ARG(x->shape.size() >= 2, "%s: input must be N x C x ...", c.node.label().c_str());
  REE_CHECK_ARG(c.node.intAttribute("training_mode", 0) == 0,
                "%s: training_mode = 1 is not supported (inference only)", c.node.label().c_str());
  for (size_t i = 1; i < c.outputs.size(); ++i) {
    REE_CHECK_ARG(c.node.outputs[i] < 0, "%s: only the first output (Y) is supported",
                  c.node.label().c_str());
  }
  GraphTensor scale, bias, mean, var, host_eps, eps, t0, t1;
  REE_RETURN_IF_ERROR(channelParameter(c, 1, x->shape, &scale));
  REE_RETURN_IF_ERROR(channelParameter(c, 2, x->shape, &bias));
  REE_RETURN_IF_ERROR(channelParameter(c, 3, x->shape, &mean));
  REE_RETURN_IF_ERROR(channelParameter(c, 4, x->shape, &var));
  const int64_t n = x->numel();
  REE_RETURN_IF_ERROR(GraphTensor::empty(ElementType::kFloat32, x->shape, &host_eps));
  std::fill(host_eps.as<float>(), host_eps.as<float>() + n,
            c.node.floatAttribute("epsilon", 1e-5f));
  REE_RETURN_IF_ERROR(moveTo(host_eps, c.device, &eps));
  REE_RETURN_IF_ERROR(emptyOn(c.device, ElementType::kFloat32, x->shape, &t0));
  REE_RETURN_IF_ERROR(emptyOn(c.device, ElementType::kFloat32, x->shape, &t1));
  REE_RETURN_IF_ERROR(emptyOn(c.device, ElementType::kFloat32, x->shape, &c.outputs[0]));
  float *a = t0.as<float>(), *b = t1.as<float>(), *y = c.outputs[0].as<float>();
  REE_RETURN_IF_ERROR(
      dev::binary(c.device, BinaryOp::kAdd, var.as<float>(), eps.as<float>(), a, n));
  REE_RETURN_IF_ERROR(dev::simpleUnary(c.device, SimpleUnaryOp::kSqrt, a, a, n));
  REE_RETURN_IF_ERROR(
      dev::binary(c.device, BinaryOp::kSub, x->as<float>(), mean.as<float>(), b, n));
  REE_RETURN_IF_ERROR(dev::binary(c.device, BinaryOp::kDiv, b, a, b, n));
  REE_RETURN_IF_ERROR(dev::binary(c.device, BinaryOp::kMul, b, scale.as<float>(), b, n));
  return dev::binary(c.device, BinaryOp::kAdd, b, bias.as<float>(), y, n);
}

}  // namespace

void registerRowOps(std::vector<OpDef>* table) {
  table->push_back({"Softmax", runSoftmax, "RepOp softmax (rowops.md), axis moved last"});
  table->push_back({"LogSoftmax", runSoftmax, "RepOp logSoftmax (rowops.md), axis moved last"});
  for (const char* op : {"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin"}) {
    table->push_back({op, runReduce, "RepOp reduceRows (rowops.md), axes moved last"});
  }
  table->push_back({"LayerNormalization", runNorm, "OperationSet::layerNorm"});
  table->push_back({"SimplifiedLayerNormalization", runNorm, "OperationSet::rmsNorm"});
  table->push_back({"RMSNormalization", runNorm, "OperationSet::rmsNorm"});
  table->push_back({"GlobalAveragePool", runGlobalAveragePool, "RepOp reduceRows mean"});
  table->push_back({"MaxPool", runMaxPool, "window gather + RepOp reduceRows max"});
  table->push_back({"AveragePool", runAveragePool,
                    "window gather + RepOp reduceRows sum, one division by the count"});
  table->push_back({"BatchNormalization", runBatchNorm,
                    "RepOp binary/simpleUnary: (x - mean) / sqrt(var + eps) * scale + B"});
}

}  // namespace ree::compiler
