#include "chat/jinja_parser.h"

#include <algorithm>

#include "chat/jinja_error.h"

namespace ree::models::jinja {

namespace {

class Parser {
 public:
  Parser(const std::vector<Token>& tokens, const SourceMap& source, int max_nesting)
      : tokens_(tokens), source_(source), max_nesting_(max_nesting) {}

  Body parseAll() {
    std::string found;
    Body body = subparse({}, &found);
    return body;
  }

 private:
  // ----- tokens
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

  [[noreturn]] void error(size_t offset, const std::string& message) const {
    int line = 0;
    int column = 0;
    source_.position(offset, &line, &column);
    failAt(line, column, message);
  }

  std::string describe(const Token& token) const {
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

  void expectOp(const char* op) {
    if (!skipOp(op))
      error(current().offset, "expected '" + std::string(op) + "', got " + describe(current()));
  }
  void expect(TokenType type, const char* what) {
    if (current().type != type)
      error(current().offset, std::string("expected ") + what + ", got " + describe(current()));
    advance();
  }
  std::string expectName(const char* what) {
    if (current().type != TokenType::kName)
      error(current().offset, std::string("expected ") + what + ", got " + describe(current()));
    std::string name = current().text;
    advance();
    return name;
  }

  struct DepthGuard {
    DepthGuard(Parser* p) : parser(p) {
      if (++parser->depth_ > parser->max_nesting_) {
        parser->error(
            parser->current().offset,
            "template nests deeper than " + std::to_string(parser->max_nesting_) + " levels");
      }
    }
    ~DepthGuard() { --parser->depth_; }
    Parser* parser;
  };

  // ----- statements
  // Parses until a {% name %} with name in `end_names` (consumed up to the name; *found = name).
  Body subparse(const std::vector<std::string>& end_names, std::string* found) {
    DepthGuard guard(this);
    Body body;
    const size_t opened_at = block_offset_;
    while (true) {
      const Token& token = current();
      if (token.type == TokenType::kEnd) {
        if (!end_names.empty()) {
          error(opened_at, "unexpected end of template: missing {% " + end_names.back() +
                               " %} for the block opened here");
        }
        return body;
      }
      if (token.type == TokenType::kData) {
        auto node = makeNode(NodeKind::kText, token.offset);
        node->text = token.text;
        body.push_back(std::move(node));
        advance();
        continue;
      }
      if (token.type == TokenType::kVariableBegin) {
        auto node = makeNode(NodeKind::kOutput, token.offset);
        advance();
        node->expr = parseTuple(true);
        expect(TokenType::kVariableEnd, "'}}'");
        body.push_back(std::move(node));
        continue;
      }
      if (token.type != TokenType::kBlockBegin)
        error(token.offset, "unexpected " + describe(token));
      const size_t tag_offset = token.offset;
      advance();
      if (current().type == TokenType::kName &&
          std::find(end_names.begin(), end_names.end(), current().text) != end_names.end()) {
        *found = current().text;
        advance();
        return body;
      }
      const size_t saved = block_offset_;
      block_offset_ = tag_offset;
      body.push_back(parseStatement());
      block_offset_ = saved;
    }
  }

  NodePtr makeNode(NodeKind kind, size_t offset) {
    auto node = std::make_unique<Node>();
    node->kind = kind;
    node->offset = offset;
    return node;
  }

  NodePtr parseStatement() {
    const Token& token = current();
    if (token.type != TokenType::kName)
      error(token.offset, "expected a tag name, got " + describe(token));
    const std::string name = token.text;
    if (name == "if") return parseIf();
    if (name == "for") return parseFor();
    if (name == "set") return parseSet();
    if (name == "macro") return parseMacro();
    if (name == "generation") return parseScope();
    if (name == "break" || name == "continue") return parseLoopControl();
    static const char* const kUnsupported[] = {"include",    "extends", "import", "from",
                                               "block",      "call",    "filter", "with",
                                               "autoescape", "raw"};
    for (const char* tag : kUnsupported) {
      if (name == tag) error(token.offset, "the '" + name + "' tag is not supported");
    }
    error(token.offset, "unknown tag '" + name + "'");
  }

  void endBlock() { expect(TokenType::kBlockEnd, "'%}'"); }

  NodePtr parseIf() {
    auto node = makeNode(NodeKind::kIf, current().offset);
    advance();
    std::string found = "elif";
    while (found == "elif") {
      ExprPtr condition = parseTuple(false);
      endBlock();
      Body body = subparse({"elif", "else", "endif"}, &found);
      node->branches.emplace_back(std::move(condition), std::move(body));
    }
    if (found == "else") {
      endBlock();
      node->else_body = subparse({"endif"}, &found);
    }
    endBlock();
    return node;
  }

  std::vector<std::string> parseTargets() {
    std::vector<std::string> targets;
    const bool parenthesised = skipOp("(");
    do {
      targets.push_back(expectName("a variable name"));
    } while (skipOp(","));
    if (parenthesised) expectOp(")");
    return targets;
  }

  NodePtr parseFor() {
    auto node = makeNode(NodeKind::kFor, current().offset);
    advance();
    node->targets = parseTargets();
    if (!skipName("in"))
      error(current().offset, "expected 'in' in the for loop, got " + describe(current()));
    node->expr = parseTuple(false);
    if (skipName("if")) node->condition = parseExpression(true);
    if (isName("recursive")) error(current().offset, "recursive for loops are not supported");
    endBlock();
    std::string found;
    ++loop_depth_;
    node->body = subparse({"else", "endfor"}, &found);
    --loop_depth_;
    if (found == "else") {
      endBlock();
      node->else_body = subparse({"endfor"}, &found);
    }
    endBlock();
    return node;
  }

  NodePtr parseSet() {
    auto node = makeNode(NodeKind::kSet, current().offset);
    advance();
    if (current().type == TokenType::kName && peek().type == TokenType::kOperator &&
        peek().text == ".") {
      node->ns = current().text;
      advance();
      advance();
      node->text = expectName("an attribute name");
    } else {
      node->targets = parseTargets();
    }
    if (skipOp("=")) {
      node->expr = parseTuple(true);
      endBlock();
      return node;
    }
    if (!node->ns.empty() || node->targets.size() != 1)
      error(node->offset, "a block set assigns one plain variable");
    node->kind = NodeKind::kSetBlock;
    endBlock();
    std::string found;
    node->body = subparse({"endset"}, &found);
    endBlock();
    return node;
  }

  NodePtr parseMacro() {
    auto node = makeNode(NodeKind::kMacro, current().offset);
    advance();
    node->text = expectName("a macro name");
    expectOp("(");
    while (!isOp(")")) {
      if (!node->params.empty()) expectOp(",");
      if (isOp(")")) break;
      std::string param = expectName("a parameter name");
      ExprPtr fallback;
      if (skipOp("=")) fallback = parseExpression(true);
      node->params.emplace_back(std::move(param), std::move(fallback));
    }
    advance();
    endBlock();
    std::string found;
    const int saved_loops = loop_depth_;
    loop_depth_ = 0;
    node->body = subparse({"endmacro"}, &found);
    loop_depth_ = saved_loops;
    if (current().type == TokenType::kName && current().text == node->text) advance();
    endBlock();
    return node;
  }

  NodePtr parseScope() {
    auto node = makeNode(NodeKind::kScope, current().offset);
    advance();
    endBlock();
    std::string found;
    node->body = subparse({"endgeneration"}, &found);
    endBlock();
    return node;
  }

  NodePtr parseLoopControl() {
    const bool is_break = current().text == "break";
    auto node = makeNode(is_break ? NodeKind::kBreak : NodeKind::kContinue, current().offset);
    if (loop_depth_ == 0) error(current().offset, "'" + current().text + "' outside a for loop");
    advance();
    endBlock();
    return node;
  }

  // ----- expressions
  ExprPtr makeExpr(ExprKind kind, size_t offset) {
    auto expr = std::make_unique<Expr>();
    expr->kind = kind;
    expr->offset = offset;
    return expr;
  }

  bool atTupleEnd() const {
    const Token& t = current();
    return t.type == TokenType::kVariableEnd || t.type == TokenType::kBlockEnd ||
           t.type == TokenType::kEnd || (t.type == TokenType::kOperator && t.text == ")") ||
           (t.type == TokenType::kName && (t.text == "if" || t.text == "recursive"));
  }

  ExprPtr parseTuple(bool with_condition) {
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

  ExprPtr parseExpression(bool with_condition) {
    DepthGuard guard(this);
    return with_condition ? parseCondition() : parseOr();
  }

  ExprPtr parseCondition() {
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

  ExprPtr binary(ExprKind kind, const std::string& op, ExprPtr left, ExprPtr right, size_t offset) {
    auto expr = makeExpr(kind, offset);
    expr->name = op;
    expr->args.push_back(std::move(left));
    expr->args.push_back(std::move(right));
    return expr;
  }

  ExprPtr parseOr() {
    ExprPtr left = parseAnd();
    while (isName("or")) {
      const size_t offset = current().offset;
      advance();
      left = binary(ExprKind::kOr, "or", std::move(left), parseAnd(), offset);
    }
    return left;
  }

  ExprPtr parseAnd() {
    ExprPtr left = parseNot();
    while (isName("and")) {
      const size_t offset = current().offset;
      advance();
      left = binary(ExprKind::kAnd, "and", std::move(left), parseNot(), offset);
    }
    return left;
  }

  ExprPtr parseNot() {
    if (!isName("not")) return parseCompare();
    DepthGuard guard(this);
    auto expr = makeExpr(ExprKind::kNot, current().offset);
    advance();
    expr->args.push_back(parseNot());
    return expr;
  }

  ExprPtr parseCompare() {
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

  ExprPtr parseMath1() {
    ExprPtr left = parseConcat();
    while (isOp("+") || isOp("-")) {
      const std::string op = current().text;
      const size_t offset = current().offset;
      advance();
      left = binary(ExprKind::kBinary, op, std::move(left), parseConcat(), offset);
    }
    return left;
  }

  ExprPtr parseConcat() {
    ExprPtr left = parseMath2();
    while (isOp("~")) {
      const size_t offset = current().offset;
      advance();
      left = binary(ExprKind::kBinary, "~", std::move(left), parseMath2(), offset);
    }
    return left;
  }

  ExprPtr parseMath2() {
    ExprPtr left = parsePow();
    while (isOp("*") || isOp("/") || isOp("//") || isOp("%")) {
      const std::string op = current().text;
      const size_t offset = current().offset;
      advance();
      left = binary(ExprKind::kBinary, op, std::move(left), parsePow(), offset);
    }
    return left;
  }

  ExprPtr parsePow() {
    ExprPtr left = parseUnary(true);
    while (isOp("**")) {
      const size_t offset = current().offset;
      advance();
      left = binary(ExprKind::kBinary, "**", std::move(left), parseUnary(true), offset);
    }
    return left;
  }

  ExprPtr parseUnary(bool with_filter) {
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

  ExprPtr literal(Value value, size_t offset) {
    auto expr = makeExpr(ExprKind::kLiteral, offset);
    expr->literal = std::move(value);
    return expr;
  }

  ExprPtr parsePrimary() {
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

  ExprPtr parseParenthesised(size_t offset) {
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

  ExprPtr parseList(size_t offset) {
    auto list = makeExpr(ExprKind::kList, offset);
    while (!isOp("]")) {
      if (!list->args.empty()) expectOp(",");
      if (isOp("]")) break;
      list->args.push_back(parseExpression(true));
    }
    advance();
    return list;
  }

  ExprPtr parseDict(size_t offset) {
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

  ExprPtr parsePostfix(ExprPtr node) {
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

  ExprPtr parseSubscript(ExprPtr node) {
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

  void parseCallArgs(Expr* call) {
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

  ExprPtr parseCall(ExprPtr node) {
    auto call = makeExpr(ExprKind::kCall, node->offset);
    call->args.push_back(std::move(node));
    parseCallArgs(call.get());
    return call;
  }

  std::string parseDottedName() {
    std::string name = expectName("a filter or test name");
    while (isOp(".") && peek().type == TokenType::kName) {
      advance();
      name += "." + current().text;
      advance();
    }
    return name;
  }

  ExprPtr parseFilterExpr(ExprPtr node) {
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

  ExprPtr parseTest(ExprPtr node) {
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

  const std::vector<Token>& tokens_;
  const SourceMap& source_;
  const int max_nesting_;
  size_t pos_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
  size_t block_offset_ = 0;  // the {% of the statement being parsed
};

}  // namespace

Body parseTemplate(const std::vector<Token>& tokens, const SourceMap& source, int max_nesting) {
  return Parser(tokens, source, max_nesting).parseAll();
}

}  // namespace ree::models::jinja
