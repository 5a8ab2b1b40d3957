// Expressions of a jinja2 template, with jinja2's grammar and operator precedence
// (jinja2/parser.py: conditions, or/and/not, comparisons, arithmetic, filters and tests,
// subscripts, calls, literals), for the subset Hugging Face chat templates use. The statement
// parser (jinja_parser.cpp) builds on it.
#pragma once

#include <string>
#include <vector>

#include "chat/jinja_ast.h"
#include "chat/jinja_token_cursor.h"

namespace ree::models::jinja {

class ExpressionParser : public TokenCursor {
 public:
  using TokenCursor::TokenCursor;

 protected:
  // A comma-separated tuple, or one expression when there is no comma ({{ a, b }}, for targets'
  // iterables, {% set x = a, b %}). `with_condition` allows "x if c else y".
  ExprPtr parseTuple(bool with_condition);
  ExprPtr parseExpression(bool with_condition);

 private:
  ExprPtr makeExpr(ExprKind kind, size_t offset);
  ExprPtr literal(Value value, size_t offset);
  ExprPtr binary(ExprKind kind, const std::string& op, ExprPtr left, ExprPtr right, size_t offset);
  bool atTupleEnd() const;

  // By increasing precedence.
  ExprPtr parseCondition();
  ExprPtr parseOr();
  ExprPtr parseAnd();
  ExprPtr parseNot();
  ExprPtr parseCompare();
  ExprPtr parseMath1();
  ExprPtr parseConcat();
  ExprPtr parseMath2();
  ExprPtr parsePow();
  ExprPtr parseUnary(bool with_filter);

  ExprPtr parsePrimary();
  ExprPtr parseParenthesised(size_t offset);
  ExprPtr parseList(size_t offset);
  ExprPtr parseDict(size_t offset);

  ExprPtr parsePostfix(ExprPtr node);
  ExprPtr parseSubscript(ExprPtr node);
  void parseCallArgs(Expr* call);
  ExprPtr parseCall(ExprPtr node);
  std::string parseDottedName();
  ExprPtr parseFilterExpr(ExprPtr node);
  ExprPtr parseTest(ExprPtr node);
};

}  // namespace ree::models::jinja
