// Methods a template may call on strings (strip, split, startswith, ...) and dicts (items, get,
// keys, values), with Python's semantics. Mutating methods are absent, as in transformers'
// ImmutableSandboxedEnvironment.
#include <algorithm>

#include "chat/jinja_builtins.h"
#include "chat/jinja_error.h"
#include "chat/jinja_text.h"

namespace ree::models::jinja {

namespace {

const char* const kStringMethods[] = {"strip",   "lstrip", "rstrip", "startswith", "endswith",
                                      "split",   "title",  "upper",  "lower",      "capitalize",
                                      "replace", "find",   "join"};
const char* const kDictMethods[] = {"items", "keys", "values", "get"};

std::string requireString(const Value& v, const std::string& method) {
  if (v.kind != Kind::kString) fail(method + "() argument must be str, not " + typeName(v));
  return v.text;
}

Value splitWhitespace(const std::string& text, int64_t max_split) {
  const std::vector<uint32_t> points = codePoints(text);
  List parts;
  size_t i = 0;
  while (true) {
    while (i < points.size() && isPythonSpace(points[i]))
      ++i;
    if (i >= points.size()) break;
    size_t end = i;
    if (max_split >= 0 && static_cast<int64_t>(parts.size()) >= max_split) {
      end = points.size();
      while (end > i && isPythonSpace(points[end - 1]))
        --end;
    } else {
      while (end < points.size() && !isPythonSpace(points[end]))
        ++end;
    }
    parts.push_back(Value::fromString(fromCodePoints(std::vector<uint32_t>(
        points.begin() + static_cast<long>(i), points.begin() + static_cast<long>(end)))));
    i = end;
  }
  return Value::fromList(std::move(parts));
}

Value split(const std::string& text, const Args& args) {
  args.check("split", 2, {"sep", "maxsplit"});
  const Value* sep = args.get(0, "sep");
  const Value* max_value = args.get(1, "maxsplit");
  const int64_t max_split =
      max_value != nullptr && max_value->kind == Kind::kInt ? max_value->integer : -1;
  if (sep == nullptr || sep->kind == Kind::kNone) return splitWhitespace(text, max_split);
  const std::string separator = requireString(*sep, "split");
  if (separator.empty()) fail("empty separator");
  List parts;
  size_t begin = 0;
  while (max_split < 0 || static_cast<int64_t>(parts.size()) < max_split) {
    const size_t found = text.find(separator, begin);
    if (found == std::string::npos) break;
    parts.push_back(Value::fromString(text.substr(begin, found - begin)));
    begin = found + separator.size();
  }
  parts.push_back(Value::fromString(text.substr(begin)));
  return Value::fromList(std::move(parts));
}

bool affixMatches(const std::string& text, const Value& affix, bool prefix,
                  const std::string& method) {
  if (affix.kind == Kind::kList) {
    return std::any_of(affix.list->begin(), affix.list->end(),
                       [&](const Value& one) { return affixMatches(text, one, prefix, method); });
  }
  const std::string a = requireString(affix, method);
  if (a.size() > text.size()) return false;
  return prefix ? text.compare(0, a.size(), a) == 0
                : text.compare(text.size() - a.size(), a.size(), a) == 0;
}

Value replace(const std::string& text, const Args& args, Budget& budget) {
  args.check("replace", 3, {});
  const std::string old_text = requireString(*args.get(0, nullptr), "replace");
  const std::string new_text = requireString(*args.get(1, nullptr), "replace");
  const Value* count_value = args.get(2, nullptr);
  int64_t count =
      count_value != nullptr && count_value->kind == Kind::kInt ? count_value->integer : -1;
  std::string out;
  if (old_text.empty()) {  // Python inserts `new` before every code point and at the end
    const std::vector<uint32_t> points = codePoints(text);
    for (size_t i = 0; i <= points.size(); ++i) {
      if (count < 0 || static_cast<int64_t>(i) < count) out += new_text;
      if (i < points.size()) appendUtf8(points[i], &out);
      budget.checkSize(out.size(), "replace's output");
    }
    return Value::fromString(std::move(out));
  }
  size_t begin = 0;
  while (count != 0) {
    const size_t found = text.find(old_text, begin);
    if (found == std::string::npos) break;
    out.append(text, begin, found - begin);
    out += new_text;
    begin = found + old_text.size();
    if (count > 0) --count;
    budget.checkSize(out.size(), "replace's output");
  }
  out.append(text, begin, std::string::npos);
  return Value::fromString(std::move(out));
}

Value stringMethod(const std::string& text, const std::string& name, const Args& args,
                   Budget& budget) {
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    args.check(name.c_str(), 1, {});
    const Value* chars = args.get(0, nullptr);
    const bool given = chars != nullptr && chars->kind != Kind::kNone;
    const std::string set = given ? requireString(*chars, name) : std::string();
    return Value::fromString(
        pythonStrip(text, name != "rstrip", name != "lstrip", given ? &set : nullptr));
  }
  if (name == "startswith" || name == "endswith") {
    args.check(name.c_str(), 1, {});
    const Value* affix = args.get(0, nullptr);
    if (affix == nullptr) fail(name + "() takes at least 1 argument (0 given)");
    return Value::fromBool(affixMatches(text, *affix, name == "startswith", name));
  }
  if (name == "split") return split(text, args);
  if (name == "title") return Value::fromString(titleCase(text));
  if (name == "upper") return Value::fromString(toUpper(text));
  if (name == "lower") return Value::fromString(toLower(text));
  if (name == "capitalize") return Value::fromString(capitalize(text));
  if (name == "replace") {
    if (args.positional.size() < 2) fail("replace() takes at least 2 arguments");
    return replace(text, args, budget);
  }
  if (name == "find") {
    const Value* sub = args.get(0, nullptr);
    if (sub == nullptr) fail("find() takes at least 1 argument (0 given)");
    const size_t found = text.find(requireString(*sub, "find"));
    return Value::fromInt(
        found == std::string::npos
            ? -1
            : static_cast<int64_t>(codePointCount(std::string_view(text).substr(0, found))));
  }
  // join
  const Value* items = args.get(0, nullptr);
  if (items == nullptr) fail("join() takes exactly one argument (0 given)");
  std::string out;
  bool first = true;
  for (const Value& item : iterate(*items)) {
    if (!first) out += text;
    first = false;
    out += requireString(item, "join");
    budget.checkSize(out.size(), "join's output");
  }
  return Value::fromString(std::move(out));
}

Value dictMethod(const Dict& dict, const std::string& name, const Args& args) {
  if (name == "get") {
    args.check("get", 2, {});
    const Value* key = args.get(0, nullptr);
    if (key == nullptr) fail("get expected at least 1 argument, got 0");
    const Value* found = key->kind == Kind::kString ? dict.find(key->text) : nullptr;
    if (found != nullptr) return *found;
    const Value* fallback = args.get(1, nullptr);
    return fallback != nullptr ? *fallback : Value::none();
  }
  args.check(name.c_str(), 0, {});
  List out;
  for (const auto& entry : dict.entries) {
    if (name == "items")
      out.push_back(Value::tupleOf({Value::fromString(entry.first), entry.second}));
    if (name == "keys") out.push_back(Value::fromString(entry.first));
    if (name == "values") out.push_back(entry.second);
  }
  return Value::fromList(std::move(out));
}

}  // namespace

bool hasMethod(const Value& self, const std::string& name) {
  if (self.kind == Kind::kString) {
    return std::any_of(std::begin(kStringMethods), std::end(kStringMethods),
                       [&](const char* m) { return name == m; });
  }
  if (self.kind == Kind::kDict) {
    return std::any_of(std::begin(kDictMethods), std::end(kDictMethods),
                       [&](const char* m) { return name == m; });
  }
  return false;
}

Value callMethod(const Value& self, const std::string& name, const Args& args, Budget& budget) {
  budget.step();
  if (self.kind == Kind::kString) return stringMethod(self.text, name, args, budget);
  if (self.kind == Kind::kDict) return dictMethod(*self.dict, name, args);
  fail("'" + typeName(self) + "' object has no method '" + name + "'");
}

}  // namespace ree::models::jinja
