// Chat templates: the Jinja templates that Hugging Face models ship (tokenizer_config.json's
// "chat_template", GGUF's tokenizer.chat_template) turn a conversation into the model's prompt.
// REE renders them with its own interpreter of the jinja2 subset such templates use, producing
// the bytes transformers' apply_chat_template produces: jinja2 with trim_blocks and lstrip_blocks,
// transformers' tojson, raise_exception and strftime_now, the loopcontrols extension
// (docs/chat-templates.md lists what is supported).
//
// Every fallible call returns ree::Status; the message names the template (source name), the line
// and column, and what failed, on one line. No exception escapes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ree/core/status.h"

namespace ree::models {

struct ChatMessage {
  std::string role;  // "system", "user", "assistant", ...
  std::string content;
};

// Bounds that a hostile template cannot pass: a clear error instead of a hang or a crash.
struct ChatTemplateLimits {
  size_t max_template_bytes = size_t{1} << 20;
  size_t max_output_bytes = size_t{8}
                            << 20;  // also bounds any string or list built while rendering
  uint64_t max_steps = 5'000'000;   // evaluated nodes, loop iterations, items copied
  int max_call_depth = 64;          // nested macro calls
  int max_nesting = 128;            // nested blocks and expressions in the source
};

struct ChatRenderOptions {
  bool add_generation_prompt = true;  // end with the header of the assistant's turn
  std::string bos_token;
  std::string eos_token;
  // A JSON object whose members become template variables as well (and override the above),
  // e.g. {"enable_thinking": false} or the other special tokens; empty for none.
  std::string extra_variables_json;
};

class ChatTemplate {
 public:
  ~ChatTemplate();
  ChatTemplate(const ChatTemplate&) = delete;
  ChatTemplate& operator=(const ChatTemplate&) = delete;

  // Compiles `text` (UTF-8). A syntax error gives kInvalidArgument naming
  // "<source_name>:line:column". `source_name` stands for the template in every message.
  static Status parse(std::string_view text, const std::string& source_name,
                      std::unique_ptr<ChatTemplate>* out, const ChatTemplateLimits& limits = {});

  // Renders the conversation with the variables transformers passes: messages, tools=None,
  // documents=None, add_generation_prompt, bos_token, eos_token (plus the extra variables).
  // A template's raise_exception(message) gives kInvalidArgument with that message.
  Status render(const std::vector<ChatMessage>& messages, const ChatRenderOptions& options,
                std::string* text) const;
  // Same with the messages as a JSON array text (any message fields: tool_calls, structured
  // content, ...).
  Status renderJson(std::string_view messages_json, const ChatRenderOptions& options,
                    std::string* text) const;

  const std::string& sourceName() const;

  struct Impl;

 private:
  explicit ChatTemplate(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The chat template a model ships, with the token strings its templates refer to.
struct ModelChatTemplate {
  std::unique_ptr<ChatTemplate> chat_template;
  std::string bos_token;  // "" when the model names none
  std::string eos_token;
};

// Finds and compiles the chat template of `model`, as transformers does:
// - a Hugging Face directory: chat_template.jinja if present, else tokenizer_config.json's
//   "chat_template" (a string, or a list of {"name", "template"} of which "default" is taken);
//   bos_token and eos_token from tokenizer_config.json (a string or {"content": ...});
// - a .gguf file: tokenizer.chat_template; the tokens named by tokenizer.ggml.bos_token_id and
//   eos_token_id in tokenizer.ggml.tokens.
// kUnsupported (one line naming the model) when the model has no chat template (e.g. a base
// model, or builtin:tiny-llama); kIoError/kInvalidArgument for unreadable or malformed files.
Status loadModelChatTemplate(const std::string& model, ModelChatTemplate* out,
                             const ChatTemplateLimits& limits = {});

}  // namespace ree::models
