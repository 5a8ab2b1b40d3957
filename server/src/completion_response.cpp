#include "completion_response.h"

#include <nlohmann/json.hpp>

#include "stop_strings.h"

namespace ree::server {
namespace {

using Json = nlohmann::json;

std::string dump(const Json& json) {
  return json.dump(-1, ' ', false, Json::error_handler_t::replace);
}

Json usageJson(const GenerationResult& result) {
  const size_t prompt = result.prompt_ids.size();
  const size_t completion = result.output_ids.size();
  return {{"prompt_tokens", prompt},
          {"completion_tokens", completion},
          {"total_tokens", prompt + completion}};
}

Json receiptJson(const Job& job) {
  return {{"id", job.id}, {"sha256", job.receipt_sha256}, {"url", "/v1/receipts/" + job.id}};
}

Json envelope(const CompletionHeader& header) {
  return {{"id", header.id},
          {"object", "text_completion"},
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
  bool stopped = false;
  std::string text = applyStops(job.result.text, job.request.stop, &stopped);
  Json body = envelope(header);
  body["choices"] = Json::array({{{"index", 0},
                                  {"text", text},
                                  {"logprobs", nullptr},
                                  {"finish_reason", openAiFinishReason(job.result, stopped)},
                                  {"prompt_token_ids", job.result.prompt_ids},
                                  {"token_ids", job.result.output_ids}}});
  body["usage"] = usageJson(job.result);
  body["receipt"] = receiptJson(job);
  return dump(body);
}

std::string streamTextEvent(const CompletionHeader& header, const std::string& text,
                            const std::vector<int32_t>& token_ids) {
  Json body = envelope(header);
  body["choices"] = Json::array({{{"index", 0},
                                  {"text", text},
                                  {"logprobs", nullptr},
                                  {"finish_reason", nullptr},
                                  {"token_ids", token_ids}}});
  return "data: " + dump(body) + "\n\n";
}

std::string streamFinishEvent(const CompletionHeader& header, const Job& job,
                              const std::string& finish_reason) {
  Json body = envelope(header);
  body["choices"] = Json::array({{{"index", 0},
                                  {"text", ""},
                                  {"logprobs", nullptr},
                                  {"finish_reason", finish_reason},
                                  {"token_ids", Json::array()}}});
  body["usage"] = usageJson(job.result);
  body["receipt"] = receiptJson(job);
  return "data: " + dump(body) + "\n\n";
}

std::string streamUsageEvent(const CompletionHeader& header, const Job& job) {
  Json body = envelope(header);
  body["choices"] = Json::array();
  body["usage"] = usageJson(job.result);
  body["receipt"] = receiptJson(job);
  return "data: " + dump(body) + "\n\n";
}

std::string streamErrorEvent(const ApiError& error) {
  return "data: " + errorBody(error) + "\n\n";
}

}  // namespace ree::server
