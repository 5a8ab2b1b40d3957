#include "chat/jinja_parser.h"

#include <algorithm>
#include <string>
#include <utility>

#include "chat/jinja_expression_parser.h"

namespace ree::models::jinja {

namespace {

// Statements: text, {{ output }} and the {% tags %} (if, for, set, macro, generation, break,
// continue); expressions come from ExpressionParser.
class Parser : public ExpressionParser {
 public:
  using ExpressionParser::ExpressionParser;

  Body parseAll() {
    std::string found;
    Body body = subparse({}, &found);
    return body;
  }

 private:
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

  int loop_depth_ = 0;
  size_t block_offset_ = 0;  // the {% of the statement being parsed
};

}  // namespace

Body parseTemplate(const std::vector<Token>& tokens, const SourceMap& source, int max_nesting) {
  return Parser(tokens, source, max_nesting).parseAll();
}

}  // namespace ree::models::jinja
