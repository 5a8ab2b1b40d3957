// jinja2's filters (x | trim, x | tojson, ...) with jinja2/filters.py's semantics; tojson is
// transformers' replacement (json.dumps without HTML escaping).
#include <cstdlib>

#include "chat/jinja_builtins.h"
#include "chat/jinja_error.h"
#include "chat/jinja_text.h"

namespace ree::models::jinja {

namespace {

std::string stringArgument(const Args& args, size_t index, const char* name, const char* fallback) {
  const Value* v = args.get(index, name);
  if (v == nullptr || v->kind == Kind::kNone) return fallback;
  return toStr(*v);
}

// jinja2's make_attrgetter: "a.b" and integer parts go through getitem.
Value attributeOf(const Value& item, const std::string& path) {
  Value current = item;
  size_t begin = 0;
  while (true) {
    const size_t dot = path.find('.', begin);
    const std::string part =
        path.substr(begin, dot == std::string::npos ? std::string::npos : dot - begin);
    const bool numeric = !part.empty() && part.find_first_not_of("0123456789") == std::string::npos;
    current = numeric ? getItem(current, Value::fromInt(std::atoll(part.c_str())))
                      : getItem(current, Value::fromString(part));
    if (dot == std::string::npos) return current;
    begin = dot + 1;
  }
}

Value toJsonFilter(const Value& input, const Args& args, Budget& budget) {
  args.check("tojson", 4, {"ensure_ascii", "indent", "separators", "sort_keys"});
  const Value* ensure_ascii = args.get(0, "ensure_ascii");
  if (ensure_ascii != nullptr && truthy(*ensure_ascii))
    fail("tojson(ensure_ascii=True) is not supported");
  const Value* indent = args.get(1, "indent");
  int width = -1;
  if (indent != nullptr && indent->kind != Kind::kNone) {
    if (indent->kind != Kind::kInt || indent->integer < 0 || indent->integer > 64) {
      fail("tojson's indent must be an integer from 0 to 64");
    }
    width = static_cast<int>(indent->integer);
  }
  std::string item_separator = width < 0 ? ", " : ",";
  std::string key_separator = ": ";
  const Value* separators = args.get(2, "separators");
  if (separators != nullptr && separators->kind != Kind::kNone) {
    if (separators->kind != Kind::kList || separators->list->size() != 2) {
      fail("tojson's separators must be a pair of strings");
    }
    item_separator = toStr((*separators->list)[0]);
    key_separator = toStr((*separators->list)[1]);
  }
  const Value* sort_keys = args.get(3, "sort_keys");
  return Value::fromString(toJson(input, width, sort_keys != nullptr && truthy(*sort_keys),
                                  item_separator, key_separator, budget));
}

Value joinFilter(const Value& input, const Args& args, Budget& budget) {
  args.check("join", 2, {"d", "attribute"});
  const std::string separator = stringArgument(args, 0, "d", "");
  const Value* attribute = args.get(1, "attribute");
  std::string out;
  bool first = true;
  for (const Value& item : iterate(input)) {
    budget.step();
    if (!first) out += separator;
    first = false;
    out += toStr(attribute != nullptr ? attributeOf(item, toStr(*attribute)) : item);
    budget.checkSize(out.size(), "join's output");
  }
  return Value::fromString(std::move(out));
}

Value selectFilter(const Value& input, const Args& args, bool by_attribute, bool keep,
                   Budget& budget) {
  size_t next = 0;
  std::string attribute;
  if (by_attribute) {
    const Value* name = args.get(next++, nullptr);
    if (name == nullptr) fail("selectattr/rejectattr need an attribute name");
    attribute = toStr(*name);
  }
  const Value* test = args.get(next++, nullptr);
  Args test_args;
  for (size_t i = next; i < args.positional.size(); ++i)
    test_args.positional.push_back(args.positional[i]);
  List out;
  for (const Value& item : iterate(input)) {
    budget.step();
    const Value value = by_attribute ? attributeOf(item, attribute) : item;
    const bool passed = test == nullptr ? truthy(value) : applyTest(toStr(*test), value, test_args);
    if (passed == keep) out.push_back(item);
  }
  return Value::fromList(std::move(out));
}

Value mapFilter(const Value& input, const Args& args, Budget& budget) {
  const Value* attribute = args.get(99, "attribute");
  List out;
  if (attribute != nullptr) {
    const Value* fallback = args.get(99, "default");
    for (const Value& item : iterate(input)) {
      budget.step();
      Value value = attributeOf(item, toStr(*attribute));
      out.push_back(value.isUndefined() && fallback != nullptr ? *fallback : value);
    }
    return Value::fromList(std::move(out));
  }
  const Value* filter = args.get(0, nullptr);
  if (filter == nullptr) fail("map needs a filter name or attribute=");
  Args filter_args;
  for (size_t i = 1; i < args.positional.size(); ++i)
    filter_args.positional.push_back(args.positional[i]);
  for (const Value& item : iterate(input)) {
    budget.step();
    out.push_back(applyFilter(toStr(*filter), item, filter_args, budget));
  }
  return Value::fromList(std::move(out));
}

Value itemsFilter(const Value& input) {
  if (input.isUndefined()) return Value::fromList({});
  if (input.kind != Kind::kDict) fail("Can only get item pairs from a mapping.");
  List out;
  for (const auto& entry : input.dict->entries)
    out.push_back(Value::tupleOf({Value::fromString(entry.first), entry.second}));
  return Value::fromList(std::move(out));
}

Value endItem(const Value& input, bool last) {
  List items = iterate(input);
  if (items.empty())
    return Value::undefined(last ? "No last item, sequence was empty."
                                 : "No first item, sequence was empty.");
  return last ? items.back() : items.front();
}

Value replaceFilter(const Value& input, const Args& args, Budget& budget) {
  args.check("replace", 3, {"old", "new", "count"});
  const Value* old_value = args.get(0, "old");
  const Value* new_value = args.get(1, "new");
  if (old_value == nullptr || new_value == nullptr) fail("replace needs the old and new strings");
  Args method_args;
  method_args.positional = {Value::fromString(toStr(*old_value)),
                            Value::fromString(toStr(*new_value))};
  if (const Value* count = args.get(2, "count")) method_args.positional.push_back(*count);
  return callMethod(Value::fromString(toStr(input)), "replace", method_args, budget);
}

Value reverseFilter(const Value& input) {
  if (input.kind == Kind::kString) {
    std::vector<uint32_t> points = codePoints(input.text);
    return Value::fromString(fromCodePoints(std::vector<uint32_t>(points.rbegin(), points.rend())));
  }
  List items = iterate(input);
  return Value::fromList(List(items.rbegin(), items.rend()));
}

// jinja2's title filter: each run between separators (-, whitespace, (, {, [, <) gets its first
// character upper-cased and the rest lower-cased.
std::string jinjaTitle(const std::string& text) {
  auto separator = [](uint32_t p) {
    return p == '-' || p == '(' || p == '{' || p == '[' || p == '<' || isPythonSpace(p);
  };
  const std::vector<uint32_t> points = codePoints(text);
  std::string out;
  for (size_t i = 0; i < points.size();) {
    size_t end = i + 1;
    const bool word = !separator(points[i]);
    while (end < points.size() && separator(points[end]) != word)
      ++end;
    if (word) {  // item[0].upper() + item[1:].lower() on the whole word (final sigma)
      out += toUpper(fromCodePoints({points[i]}));
      out += toLower(fromCodePoints(std::vector<uint32_t>(
          points.begin() + static_cast<long>(i) + 1, points.begin() + static_cast<long>(end))));
    } else {
      out += fromCodePoints(std::vector<uint32_t>(points.begin() + static_cast<long>(i),
                                                  points.begin() + static_cast<long>(end)));
    }
    i = end;
  }
  return out;
}

std::string htmlEscape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

Value numberFilter(const std::string& name, const Value& input, const Args& args) {
  if (input.isUndefined()) fail(input.text.empty() ? "an undefined value was used" : input.text);
  if (name == "abs" && input.kind == Kind::kBool) return Value::fromInt(input.boolean ? 1 : 0);
  if (name == "abs") {
    if (input.kind == Kind::kInt)
      return Value::fromInt(input.integer < 0 ? -input.integer : input.integer);
    if (input.kind == Kind::kFloat)
      return Value::fromFloat(input.number < 0 ? -input.number : input.number);
    fail("bad operand type for abs(): '" + typeName(input) + "'");
  }
  const bool to_int = name == "int";
  const Value* fallback = args.get(0, "default");
  if (input.kind == Kind::kInt || input.kind == Kind::kBool)
    return to_int ? Value::fromInt(input.kind == Kind::kBool ? input.boolean : input.integer)
                  : Value::fromFloat(input.asDouble());
  if (input.kind == Kind::kFloat)
    return to_int ? Value::fromInt(static_cast<int64_t>(input.number)) : input;
  if (input.kind == Kind::kString) {
    const std::string text = pythonStrip(input.text, true, true, nullptr);
    char* end = nullptr;
    const double parsed = std::strtod(text.c_str(), &end);
    if (!text.empty() && end == text.c_str() + text.size()) {
      return to_int ? Value::fromInt(static_cast<int64_t>(parsed)) : Value::fromFloat(parsed);
    }
  }
  if (fallback != nullptr) return *fallback;
  return to_int ? Value::fromInt(0) : Value::fromFloat(0.0);
}

Value stringFilter(const std::string& name, const Value& input, const Args& args, Budget& budget,
                   bool* handled) {
  *handled = true;
  if (name == "trim") {
    const Value* chars = args.get(0, "chars");
    const std::string set =
        chars != nullptr && chars->kind != Kind::kNone ? toStr(*chars) : std::string();
    return Value::fromString(pythonStrip(
        toStr(input), true, true, chars != nullptr && chars->kind != Kind::kNone ? &set : nullptr));
  }
  if (name == "upper") return Value::fromString(toUpper(toStr(input)));
  if (name == "lower") return Value::fromString(toLower(toStr(input)));
  if (name == "capitalize") return Value::fromString(capitalize(toStr(input)));
  if (name == "title") return Value::fromString(jinjaTitle(toStr(input)));
  if (name == "string")
    return input.kind == Kind::kString ? input : Value::fromString(toStr(input));
  if (name == "escape" || name == "e") return Value::fromString(htmlEscape(toStr(input)));
  if (name == "replace") return replaceFilter(input, args, budget);
  *handled = false;
  return {};
}

}  // namespace

Value applyFilter(const std::string& name, const Value& input, const Args& args, Budget& budget) {
  budget.step();
  bool handled = false;
  Value result = stringFilter(name, input, args, budget, &handled);
  if (handled) return result;
  if (name == "length" || name == "count") return Value::fromInt(lengthOf(input));
  if (name == "tojson") return toJsonFilter(input, args, budget);
  if (name == "first") return endItem(input, false);
  if (name == "last") return endItem(input, true);
  if (name == "join") return joinFilter(input, args, budget);
  if (name == "default" || name == "d") {
    const Value* fallback = args.get(0, "default_value");
    const Value* boolean = args.get(1, "boolean");
    const bool use_fallback =
        boolean != nullptr && truthy(*boolean) ? !truthy(input) : input.isUndefined();
    if (!use_fallback) return input;
    return fallback != nullptr ? *fallback : Value::fromString("");
  }
  if (name == "items") return itemsFilter(input);
  if (name == "list") return Value::fromList(iterate(input));
  if (name == "selectattr" || name == "rejectattr")
    return selectFilter(input, args, true, name == "selectattr", budget);
  if (name == "select" || name == "reject")
    return selectFilter(input, args, false, name == "select", budget);
  if (name == "map") return mapFilter(input, args, budget);
  if (name == "reverse") return reverseFilter(input);
  if (name == "safe") return input;
  if (name == "abs" || name == "int" || name == "float") return numberFilter(name, input, args);
  fail("no filter named '" + name + "'");
}

}  // namespace ree::models::jinja
