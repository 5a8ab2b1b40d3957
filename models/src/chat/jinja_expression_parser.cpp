#include "chat/jinja_expression_parser.h"

#include <utility>

namespace ree::models::jinja {

ExprPtr ExpressionParser::makeExpr(ExprKind kind, size_t offset) {
  auto expr = std::make_unique<Expr>();
  expr->kind = kind;
  expr->offset = offset;
  return expr;
}

bool ExpressionParser::atTupleEnd() const {
  const Token& t = current();
  return t.type == TokenType::kVariableEnd || t.type == TokenType::kBlockEnd ||
         t.type == TokenType::kEnd || (t.type == TokenType::kOperator && t.text == ")") ||
         (t.type == TokenType::kName && (t.text == "if" || t.text == "recursive"));
}

ExprPtr ExpressionParser::parseTuple(bool with_condition) {
  const size_t offset = current().offset;
  ExprPtr first = parseExpression(with_condition);
  if (!isOp(",")) return first;
  auto tuple = makeExpr(ExprKind::kTuple, offset);
  tuple->args.push_back(std::move(first));
  while (skipOp(",")) {
    if (atTupleEnd()) break;
    tuple->args.push_back(parseExpression(with_condition));
  }
  return tuple;
}

ExprPtr ExpressionParser::parseExpression(bool with_condition) {
  DepthGuard guard(this);
  return with_condition ? parseCondition() : parseOr();
}

ExprPtr ExpressionParser::parseCondition() {
  ExprPtr expr = parseOr();
  while (isName("if")) {
    auto cond = makeExpr(ExprKind::kCondition, current().offset);
    advance();
    ExprPtr test = parseOr();
    ExprPtr otherwise = skipName("else") ? parseCondition() : nullptr;
    cond->args.push_back(std::move(expr));
    cond->args.push_back(std::move(test));
    cond->args.push_back(std::move(otherwise));
    expr = std::move(cond);
  }
  return expr;
}

ExprPtr ExpressionParser::binary(ExprKind kind, const std::string& op, ExprPtr left, ExprPtr right,
                                 size_t offset) {
  auto expr = makeExpr(kind, offset);
  expr->name = op;
  expr->args.push_back(std::move(left));
  expr->args.push_back(std::move(right));
  return expr;
}

ExprPtr ExpressionParser::parseOr() {
  ExprPtr left = parseAnd();
  while (isName("or")) {
    const size_t offset = current().offset;
    advance();
    left = binary(ExprKind::kOr, "or", std::move(left), parseAnd(), offset);
  }
  return left;
}

ExprPtr ExpressionParser::parseAnd() {
  ExprPtr left = parseNot();
  while (isName("and")) {
    const size_t offset = current().offset;
    advance();
    left = binary(ExprKind::kAnd, "and", std::move(left), parseNot(), offset);
  }
  return left;
}

ExprPtr ExpressionParser::parseNot() {
  if (!isName("not")) return parseCompare();
  DepthGuard guard(this);
  auto expr = makeExpr(ExprKind::kNot, current().offset);
  advance();
  expr->args.push_back(parseNot());
  return expr;
}

ExprPtr ExpressionParser::parseCompare() {
  const size_t offset = current().offset;
  ExprPtr first = parseMath1();
  auto compare = makeExpr(ExprKind::kCompare, offset);
  compare->args.push_back(std::move(first));
  while (true) {
    const Token& t = current();
    static const char* const kOps[] = {"==", "!=", "<", "<=", ">", ">="};
    std::string op;
    for (const char* candidate : kOps) {
      if (t.type == TokenType::kOperator && t.text == candidate) op = candidate;
    }
    if (!op.empty()) {
      advance();
    } else if (skipName("in")) {
      op = "in";
    } else if (isName("not") && peek().type == TokenType::kName && peek().text == "in") {
      advance();
      advance();
      op = "notin";
    } else {
      break;
    }
    compare->ops.push_back(op);
    compare->args.push_back(parseMath1());
  }
  if (compare->ops.empty()) return std::move(compare->args[0]);
  return compare;
}

ExprPtr ExpressionParser::parseMath1() {
  ExprPtr left = parseConcat();
  while (isOp("+") || isOp("-")) {
    const std::string op = current().text;
    const size_t offset = current().offset;
    advance();
    left = binary(ExprKind::kBinary, op, std::move(left), parseConcat(), offset);
  }
  return left;
}

ExprPtr ExpressionParser::parseConcat() {
  ExprPtr left = parseMath2();
  while (isOp("~")) {
    const size_t offset = current().offset;
    advance();
    left = binary(ExprKind::kBinary, "~", std::move(left), parseMath2(), offset);
  }
  return left;
}

ExprPtr ExpressionParser::parseMath2() {
  ExprPtr left = parsePow();
  while (isOp("*") || isOp("/") || isOp("//") || isOp("%")) {
    const std::string op = current().text;
    const size_t offset = current().offset;
    advance();
    left = binary(ExprKind::kBinary, op, std::move(left), parsePow(), offset);
  }
  return left;
}

ExprPtr ExpressionParser::parsePow() {
  ExprPtr left = parseUnary(true);
  while (isOp("**")) {
    const size_t offset = current().offset;
    advance();
    left = binary(ExprKind::kBinary, "**", std::move(left), parseUnary(true), offset);
  }
  return left;
}

ExprPtr ExpressionParser::parseUnary(bool with_filter) {
  DepthGuard guard(this);
  ExprPtr node;
  if (isOp("-") || isOp("+")) {
    node = makeExpr(isOp("-") ? ExprKind::kNeg : ExprKind::kPos, current().offset);
    advance();
    node->args.push_back(parseUnary(false));
  } else {
    node = parsePrimary();
  }
  node = parsePostfix(std::move(node));
  if (with_filter) node = parseFilterExpr(std::move(node));
  return node;
}

ExprPtr ExpressionParser::literal(Value value, size_t offset) {
  auto expr = makeExpr(ExprKind::kLiteral, offset);
  expr->literal = std::move(value);
  return expr;
}

ExprPtr ExpressionParser::parsePrimary() {
  const Token& t = current();
  const size_t offset = t.offset;
  if (t.type == TokenType::kName) {
    const std::string& n = t.text;
    advance();
    if (n == "true" || n == "True") return literal(Value::fromBool(true), offset);
    if (n == "false" || n == "False") return literal(Value::fromBool(false), offset);
    if (n == "none" || n == "None") return literal(Value::none(), offset);
    auto name = makeExpr(ExprKind::kName, offset);
    name->name = n;
    return name;
  }
  if (t.type == TokenType::kString) {
    std::string text;
    while (current().type == TokenType::kString) {
      text += current().text;
      advance();
    }
    return literal(Value::fromString(std::move(text)), offset);
  }
  if (t.type == TokenType::kInteger) {
    const int64_t v = t.integer;
    advance();
    return literal(Value::fromInt(v), offset);
  }
  if (t.type == TokenType::kFloat) {
    const double v = t.number;
    advance();
    return literal(Value::fromFloat(v), offset);
  }
  if (skipOp("(")) return parseParenthesised(offset);
  if (skipOp("[")) return parseList(offset);
  if (skipOp("{")) return parseDict(offset);
  error(offset, "unexpected " + describe(t));
}

ExprPtr ExpressionParser::parseParenthesised(size_t offset) {
  if (skipOp(")")) return makeExpr(ExprKind::kTuple, offset);
  ExprPtr first = parseExpression(true);
  if (skipOp(")")) return first;
  auto tuple = makeExpr(ExprKind::kTuple, offset);
  tuple->args.push_back(std::move(first));
  while (skipOp(",")) {
    if (isOp(")")) break;
    tuple->args.push_back(parseExpression(true));
  }
  expectOp(")");
  return tuple;
}

ExprPtr ExpressionParser::parseList(size_t offset) {
  auto list = makeExpr(ExprKind::kList, offset);
  while (!isOp("]")) {
    if (!list->args.empty()) expectOp(",");
    if (isOp("]")) break;
    list->args.push_back(parseExpression(true));
  }
  advance();
  return list;
}

ExprPtr ExpressionParser::parseDict(size_t offset) {
  auto dict = makeExpr(ExprKind::kDict, offset);
  while (!isOp("}")) {
    if (!dict->args.empty()) expectOp(",");
    if (isOp("}")) break;
    dict->args.push_back(parseExpression(true));
    expectOp(":");
    dict->args.push_back(parseExpression(true));
  }
  advance();
  return dict;
}

ExprPtr ExpressionParser::parsePostfix(ExprPtr node) {
  while (true) {
    if (isOp(".") || isOp("[")) {
      node = parseSubscript(std::move(node));
    } else if (isOp("(")) {
      node = parseCall(std::move(node));
    } else {
      return node;
    }
  }
}

ExprPtr ExpressionParser::parseSubscript(ExprPtr node) {
  const size_t offset = current().offset;
  if (skipOp(".")) {
    const Token& t = current();
    if (t.type == TokenType::kName) {
      auto attr = makeExpr(ExprKind::kGetAttr, offset);
      attr->name = t.text;
      attr->args.push_back(std::move(node));
      advance();
      return attr;
    }
    if (t.type != TokenType::kInteger)
      error(t.offset, "expected a name or number after '.', got " + describe(t));
    auto item = makeExpr(ExprKind::kGetItem, offset);
    item->args.push_back(std::move(node));
    item->args.push_back(literal(Value::fromInt(t.integer), t.offset));
    advance();
    return item;
  }
  advance();  // [
  ExprPtr parts[3];
  int part = 0;
  bool is_slice = false;
  while (!isOp("]")) {
    if (isOp(":")) {
      if (++part > 2) error(current().offset, "a slice has at most three parts");
      is_slice = true;
      advance();
      continue;
    }
    if (parts[part]) error(current().offset, "expected ':' or ']', got " + describe(current()));
    parts[part] = parseExpression(true);
  }
  advance();
  if (!is_slice && !parts[0]) error(offset, "empty subscript");
  auto expr = makeExpr(is_slice ? ExprKind::kSlice : ExprKind::kGetItem, offset);
  expr->args.push_back(std::move(node));
  expr->args.push_back(std::move(parts[0]));
  if (is_slice) {
    expr->args.push_back(std::move(parts[1]));
    expr->args.push_back(std::move(parts[2]));
  }
  return expr;
}

void ExpressionParser::parseCallArgs(Expr* call) {
  expectOp("(");
  bool first = true;
  while (!isOp(")")) {
    if (!first) expectOp(",");
    first = false;
    if (isOp(")")) break;
    if (isOp("*") || isOp("**"))
      error(current().offset, "*args and **kwargs in calls are not supported");
    if (current().type == TokenType::kName && peek().type == TokenType::kOperator &&
        peek().text == "=") {
      std::string key = current().text;
      advance();
      advance();
      call->kwargs.emplace_back(std::move(key), parseExpression(true));
      continue;
    }
    if (!call->kwargs.empty())
      error(current().offset, "a positional argument follows a keyword argument");
    call->args.push_back(parseExpression(true));
  }
  advance();
}

ExprPtr ExpressionParser::parseCall(ExprPtr node) {
  auto call = makeExpr(ExprKind::kCall, node->offset);
  call->args.push_back(std::move(node));
  parseCallArgs(call.get());
  return call;
}

std::string ExpressionParser::parseDottedName() {
  std::string name = expectName("a filter or test name");
  while (isOp(".") && peek().type == TokenType::kName) {
    advance();
    name += "." + current().text;
    advance();
  }
  return name;
}

ExprPtr ExpressionParser::parseFilterExpr(ExprPtr node) {
  while (true) {
    if (isOp("|")) {
      auto filter = makeExpr(ExprKind::kFilter, current().offset);
      advance();
      filter->name = parseDottedName();
      filter->args.push_back(std::move(node));
      if (isOp("(")) parseCallArgs(filter.get());
      node = std::move(filter);
    } else if (isName("is")) {
      node = parseTest(std::move(node));
    } else if (isOp("(")) {
      node = parseCall(std::move(node));
    } else {
      return node;
    }
  }
}

ExprPtr ExpressionParser::parseTest(ExprPtr node) {
  auto test = makeExpr(ExprKind::kTest, current().offset);
  advance();
  test->negated = skipName("not");
  test->name = parseDottedName();
  test->args.push_back(std::move(node));
  const Token& t = current();
  if (isOp("(")) {
    parseCallArgs(test.get());
  } else if ((t.type == TokenType::kName || t.type == TokenType::kString ||
              t.type == TokenType::kInteger || t.type == TokenType::kFloat || isOp("[") ||
              isOp("{")) &&
             !isName("else") && !isName("or") && !isName("and")) {
    if (isName("is")) error(t.offset, "tests cannot be chained with 'is'");
    test->args.push_back(parsePostfix(parsePrimary()));
  }
  return test;
}

}  // namespace ree::models::jinja
