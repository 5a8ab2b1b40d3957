#include "chat/jinja_eval.h"

#include <unordered_map>

#include "chat/jinja_builtins.h"
#include "chat/jinja_error.h"

namespace ree::models::jinja {

namespace {

enum class Flow { kNormal, kBreak, kContinue };

// Statements and expressions nest at most this deep while rendering (nested blocks times nested
// macro calls): deeper would risk the thread's stack.
constexpr int kMaxEvalDepth = 1000;

struct EvalDepth {
  explicit EvalDepth(int* depth) : depth_(depth) {
    if (++*depth_ > kMaxEvalDepth) {
      failLimit("rendering nests deeper than " + std::to_string(kMaxEvalDepth) +
                " statements and expressions");
    }
  }
  ~EvalDepth() { --*depth_; }
  int* depth_;
};

class Evaluator {
 public:
  Evaluator(const SourceMap& source, Dict variables, const RenderLimits& limits)
      : source_(source), limits_(limits) {
    budget_.max_steps = limits.max_steps;
    budget_.max_string_bytes = limits.max_output_bytes;
    frames_.emplace_back();
    for (auto& entry : variables.entries)
      frames_[0][entry.first] = std::move(entry.second);
  }

  std::string run(const Body& body) {
    try {
      exec(body);
    } catch (JinjaError& error) {
      if (error.line == 0) source_.position(offset_, &error.line, &error.column);
      throw;
    }
    return std::move(output_);
  }

 private:
  using Frame = std::unordered_map<std::string, Value>;

  // ----- scopes
  Value lookup(const std::string& name) const {
    for (size_t i = frames_.size(); i-- > base_;) {
      auto found = frames_[i].find(name);
      if (found != frames_[i].end()) return found->second;
    }
    auto global = frames_[0].find(name);
    if (global != frames_[0].end()) return global->second;
    if (isGlobalFunction(name)) {
      Callable function;
      function.name = name;
      return Value::fromCallable(std::move(function));
    }
    return Value::undefined("'" + name + "' is undefined");
  }

  void assign(const std::string& name, Value value) { frames_.back()[name] = std::move(value); }

  void bindTargets(const std::vector<std::string>& targets, const Value& value) {
    if (targets.size() == 1) return assign(targets[0], value);
    const List items = iterate(value);
    if (items.size() != targets.size()) {
      fail(std::string(items.size() < targets.size() ? "not enough" : "too many") +
           " values to unpack (expected " + std::to_string(targets.size()) + ", got " +
           std::to_string(items.size()) + ")");
    }
    for (size_t i = 0; i < targets.size(); ++i)
      assign(targets[i], items[i]);
  }

  // ----- statements
  Flow exec(const Body& body) {
    for (const NodePtr& node : body) {
      const Flow flow = execNode(*node);
      if (flow != Flow::kNormal) return flow;
    }
    return Flow::kNormal;
  }

  void write(const std::string& text) {
    output_ += text;
    if (output_.size() > limits_.max_output_bytes) {
      failLimit("the rendered text exceeds " + std::to_string(limits_.max_output_bytes) + " bytes");
    }
  }

  Flow execNode(const Node& node) {
    const EvalDepth depth(&eval_depth_);
    offset_ = node.offset;
    budget_.step();
    switch (node.kind) {
      case NodeKind::kText:
        write(node.text);
        return Flow::kNormal;
      case NodeKind::kOutput:
        write(toStr(eval(*node.expr)));
        return Flow::kNormal;
      case NodeKind::kIf:
        for (const auto& branch : node.branches) {
          if (truthy(eval(*branch.first))) return exec(branch.second);
        }
        return exec(node.else_body);
      case NodeKind::kFor:
        return execFor(node);
      case NodeKind::kSet:
        execSet(node);
        return Flow::kNormal;
      case NodeKind::kSetBlock:
        assign(node.targets[0], Value::fromString(capture(node.body)));
        return Flow::kNormal;
      case NodeKind::kMacro: {
        Callable macro;
        macro.kind = Callable::Kind::kMacro;
        macro.name = node.text;
        macro.macro = &node;
        assign(node.text, Value::fromCallable(std::move(macro)));
        return Flow::kNormal;
      }
      case NodeKind::kBreak:
        return Flow::kBreak;
      case NodeKind::kContinue:
        return Flow::kContinue;
      case NodeKind::kScope:
        return exec(node.body);
    }
    return Flow::kNormal;
  }

  std::string capture(const Body& body) {
    std::string saved;
    saved.swap(output_);
    exec(body);
    saved.swap(output_);
    return saved;
  }

  void execSet(const Node& node) {
    Value value = eval(*node.expr);
    if (node.ns.empty()) return bindTargets(node.targets, value);
    Value target = lookup(node.ns);
    if (target.kind != Kind::kNamespace) {
      fail("cannot assign attribute '" + node.text + "' on '" + node.ns + "': not a namespace()");
    }
    budget_.step(value.depth);
    if (holdsNamespace(value)) fail("a namespace attribute cannot hold a namespace");
    if (value.depth + 1 > kMaxValueDepth) {
      failLimit("lists and dicts nest deeper than " + std::to_string(kMaxValueDepth) + " levels");
    }
    target.dict->set(node.text, std::move(value));
  }

  List loopItems(const Node& node) {
    List items = iterate(eval(*node.expr));
    if (!node.condition) return items;
    List kept;
    frames_.emplace_back();
    for (const Value& item : items) {
      budget_.step();
      bindTargets(node.targets, item);
      if (truthy(eval(*node.condition))) kept.push_back(item);
    }
    frames_.pop_back();
    return kept;
  }

  Value loopObject(const List& items, size_t i) {
    const auto n = static_cast<int64_t>(items.size());
    const auto index = static_cast<int64_t>(i);
    Dict loop;
    auto& e = loop.entries;
    e.reserve(12);
    e.emplace_back("index", Value::fromInt(index + 1));
    e.emplace_back("index0", Value::fromInt(index));
    e.emplace_back("revindex", Value::fromInt(n - index));
    e.emplace_back("revindex0", Value::fromInt(n - index - 1));
    e.emplace_back("first", Value::fromBool(i == 0));
    e.emplace_back("last", Value::fromBool(index == n - 1));
    e.emplace_back("length", Value::fromInt(n));
    e.emplace_back("depth", Value::fromInt(1));
    e.emplace_back("depth0", Value::fromInt(0));
    if (i > 0) e.emplace_back("previtem", items[i - 1]);
    if (index + 1 < n) e.emplace_back("nextitem", items[i + 1]);
    Callable cycle;  // loop.cycle(a, b, ...): the argument at index0 modulo their number
    cycle.name = "loop.cycle";
    cycle.self = std::make_shared<Value>(Value::fromInt(index));
    e.emplace_back("cycle", Value::fromCallable(std::move(cycle)));
    return Value::fromDict(std::move(loop));
  }

  Flow execFor(const Node& node) {
    const List items = loopItems(node);
    for (size_t i = 0; i < items.size(); ++i) {
      budget_.step();
      frames_.emplace_back();  // jinja2: what an iteration sets does not reach the next one
      assign("loop", loopObject(items, i));
      bindTargets(node.targets, items[i]);
      const Flow flow = exec(node.body);
      frames_.pop_back();
      if (flow == Flow::kBreak) break;
    }
    if (items.empty()) {
      frames_.emplace_back();
      const Flow flow = exec(node.else_body);
      frames_.pop_back();
      return flow;
    }
    return Flow::kNormal;
  }

  // ----- expressions
  Value eval(const Expr& expr) {
    const EvalDepth depth(&eval_depth_);
    offset_ = expr.offset;
    budget_.step();
    switch (expr.kind) {
      case ExprKind::kLiteral:
        return expr.literal;
      case ExprKind::kName:
        return lookup(expr.name);
      case ExprKind::kList:
        return Value::fromList(evalAll(expr.args));
      case ExprKind::kTuple:
        return Value::tupleOf(evalAll(expr.args));
      case ExprKind::kDict:
        return evalDict(expr);
      case ExprKind::kNeg:
      case ExprKind::kPos:
        return negate(eval(*expr.args[0]), expr.kind == ExprKind::kNeg);
      case ExprKind::kNot:
        return Value::fromBool(!truthy(eval(*expr.args[0])));
      case ExprKind::kBinary: {
        const Value left = eval(*expr.args[0]);
        const Value right = eval(*expr.args[1]);
        offset_ = expr.offset;
        return binaryOperator(expr.name, left, right, budget_);
      }
      case ExprKind::kAnd: {
        Value left = eval(*expr.args[0]);
        return truthy(left) ? eval(*expr.args[1]) : left;
      }
      case ExprKind::kOr: {
        Value left = eval(*expr.args[0]);
        return truthy(left) ? left : eval(*expr.args[1]);
      }
      case ExprKind::kCompare:
        return evalCompare(expr);
      case ExprKind::kCondition:
        if (truthy(eval(*expr.args[1]))) return eval(*expr.args[0]);
        return expr.args[2] ? eval(*expr.args[2])
                            : Value::undefined("the condition was false and there is no else");
      case ExprKind::kGetAttr:
        return getAttribute(eval(*expr.args[0]), expr.name);
      case ExprKind::kGetItem: {
        const Value object = eval(*expr.args[0]);
        return getItem(object, eval(*expr.args[1]));
      }
      case ExprKind::kSlice:
        return evalSlice(expr);
      case ExprKind::kCall:
        return evalCall(expr);
      case ExprKind::kFilter: {
        const Value input = eval(*expr.args[0]);
        const Args args = evalArgs(expr);
        offset_ = expr.offset;
        return applyFilter(expr.name, input, args, budget_);
      }
      case ExprKind::kTest: {
        const Value input = eval(*expr.args[0]);
        const Args args = evalArgs(expr);
        offset_ = expr.offset;
        return Value::fromBool(applyTest(expr.name, input, args) != expr.negated);
      }
    }
    return {};
  }

  List evalAll(const std::vector<ExprPtr>& exprs) {
    List values;
    for (const ExprPtr& e : exprs)
      values.push_back(eval(*e));
    return values;
  }

  Value evalDict(const Expr& expr) {
    Dict dict;
    for (size_t i = 0; i + 1 < expr.args.size(); i += 2) {
      const Value key = eval(*expr.args[i]);
      if (key.kind != Kind::kString)
        fail("dict literals take string keys only, not " + typeName(key));
      dict.set(key.text, eval(*expr.args[i + 1]));
    }
    return Value::fromDict(std::move(dict));
  }

  Value evalCompare(const Expr& expr) {
    Value left = eval(*expr.args[0]);
    for (size_t i = 0; i < expr.ops.size(); ++i) {
      Value right = eval(*expr.args[i + 1]);
      offset_ = expr.offset;
      if (!compareOperator(expr.ops[i], left, right)) return Value::fromBool(false);
      left = std::move(right);
    }
    return Value::fromBool(true);
  }

  Value evalSlice(const Expr& expr) {
    const Value object = eval(*expr.args[0]);
    Value parts[3];
    for (int i = 0; i < 3; ++i) {
      if (expr.args[static_cast<size_t>(i) + 1])
        parts[i] = eval(*expr.args[static_cast<size_t>(i) + 1]);
    }
    return sliceOf(object, parts[0], parts[1], parts[2]);
  }

  // Arguments after the first (the callee, or the operand of a filter or test).
  Args evalArgs(const Expr& expr) {
    Args args;
    for (size_t i = 1; i < expr.args.size(); ++i)
      args.positional.push_back(eval(*expr.args[i]));
    for (const auto& kw : expr.kwargs)
      args.keyword.emplace_back(kw.first, eval(*kw.second));
    return args;
  }

  Value evalCall(const Expr& expr) {
    const Value callee = eval(*expr.args[0]);
    const Args args = evalArgs(expr);
    offset_ = expr.offset;
    if (callee.isUndefined()) fail(callee.text.empty() ? "called an undefined value" : callee.text);
    if (callee.kind != Kind::kCallable) fail("'" + typeName(callee) + "' object is not callable");
    const Callable& callable = *callee.callable;
    if (callable.kind == Callable::Kind::kMethod)
      return callMethod(*callable.self, callable.name, args, budget_);
    if (callable.kind == Callable::Kind::kGlobal && callable.self) {  // loop.cycle
      if (args.positional.empty()) fail("no items for cycling given");
      return args.positional[static_cast<size_t>(callable.self->integer) % args.positional.size()];
    }
    if (callable.kind == Callable::Kind::kGlobal) return callGlobal(callable.name, args, budget_);
    return callMacro(*callable.macro, args);
  }

  Value callMacro(const Node& macro, const Args& args) {
    if (call_depth_ >= limits_.max_call_depth) {
      failLimit("macro calls nest deeper than " + std::to_string(limits_.max_call_depth));
    }
    if (args.positional.size() > macro.params.size())
      fail("macro '" + macro.text + "' takes " + std::to_string(macro.params.size()) +
           " arguments");
    const size_t saved_base = base_;
    frames_.emplace_back();
    base_ = frames_.size() - 1;
    ++call_depth_;
    for (size_t i = 0; i < macro.params.size(); ++i) {
      const std::string& name = macro.params[i].first;
      const Value* given = args.get(i, name.c_str());
      if (given != nullptr)
        assign(name, *given);
      else if (macro.params[i].second)
        assign(name, eval(*macro.params[i].second));
      else
        assign(name, Value::undefined("parameter '" + name + "' was not provided"));
    }
    const std::string text = capture(macro.body);
    --call_depth_;
    frames_.pop_back();
    base_ = saved_base;
    return Value::fromString(text);
  }

  const SourceMap& source_;
  const RenderLimits limits_;
  Budget budget_;
  std::vector<Frame> frames_;
  size_t base_ = 1;  // lowest frame visible besides the globals (frame 0)
  size_t offset_ = 0;
  int call_depth_ = 0;
  int eval_depth_ = 0;
  std::string output_;
};

}  // namespace

std::string renderTemplate(const Body& body, const SourceMap& source, Dict variables,
                           const RenderLimits& limits) {
  return Evaluator(source, std::move(variables), limits).run(body);
}

}  // namespace ree::models::jinja
