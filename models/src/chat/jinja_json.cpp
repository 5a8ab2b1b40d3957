// transformers' tojson filter: Python's json.dumps(x, ensure_ascii=False, indent=indent,
// separators=separators, sort_keys=sort_keys).
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "chat/jinja_builtins.h"
#include "chat/jinja_error.h"
#include "chat/jinja_text.h"

namespace ree::models::jinja {

namespace {

void appendJsonString(const std::string& text, std::string* out) {
  *out += '"';
  for (const char c : text) {
    switch (c) {
      case '"':
        *out += "\\\"";
        break;
      case '\\':
        *out += "\\\\";
        break;
      case '\n':
        *out += "\\n";
        break;
      case '\r':
        *out += "\\r";
        break;
      case '\t':
        *out += "\\t";
        break;
      case '\b':
        *out += "\\b";
        break;
      case '\f':
        *out += "\\f";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buffer[8];
          std::snprintf(buffer, sizeof(buffer), "\\u%04x", static_cast<unsigned>(c));
          *out += buffer;
        } else {
          *out += c;
        }
    }
  }
  *out += '"';
}

struct JsonWriter {
  int indent;
  bool sort_keys;
  std::string item_separator;
  std::string key_separator;
  Budget& budget;
  std::string out;

  void newline(int level) {
    if (indent < 0) return;
    out += '\n';
    out.append(static_cast<size_t>(indent * level), ' ');
  }

  void write(const Value& value, int level) {
    budget.step();
    budget.checkSize(out.size(), "tojson's output");
    if (level > 512) failLimit("tojson: value nests deeper than 512 levels");
    switch (value.kind) {
      case Kind::kNone:
        out += "null";
        return;
      case Kind::kBool:
        out += value.boolean ? "true" : "false";
        return;
      case Kind::kInt:
        out += std::to_string(value.integer);
        return;
      case Kind::kFloat:
        writeFloat(value.number);
        return;
      case Kind::kString:
        appendJsonString(value.text, &out);
        return;
      case Kind::kList:
        writeList(*value.list, level);
        return;
      case Kind::kDict:
        writeDict(*value.dict, level);
        return;
      default:
        fail("Object of type " + typeName(value) + " is not JSON serializable");
    }
  }

  void writeFloat(double number) {
    if (std::isnan(number))
      out += "NaN";
    else if (std::isinf(number))
      out += number < 0 ? "-Infinity" : "Infinity";
    else
      out += pythonFloatRepr(number);
  }

  void writeList(const List& items, int level) {
    if (items.empty()) {
      out += "[]";
      return;
    }
    out += '[';
    for (size_t i = 0; i < items.size(); ++i) {
      if (i > 0) out += item_separator;
      newline(level + 1);
      write(items[i], level + 1);
    }
    newline(level);
    out += ']';
  }

  void writeDict(const Dict& dict, int level) {
    if (dict.entries.empty()) {
      out += "{}";
      return;
    }
    std::vector<const std::pair<std::string, Value>*> entries;
    for (const auto& entry : dict.entries)
      entries.push_back(&entry);
    if (sort_keys) {
      std::sort(entries.begin(), entries.end(),
                [](const auto* a, const auto* b) { return a->first < b->first; });
    }
    out += '{';
    for (size_t i = 0; i < entries.size(); ++i) {
      if (i > 0) out += item_separator;
      newline(level + 1);
      appendJsonString(entries[i]->first, &out);
      out += key_separator;
      write(entries[i]->second, level + 1);
    }
    newline(level);
    out += '}';
  }
};

}  // namespace

std::string toJson(const Value& value, int indent, bool sort_keys,
                   const std::string& item_separator, const std::string& key_separator,
                   Budget& budget) {
  JsonWriter writer{indent, sort_keys, item_separator, key_separator, budget, {}};
  writer.write(value, 0);
  return std::move(writer.out);
}

}  // namespace ree::models::jinja
