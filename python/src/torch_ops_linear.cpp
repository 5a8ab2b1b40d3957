// C++ kernels of ree::linear, ree::matmul and ree::cast (torch_ops_library.cpp has the schemas):
// the checks, messages and kernel calls of ree/ops.py's Python versions, on the same RepOps entry
// points as ree._C.linear / ree._C.cast (ops_bindings.cpp), so the bits are the same.
#include <torch/library.h>

#include <vector>

#include "ree/kernels/linear.h"
#include "torch_ops_util.h"

namespace ree::torch_ops {
namespace {

// y = x @ weight.T (+ bias) with x [..., K], weight [N, K]; the output dtype is x's.
at::Tensor linearRaw(const char* op, const at::Tensor& x, const at::Tensor& weight_in,
                     const std::optional<at::Tensor>& bias_in) {
  const at::Tensor none;
  const at::Tensor& bias_arg = bias_in ? *bias_in : none;
  const at::Device device = deviceOf(op, {{"x", &x}, {"weight", &weight_in}, {"bias", &bias_arg}});
  dtypeOf(op, "x", x);
  dtypeOf(op, "weight", weight_in);
  TORCH_CHECK_VALUE(weight_in.dim() == 2, "ree.ops.", op,
                    ": weight must be 2-D [out_features, in_features], got shape ",
                    shapeText(weight_in.sizes()));
  const int64_t n = weight_in.size(0), k = weight_in.size(1);
  TORCH_CHECK_VALUE(x.dim() >= 1 && x.size(-1) == k, "ree.ops.", op,
                    ": x's last dimension must be in_features = ", k, ", got shape ",
                    shapeText(x.sizes()));
  at::Tensor bias;
  if (bias_arg.defined()) {
    dtypeOf(op, "bias", bias_arg);
    TORCH_CHECK_VALUE(bias_arg.dim() == 1 && bias_arg.size(0) == n, "ree.ops.", op,
                      ": bias must have shape (", n, ",), got ", shapeText(bias_arg.sizes()));
    bias = bias_arg;
    if (bias.scalar_type() != at::kFloat && bias.scalar_type() != weight_in.scalar_type()) {
      bias = castRaw(bias, at::kFloat);  // exact widening
    }
    bias = bias.contiguous();
  }
  std::vector<int64_t> out_shape(x.sizes().begin(), x.sizes().end());
  out_shape.back() = n;
  at::Tensor x2 = x.reshape({-1, k}).contiguous();
  const int64_t m = x2.size(0);
  // The kernel reads f32/bf16 activations and writes f32/bf16: f16 activations are widened
  // (exact) and the f32 result rounded once to f16.
  if (x2.scalar_type() == at::kHalf) x2 = castRaw(x2, at::kFloat);
  at::Tensor y = at::empty({m, n}, x2.options());
  if (m > 0 && n > 0) {
    const at::Tensor weight = weight_in.contiguous();
    repops::LinearArgs args;
    args.x = x2.data_ptr();
    args.x_dtype = dtypeOf(x2.scalar_type());
    args.w = weight.data_ptr();
    args.w_dtype = dtypeOf(weight.scalar_type());
    args.bias = bias.defined() ? bias.data_ptr() : nullptr;
    args.bias_dtype = bias.defined() ? dtypeOf(bias.scalar_type()) : DType::kF32;
    args.y = y.data_ptr();
    args.y_dtype = dtypeOf(y.scalar_type());
    args.m = m;
    args.n = n;
    args.k = k;
    REE_TORCH_RUN(device, repops::cpu::linear(args), repops::cuda::linear(args, cuda_stream));
  }
  return castRaw(y, x.scalar_type()).reshape(out_shape);
}

at::Tensor linear(const at::Tensor& x, const at::Tensor& weight,
                  const std::optional<at::Tensor>& bias) {
  return linearRaw("linear", x, weight, bias);
}

// The shape of a @ b (ValueError when they do not fit).
std::vector<int64_t> matmulShape(const at::Tensor& a, const at::Tensor& b) {
  TORCH_CHECK_VALUE(a.dim() >= 1 && b.dim() >= 1 && b.dim() <= 3, "ree.ops.matmul: shapes ",
                    shapeText(a.sizes()), " and ", shapeText(b.sizes()),
                    ": b must be 1-D, 2-D [K, N] or 3-D [batch, K, N]");
  TORCH_CHECK_VALUE(b.dim() != 3 || (a.dim() == 3 && a.size(0) == b.size(0)),
                    "ree.ops.matmul: a 3-D b needs a 3-D a with the same batch, got ",
                    shapeText(a.sizes()), " and ", shapeText(b.sizes()));
  TORCH_CHECK_VALUE(a.size(-1) == b.size(b.dim() > 1 ? -2 : 0),
                    "ree.ops.matmul: inner dimensions differ: ", shapeText(a.sizes()), " @ ",
                    shapeText(b.sizes()));
  std::vector<int64_t> shape;
  if (a.dim() > 1) shape.assign(a.sizes().begin(), a.sizes().end() - 1);
  if (b.dim() > 1) shape.push_back(b.size(-1));
  return shape;
}

at::Tensor matmul(const at::Tensor& a, const at::Tensor& b) {
  const std::vector<int64_t> shape = matmulShape(a, b);
  TORCH_CHECK_TYPE(a.scalar_type() == b.scalar_type(),
                   "ree.ops.matmul: a and b must have one dtype, got torch.",
                   dtypeText(a.scalar_type()), " and torch.", dtypeText(b.scalar_type()));
  const at::Tensor a2 = a.dim() == 1 ? a.unsqueeze(0) : a;
  at::Tensor out;
  if (b.dim() == 3) {
    std::vector<at::Tensor> parts;
    for (int64_t i = 0; i < b.size(0); ++i) {
      parts.push_back(linearRaw("matmul", a2[i], b[i].t().contiguous(), std::nullopt));
    }
    out = parts.empty() ? a2.new_empty({0, a2.size(1), b.size(2)}) : at::stack(parts);
  } else {
    const at::Tensor w = b.dim() == 1 ? b.unsqueeze(1).t() : b.t();
    out = linearRaw("matmul", a2, w.contiguous(), std::nullopt);
  }
  return out.reshape(shape);
}

at::Tensor cast(const at::Tensor& x, at::ScalarType dtype) {
  dtypeOf("cast", "x", x);
  dtypeOf("cast", "dtype", at::empty({0}, at::TensorOptions().dtype(dtype)));
  deviceOf("cast", {{"x", &x}});
  at::Tensor y = castRaw(x, dtype);
  return y.is_same(x) ? x.clone() : y;  // an operator's output never aliases its input
}

}  // namespace

TORCH_LIBRARY_IMPL(ree, CPU, m) {
  m.impl("linear", &linear);
  m.impl("matmul", &matmul);
  m.impl("cast", &cast);
}

TORCH_LIBRARY_IMPL(ree, CUDA, m) {
  m.impl("linear", &linear);
  m.impl("matmul", &matmul);
  m.impl("cast", &cast);
}

}  // namespace ree::torch_ops
