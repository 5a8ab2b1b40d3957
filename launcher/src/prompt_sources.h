// The prompts of a run, from exactly one of --prompt-text, --prompt-ids, --prompt-file and --chat.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ree/core/status.h"
#include "ree/models/engine.h"

namespace ree::launcher {

// --prompt-ids: comma-separated decimal token ids in [0, 2^31-1]. Strict: digits only (no sign,
// space or exponent), no empty item ("1,,2", "1,2,"), at least one id.
Status parsePromptIdList(const std::string& text, std::vector<int32_t>* ids);

// Where the prompts come from (the flag values as given; empty when absent).
struct PromptFlags {
  int given = 0;  // how many of the four flags were given
  std::string text, ids, file;
  bool has_text = false, has_ids = false, has_file = false;
  // --chat (with --system): rendered with `model`'s chat template (chat_prompt.h).
  std::string chat, system, model;
  bool has_chat = false, has_system = false;
};

// One request per prompt, each a copy of `base` with its prompt filled in.
Status buildRequests(const PromptFlags& flags, const GenerationRequest& base,
                     std::vector<GenerationRequest>* requests);

}  // namespace ree::launcher
