// The one error type of the chat-template interpreter (internal: it never crosses the public API;
// chat_template.cpp turns it into a Status and a one-line message).
#pragma once

#include <string>
#include <utility>

namespace ree::models::jinja {

struct JinjaError {
  std::string message;
  int line = 0;        // 1-based; 0 until the evaluator fills in the position being evaluated
  int column = 0;      // 1-based, in code points of the normalised template text
  bool limit = false;  // a resource limit (steps, output, depth), not a template bug
};

[[noreturn]] inline void fail(std::string message) {
  throw JinjaError{std::move(message)};
}
[[noreturn]] inline void failAt(int line, int column, std::string message) {
  throw JinjaError{std::move(message), line, column};
}
[[noreturn]] inline void failLimit(std::string message) {
  throw JinjaError{std::move(message), 0, 0, true};
}

}  // namespace ree::models::jinja
