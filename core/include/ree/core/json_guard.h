// A guard run over every JSON text REE parses (configs, tokenizers, safetensors headers, indexes,
// receipts, prompt files, requests) before it is turned into a document. JSON itself allows an
// object to repeat a key, and readers disagree on which value wins (nlohmann and Python keep the
// last, others the first), so a repeated key could show one reader a value that another never
// checked: REE refuses them everywhere. The scan is linear in the text and allocates no document.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "ree/core/status.h"

namespace ree {

struct JsonGuardLimits {
  size_t max_depth = 256;  // nested objects/arrays
};

// Fails (kIoError) on a syntax error (with the byte offset), a key repeated within one object
// (naming the key and where the object is, e.g. "$.requests[0]"), or nesting deeper than the
// limit. `what` names the text's origin in the message ("config.json '/m/config.json'").
Status checkJsonText(std::string_view text, const std::string& what,
                     JsonGuardLimits limits = JsonGuardLimits());

}  // namespace ree
