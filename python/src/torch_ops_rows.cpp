// C++ kernels of the row operators ree::rms_norm, layer_norm, sum, mean, max, min, var, softmax,
// log_softmax and argmax (torch_ops_library.cpp has the schemas): ree/ops.py's checks and
// messages, the RepOps rowops entry points of ree._C (ops_bindings.cpp) with the same arguments.
#include <torch/library.h>

#include <vector>

#include "ree/kernels/rowops.h"
#include "torch_ops_util.h"

namespace ree::torch_ops {
namespace {

using repops::RowsIn;
using repops::RowsOut;
using repops::VecIn;

// A weight or bias of `cols` elements (contiguous), or an undefined tensor when absent.
at::Tensor vectorArg(const char* op, const char* name, const std::optional<at::Tensor>& v,
                     int64_t cols) {
  if (!v || !v->defined()) return {};
  dtypeOf(op, name, *v);
  TORCH_CHECK_VALUE(v->numel() == cols && v->dim() == 1, "ree.ops.", op, ": ", name,
                    " must have shape (", cols, ",), got ", shapeText(v->sizes()));
  return v->contiguous();
}

VecIn vecIn(const at::Tensor& v) {
  return v.defined() ? VecIn{v.data_ptr(), dtypeOf(v.scalar_type())} : VecIn{nullptr, DType::kF32};
}

const at::Tensor& orNone(const std::optional<at::Tensor>& t) {
  static const at::Tensor none;
  return t ? *t : none;
}

at::Tensor rmsNorm(const at::Tensor& x_in, const std::optional<at::Tensor>& weight_in, double eps,
                   bool cast_before_weight) {
  const at::Device device = deviceOf("rms_norm", {{"x", &x_in}, {"weight", &orNone(weight_in)}});
  const DType dtype = dtypeOf("rms_norm", "x", x_in);
  const int64_t cols = lastDim("rms_norm", x_in);
  const at::Tensor weight = vectorArg("rms_norm", "weight", weight_in, cols);
  const at::Tensor x = x_in.contiguous();
  at::Tensor y = at::empty_like(x);
  const int64_t rows = x.numel() / cols;
  RowsIn in{x.data_ptr(), dtype, cols};
  RowsOut out{y.data_ptr(), dtype, cols};
  const VecIn w = vecIn(weight);
  const auto variant =
      cast_before_weight ? repops::RmsNormVariant::kCastBeforeWeight : repops::RmsNormVariant::kF32;
  const float eps_f = static_cast<float>(eps);
  REE_TORCH_RUN(device, repops::cpu::rmsNorm(in, w, out, rows, cols, eps_f, variant),
                repops::cuda::rmsNorm(in, w, out, rows, cols, eps_f, variant, cuda_stream));
  return y;
}

at::Tensor layerNorm(const at::Tensor& x_in, const std::optional<at::Tensor>& weight_in,
                     const std::optional<at::Tensor>& bias_in, double eps) {
  const at::Device device = deviceOf(
      "layer_norm", {{"x", &x_in}, {"weight", &orNone(weight_in)}, {"bias", &orNone(bias_in)}});
  const DType dtype = dtypeOf("layer_norm", "x", x_in);
  const int64_t cols = lastDim("layer_norm", x_in);
  const at::Tensor weight = vectorArg("layer_norm", "weight", weight_in, cols);
  const at::Tensor bias = vectorArg("layer_norm", "bias", bias_in, cols);
  const at::Tensor x = x_in.contiguous();
  at::Tensor y = at::empty_like(x);
  const int64_t rows = x.numel() / cols;
  RowsIn in{x.data_ptr(), dtype, cols};
  RowsOut out{y.data_ptr(), dtype, cols};
  const VecIn w = vecIn(weight), b = vecIn(bias);
  const float eps_f = static_cast<float>(eps);
  REE_TORCH_RUN(device, repops::cpu::layerNorm(in, w, b, out, rows, cols, eps_f),
                repops::cuda::layerNorm(in, w, b, out, rows, cols, eps_f, cuda_stream));
  return y;
}

// x with `dim` moved last, contiguous (a 0-d x as one element), and its rows and columns.
struct RowsView {
  at::Tensor x;
  int64_t rows, cols;
};

RowsView rowsLast(const char* op, const at::Tensor& x, int64_t dim) {
  at::Tensor xm;
  if (x.dim() == 0) {
    xm = x.reshape({1});
  } else if (dim == -1 || dim == x.dim() - 1) {  // the common case: no movedim view
    xm = x.contiguous();
  } else {
    xm = x.movedim(dim, -1).contiguous();
  }
  const int64_t cols = lastDim(op, xm);
  return {xm, xm.numel() / cols, cols};
}

std::vector<int64_t> reducedShape(const at::Tensor& x, int64_t dim, bool keepdim) {
  if (x.dim() == 0) return {};
  dim = at::maybe_wrap_dim(dim, x.dim());
  std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
  if (keepdim) {
    shape[dim] = 1;
  } else {
    shape.erase(shape.begin() + dim);
  }
  return shape;
}

template <repops::ReduceOp kOp>
at::Tensor reduce(const at::Tensor& x, int64_t dim, bool keepdim) {
  static constexpr const char* kNames[] = {"sum", "mean", "max", "min", "var"};
  const char* op = kNames[static_cast<int>(kOp)];
  const at::Device device = deviceOf(op, {{"x", &x}});
  const DType dtype = dtypeOf(op, "x", x);
  const std::vector<int64_t> shape = reducedShape(x, dim, keepdim);
  const RowsView view = rowsLast(op, x, dim);
  // Allocated in the result's shape: rows values in row order, contiguous.
  at::Tensor out = at::empty(shape, x.options());
  RowsIn in{view.x.data_ptr(), dtype, view.cols};
  void* result = out.data_ptr();
  REE_TORCH_RUN(
      device, repops::cpu::reduceRows(kOp, in, result, dtype, view.rows, view.cols),
      repops::cuda::reduceRows(kOp, in, result, dtype, view.rows, view.cols, cuda_stream));
  return out;
}

template <bool kLog>
at::Tensor softmax(const at::Tensor& x, int64_t dim) {
  const char* op = kLog ? "log_softmax" : "softmax";
  const at::Device device = deviceOf(op, {{"x", &x}});
  const DType dtype = dtypeOf(op, "x", x);
  if (x.dim()) dim = at::maybe_wrap_dim(dim, x.dim());
  const RowsView view = rowsLast(op, x, dim);
  at::Tensor y = at::empty_like(view.x);
  RowsIn in{view.x.data_ptr(), dtype, view.cols};
  RowsOut out{y.data_ptr(), dtype, view.cols};
  if (kLog) {
    REE_TORCH_RUN(device, repops::cpu::logSoftmax(in, out, view.rows, view.cols),
                  repops::cuda::logSoftmax(in, out, view.rows, view.cols, cuda_stream));
  } else {
    REE_TORCH_RUN(device, repops::cpu::softmax(in, out, view.rows, view.cols),
                  repops::cuda::softmax(in, out, view.rows, view.cols, cuda_stream));
  }
  if (x.dim() == 0) return y.reshape({});
  return y.movedim(-1, dim).reshape(x.sizes()).contiguous();
}

at::Tensor argmax(const at::Tensor& x, int64_t dim, bool keepdim) {
  const at::Device device = deviceOf("argmax", {{"x", &x}});
  const DType dtype = dtypeOf("argmax", "x", x);
  const std::vector<int64_t> shape = reducedShape(x, dim, keepdim);
  const RowsView view = rowsLast("argmax", x, dim);
  at::Tensor out = at::empty({view.rows}, x.options().dtype(at::kInt));
  RowsIn in{view.x.data_ptr(), dtype, view.cols};
  auto* indices = out.data_ptr<int32_t>();
  REE_TORCH_RUN(device, repops::cpu::argmaxRows(in, indices, view.rows, view.cols),
                repops::cuda::argmaxRows(in, indices, view.rows, view.cols, cuda_stream));
  return out.to(at::kLong).reshape(shape);
}

void registerRowOps(torch::Library& m) {
  m.impl("rms_norm", &rmsNorm);
  m.impl("layer_norm", &layerNorm);
  m.impl("sum", &reduce<repops::ReduceOp::kSum>);
  m.impl("mean", &reduce<repops::ReduceOp::kMean>);
  m.impl("max", &reduce<repops::ReduceOp::kMax>);
  m.impl("min", &reduce<repops::ReduceOp::kMin>);
  m.impl("var", &reduce<repops::ReduceOp::kVar>);
  m.impl("softmax", &softmax<false>);
  m.impl("log_softmax", &softmax<true>);
  m.impl("argmax", &argmax);
}

}  // namespace

TORCH_LIBRARY_IMPL(ree, CPU, m) {
  registerRowOps(m);
}

TORCH_LIBRARY_IMPL(ree, CUDA, m) {
  registerRowOps(m);
}

}  // namespace ree::torch_ops
