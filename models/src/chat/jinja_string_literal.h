// The value of a jinja2 string literal: jinja2 decodes the text between the quotes with Python's
// "unicode-escape" codec after encoding it with "backslashreplace", and this reproduces that.
#pragma once

#include <string>
#include <string_view>

namespace ree::models::jinja {

// False (and *problem set) for an escape Python refuses (truncated \x, \u, \U; \N{...};
// a surrogate or out-of-range code point).
bool unescapeStringLiteral(std::string_view body, std::string* value, std::string* problem);

}  // namespace ree::models::jinja
