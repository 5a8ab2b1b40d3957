// Values of the chat-template interpreter, with Python's semantics (truthiness, str(), ==, <)
// as jinja2 applies them. Lists and dicts are shared and never mutated after construction
// (transformers renders in an ImmutableSandboxedEnvironment); namespaces are shared and mutable.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace ree::models::jinja {

struct Value;
struct Node;
using List = std::vector<Value>;

// Insertion-ordered string-keyed mapping (Python dict order).
struct Dict {
  std::vector<std::pair<std::string, Value>> entries;
  const Value* find(const std::string& key) const;
  void set(const std::string& key, Value value);
};

// Something callable: a global function, a macro, or a method bound to its object.
struct Callable {
  enum class Kind { kGlobal, kMacro, kMethod } kind = Kind::kGlobal;
  std::string name;
  const Node* macro = nullptr;  // kMacro
  std::shared_ptr<Value> self;  // kMethod
};

enum class Kind {
  kUndefined,
  kNone,
  kBool,
  kInt,
  kFloat,
  kString,
  kList,
  kDict,
  kNamespace,
  kCallable
};

struct Value {
  Kind kind = Kind::kUndefined;
  bool boolean = false;
  int64_t integer = 0;
  double number = 0.0;
  std::string text;                  // kString; kUndefined: the name that was undefined
  std::shared_ptr<const List> list;  // kList (tuples too)
  bool tuple = false;
  uint32_t depth = 0;  // nesting of lists and dicts (bounded: deep values would exhaust the stack)
                       // // a kList that Python would hold as a tuple: (1, 2)
  std::shared_ptr<Dict> dict;  // kDict (never mutated) and kNamespace (mutable)
  std::shared_ptr<const Callable> callable;

  static Value undefined(std::string hint = {});
  static Value none();
  static Value fromBool(bool b);
  static Value fromInt(int64_t i);
  static Value fromFloat(double d);
  static Value fromString(std::string s);
  static Value fromList(List items);
  static Value tupleOf(List items);
  static Value fromDict(Dict d);
  static Value fromCallable(Callable c);

  bool isUndefined() const { return kind == Kind::kUndefined; }
  bool isNumber() const {
    return kind == Kind::kInt || kind == Kind::kFloat || kind == Kind::kBool;
  }
  bool isMapping() const { return kind == Kind::kDict; }
  bool isIterable() const;
  double asDouble() const;
};

// Lists and dicts nest at most this deep (kLimit errors beyond).
constexpr uint32_t kMaxValueDepth = 512;
// True when `value` is or holds a namespace (refused inside a namespace: no reference cycles).
bool holdsNamespace(const Value& value);

bool truthy(const Value& value);
// str(value) as jinja prints it (Undefined prints as "").
std::string toStr(const Value& value);
// repr(value) (inside lists and dicts).
std::string toRepr(const Value& value);
// Python == (1 == 1.0 == True; lists and dicts element-wise).
bool equals(const Value& a, const Value& b);
// Python <: numbers, strings (code-point order), lists; anything else fails.
bool lessThan(const Value& a, const Value& b);
// Items of an iteration: list, tuple, dict keys, string characters, Undefined (empty).
List iterate(const Value& value);
// Python's type name, for error messages ("str", "list", "dict", ...).
std::string typeName(const Value& value);
// Length as jinja's length filter: code points, items, keys (Undefined: 0).
int64_t lengthOf(const Value& value);

}  // namespace ree::models::jinja
