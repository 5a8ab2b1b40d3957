#include "completion_response.h"

#include <nlohmann/json.hpp>

#include "ree/models/tokenizer.h"
#include "stop_strings.h"

namespace ree::server {
namespace {

// Keys in insertion order: a completions top_logprobs object lists the most likely token first.
using Json = nlohmann::ordered_json;

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

// A token's own text: the tokenizer's decode of it alone (special tokens kept).
std::string tokenText(const CompletionHeader& header, int32_t id) {
  std::string text;
  if (header.tokenizer == nullptr ||
      header.tokenizer->decode(&id, 1, /*skip_special_tokens=*/false, &text) != Status::kSuccess) {
    return "<" + std::to_string(id) + ">";
  }
  return text;
}

// OpenAI's chat token entry; "bytes" are the text's UTF-8 bytes as 0..255.
Json chatTokenJson(const std::string& text, float logprob) {
  std::vector<int> bytes;
  for (char c : text)
    bytes.push_back(static_cast<unsigned char>(c));
  return {{"token", text}, {"logprob", logprob}, {"bytes", std::move(bytes)}};
}

// OpenAI's logprobs object of `ids` (completions: parallel lists; chat: content[]); the first
// token's text starts at byte *text_offset of the concatenated token texts.
Json logprobsJson(const CompletionHeader& header, const std::vector<int32_t>& ids,
                  const std::vector<TokenLogprobs>& logprobs, size_t* text_offset) {
  Json tokens = Json::array(), values = Json::array(), tops = Json::array(),
       offsets = Json::array(), content = Json::array();
  for (size_t t = 0; t < ids.size() && t < logprobs.size(); ++t) {
    const std::string text = tokenText(header, ids[t]);
    Json top = header.chat ? Json::array() : Json::object();
    for (const TokenLogprob& alternative : logprobs[t].top) {
      const std::string name = tokenText(header, alternative.token);
      if (header.chat) {
        top.push_back(chatTokenJson(name, alternative.logprob));
      } else if (!top.contains(name)) {  // tokens of equal text: the most likely is kept
        top[name] = alternative.logprob;
      }
    }
    if (header.chat) {
      content.push_back(chatTokenJson(text, logprobs[t].logprob));
      content.back()["top_logprobs"] = std::move(top);
    } else {
      tokens.push_back(text);
      values.push_back(logprobs[t].logprob);
      tops.push_back(std::move(top));
      offsets.push_back(*text_offset);
    }
    *text_offset += text.size();
  }
  if (header.chat) return {{"content", std::move(content)}};
  return {{"tokens", std::move(tokens)},
          {"token_logprobs", std::move(values)},
          {"top_logprobs", std::move(tops)},
          {"text_offset", std::move(offsets)}};
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
    if (job.request.top_logprobs >= 0) {
      size_t offset = 0;
      choice["logprobs"] = logprobsJson(header, result.output_ids, result.token_logprobs, &offset);
    }
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
                            const std::vector<int32_t>& token_ids, const TokenLogprobs* logprobs,
                            size_t* text_offset) {
  Json body = envelope(header, true);
  Json logprobs_json = nullptr;
  if (logprobs != nullptr && text_offset != nullptr && token_ids.size() == 1) {
    logprobs_json = logprobsJson(header, token_ids, {*logprobs}, text_offset);
  }
  Json part = {{"index", choice},
               {"logprobs", std::move(logprobs_json)},
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
