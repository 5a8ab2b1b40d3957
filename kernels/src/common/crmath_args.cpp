#include "crmath_args.h"

namespace ree::repops {

Status validateUnaryMathArgs(UnaryMathOp op, const float* in, const float* out, int64_t n) {
  REE_CHECK_ARG(n >= 0, "unaryMath: n = %lld must be >= 0", static_cast<long long>(n));
  if (n == 0) return Status::kSuccess;
  REE_CHECK_ARG(in != nullptr, "unaryMath: input pointer `in` is null (n = %lld)",
                static_cast<long long>(n));
  REE_CHECK_ARG(out != nullptr, "unaryMath: output pointer `out` is null (n = %lld)",
                static_cast<long long>(n));
  REE_CHECK_ARG(static_cast<int>(op) >= 0 && static_cast<int>(op) < kUnaryMathOpCount,
                "unaryMath: unknown op %d", static_cast<int>(op));
  return Status::kSuccess;
}

}  // namespace ree::repops
