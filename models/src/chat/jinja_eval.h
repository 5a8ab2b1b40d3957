// Renders a parsed template: statements, scopes (a for-loop iteration and a macro call get their
// own scope, as in jinja2; if does not), expressions, and the limits on work, output and depth.
#pragma once

#include <cstdint>
#include <string>

#include "chat/jinja_ast.h"
#include "chat/jinja_lexer.h"

namespace ree::models::jinja {

struct RenderLimits {
  uint64_t max_steps = 0;
  size_t max_output_bytes = 0;
  int max_call_depth = 0;
};

// Throws JinjaError (with the line and column of the node being evaluated) on failure.
std::string renderTemplate(const Body& body, const SourceMap& source, Dict variables,
                           const RenderLimits& limits);

}  // namespace ree::models::jinja
