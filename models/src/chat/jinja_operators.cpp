// Arithmetic, comparison, attribute, item and slice operators with Python's semantics.
#include <cmath>
#include <cstdint>

#include "chat/jinja_builtins.h"
#include "chat/jinja_error.h"
#include "chat/jinja_text.h"

namespace ree::models::jinja {

namespace {

[[noreturn]] void unsupported(const std::string& op, const Value& a, const Value& b) {
  fail("unsupported operand type(s) for " + op + ": '" + typeName(a) + "' and '" + typeName(b) +
       "'");
}

bool isInteger(const Value& v) {
  return v.kind == Kind::kInt || v.kind == Kind::kBool;
}
int64_t integerOf(const Value& v) {
  return v.kind == Kind::kBool ? (v.boolean ? 1 : 0) : v.integer;
}

// Python integers do not overflow; REE's are 64-bit and refuse to.
template <typename Op>
Value checkedInteger(Op op, int64_t a, int64_t b) {
  int64_t result = 0;
  if (op(a, b, &result)) fail("integer overflow in a template expression");
  return Value::fromInt(result);
}

bool addOverflows(int64_t a, int64_t b, int64_t* r) {
  return __builtin_add_overflow(a, b, r);
}
bool subOverflows(int64_t a, int64_t b, int64_t* r) {
  return __builtin_sub_overflow(a, b, r);
}
bool mulOverflows(int64_t a, int64_t b, int64_t* r) {
  return __builtin_mul_overflow(a, b, r);
}

Value repeat(const Value& sequence, int64_t times, Budget& budget) {
  if (times < 0) times = 0;
  const size_t unit = sequence.kind == Kind::kString ? sequence.text.size() : sequence.list->size();
  size_t total = 0;
  if (__builtin_mul_overflow(unit, static_cast<size_t>(times), &total)) total = SIZE_MAX;
  if (sequence.kind == Kind::kString) {
    budget.checkSize(total, "a repeated string");
    budget.step(static_cast<uint64_t>(times));
    std::string out;
    for (int64_t i = 0; i < times; ++i)
      out += sequence.text;
    return Value::fromString(std::move(out));
  }
  budget.checkItems(total, "a repeated list");
  budget.step(static_cast<uint64_t>(times));
  List out;
  for (int64_t i = 0; i < times; ++i)
    out.insert(out.end(), sequence.list->begin(), sequence.list->end());
  return Value::fromList(std::move(out));
}

Value add(const Value& a, const Value& b, Budget& budget) {
  if (isInteger(a) && isInteger(b)) {
    return checkedInteger(addOverflows, integerOf(a), integerOf(b));
  }
  if (a.isNumber() && b.isNumber()) return Value::fromFloat(a.asDouble() + b.asDouble());
  if (a.kind == Kind::kString && b.kind == Kind::kString) {
    budget.checkSize(a.text.size() + b.text.size(), "a concatenated string");
    return Value::fromString(a.text + b.text);
  }
  if (a.kind == Kind::kList && b.kind == Kind::kList) {
    budget.checkItems(a.list->size() + b.list->size(), "a concatenated list");
    budget.step(a.list->size() + b.list->size());
    List out = *a.list;
    out.insert(out.end(), b.list->begin(), b.list->end());
    return Value::fromList(std::move(out));
  }
  unsupported("+", a, b);
}

Value multiply(const Value& a, const Value& b, Budget& budget) {
  if (isInteger(a) && isInteger(b)) {
    return checkedInteger(mulOverflows, integerOf(a), integerOf(b));
  }
  if (a.isNumber() && b.isNumber()) return Value::fromFloat(a.asDouble() * b.asDouble());
  if ((a.kind == Kind::kString || a.kind == Kind::kList) && isInteger(b))
    return repeat(a, integerOf(b), budget);
  if ((b.kind == Kind::kString || b.kind == Kind::kList) && isInteger(a))
    return repeat(b, integerOf(a), budget);
  unsupported("*", a, b);
}

Value divide(const std::string& op, const Value& a, const Value& b) {
  if (!a.isNumber() || !b.isNumber()) {
    if (op == "%" && a.kind == Kind::kString)
      fail("printf-style string formatting ('%') is not supported");
    unsupported(op, a, b);
  }
  if (isInteger(a) && isInteger(b) && op != "/") {
    const int64_t x = integerOf(a);
    const int64_t y = integerOf(b);
    if (y == 0) fail("integer division or modulo by zero");
    if (x == INT64_MIN && y == -1) fail("integer overflow in a template expression");
    int64_t q = x / y;
    int64_t r = x % y;
    if (r != 0 && ((r < 0) != (y < 0))) {
      --q;
      r += y;
    }
    return Value::fromInt(op == "//" ? q : r);
  }
  const double x = a.asDouble();
  const double y = b.asDouble();
  if (y == 0.0) fail(op == "/" ? "division by zero" : "float division or modulo by zero");
  if (op == "/") return Value::fromFloat(x / y);
  double r = std::fmod(x, y);
  if (r != 0.0 && ((r < 0) != (y < 0))) r += y;
  if (op == "%") return Value::fromFloat(r);
  return Value::fromFloat(std::floor((x - r) / y + 0.5));
}

Value power(const Value& a, const Value& b) {
  if (!a.isNumber() || !b.isNumber()) unsupported("**", a, b);
  if (isInteger(a) && isInteger(b) && integerOf(b) >= 0) {
    int64_t result = 1;
    const int64_t base = integerOf(a);
    for (int64_t e = integerOf(b); e > 0; --e) {
      if (__builtin_mul_overflow(result, base, &result))
        fail("integer overflow in a template expression");
      if (result == 0 || result == 1) break;
      if (result == -1) {
        result = (e - 1) % 2 == 0 ? -1 : 1;
        break;
      }
    }
    return Value::fromInt(result);
  }
  return Value::fromFloat(std::pow(a.asDouble(), b.asDouble()));
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind) {
    case Kind::kUndefined:
      return false;
    case Kind::kString:
      if (item.kind != Kind::kString)
        fail("'in <string>' requires string as left operand, not " + typeName(item));
      return container.text.find(item.text) != std::string::npos;
    case Kind::kList:
      for (const Value& element : *container.list) {
        if (equals(element, item)) return true;
      }
      return false;
    case Kind::kDict:
      return item.kind == Kind::kString && container.dict->find(item.text) != nullptr;
    default:
      fail("argument of type '" + typeName(container) + "' is not iterable");
  }
}

[[noreturn]] void failUndefined(const Value& v) {
  fail(v.text.empty() ? "an undefined value was used" : v.text);
}

// Python's slice.indices(length) and the selected positions.
std::vector<size_t> slicePositions(int64_t length, const Value& start, const Value& stop,
                                   const Value& step) {
  auto bound = [](const Value& v) { return v.kind == Kind::kUndefined || v.kind == Kind::kNone; };
  auto index = [](const Value& v) {
    if (!isInteger(v)) fail("slice indices must be integers or None");
    return integerOf(v);
  };
  const int64_t s = bound(step) ? 1 : index(step);
  if (s == 0) fail("slice step cannot be zero");
  auto clamp = [&](const Value& v, int64_t fallback) {
    if (bound(v)) return fallback;
    int64_t i = index(v);
    if (i < 0) i += length;
    if (s > 0) return i < 0 ? 0 : (i > length ? length : i);
    return i < 0 ? -1 : (i >= length ? length - 1 : i);
  };
  const int64_t begin = clamp(start, s > 0 ? 0 : length - 1);
  const int64_t end = clamp(stop, s > 0 ? length : -1);
  std::vector<size_t> positions;
  for (int64_t i = begin; s > 0 ? i < end : i > end; i += s)
    positions.push_back(static_cast<size_t>(i));
  return positions;
}

}  // namespace

Value binaryOperator(const std::string& op, const Value& left, const Value& right, Budget& budget) {
  if (op == "~") {
    std::string text = toStr(left) + toStr(right);
    budget.checkSize(text.size(), "a concatenated string");
    return Value::fromString(std::move(text));
  }
  if (left.isUndefined()) failUndefined(left);
  if (right.isUndefined()) failUndefined(right);
  if (op == "+") return add(left, right, budget);
  if (op == "*") return multiply(left, right, budget);
  if (op == "**") return power(left, right);
  if (op == "-") {
    if (isInteger(left) && isInteger(right)) {
      return checkedInteger(subOverflows, integerOf(left), integerOf(right));
    }
    if (left.isNumber() && right.isNumber())
      return Value::fromFloat(left.asDouble() - right.asDouble());
    unsupported("-", left, right);
  }
  return divide(op, left, right);
}

Value negate(const Value& operand, bool minus) {
  if (operand.isUndefined()) failUndefined(operand);
  if (isInteger(operand)) {
    if (!minus) return Value::fromInt(integerOf(operand));
    if (integerOf(operand) == INT64_MIN) fail("integer overflow in a template expression");
    return Value::fromInt(-integerOf(operand));
  }
  if (operand.kind == Kind::kFloat)
    return Value::fromFloat(minus ? -operand.number : operand.number);
  fail(std::string("bad operand type for unary ") + (minus ? "-" : "+") + ": '" +
       typeName(operand) + "'");
}

bool compareOperator(const std::string& op, const Value& left, const Value& right) {
  if (op == "==") return equals(left, right);
  if (op == "!=") return !equals(left, right);
  if (op == "in") return contains(right, left);
  if (op == "notin") return !contains(right, left);
  if (op == "<") return lessThan(left, right);
  if (op == ">") return lessThan(right, left);
  if (op == "<=") return !lessThan(right, left);
  return !lessThan(left, right);  // >=
}

Value getAttribute(const Value& object, const std::string& name) {
  if (object.isUndefined()) failUndefined(object);
  if (hasMethod(object, name)) {
    Callable method;
    method.kind = Callable::Kind::kMethod;
    method.name = name;
    method.self = std::make_shared<Value>(object);
    return Value::fromCallable(std::move(method));
  }
  if (object.kind == Kind::kDict || object.kind == Kind::kNamespace) {
    if (const Value* found = object.dict->find(name)) return *found;
  }
  return Value::undefined("'" + typeName(object) + " object' has no attribute '" + name + "'");
}

Value getItem(const Value& object, const Value& key) {
  if (object.isUndefined()) failUndefined(object);
  if ((object.kind == Kind::kList || object.kind == Kind::kString) && isInteger(key)) {
    const int64_t length = lengthOf(object);
    int64_t index = integerOf(key);
    if (index < 0) index += length;
    if (index < 0 || index >= length)
      return Value::undefined(typeName(object) + " index out of range");
    if (object.kind == Kind::kList) return (*object.list)[static_cast<size_t>(index)];
    std::string one;
    appendUtf8(codePoints(object.text)[static_cast<size_t>(index)], &one);
    return Value::fromString(std::move(one));
  }
  if ((object.kind == Kind::kDict || object.kind == Kind::kNamespace) &&
      key.kind == Kind::kString) {
    if (const Value* found = object.dict->find(key.text)) return *found;
    if (hasMethod(object, key.text)) return getAttribute(object, key.text);
    return Value::undefined("'" + typeName(object) + " object' has no attribute '" + key.text +
                            "'");
  }
  if (key.kind == Kind::kString) return getAttribute(object, key.text);
  return Value::undefined("'" + typeName(object) + " object' has no item " + toRepr(key));
}

Value sliceOf(const Value& object, const Value& start, const Value& stop, const Value& step) {
  if (object.isUndefined()) failUndefined(object);
  if (object.kind == Kind::kList) {
    List out;
    for (size_t i : slicePositions(static_cast<int64_t>(object.list->size()), start, stop, step)) {
      out.push_back((*object.list)[i]);
    }
    return object.tuple ? Value::tupleOf(std::move(out)) : Value::fromList(std::move(out));
  }
  if (object.kind != Kind::kString) {  // jinja2's getitem turns the TypeError into an Undefined
    return Value::undefined("'" + typeName(object) + "' object is not subscriptable");
  }
  const std::vector<uint32_t> points = codePoints(object.text);
  std::vector<uint32_t> out;
  for (size_t i : slicePositions(static_cast<int64_t>(points.size()), start, stop, step))
    out.push_back(points[i]);
  return Value::fromString(fromCodePoints(out));
}

}  // namespace ree::models::jinja
