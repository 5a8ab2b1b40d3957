// POST /v1/chat/completions: the messages are rendered with the model's chat template
// (ree/models/chat_template.h, as transformers' apply_chat_template) into a prompt that is then a
// completion request like any other (no special tokens added: the template writes them).
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "completion_request.h"
#include "ree/models/chat_template.h"

namespace ree::server {

class ChatPrompter {
 public:
  // Loads the template of the model directory or .gguf file; without one (or when it cannot be
  // read) chat requests get a 400 that says why.
  void load(const std::string& model);
  bool available() const { return model_template_.chat_template != nullptr; }
  const std::string& unavailableReason() const { return unavailable_reason_; }
  // Renders a JSON array of messages (with the template's extra variables, a JSON object or "").
  bool render(const std::string& messages_json, const std::string& extra_variables_json,
              std::string* prompt, ApiError* error) const;

 private:
  models::ModelChatTemplate model_template_;
  std::string unavailable_reason_;
  mutable std::mutex mutex_;  // one rendering at a time: the template's state is not shared
};

// Parses a /v1/chat/completions body into `out` (chat = true, prompt = the rendered messages).
// Returns false and fills `error` (a 4xx) on any bad field or a template that refuses the
// messages.
bool parseChatRequest(const std::string& body, const RequestLimits& limits,
                      const ChatPrompter& prompter, CompletionRequest* out, ApiError* error);

}  // namespace ree::server
