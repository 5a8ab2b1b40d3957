#include "elementwise_args.h"

namespace ree {

const char* binaryOpName(BinaryOp op) {
  switch (op) {
    case BinaryOp::kAdd:
      return "add";
    case BinaryOp::kSub:
      return "sub";
    case BinaryOp::kMul:
      return "mul";
    case BinaryOp::kDiv:
      return "div";
    case BinaryOp::kPow:
      return "pow";
    case BinaryOp::kMax:
      return "max";
    case BinaryOp::kMin:
      return "min";
  }
  return "?";
}

const char* simpleUnaryOpName(SimpleUnaryOp op) {
  switch (op) {
    case SimpleUnaryOp::kNeg:
      return "neg";
    case SimpleUnaryOp::kAbs:
      return "abs";
    case SimpleUnaryOp::kSqrt:
      return "sqrt";
    case SimpleUnaryOp::kReciprocal:
      return "reciprocal";
    case SimpleUnaryOp::kRelu:
      return "relu";
  }
  return "?";
}

namespace repops {

Status validateElementwiseArgs(const char* what, int op, int op_count, const void* a, const void* b,
                               const void* c, const void* out, int64_t n) {
  REE_CHECK_ARG(n >= 0, "%s: n = %lld must be >= 0", what, static_cast<long long>(n));
  if (n == 0) return Status::kSuccess;
  REE_CHECK_ARG(op >= 0 && op < op_count, "%s: unknown op %d", what, op);
  REE_CHECK_ARG(a != nullptr && b != nullptr && c != nullptr && out != nullptr,
                "%s: a null operand or output pointer (n = %lld)", what, static_cast<long long>(n));
  return Status::kSuccess;
}

}  // namespace repops
}  // namespace ree
