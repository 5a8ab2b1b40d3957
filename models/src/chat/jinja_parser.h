// Statements and expressions of a jinja2 template, with jinja2's grammar and operator precedence
// (jinja2/parser.py), for the subset Hugging Face chat templates use.
#pragma once

#include <vector>

#include "chat/jinja_ast.h"
#include "chat/jinja_lexer.h"

namespace ree::models::jinja {

// Throws JinjaError naming the line and column of the offending token. `max_nesting` bounds the
// depth of nested blocks and expressions (a hostile template cannot exhaust the stack).
Body parseTemplate(const std::vector<Token>& tokens, const SourceMap& source, int max_nesting);

}  // namespace ree::models::jinja
