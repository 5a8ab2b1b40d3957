#include "chat/jinja_string_literal.h"

#include <cstdint>
#include <cstdio>
#include <vector>

#include "chat/jinja_text.h"

namespace ree::models::jinja {

namespace {

int hexDigit(uint32_t c) {
  if (c >= '0' && c <= '9') return static_cast<int>(c - '0');
  if (c >= 'a' && c <= 'f') return static_cast<int>(c - 'a' + 10);
  if (c >= 'A' && c <= 'F') return static_cast<int>(c - 'A' + 10);
  return -1;
}

// \x, \u, \U: exactly `count` hex digits after points[*i].
bool readHex(const std::vector<uint32_t>& points, size_t* i, int count, uint32_t* value) {
  *value = 0;
  for (int k = 0; k < count; ++k) {
    const size_t at = *i + 1 + static_cast<size_t>(k);
    const int digit = at < points.size() ? hexDigit(points[at]) : -1;
    if (digit < 0) return false;
    *value = *value * 16 + static_cast<uint32_t>(digit);
  }
  *i += static_cast<size_t>(count);
  return true;
}

char simpleEscape(uint32_t c) {
  switch (c) {
    case '\\':
      return '\\';
    case '\'':
      return '\'';
    case '"':
      return '"';
    case 'a':
      return '\a';
    case 'b':
      return '\b';
    case 'f':
      return '\f';
    case 'n':
      return '\n';
    case 'r':
      return '\r';
    case 't':
      return '\t';
    case 'v':
      return '\v';
    default:
      return 0;
  }
}

// "backslashreplace" of a non-ASCII code point after a backslash: the escape text stays literal.
std::string backslashReplaced(uint32_t c) {
  char buffer[16];
  const char* format = c < 0x100 ? "\\\\x%02x" : (c < 0x10000 ? "\\\\u%04x" : "\\\\U%08x");
  std::snprintf(buffer, sizeof(buffer), format, c);
  return std::string(buffer + 1);  // one backslash from the escape, one from the replacement
}

}  // namespace

bool unescapeStringLiteral(std::string_view body, std::string* value, std::string* problem) {
  const std::vector<uint32_t> points = codePoints(body);
  value->clear();
  for (size_t i = 0; i < points.size(); ++i) {
    if (points[i] != '\\' || i + 1 >= points.size()) {
      appendUtf8(points[i], value);
      continue;
    }
    const uint32_t c = points[++i];
    if (c == '\n') continue;
    if (const char simple = simpleEscape(c)) {
      *value += simple;
      continue;
    }
    if (c >= '0' && c <= '7') {
      uint32_t octal = c - '0';
      for (int k = 0;
           k < 2 && i + 1 < points.size() && points[i + 1] >= '0' && points[i + 1] <= '7'; ++k) {
        octal = octal * 8 + (points[++i] - '0');
      }
      appendUtf8(octal, value);
      continue;
    }
    const int hex_count = c == 'x' ? 2 : (c == 'u' ? 4 : (c == 'U' ? 8 : 0));
    if (hex_count > 0) {
      uint32_t code = 0;
      if (!readHex(points, &i, hex_count, &code)) {
        *problem =
            std::string("truncated \\") + static_cast<char>(c) + " escape in a string literal";
        return false;
      }
      if (code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) {
        *problem = "string literal escape names no Unicode scalar value";
        return false;
      }
      appendUtf8(code, value);
      continue;
    }
    if (c == 'N') {
      *problem = "\\N{...} escapes are not supported in string literals";
      return false;
    }
    if (c >= 0x80) {
      *value += backslashReplaced(c);
      continue;
    }
    *value += '\\';
    appendUtf8(c, value);
  }
  return true;
}

}  // namespace ree::models::jinja
