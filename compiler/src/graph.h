// The compiler's graph IR: values (typed, with static or symbolic dims), nodes in topological
// order, and the constants (initializers and folded values) by value id.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "ree/compiler/compile.h"

namespace ree::compiler {

// One dim: a number (value >= 0) or a symbol ("batch"; value -1); both empty/-1: unknown.
struct Dim {
  int64_t value = -1;
  std::string symbol;
  bool known() const { return value >= 0; }
  static Dim of(int64_t v) { return Dim{v, {}}; }
};

struct ValueType {
  ElementType type = ElementType::kFloat32;
  bool type_known = false;
  bool rank_known = false;
  std::vector<Dim> dims;
};

struct Value {
  std::string name;
  ValueType info;
};

struct Attribute {
  enum class Kind { kInt, kFloat, kString, kInts, kFloats, kTensor, kOther } kind = Kind::kOther;
  int64_t i = 0;
  float f = 0.0f;
  std::string s;
  std::vector<int64_t> ints;
  std::vector<float> floats;
  GraphTensor tensor;
};

struct Node {
  std::string name;  // the ONNX node name, or "#<index>" when it has none
  std::string op_type;
  std::string domain;
  std::vector<int> inputs;  // value ids; -1 for an omitted optional input
  std::vector<int> outputs;
  std::map<std::string, Attribute> attributes;
  // A fused node's original nodes (graph_fusion.h), run instead when the fused operator finds at
  // run time that its inputs are not the case it computes (OpContext::use_fallback).
  std::vector<Node> fallback;

  // "node 'name' (Op)" for messages.
  std::string label() const;
  const Attribute* attribute(const std::string& key) const;
  int64_t intAttribute(const std::string& key, int64_t fallback) const;
  float floatAttribute(const std::string& key, float fallback) const;
  std::string stringAttribute(const std::string& key, const std::string& fallback) const;
};

struct Graph {
  std::vector<Value> values;
  std::unordered_map<std::string, int> value_ids;
  std::vector<Node> nodes;
  std::map<int, GraphTensor> constants;
  std::vector<int> inputs;
  std::vector<int> outputs;
  int64_t opset = 0;  // of the default ("" / "ai.onnx") domain

  // The id of `name`, created (type unknown) if new.
  int valueId(const std::string& name);
  bool isConstant(int id) const { return constants.count(id) != 0; }
};

}  // namespace ree::compiler
