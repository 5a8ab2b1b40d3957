// Python str semantics over UTF-8 (internal to the chat-template interpreter): code-point
// lengths and slices, str.isspace, case mapping, repr.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ree::models::jinja {

bool isValidUtf8(std::string_view text);
// Code points of valid UTF-8 `text`.
std::vector<uint32_t> codePoints(std::string_view text);
std::string fromCodePoints(const std::vector<uint32_t>& points);
void appendUtf8(uint32_t point, std::string* out);
size_t codePointCount(std::string_view text);

// Python's str.isspace() for one code point (the set str.strip() and re's \s use).
bool isPythonSpace(uint32_t point);
// str.strip()/lstrip()/rstrip() with no argument (Unicode whitespace) or with `chars`.
std::string pythonStrip(std::string_view text, bool left, bool right, const std::string* chars);

// Simple Unicode case mapping of each code point (utf8proc).
std::string toUpper(std::string_view text);
std::string toLower(std::string_view text);
// str.capitalize() and str.title().
std::string capitalize(std::string_view text);
std::string titleCase(std::string_view text);

// Python's repr() of a str, e.g. 'it\'s' -> "it's".
std::string pythonRepr(std::string_view text);
// Python's repr() of a float (shortest round trip; 1.0, 1e+16, 1.5e-05, nan, inf).
std::string pythonFloatRepr(double value);

}  // namespace ree::models::jinja
