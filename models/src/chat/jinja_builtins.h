// What a template can call: filters, tests, methods of str and dict, global functions, and the
// operators; all with jinja2's (and Python's) semantics. Internal to the chat-template
// interpreter; failures throw JinjaError.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "chat/jinja_value.h"

namespace ree::models::jinja {

// Arguments of a call, filter or test (the operand of a filter or test is passed apart).
struct Args {
  List positional;
  std::vector<std::pair<std::string, Value>> keyword;
  // The argument at `index` or named `name`, or nullptr.
  const Value* get(size_t index, const char* name) const;
  // Fails when more than `max_positional` positional arguments, or an unknown keyword, came.
  void check(const char* what, size_t max_positional, std::vector<const char*> names) const;
};

// Bounds on work and value sizes (a hostile template cannot run forever or fill memory).
struct Budget {
  uint64_t steps = 0;
  uint64_t max_steps = 0;
  size_t max_string_bytes = 0;
  size_t max_list_items = size_t{1} << 20;
  void step(uint64_t cost = 1);
  void checkSize(size_t bytes, const char* what) const;
  void checkItems(size_t items, const char* what) const;
};

Value applyFilter(const std::string& name, const Value& input, const Args& args, Budget& budget);
bool applyTest(const std::string& name, const Value& input, const Args& args);

// Methods reachable with obj.name(...) on strings and dicts.
bool hasMethod(const Value& self, const std::string& name);
Value callMethod(const Value& self, const std::string& name, const Args& args, Budget& budget);

// Globals: range, namespace, dict, raise_exception, strftime_now.
bool isGlobalFunction(const std::string& name);
Value callGlobal(const std::string& name, const Args& args, Budget& budget);

// Operators. `op` is the template's spelling (+ - * / // % ** ~).
Value binaryOperator(const std::string& op, const Value& left, const Value& right, Budget& budget);
Value negate(const Value& operand, bool minus);
// ==, !=, <, <=, >, >=, in, notin.
bool compareOperator(const std::string& op, const Value& left, const Value& right);
// obj.name and obj[key] as jinja2's getattr/getitem do them (missing: Undefined).
Value getAttribute(const Value& object, const std::string& name);
Value getItem(const Value& object, const Value& key);
Value sliceOf(const Value& object, const Value& start, const Value& stop, const Value& step);

// transformers' tojson: json.dumps(x, ensure_ascii=False, indent, separators, sort_keys).
std::string toJson(const Value& value, int indent, bool sort_keys,
                   const std::string& item_separator, const std::string& key_separator,
                   Budget& budget);

}  // namespace ree::models::jinja
