#include "chat/jinja_token_cursor.h"

#include "chat/jinja_error.h"

namespace ree::models::jinja {

void TokenCursor::error(size_t offset, const std::string& message) const {
  int line = 0;
  int column = 0;
  source_.position(offset, &line, &column);
  failAt(line, column, message);
}

std::string TokenCursor::describe(const Token& token) const {
  switch (token.type) {
    case TokenType::kEnd:
      return "end of template";
    case TokenType::kBlockEnd:
      return "end of statement block";
    case TokenType::kVariableEnd:
      return "end of print statement";
    case TokenType::kBlockBegin:
      return "begin of statement block";
    case TokenType::kVariableBegin:
      return "begin of print statement";
    case TokenType::kData:
      return "template data";
    case TokenType::kString:
      return "string literal";
    default:
      return "'" + token.text + "'";
  }
}

void TokenCursor::expectOp(const char* op) {
  if (!skipOp(op))
    error(current().offset, "expected '" + std::string(op) + "', got " + describe(current()));
}

void TokenCursor::expect(TokenType type, const char* what) {
  if (current().type != type)
    error(current().offset, std::string("expected ") + what + ", got " + describe(current()));
  advance();
}

std::string TokenCursor::expectName(const char* what) {
  if (current().type != TokenType::kName)
    error(current().offset, std::string("expected ") + what + ", got " + describe(current()));
  std::string name = current().text;
  advance();
  return name;
}

TokenCursor::DepthGuard::DepthGuard(TokenCursor* c) : cursor(c) {
  if (++cursor->depth_ > cursor->max_nesting_) {
    cursor->error(cursor->current().offset,
                  "template nests deeper than " + std::to_string(cursor->max_nesting_) + " levels");
  }
}

}  // namespace ree::models::jinja
