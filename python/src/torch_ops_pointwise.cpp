// C++ kernels of the element-wise operators: the correctly rounded fp32 functions (ree::sigmoid,
// exp, expm1, log, log1p, tanh, erf, sin, cos, rsqrt, softplus), ree::silu, gelu, swiglu and geglu
// (torch_ops_library.cpp has the schemas), with ree/ops.py's checks and messages and the RepOps
// entry points of ree._C.unary_math / activation / gated (ops_bindings.cpp).
#include <torch/library.h>

#include <string>

#include "ree/kernels/math_ops.h"
#include "ree/kernels/pointwise.h"
#include "torch_ops_util.h"

namespace ree::torch_ops {
namespace {

// bf16/f16 inputs are widened exactly and the fp32 result rounded once to their dtype.
template <UnaryMathOp kOp>
at::Tensor unary(const at::Tensor& x) {
  static constexpr const char* kNames[] = {"exp",   "expm1", "log",   "log1p",   "tanh",
                                           "erf",   "sin",   "cos",   "rsqrt",   "sigmoid",
                                           nullptr, nullptr, nullptr, "softplus"};
  const char* op = kNames[static_cast<int>(kOp)];
  const at::Device device = deviceOf(op, {{"x", &x}});
  dtypeOf(op, "x", x);
  const bool f32 = x.scalar_type() == at::kFloat;
  const at::Tensor xf = f32 ? x.contiguous() : castRaw(x, at::kFloat);
  at::Tensor y = at::empty_like(xf);
  const auto* in = xf.data_ptr<float>();
  auto* out = y.data_ptr<float>();
  const int64_t n = xf.numel();
  REE_TORCH_RUN(device, repops::cpu::unaryMath(kOp, in, out, n),
                repops::cuda::unaryMath(kOp, in, out, n, cuda_stream));
  return f32 ? y : castRaw(y, x.scalar_type());
}

at::Tensor activation(const char* op, Activation act, const at::Tensor& x_in) {
  const at::Device device = deviceOf(op, {{"x", &x_in}});
  const DType dtype = dtypeOf(op, "x", x_in);
  const at::Tensor x = x_in.contiguous();
  at::Tensor y = at::empty_like(x);
  const void* in = x.data_ptr();
  void* out = y.data_ptr();
  const int64_t n = x.numel();
  REE_TORCH_RUN(device, repops::cpu::activation(act, dtype, in, out, n),
                repops::cuda::activation(act, dtype, in, out, n, cuda_stream));
  return y;
}

Activation geluKind(const char* op, c10::string_view approximate) {
  if (approximate == "none") return Activation::kGeluErf;
  TORCH_CHECK_VALUE(approximate == "tanh", "ree.ops.", op,
                    ": approximate must be 'none' or 'tanh', got '", std::string(approximate), "'");
  return Activation::kGeluTanh;
}

at::Tensor silu(const at::Tensor& x) {
  return activation("silu", Activation::kSilu, x);
}

at::Tensor gelu(const at::Tensor& x, c10::string_view approximate) {
  return activation("gelu", geluKind("gelu", approximate), x);
}

at::Tensor gated(const char* op, Activation act, const at::Tensor& gate_in,
                 const at::Tensor& up_in) {
  const at::Device device = deviceOf(op, {{"gate", &gate_in}, {"up", &up_in}});
  const DType dtype = dtypeOf(op, "gate", gate_in);
  TORCH_CHECK_VALUE(
      up_in.scalar_type() == gate_in.scalar_type() && up_in.sizes() == gate_in.sizes(), "ree.ops.",
      op, ": gate and up must have one shape and dtype, got ", shapeText(gate_in.sizes()),
      " torch.", dtypeText(gate_in.scalar_type()), " and ", shapeText(up_in.sizes()), " torch.",
      dtypeText(up_in.scalar_type()));
  const int64_t cols = lastDim(op, gate_in);
  const at::Tensor gate = gate_in.contiguous(), up = up_in.contiguous();
  at::Tensor out = at::empty_like(gate);
  const int64_t rows = gate.numel() / cols;
  const void *g = gate.data_ptr(), *u = up.data_ptr();
  void* o = out.data_ptr();
  REE_TORCH_RUN(
      device, repops::cpu::gated(act, dtype, g, cols, u, cols, o, cols, rows, cols),
      repops::cuda::gated(act, dtype, g, cols, u, cols, o, cols, rows, cols, cuda_stream));
  return out;
}

at::Tensor swiglu(const at::Tensor& gate, const at::Tensor& up) {
  return gated("swiglu", Activation::kSilu, gate, up);
}

at::Tensor geglu(const at::Tensor& gate, const at::Tensor& up, c10::string_view approximate) {
  return gated("geglu", geluKind("geglu", approximate), gate, up);
}

void registerPointwiseOps(torch::Library& m) {
  m.impl("sigmoid", &unary<UnaryMathOp::kSigmoid>);
  m.impl("exp", &unary<UnaryMathOp::kExp>);
  m.impl("expm1", &unary<UnaryMathOp::kExpm1>);
  m.impl("log", &unary<UnaryMathOp::kLog>);
  m.impl("log1p", &unary<UnaryMathOp::kLog1p>);
  m.impl("tanh", &unary<UnaryMathOp::kTanh>);
  m.impl("erf", &unary<UnaryMathOp::kErf>);
  m.impl("sin", &unary<UnaryMathOp::kSin>);
  m.impl("cos", &unary<UnaryMathOp::kCos>);
  m.impl("rsqrt", &unary<UnaryMathOp::kRsqrt>);
  m.impl("softplus", &unary<UnaryMathOp::kSoftplus>);
  m.impl("silu", &silu);
  m.impl("gelu", &gelu);
  m.impl("swiglu", &swiglu);
  m.impl("geglu", &geglu);
}

}  // namespace

TORCH_LIBRARY_IMPL(ree, CPU, m) {
  registerPointwiseOps(m);
}

TORCH_LIBRARY_IMPL(ree, CUDA, m) {
  registerPointwiseOps(m);
}

}  // namespace ree::torch_ops
