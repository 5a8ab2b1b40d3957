// Syntax tree of a parsed template: expressions (Expr) and statements (Node).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chat/jinja_value.h"

namespace ree::models::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

enum class ExprKind {
  kLiteral,    // literal
  kName,       // name
  kList,       // args: items
  kTuple,      // args: items
  kDict,       // args: key, value, key, value, ...
  kNeg,        // args[0]
  kPos,        // args[0]
  kNot,        // args[0]
  kBinary,     // name: + - * / // % ** ~ ; args: left, right
  kAnd,        // args: left, right
  kOr,         // args: left, right
  kCompare,    // args: operands; ops: ==, !=, <, <=, >, >=, in, notin
  kCondition,  // args: then, condition, else (may be null)
  kGetAttr,    // name: attribute; args[0]: object
  kGetItem,    // args: object, key
  kSlice,      // args: object, start, stop, step (each may be null)
  kCall,       // args[0]: callee, then positional arguments; kwargs
  kFilter,     // name: filter; args[0]: operand, then arguments; kwargs
  kTest,       // name: test; args[0]: operand, then arguments; negated
};

struct Expr {
  ExprKind kind = ExprKind::kLiteral;
  size_t offset = 0;
  std::string name;
  Value literal;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;
  bool negated = false;
};

struct Node;
using NodePtr = std::unique_ptr<Node>;
using Body = std::vector<NodePtr>;

enum class NodeKind {
  kText,      // text
  kOutput,    // expr
  kIf,        // branches (condition, body); else_body
  kFor,       // targets, expr (iterable), condition (may be null), body, else_body
  kSet,       // targets (one name, several for unpacking) or ns + attribute; expr
  kSetBlock,  // targets[0]; body
  kMacro,     // name; params (name, default or null); body
  kBreak,
  kContinue,
  kScope,  // body rendered in place ({% generation %})
};

struct Node {
  NodeKind kind = NodeKind::kText;
  size_t offset = 0;
  std::string text;  // kText; kMacro: name; kSet on a namespace: the attribute
  std::string ns;    // kSet: the namespace variable of "ns.attr = ..."
  ExprPtr expr;
  ExprPtr condition;
  std::vector<std::string> targets;
  std::vector<std::pair<ExprPtr, Body>> branches;
  std::vector<std::pair<std::string, ExprPtr>> params;
  Body body;
  Body else_body;
};

}  // namespace ree::models::jinja
