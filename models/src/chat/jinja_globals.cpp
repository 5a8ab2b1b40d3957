// The global functions transformers' chat-template environment offers: jinja2's range, dict and
// namespace, and transformers' raise_exception and strftime_now.
#include <ctime>

#include "chat/jinja_builtins.h"
#include "chat/jinja_error.h"

namespace ree::models::jinja {

namespace {

int64_t integerArgument(const Value& v) {
  if (v.kind != Kind::kInt && v.kind != Kind::kBool)
    fail("range() arguments must be integers, not " + typeName(v));
  return v.kind == Kind::kBool ? v.boolean : v.integer;
}

Value range(const Args& args, Budget& budget) {
  args.check("range", 3, {});
  if (args.positional.empty()) fail("range expected at least 1 argument, got 0");
  int64_t start = 0;
  int64_t stop = integerArgument(args.positional[0]);
  int64_t step = 1;
  if (args.positional.size() >= 2) {
    start = stop;
    stop = integerArgument(args.positional[1]);
  }
  if (args.positional.size() == 3) step = integerArgument(args.positional[2]);
  if (step == 0) fail("range() arg 3 must not be zero");
  List out;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    budget.checkItems(out.size() + 1, "range()");
    budget.step();
    out.push_back(Value::fromInt(i));
    if ((step > 0 && i > INT64_MAX - step) || (step < 0 && i < INT64_MIN - step)) break;
  }
  return Value::fromList(std::move(out));
}

Value mapping(const Args& args, Kind kind) {
  Dict dict;
  for (const Value& positional : args.positional) {
    if (positional.kind != Kind::kDict)
      fail("namespace() and dict() take keyword arguments or a dict");
    for (const auto& entry : positional.dict->entries)
      dict.set(entry.first, entry.second);
  }
  for (const auto& entry : args.keyword)
    dict.set(entry.first, entry.second);
  Value value = Value::fromDict(std::move(dict));
  value.kind = kind;
  return value;
}

Value strftimeNow(const Args& args) {
  const Value* format = args.get(0, "format");
  if (format == nullptr || format->kind != Kind::kString)
    fail("strftime_now() needs a format string");
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char buffer[512];
  const size_t n = std::strftime(buffer, sizeof(buffer), format->text.c_str(), &local);
  return Value::fromString(std::string(buffer, n));
}

}  // namespace

bool isGlobalFunction(const std::string& name) {
  return name == "range" || name == "namespace" || name == "dict" || name == "raise_exception" ||
         name == "strftime_now";
}

Value callGlobal(const std::string& name, const Args& args, Budget& budget) {
  budget.step();
  if (name == "range") return range(args, budget);
  if (name == "namespace") return mapping(args, Kind::kNamespace);
  if (name == "dict") return mapping(args, Kind::kDict);
  if (name == "strftime_now") return strftimeNow(args);
  const Value* message = args.get(0, "message");
  fail("raise_exception: " + (message != nullptr ? toStr(*message) : std::string()));
}

}  // namespace ree::models::jinja
