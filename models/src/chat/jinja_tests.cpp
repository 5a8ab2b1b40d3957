// jinja2's tests (x is defined, x is none, x is string, ...) with jinja2/tests.py's semantics.
#include "chat/jinja_builtins.h"
#include "chat/jinja_error.h"
#include "chat/jinja_text.h"

namespace ree::models::jinja {

namespace {

const Value& argument(const Args& args, const char* test) {
  const Value* arg = args.get(0, nullptr);
  if (arg == nullptr) fail(std::string("the '") + test + "' test needs an argument");
  return *arg;
}

bool comparisonTest(const std::string& name, const Value& input, const Args& args, bool* result) {
  static const char* const kAliases[][2] = {
      {"eq", "=="}, {"equalto", "=="},    {"==", "=="},      {"ne", "!="},
      {"!=", "!="}, {"lt", "<"},          {"lessthan", "<"}, {"<", "<"},
      {"le", "<="}, {"<=", "<="},         {"gt", ">"},       {">", ">"},
      {"ge", ">="}, {"greaterthan", ">"}, {">=", ">="},      {"in", "in"}};
  for (const auto& alias : kAliases) {
    if (name != alias[0]) continue;
    *result = compareOperator(alias[1], input, argument(args, alias[0]));
    return true;
  }
  return false;
}

// odd: value % 2 == 1; even: value % 2 == 0; divisibleby(n): value % n == 0 (Python's %, so
// floats work too).
bool numberTest(const std::string& name, const Value& input, const Args& args, bool* result) {
  if (name != "odd" && name != "even" && name != "divisibleby") return false;
  if (!input.isNumber()) fail("the '" + name + "' test needs a number, not " + typeName(input));
  const Value divisor = name == "divisibleby" ? argument(args, "divisibleby") : Value::fromInt(2);
  Budget unused;
  const Value remainder = binaryOperator("%", input, divisor, unused);
  *result = equals(remainder, Value::fromInt(name == "odd" ? 1 : 0));
  return true;
}

}  // namespace

bool applyTest(const std::string& name, const Value& input, const Args& args) {
  bool result = false;
  if (comparisonTest(name, input, args, &result) || numberTest(name, input, args, &result))
    return result;
  const Kind k = input.kind;
  if (name == "defined") return k != Kind::kUndefined;
  if (name == "undefined") return k == Kind::kUndefined;
  if (name == "none") return k == Kind::kNone;
  if (name == "true") return k == Kind::kBool && input.boolean;
  if (name == "false") return k == Kind::kBool && !input.boolean;
  if (name == "boolean") return k == Kind::kBool;
  if (name == "string") return k == Kind::kString;
  if (name == "number") return k == Kind::kInt || k == Kind::kFloat || k == Kind::kBool;
  if (name == "integer") return k == Kind::kInt;
  if (name == "float") return k == Kind::kFloat;
  if (name == "mapping") return k == Kind::kDict;
  if (name == "iterable") return input.isIterable();
  if (name == "sequence") return input.isIterable();
  if (name == "callable") return k == Kind::kCallable;
  if (name == "sameas")
    return equals(input, argument(args, "sameas")) && k == argument(args, "sameas").kind;
  if (name == "lower") return k == Kind::kString && toLower(input.text) == input.text;
  if (name == "upper") return k == Kind::kString && toUpper(input.text) == input.text;
  fail("no test named '" + name + "'");
}

}  // namespace ree::models::jinja
