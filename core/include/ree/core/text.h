// Text made safe for one-line error messages.
#pragma once

#include <cstddef>
#include <string>

namespace ree {

// Quotes `text` for an error message: at most `max_chars` characters, control and non-ASCII bytes
// escaped (\xNN), so that a hostile name cannot break the one-line message.
std::string printableText(const std::string& text, size_t max_chars = 160);

}  // namespace ree
