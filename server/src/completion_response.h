// The bodies of /v1/completions and /v1/chat/completions answers: the whole completion, and the
// SSE chunks of a stream (chat: "message" and "delta" where completions have "text").
// Besides OpenAI's fields each carries REE's: choices[0].token_ids (the ids the text came from),
// and "receipt": {"id", "sha256", "url"} naming the request's receipt.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "job.h"

namespace ree::models {
class Tokenizer;
}

namespace ree::server {

struct CompletionHeader {
  std::string id;     // the job's id (also its receipt's)
  std::string model;  // as the client named it
  int64_t created = 0;
  bool chat = false;  // chat.completion(.chunk) with message / delta instead of text
  // Names the tokens of logprobs (each token's own decoded text); null: "<id>".
  const models::Tokenizer* tokenizer = nullptr;
};

// "stop" (a stop string or the end-of-sequence token) or "length".
std::string openAiFinishReason(const GenerationResult& result, bool stopped_by_string);

// The non-streaming answer of a finished job: a choice per sequence (text cut at its stop
// string), usage, receipt.
std::string completionBody(const CompletionHeader& header, const Job& job);

// One "data: {...}\n\n" event of a stream: `text` of choice `choice` and the `token_ids` it
// covers; with `logprobs`, the logprobs of its one token, that token's text starting at byte
// `text_offset` of the concatenated token texts (*text_offset advances past it).
std::string streamTextEvent(const CompletionHeader& header, int choice, const std::string& text,
                            const std::vector<int32_t>& token_ids,
                            const TokenLogprobs* logprobs = nullptr, size_t* text_offset = nullptr);
// Chat streams: the first event of a choice, naming the assistant's role.
std::string streamRoleEvent(const CompletionHeader& header, int choice);
// The last event of a choice: finish_reason, the receipt, and the usage.
std::string streamFinishEvent(const CompletionHeader& header, const Job& job, int choice,
                              const std::string& finish_reason);
// With stream_options.include_usage: the usage event (empty choices) before [DONE].
std::string streamUsageEvent(const CompletionHeader& header, const Job& job);
// An error inside a stream (the status line is already sent): {"error": {...}}.
std::string streamErrorEvent(const ApiError& error);
inline constexpr const char* kStreamDone = "data: [DONE]\n\n";

}  // namespace ree::server
