#include "completion_response.h"

#include <nlohmann/json.hpp>

#include "stop_strings.h"

namespace ree::server {
namespace {

using Json = nlohmann::json;

std::string dump(const Json& json) {
  return json.dump(-1, ' ', false, Json::error_handler_t::replace);
}

// OpenAI counts the prompt once and the tokens of every choice.
Json usageJson(const Job& job) {
  const size_t prompt = job.results.empty() ? 0 : job.results[0].prompt_ids.size();
  size_t completion = 0;
  for (const GenerationResult& result : job.results)
    completion += result.output_ids.size();
  return {{"prompt_tokens", prompt},
          {"completion_tokens", completion},
          {"total_tokens", prompt + completion}};
}

Json receiptJson(const Job& job) {
  return {{"id", job.id}, {"sha256", job.receipt_sha256}, {"url", "/v1/receipts/" + job.id}};
}

Json envelope(const CompletionHeader& header, bool chunk) {
  const char* object = !header.chat ? "text_completion"
                       : chunk      ? "chat.completion.chunk"
                                    : "chat.completion";
  return {{"id", header.id},
          {"object", object},
          {"created", header.created},
          {"model", header.model},
          {"system_fingerprint", nullptr}};
}

}  // namespace

std::string openAiFinishReason(const GenerationResult& result, bool stopped_by_string) {
  if (stopped_by_string || result.finish_reason == "eos") return "stop";
  return "length";
}

std::string completionBody(const CompletionHeader& header, const Job& job) {
  Json choices = Json::array();
  for (size_t i = 0; i < job.results.size(); ++i) {
    const GenerationResult& result = job.results[i];
    bool stopped = false;
    std::string text = applyStops(result.text, job.request.stop, &stopped);
    Json choice = {{"index", i}, {"logprobs", nullptr}};
    if (header.chat) {
      choice["message"] = {{"role", "assistant"}, {"content", text}};
    } else {
      choice["text"] = text;
    }
    choices.push_back(choice);
    choices.back().update({{"finish_reason", openAiFinishReason(result, stopped)},
                           {"prompt_token_ids", result.prompt_ids},
                           {"token_ids", result.output_ids}});
  }
  Json body = envelope(header, false);
  body["choices"] = std::move(choices);
  body["usage"] = usageJson(job);
  body["receipt"] = receiptJson(job);
  return dump(body);
}

std::string streamTextEvent(const CompletionHeader& header, int choice, const std::string& text,
                            const std::vector<int32_t>& token_ids) {
  Json body = envelope(header, true);
  Json part = {{"index", choice},
               {"logprobs", nullptr},
               {"finish_reason", nullptr},
               {"token_ids", token_ids}};
  if (header.chat) {
    part["delta"] = {{"content", text}};
  } else {
    part["text"] = text;
  }
  body["choices"] = Json::array({part});
  return "data: " + dump(body) + "\n\n";
}

std::string streamRoleEvent(const CompletionHeader& header, int choice) {
  Json body = envelope(header, true);
  body["choices"] = Json::array({{{"index", choice},
                                  {"delta", {{"role", "assistant"}, {"content", ""}}},
                                  {"logprobs", nullptr},
                                  {"finish_reason", nullptr}}});
  return "data: " + dump(body) + "\n\n";
}

std::string streamFinishEvent(const CompletionHeader& header, const Job& job, int choice,
                              const std::string& finish_reason) {
  Json body = envelope(header, true);
  Json part = {{"index", choice},
               {"logprobs", nullptr},
               {"finish_reason", finish_reason},
               {"token_ids", Json::array()}};
  if (header.chat) {
    part["delta"] = Json::object();
  } else {
    part["text"] = "";
  }
  body["choices"] = Json::array({part});
  body["usage"] = usageJson(job);
  body["receipt"] = receiptJson(job);
  return "data: " + dump(body) + "\n\n";
}

std::string streamUsageEvent(const CompletionHeader& header, const Job& job) {
  Json body = envelope(header, true);
  body["choices"] = Json::array();
  body["usage"] = usageJson(job);
  body["receipt"] = receiptJson(job);
  return "data: " + dump(body) + "\n\n";
}

std::string streamErrorEvent(const ApiError& error) {
  return "data: " + errorBody(error) + "\n\n";
}

}  // namespace ree::server
