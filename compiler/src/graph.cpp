#include "graph.h"

#include "ree/core/text.h"

namespace ree::compiler {

std::string Node::label() const {
  return "node '" + printableText(name, 80) + "' (" + printableText(op_type, 60) + ")";
}

const Attribute* Node::attribute(const std::string& key) const {
  auto it = attributes.find(key);
  return it == attributes.end() ? nullptr : &it->second;
}

int64_t Node::intAttribute(const std::string& key, int64_t fallback) const {
  const Attribute* a = attribute(key);
  return a != nullptr && a->kind == Attribute::Kind::kInt ? a->i : fallback;
}

float Node::floatAttribute(const std::string& key, float fallback) const {
  const Attribute* a = attribute(key);
  return a != nullptr && a->kind == Attribute::Kind::kFloat ? a->f : fallback;
}

std::string Node::stringAttribute(const std::string& key, const std::string& fallback) const {
  const Attribute* a = attribute(key);
  return a != nullptr && a->kind == Attribute::Kind::kString ? a->s : fallback;
}

int Graph::valueId(const std::string& name) {
  auto it = value_ids.find(name);
  if (it != value_ids.end()) return it->second;
  int id = static_cast<int>(values.size());
  values.push_back(Value{name, {}});
  value_ids.emplace(name, id);
  return id;
}

}  // namespace ree::compiler
