// CPU batch API of the correctly rounded math (crmath.h).
#include "ree/kernels/crmath.h"

#include "common/crmath_args.h"
#include "ree/core/parallel.h"
#include "ree/kernels/math_ops.h"
#include "vector_math.h"

namespace ree {

const char* unaryMathOpName(UnaryMathOp op) {
  switch (op) {
    case UnaryMathOp::kExp:
      return "exp";
    case UnaryMathOp::kExpm1:
      return "expm1";
    case UnaryMathOp::kLog:
      return "log";
    case UnaryMathOp::kLog1p:
      return "log1p";
    case UnaryMathOp::kTanh:
      return "tanh";
    case UnaryMathOp::kErf:
      return "erf";
    case UnaryMathOp::kSin:
      return "sin";
    case UnaryMathOp::kCos:
      return "cos";
    case UnaryMathOp::kRsqrt:
      return "rsqrt";
    case UnaryMathOp::kSigmoid:
      return "sigmoid";
    case UnaryMathOp::kSilu:
      return "silu";
    case UnaryMathOp::kGeluErf:
      return "gelu_erf";
    case UnaryMathOp::kGeluTanh:
      return "gelu_tanh";
    case UnaryMathOp::kSoftplus:
      return "softplus";
  }
  return "?";
}

namespace repops::cpu {
namespace {

template <float (*Fn)(float)>
void applyAll(const float* in, float* out, int64_t n) {
  parallelForVectorMath(n, 1 << 14, [&](int64_t begin, int64_t end) REE_VECTOR_MATH_INLINE {
    for (int64_t i = begin; i < end; ++i)
      out[i] = Fn(in[i]);
  });
}

}  // namespace

Status unaryMath(UnaryMathOp op, const float* in, float* out, int64_t n) {
  REE_RETURN_IF_ERROR(validateUnaryMathArgs(op, in, out, n));
  if (n == 0) return Status::kSuccess;
  switch (op) {
    case UnaryMathOp::kExp:
      applyAll<crExp>(in, out, n);
      break;
    case UnaryMathOp::kExpm1:
      applyAll<crExpm1>(in, out, n);
      break;
    case UnaryMathOp::kLog:
      applyAll<crLog>(in, out, n);
      break;
    case UnaryMathOp::kLog1p:
      applyAll<crLog1p>(in, out, n);
      break;
    case UnaryMathOp::kTanh:
      applyAll<crTanh>(in, out, n);
      break;
    case UnaryMathOp::kErf:
      applyAll<crErf>(in, out, n);
      break;
    case UnaryMathOp::kSin:
      applyAll<crSin>(in, out, n);
      break;
    case UnaryMathOp::kCos:
      applyAll<crCos>(in, out, n);
      break;
    case UnaryMathOp::kRsqrt:
      applyAll<crRsqrt>(in, out, n);
      break;
    case UnaryMathOp::kSigmoid:
      applyAll<crSigmoid>(in, out, n);
      break;
    case UnaryMathOp::kSilu:
      applyAll<crSilu>(in, out, n);
      break;
    case UnaryMathOp::kGeluErf:
      applyAll<crGeluErf>(in, out, n);
      break;
    case UnaryMathOp::kGeluTanh:
      applyAll<crGeluTanh>(in, out, n);
      break;
    case UnaryMathOp::kSoftplus:
      applyAll<crSoftplus>(in, out, n);
      break;
    default:
      return REE_FAIL(Status::kInvalidArgument, "unaryMath: unknown op %d", static_cast<int>(op));
  }
  return Status::kSuccess;
}

}  // namespace repops::cpu
}  // namespace ree
