// Template variables from JSON text (messages, extra variables), with json.loads' types.
#pragma once

#include <string>
#include <string_view>

#include "chat/jinja_value.h"
#include "ree/core/status.h"

namespace ree::models::jinja {

// Parses `json_text` (refused with kInvalidArgument naming `what` when malformed, with repeated
// keys or invalid UTF-8) into a Value: objects become dicts, arrays lists, integers int, other
// numbers float.
Status valueFromJson(std::string_view json_text, const std::string& what, Value* value);

}  // namespace ree::models::jinja
