// Call arguments and the work budget of the chat-template interpreter.
#include <algorithm>

#include "chat/jinja_builtins.h"
#include "chat/jinja_error.h"

namespace ree::models::jinja {

const Value* Args::get(size_t index, const char* name) const {
  if (index < positional.size()) return &positional[index];
  for (const auto& entry : keyword) {
    if (name != nullptr && entry.first == name) return &entry.second;
  }
  return nullptr;
}

void Args::check(const char* what, size_t max_positional, std::vector<const char*> names) const {
  if (positional.size() > max_positional) {
    fail(std::string(what) + "() takes at most " + std::to_string(max_positional) +
         " positional arguments (" + std::to_string(positional.size()) + " given)");
  }
  for (const auto& entry : keyword) {
    const bool known = std::any_of(names.begin(), names.end(),
                                   [&](const char* name) { return entry.first == name; });
    if (!known)
      fail(std::string(what) + "() got an unexpected keyword argument '" + entry.first + "'");
  }
}

void Budget::step(uint64_t cost) {
  steps += cost;
  if (steps > max_steps) {
    failLimit("rendering took more than " + std::to_string(max_steps) +
              " steps (a loop or recursion too long for a chat template)");
  }
}

void Budget::checkSize(size_t bytes, const char* what) const {
  if (bytes > max_string_bytes) {
    failLimit(std::string(what) + " would hold " + std::to_string(bytes) +
              " bytes, over the limit of " + std::to_string(max_string_bytes));
  }
}

void Budget::checkItems(size_t items, const char* what) const {
  if (items > max_list_items) {
    failLimit(std::string(what) + " would hold " + std::to_string(items) +
              " items, over the limit of " + std::to_string(max_list_items));
  }
}

}  // namespace ree::models::jinja
