// Element-wise operators: float arithmetic through the element-wise RepOps (elementwise.h) and the
// correctly rounded math (math_ops.h); integers and bools exactly on the host. Broadcasting is an
// exact copy first (tensor_util.h).
#include <cmath>
#include <cstring>

#include "device_ops.h"
#include "ops.h"
#include "ree/kernels/elementwise.h"
#include "ree/kernels/math_ops.h"
#include "tensor_util.h"

namespace ree::compiler {

namespace {

BinaryOp binaryOpOf(const std::string& op_type) {
  if (op_type == "Add") return BinaryOp::kAdd;
  if (op_type == "Sub") return BinaryOp::kSub;
  if (op_type == "Mul") return BinaryOp::kMul;
  if (op_type == "Div") return BinaryOp::kDiv;
  if (op_type == "Pow") return BinaryOp::kPow;
  if (op_type == "Max") return BinaryOp::kMax;
  return BinaryOp::kMin;
}

// Broadcasts inputs 0 and 1 of the node to their common shape.
Status broadcastPair(OpContext& c, GraphTensor* a, GraphTensor* b) {
  const GraphTensor *x, *y;
  REE_RETURN_IF_ERROR(c.required(0, &x));
  REE_RETURN_IF_ERROR(c.required(1, &y));
  Shape shape;
  REE_RETURN_IF_ERROR(broadcastShapes(x->shape, y->shape, c.node.label(), &shape));
  REE_RETURN_IF_ERROR(broadcastTo(*x, shape, a));
  return broadcastTo(*y, shape, b);
}

int64_t intBinary(BinaryOp op, int64_t a, int64_t b) {
  switch (op) {
    case BinaryOp::kAdd:
      return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
    case BinaryOp::kSub:
      return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
    case BinaryOp::kMul:
      return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
    case BinaryOp::kMax:
      return a > b ? a : b;
    case BinaryOp::kMin:
      return a < b ? a : b;
    default:
      return 0;
  }
}

Status runIntBinary(OpContext& c, BinaryOp op, const GraphTensor& a, const GraphTensor& b,
                    GraphTensor* out) {
  REE_CHECK_ARG(op != BinaryOp::kPow, "%s: integer Pow is not supported", c.node.label().c_str());
  REE_RETURN_IF_ERROR(GraphTensor::empty(ElementType::kInt64, a.shape, out));
  const int64_t *x = a.as<int64_t>(), *y = b.as<int64_t>();
  int64_t* z = out->as<int64_t>();
  for (int64_t i = 0; i < a.numel(); ++i) {
    if (op == BinaryOp::kDiv) {
      REE_CHECK_ARG(y[i] != 0 && !(x[i] == INT64_MIN && y[i] == -1),
                    "%s: integer division by zero (or overflow)", c.node.label().c_str());
      z[i] = x[i] / y[i];
    } else {
      z[i] = intBinary(op, x[i], y[i]);
    }
  }
  return Status::kSuccess;
}

Status runBinary(OpContext& c) {
  GraphTensor a, b;
  REE_RETURN_IF_ERROR(broadcastPair(c, &a, &b));
  const BinaryOp op = binaryOpOf(c.node.op_type);
  if (op == BinaryOp::kPow && a.type == ElementType::kFloat32 && b.type == ElementType::kInt64) {
    GraphTensor exponent;
    REE_RETURN_IF_ERROR(GraphTensor::empty(ElementType::kFloat32, b.shape, &exponent));
    for (int64_t i = 0; i < b.numel(); ++i)
      exponent.as<float>()[i] = static_cast<float>(b.as<int64_t>()[i]);
    REE_RETURN_IF_ERROR(moveTo(exponent, c.device, &b));
  }
  REE_CHECK_ARG(a.type == b.type && a.type != ElementType::kBool,
                "%s: operands %s and %s (float or int64 pairs are supported)",
                c.node.label().c_str(), a.describe().c_str(), b.describe().c_str());
  if (a.type == ElementType::kInt64) return runIntBinary(c, op, a, b, &c.outputs[0]);
  REE_RETURN_IF_ERROR(emptyOn(c.device, ElementType::kFloat32, a.shape, &c.outputs[0]));
  return dev::binary(c.device, op, a.as<float>(), b.as<float>(), c.outputs[0].as<float>(),
                     a.numel());
}

// Comparisons and logic: exact on the host, bool out.
template <typename T>
bool compare(const std::string& op, T a, T b) {
  if (op == "Equal") return a == b;
  if (op == "Less") return a < b;
  if (op == "Greater") return a > b;
  if (op == "LessOrEqual") return a <= b;
  if (op == "GreaterOrEqual") return a >= b;
  if (op == "And") return a && b;
  if (op == "Or") return a || b;
  return a != b;  // Xor
}

Status runCompare(OpContext& c) {
  GraphTensor a, b;
  REE_RETURN_IF_ERROR(broadcastPair(c, &a, &b));
  REE_CHECK_ARG(a.type == b.type, "%s: operands %s and %s differ in type", c.node.label().c_str(),
                a.describe().c_str(), b.describe().c_str());
  GraphTensor& out = c.outputs[0];
  REE_RETURN_IF_ERROR(GraphTensor::empty(ElementType::kBool, a.shape, &out));
  const std::string& op = c.node.op_type;
  for (int64_t i = 0; i < a.numel(); ++i) {
    bool v = a.type == ElementType::kFloat32 ? compare(op, a.as<float>()[i], b.as<float>()[i])
             : a.type == ElementType::kInt64 ? compare(op, a.as<int64_t>()[i], b.as<int64_t>()[i])
                                             : compare(op, a.as<uint8_t>()[i], b.as<uint8_t>()[i]);
    out.as<uint8_t>()[i] = v ? 1 : 0;
  }
  return Status::kSuccess;
}

Status runNot(OpContext& c) {
  const GraphTensor* x;
  REE_RETURN_IF_ERROR(c.required(0, &x));
  REE_CHECK_ARG(x->type == ElementType::kBool, "%s: input must be bool", c.node.label().c_str());
  REE_RETURN_IF_ERROR(GraphTensor::empty(ElementType::kBool, x->shape, &c.outputs[0]));
  for (int64_t i = 0; i < x->numel(); ++i)
    c.outputs[0].as<uint8_t>()[i] = x->as<uint8_t>()[i] ? 0 : 1;
  return Status::kSuccess;
}

Status runWhere(OpContext& c) {
  const GraphTensor *cond, *x, *y;
  REE_RETURN_IF_ERROR(c.required(0, &cond));
  REE_RETURN_IF_ERROR(c.required(1, &x));
  REE_RETURN_IF_ERROR(c.required(2, &y));
  REE_CHECK_ARG(cond->type == ElementType::kBool && x->type == y->type,
                "%s: condition %s, values %s and %s", c.node.label().c_str(),
                cond->describe().c_str(), x->describe().c_str(), y->describe().c_str());
  Shape shape, both;
  REE_RETURN_IF_ERROR(broadcastShapes(x->shape, y->shape, c.node.label(), &both));
  REE_RETURN_IF_ERROR(broadcastShapes(cond->shape, both, c.node.label(), &shape));
  GraphTensor k, a, b;
  REE_RETURN_IF_ERROR(broadcastTo(*cond, shape, &k));
  REE_RETURN_IF_ERROR(broadcastTo(*x, shape, &a));
  REE_RETURN_IF_ERROR(broadcastTo(*y, shape, &b));
  GraphTensor& out = c.outputs[0];
  if (x->type == ElementType::kFloat32) {
    REE_RETURN_IF_ERROR(moveTo(k, c.device, &k));  // the condition is host-resident
    REE_RETURN_IF_ERROR(emptyOn(c.device, ElementType::kFloat32, shape, &out));
    return dev::where(c.device, k.as<uint8_t>(), a.as<float>(), b.as<float>(), out.as<float>(),
                      out.numel());
  }
  REE_RETURN_IF_ERROR(GraphTensor::empty(x->type, shape, &out));
  const int size = elementTypeSize(x->type);
  for (int64_t i = 0; i < out.numel(); ++i) {
    const GraphTensor& pick = k.as<uint8_t>()[i] ? a : b;
    std::memcpy(static_cast<char*>(out.data()) + i * size,
                static_cast<const char*>(pick.data()) + i * size, size);
  }
  return Status::kSuccess;
}

Status runIntUnary(OpContext& c, const GraphTensor& x) {
  const std::string& op = c.node.op_type;
  REE_CHECK_ARG(op == "Neg" || op == "Abs" || op == "Relu", "%s: integer input %s is not supported",
                c.node.label().c_str(), x.describe().c_str());
  REE_RETURN_IF_ERROR(GraphTensor::empty(ElementType::kInt64, x.shape, &c.outputs[0]));
  for (int64_t i = 0; i < x.numel(); ++i) {
    const int64_t v = x.as<int64_t>()[i];
    // Negation in unsigned arithmetic: -INT64_MIN wraps (as numpy does) instead of being UB.
    const int64_t negated = static_cast<int64_t>(0 - static_cast<uint64_t>(v));
    c.outputs[0].as<int64_t>()[i] = op == "Neg"   ? negated
                                    : op == "Abs" ? (v < 0 ? negated : v)
                                                  : (v > 0 ? v : 0);
  }
  return Status::kSuccess;
}

Status runUnary(OpContext& c) {
  const GraphTensor* x;
  REE_RETURN_IF_ERROR(c.required(0, &x));
  if (x->type == ElementType::kInt64) return runIntUnary(c, *x);
  REE_RETURN_IF_ERROR(c.floatInput(0, &x));
  REE_RETURN_IF_ERROR(emptyOn(c.device, ElementType::kFloat32, x->shape, &c.outputs[0]));
  const std::string& op = c.node.op_type;
  const Device d = c.device;
  const float* in = x->as<float>();
  float* out = c.outputs[0].as<float>();
  const int64_t n = x->numel();
  if (op == "Neg") return dev::simpleUnary(d, SimpleUnaryOp::kNeg, in, out, n);
  if (op == "Abs") return dev::simpleUnary(d, SimpleUnaryOp::kAbs, in, out, n);
  if (op == "Sqrt") return dev::simpleUnary(d, SimpleUnaryOp::kSqrt, in, out, n);
  if (op == "Reciprocal") return dev::simpleUnary(d, SimpleUnaryOp::kReciprocal, in, out, n);
  if (op == "Relu") return dev::simpleUnary(d, SimpleUnaryOp::kRelu, in, out, n);
  UnaryMathOp math = UnaryMathOp::kExp;
  if (op == "Log") math = UnaryMathOp::kLog;
  if (op == "Tanh") math = UnaryMathOp::kTanh;
  if (op == "Erf") math = UnaryMathOp::kErf;
  if (op == "Sigmoid") math = UnaryMathOp::kSigmoid;
  if (op == "Sin") math = UnaryMathOp::kSin;
  if (op == "Cos") math = UnaryMathOp::kCos;
  if (op == "Softplus") math = UnaryMathOp::kSoftplus;
  if (op == "Gelu") {
    const std::string approximate = c.node.stringAttribute("approximate", "none");
    REE_CHECK_ARG(approximate == "none" || approximate == "tanh",
                  "%s: approximate '%s' (none or tanh)", c.node.label().c_str(),
                  approximate.c_str());
    math = approximate == "tanh" ? UnaryMathOp::kGeluTanh : UnaryMathOp::kGeluErf;
  }
  return dev::unaryMath(d, math, in, out, n);
}

// Cast to FLOAT16 / BFLOAT16 rounds (RNE, numeric.h) and keeps the value as float32.
float roundToOnnxType(float value, int64_t onnx_type) {
  if (onnx_type == 10) return toFloat(toF16(value));
  if (onnx_type == 16) return toFloat(toBF16(value));
  return value;
}

Status runCast(OpContext& c) {
  const GraphTensor* x;
  REE_RETURN_IF_ERROR(c.required(0, &x));
  ElementType to;
  const int64_t onnx_type = c.node.intAttribute("to", 0);
  // FLOAT, FLOAT16, BFLOAT16, DOUBLE compute as float32 (docs/compiler.md).
  if (onnx_type == 1 || onnx_type == 10 || onnx_type == 16 || onnx_type == 11) {
    to = ElementType::kFloat32;
  } else if (onnx_type == 6 || onnx_type == 7 || onnx_type == 3 || onnx_type == 5) {
    to = ElementType::kInt64;
  } else if (onnx_type == 9) {
    to = ElementType::kBool;
  } else {
    return REE_FAIL(Status::kUnsupported, "%s: cast to ONNX type %lld is not supported",
                    c.node.label().c_str(), static_cast<long long>(onnx_type));
  }
  GraphTensor& out = c.outputs[0];
  if (to == x->type && !(to == ElementType::kFloat32 && (onnx_type == 10 || onnx_type == 16))) {
    out = *x;
    return Status::kSuccess;
  }
  REE_RETURN_IF_ERROR(GraphTensor::empty(to, x->shape, &out));
  for (int64_t i = 0; i < x->numel(); ++i) {
    double v = x->type == ElementType::kFloat32 ? x->as<float>()[i]
               : x->type == ElementType::kInt64 ? static_cast<double>(x->as<int64_t>()[i])
                                                : x->as<uint8_t>()[i];
    if (to == ElementType::kFloat32) {
      out.as<float>()[i] = x->type == ElementType::kInt64
                               ? static_cast<float>(x->as<int64_t>()[i])  // one RNE rounding
                               : static_cast<float>(v);
      out.as<float>()[i] = roundToOnnxType(out.as<float>()[i], onnx_type);
    } else if (to == ElementType::kInt64) {
      REE_CHECK_ARG(std::isfinite(v) && std::fabs(v) < 9.2e18, "%s: value %g does not fit int64",
                    c.node.label().c_str(), v);
      out.as<int64_t>()[i] = static_cast<int64_t>(v);
    } else {
      out.as<uint8_t>()[i] = v != 0.0 ? 1 : 0;
    }
  }
  return Status::kSuccess;
}

Status runIdentity(OpContext& c) {
  const GraphTensor* x;
  REE_RETURN_IF_ERROR(c.required(0, &x));
  c.outputs[0] = *x;
  return Status::kSuccess;
}

}  // namespace

void registerElementwiseOps(std::vector<OpDef>* table) {
  for (const char* op : {"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min"}) {
    table->push_back({op, runBinary, "RepOp binary (elementwise.md); int64 exact on the host"});
  }
  for (const char* op :
       {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "And", "Or", "Xor"}) {
    table->push_back({op, runCompare, "exact comparison on the host (bool out)"});
  }
  table->push_back({"Not", runNot, "exact on the host"});
  table->push_back({"Where", runWhere, "RepOp where (elementwise.md); other types copied"});
  for (const char* op : {"Neg", "Abs", "Sqrt", "Reciprocal", "Relu"}) {
    table->push_back({op, runUnary, "RepOp simpleUnary (elementwise.md)"});
  }
  for (const char* op :
       {"Exp", "Log", "Tanh", "Erf", "Sigmoid", "Sin", "Cos", "Softplus", "Gelu"}) {
    table->push_back({op, runUnary, "RepOp unaryMath (correctly rounded, crmath.md)"});
  }
  table->push_back({"Cast", runCast, "conversion on the host (to float: one RNE rounding)"});
  table->push_back({"Identity", runIdentity, "view"});
}

}  // namespace ree::compiler
