// Tokens of a jinja2 template, cut exactly as jinja2's lexer cuts them with the environment
// transformers uses (trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=False):
// newlines normalised to "\n", one trailing newline dropped, whitespace control (-, +) applied to
// the data around tags, comments dropped, {% raw %} blocks turned into data.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ree::models::jinja {

enum class TokenType {
  kData,
  kVariableBegin,
  kVariableEnd,
  kBlockBegin,
  kBlockEnd,
  kName,
  kString,
  kInteger,
  kFloat,
  kOperator,
  kEnd,
};

struct Token {
  TokenType type = TokenType::kEnd;
  std::string text;  // data, name, operator, or the unescaped string literal
  int64_t integer = 0;
  double number = 0.0;
  size_t offset = 0;  // byte offset in the normalised source
};

// The normalised source (what offsets refer to) and line/column lookup.
class SourceMap {
 public:
  explicit SourceMap(std::string_view template_text);
  const std::string& text() const { return text_; }
  // 1-based line and column (in code points) of a byte offset.
  void position(size_t offset, int* line, int* column) const;

 private:
  std::string text_;
  std::vector<size_t> line_starts_;
};

// Throws JinjaError (with line and column) on a lexical error.
std::vector<Token> lexTemplate(const SourceMap& source);

}  // namespace ree::models::jinja
