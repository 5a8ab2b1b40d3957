#include "chat_request.h"

#include <nlohmann/json.hpp>

#include "ree/core/json_guard.h"

namespace ree::server {
namespace {

using Json = nlohmann::json;

bool fail(ApiError* error, const std::string& param, const std::string& message) {
  *error = badRequest(param, message);
  return false;
}

bool checkMessages(const Json& body, ApiError* error) {
  if (!body.contains("messages") || !body["messages"].is_array() || body["messages"].empty()) {
    return fail(error, "messages", "messages must be a non-empty list of messages");
  }
  for (size_t i = 0; i < body["messages"].size(); ++i) {
    const Json& message = body["messages"][i];
    if (!message.is_object() || !message.contains("role") || !message["role"].is_string()) {
      return fail(error, "messages",
                  "messages[" + std::to_string(i) + "] must be an object with a string role");
    }
  }
  return true;
}

// Chat's logprobs (a boolean) and top_logprobs (0..20, needs logprobs) become the completions'
// logprobs = N that parseCompletionRequest reads.
bool takeChatLogprobs(Json& body, ApiError* error) {
  bool wanted = false;
  if (body.contains("logprobs") && !body["logprobs"].is_null()) {
    if (!body["logprobs"].is_boolean())
      return fail(error, "logprobs", "logprobs must be a boolean");
    wanted = body["logprobs"].get<bool>();
  }
  int64_t top = 0;
  if (body.contains("top_logprobs") && !body["top_logprobs"].is_null()) {
    const Json& field = body["top_logprobs"];
    // nlohmann reads a non-negative integer as unsigned; a negative one as signed.
    const bool in_range = field.is_number_unsigned()
                              ? field.get<uint64_t>() <= static_cast<uint64_t>(kMaxLogprobs)
                              : field.is_number_integer() && field.get<int64_t>() >= 0;
    if (!in_range) {
      return fail(error, "top_logprobs",
                  "top_logprobs must be an integer in [0, " + std::to_string(kMaxLogprobs) + "]");
    }
    top = field.get<int64_t>();
    if (!wanted) return fail(error, "top_logprobs", "top_logprobs needs logprobs: true");
  }
  body.erase("top_logprobs");
  body.erase("logprobs");
  if (wanted) body["logprobs"] = top;
  return true;
}

// The chat-only fields leave `body`; what stays is read as a completion request.
bool takeChatFields(Json& body, std::string* extra_variables, ApiError* error) {
  if (body.contains("max_completion_tokens")) {
    if (body.contains("max_tokens")) {
      return fail(error, "max_completion_tokens",
                  "give max_completion_tokens or max_tokens, not both");
    }
    body["max_tokens"] = body["max_completion_tokens"];
    body.erase("max_completion_tokens");
  }
  if (body.contains("chat_template_kwargs") && !body["chat_template_kwargs"].is_null()) {
    if (!body["chat_template_kwargs"].is_object()) {
      return fail(error, "chat_template_kwargs", "chat_template_kwargs must be an object");
    }
    *extra_variables = body["chat_template_kwargs"].dump();
  }
  body.erase("chat_template_kwargs");
  body.erase("messages");
  if (!takeChatLogprobs(body, error)) return false;
  if (body.contains("prompt")) return fail(error, "prompt", "unknown field 'prompt'");
  if (body.contains("add_special_tokens")) {
    return fail(error, "add_special_tokens", "unknown field 'add_special_tokens'");
  }
  return true;
}

}  // namespace

void ChatPrompter::load(const std::string& model) {
  if (models::loadModelChatTemplate(model, &model_template_) != Status::kSuccess) {
    unavailable_reason_ = clientMessage(lastErrorMessage());
    model_template_.chat_template.reset();
  }
}

bool ChatPrompter::render(const std::string& messages_json, const std::string& extra_variables_json,
                          std::string* prompt, ApiError* error) const {
  models::ChatRenderOptions options;
  options.bos_token = model_template_.bos_token;
  options.eos_token = model_template_.eos_token;
  options.extra_variables_json = extra_variables_json;
  std::lock_guard<std::mutex> lock(mutex_);
  if (model_template_.chat_template->renderJson(messages_json, options, prompt) !=
      Status::kSuccess) {
    return fail(error, "messages",
                "the chat template refused the messages: " + clientMessage(lastErrorMessage()));
  }
  return true;
}

bool parseChatRequest(const std::string& body, const RequestLimits& limits,
                      const ChatPrompter& prompter, CompletionRequest* out, ApiError* error) {
  if (checkJsonText(body, "the request body") != Status::kSuccess) {
    return fail(error, "", "malformed JSON: " + clientMessage(lastErrorMessage()));
  }
  Json json = Json::parse(body, nullptr, false);
  if (json.is_discarded() || !json.is_object()) {
    return fail(error, "", "the request body must be a JSON object");
  }
  if (!prompter.available()) {
    ApiError unavailable = badRequest(
        "messages", "chat completions need a chat template (not available for this model: " +
                        prompter.unavailableReason() +
                        "); use /v1/completions with the rendered prompt");
    unavailable.code = "chat_template_unavailable";
    *error = unavailable;
    return false;
  }
  if (!checkMessages(json, error)) return false;
  const std::string messages =
      json["messages"].dump(-1, ' ', false, Json::error_handler_t::replace);
  std::string extra_variables;
  if (!takeChatFields(json, &extra_variables, error)) return false;
  std::string prompt;
  if (!prompter.render(messages, extra_variables, &prompt, error)) return false;
  if (prompt.empty()) return fail(error, "messages", "the chat template rendered no text");
  json["prompt"] = prompt;
  json["add_special_tokens"] = false;  // the template writes them (transformers does the same)
  const bool default_length = !json.contains("max_tokens") || json["max_tokens"].is_null();
  if (!parseCompletionRequest(json.dump(-1, ' ', false, Json::error_handler_t::replace), limits,
                              out, error))
    return false;
  out->chat = true;
  out->max_tokens_to_context = default_length;
  return true;
}

}  // namespace ree::server
