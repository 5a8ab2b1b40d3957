// --chat and --system: the prompt is the conversation rendered with the model's own chat template
// (docs/chat-templates.md), ending with the header of the assistant's turn.
#pragma once

#include <string>

#include "ree/core/status.h"

namespace ree::launcher {

// Renders [{system}] + {user} with `model`'s chat template (add_generation_prompt = true). The
// text already holds the template's special tokens, so it is tokenized without adding them again.
Status renderChatPrompt(const std::string& model, const std::string* system,
                        const std::string& user, std::string* prompt);

}  // namespace ree::launcher
