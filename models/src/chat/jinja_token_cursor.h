// A cursor over a template's tokens for the parsers (jinja_expression_parser.cpp,
// jinja_parser.cpp): looking at and skipping tokens, errors at a token's line:column, and the
// nesting bound shared by statements and expressions.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include "chat/jinja_lexer.h"

namespace ree::models::jinja {

class TokenCursor {
 public:
  TokenCursor(const std::vector<Token>& tokens, const SourceMap& source, int max_nesting)
      : tokens_(tokens), source_(source), max_nesting_(max_nesting) {}

 protected:
  const Token& current() const { return tokens_[pos_]; }
  const Token& peek(size_t ahead = 1) const {
    return tokens_[std::min(pos_ + ahead, tokens_.size() - 1)];
  }
  void advance() {
    if (pos_ + 1 < tokens_.size()) ++pos_;
  }
  bool isOp(const char* op) const {
    return current().type == TokenType::kOperator && current().text == op;
  }
  bool isName(const char* name) const {
    return current().type == TokenType::kName && current().text == name;
  }
  bool skipOp(const char* op) {
    if (!isOp(op)) return false;
    advance();
    return true;
  }
  bool skipName(const char* name) {
    if (!isName(name)) return false;
    advance();
    return true;
  }

  // Throws JinjaError at the line and column of a byte offset of the normalised source.
  [[noreturn]] void error(size_t offset, const std::string& message) const;
  // How jinja2 names a token in "expected ..., got ..." messages.
  std::string describe(const Token& token) const;

  void expectOp(const char* op);
  void expect(TokenType type, const char* what);
  std::string expectName(const char* what);

  // One level of nesting (a block or an expression) while alive; past max_nesting an error.
  struct DepthGuard {
    explicit DepthGuard(TokenCursor* cursor);
    ~DepthGuard() { --cursor->depth_; }
    TokenCursor* cursor;
  };

 private:
  const std::vector<Token>& tokens_;
  const SourceMap& source_;
  const int max_nesting_;
  size_t pos_ = 0;
  int depth_ = 0;
};

}  // namespace ree::models::jinja
