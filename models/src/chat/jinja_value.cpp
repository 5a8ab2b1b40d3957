#include "chat/jinja_value.h"

#include <algorithm>
#include <cstdio>

#include "chat/jinja_error.h"
#include "chat/jinja_text.h"

namespace ree::models::jinja {

const Value* Dict::find(const std::string& key) const {
  for (const auto& entry : entries) {
    if (entry.first == key) return &entry.second;
  }
  return nullptr;
}

void Dict::set(const std::string& key, Value value) {
  for (auto& entry : entries) {
    if (entry.first == key) {
      entry.second = std::move(value);
      return;
    }
  }
  entries.emplace_back(key, std::move(value));
}

Value Value::undefined(std::string hint) {
  Value v;
  v.text = std::move(hint);
  return v;
}
Value Value::none() {
  Value v;
  v.kind = Kind::kNone;
  return v;
}
Value Value::fromBool(bool b) {
  Value v;
  v.kind = Kind::kBool;
  v.boolean = b;
  return v;
}
Value Value::fromInt(int64_t i) {
  Value v;
  v.kind = Kind::kInt;
  v.integer = i;
  return v;
}
Value Value::fromFloat(double d) {
  Value v;
  v.kind = Kind::kFloat;
  v.number = d;
  return v;
}
Value Value::fromString(std::string s) {
  Value v;
  v.kind = Kind::kString;
  v.text = std::move(s);
  return v;
}
namespace {

uint32_t childDepth(const Value& child) {
  return child.kind == Kind::kList || child.kind == Kind::kDict || child.kind == Kind::kNamespace
             ? child.depth
             : 0;
}

uint32_t checkedDepth(uint32_t deepest_child) {
  if (deepest_child + 1 > kMaxValueDepth) {
    failLimit("lists and dicts nest deeper than " + std::to_string(kMaxValueDepth) + " levels");
  }
  return deepest_child + 1;
}

}  // namespace

Value Value::fromList(List items) {
  Value v;
  v.kind = Kind::kList;
  uint32_t deepest = 0;
  for (const Value& item : items)
    deepest = std::max(deepest, childDepth(item));
  v.depth = checkedDepth(deepest);
  v.list = std::make_shared<const List>(std::move(items));
  return v;
}
Value Value::tupleOf(List items) {
  Value v = fromList(std::move(items));
  v.tuple = true;
  return v;
}
Value Value::fromDict(Dict d) {
  Value v;
  v.kind = Kind::kDict;
  uint32_t deepest = 0;
  for (const auto& entry : d.entries)
    deepest = std::max(deepest, childDepth(entry.second));
  v.depth = checkedDepth(deepest);
  v.dict = std::make_shared<Dict>(std::move(d));
  return v;
}
Value Value::fromCallable(Callable c) {
  Value v;
  v.kind = Kind::kCallable;
  v.callable = std::make_shared<const Callable>(std::move(c));
  return v;
}

bool Value::isIterable() const {
  return kind == Kind::kList || kind == Kind::kDict || kind == Kind::kString ||
         kind == Kind::kUndefined;
}

double Value::asDouble() const {
  if (kind == Kind::kFloat) return number;
  if (kind == Kind::kBool) return boolean ? 1.0 : 0.0;
  return static_cast<double>(integer);
}

bool holdsNamespace(const Value& value) {
  if (value.kind == Kind::kNamespace) return true;
  if (value.kind == Kind::kList) {
    for (const Value& item : *value.list) {
      if (holdsNamespace(item)) return true;
    }
  }
  if (value.kind == Kind::kDict) {
    for (const auto& entry : value.dict->entries) {
      if (holdsNamespace(entry.second)) return true;
    }
  }
  if (value.kind == Kind::kCallable && value.callable->self)
    return holdsNamespace(*value.callable->self);
  return false;
}

bool truthy(const Value& value) {
  switch (value.kind) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
      return value.boolean;
    case Kind::kInt:
      return value.integer != 0;
    case Kind::kFloat:
      return value.number != 0.0;
    case Kind::kString:
      return !value.text.empty();
    case Kind::kList:
      return !value.list->empty();
    case Kind::kDict:
      return !value.dict->entries.empty();
    default:
      return true;
  }
}

namespace {

std::string listRepr(const List& items, bool tuple) {
  std::string out = tuple ? "(" : "[";
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += ", ";
    out += toRepr(items[i]);
  }
  if (tuple && items.size() == 1) out += ",";
  return out + (tuple ? ")" : "]");
}

std::string dictRepr(const Dict& dict) {
  std::string out = "{";
  for (size_t i = 0; i < dict.entries.size(); ++i) {
    if (i > 0) out += ", ";
    out += pythonRepr(dict.entries[i].first) + ": " + toRepr(dict.entries[i].second);
  }
  return out + "}";
}

}  // namespace

std::string toStr(const Value& value) {
  switch (value.kind) {
    case Kind::kUndefined:
      return "";
    case Kind::kNone:
      return "None";
    case Kind::kBool:
      return value.boolean ? "True" : "False";
    case Kind::kInt:
      return std::to_string(value.integer);
    case Kind::kFloat:
      return pythonFloatRepr(value.number);
    case Kind::kString:
      return value.text;
    case Kind::kList:
      return listRepr(*value.list, value.tuple);
    case Kind::kDict:
      return dictRepr(*value.dict);
    case Kind::kNamespace:
      return "<Namespace " + dictRepr(*value.dict) + ">";
    case Kind::kCallable:
      return "<function " + value.callable->name + ">";
  }
  return "";
}

std::string toRepr(const Value& value) {
  if (value.kind == Kind::kUndefined) return "Undefined";
  return value.kind == Kind::kString ? pythonRepr(value.text) : toStr(value);
}

bool equals(const Value& a, const Value& b) {
  if (a.isNumber() && b.isNumber()) {
    if (a.kind == Kind::kFloat || b.kind == Kind::kFloat) return a.asDouble() == b.asDouble();
    return (a.kind == Kind::kBool ? a.boolean : a.integer) ==
           (b.kind == Kind::kBool ? b.boolean : b.integer);
  }
  if (a.kind != b.kind || a.tuple != b.tuple) return false;  // Python: (1, 2) != [1, 2]
  switch (a.kind) {
    case Kind::kUndefined:
    case Kind::kNone:
      return true;
    case Kind::kString:
      return a.text == b.text;
    case Kind::kList: {
      if (a.list->size() != b.list->size()) return false;
      for (size_t i = 0; i < a.list->size(); ++i) {
        if (!equals((*a.list)[i], (*b.list)[i])) return false;
      }
      return true;
    }
    case Kind::kDict: {
      if (a.dict->entries.size() != b.dict->entries.size()) return false;
      for (const auto& entry : a.dict->entries) {
        const Value* other = b.dict->find(entry.first);
        if (other == nullptr || !equals(entry.second, *other)) return false;
      }
      return true;
    }
    default:
      return a.dict == b.dict && a.callable == b.callable;
  }
}

bool lessThan(const Value& a, const Value& b) {
  if (a.isNumber() && b.isNumber()) {
    if (a.kind == Kind::kFloat || b.kind == Kind::kFloat) return a.asDouble() < b.asDouble();
    return (a.kind == Kind::kBool ? a.boolean : a.integer) <
           (b.kind == Kind::kBool ? b.boolean : b.integer);
  }
  if (a.kind == Kind::kString && b.kind == Kind::kString) return a.text < b.text;  // UTF-8 order
  if (a.kind == Kind::kList && b.kind == Kind::kList) {
    const List& x = *a.list;
    const List& y = *b.list;
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!equals(x[i], y[i])) return lessThan(x[i], y[i]);
    }
    return x.size() < y.size();
  }
  if (a.isUndefined()) fail(a.text.empty() ? "undefined value in a comparison" : a.text);
  if (b.isUndefined()) fail(b.text.empty() ? "undefined value in a comparison" : b.text);
  fail("'<' not supported between instances of '" + typeName(a) + "' and '" + typeName(b) + "'");
}

List iterate(const Value& value) {
  switch (value.kind) {
    case Kind::kUndefined:
      return {};
    case Kind::kList:
      return *value.list;
    case Kind::kDict: {
      List keys;
      for (const auto& entry : value.dict->entries)
        keys.push_back(Value::fromString(entry.first));
      return keys;
    }
    case Kind::kString: {
      List chars;
      for (uint32_t point : codePoints(value.text)) {
        std::string one;
        appendUtf8(point, &one);
        chars.push_back(Value::fromString(std::move(one)));
      }
      return chars;
    }
    default:
      fail("'" + typeName(value) + "' object is not iterable");
  }
}

std::string typeName(const Value& value) {
  switch (value.kind) {
    case Kind::kUndefined:
      return "Undefined";
    case Kind::kNone:
      return "NoneType";
    case Kind::kBool:
      return "bool";
    case Kind::kInt:
      return "int";
    case Kind::kFloat:
      return "float";
    case Kind::kString:
      return "str";
    case Kind::kList:
      return "list";
    case Kind::kDict:
      return "dict";
    case Kind::kNamespace:
      return "Namespace";
    case Kind::kCallable:
      return "function";
  }
  return "object";
}

int64_t lengthOf(const Value& value) {
  switch (value.kind) {
    case Kind::kUndefined:
      return 0;
    case Kind::kString:
      return static_cast<int64_t>(codePointCount(value.text));
    case Kind::kList:
      return static_cast<int64_t>(value.list->size());
    case Kind::kDict:
      return static_cast<int64_t>(value.dict->entries.size());
    default:
      fail("object of type '" + typeName(value) + "' has no len()");
  }
}

}  // namespace ree::models::jinja
