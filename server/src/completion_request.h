// POST /v1/completions and /v1/chat/completions bodies: parsed and checked field by field, so a
// bad request gets a 400 naming the field before it reaches the engine.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "api_error.h"
#include "ree/models/engine.h"

namespace ree::server {

struct CompletionRequest {
  bool chat = false;  // /v1/chat/completions: answers as chat.completion(.chunk)
  // Chat without max_tokens: generate up to the end of the context (OpenAI's default).
  bool max_tokens_to_context = false;
  bool prompt_is_ids = false;
  std::string prompt_text;
  std::vector<int32_t> prompt_ids;
  bool add_special_tokens = true;  // extra field, as vLLM's
  int max_tokens = 16;             // OpenAI's default for completions
  SamplingParams sampling;         // seed 0 when not given: the same request gives the same bits
  std::vector<std::string> stop;   // cut the text at the first occurrence (finish_reason "stop")
  int n = 1;  // sequences (choices) generated for the prompt, in one batch at positions 0..n-1
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  // Log-probabilities (GenerationRequest::top_logprobs): -1 none; else the alternatives per token.
  // Completions: logprobs = N; chat: logprobs = true with top_logprobs = N (default 0).
  int top_logprobs = -1;
};

inline constexpr int kMaxLogprobs = 20;  // OpenAI's limit for logprobs and top_logprobs

// What the parser checks against: the model's name and vocabulary.
struct RequestLimits {
  std::string model_name;  // "model" must be absent or this
  int64_t vocab_size = 0;
  size_t max_stop_strings = 4;
  size_t max_stop_bytes = 256;
  int max_n = 128;
};

// Parses a /v1/completions body. Returns false and fills `error` (a 4xx) on any bad field.
bool parseCompletionRequest(const std::string& body, const RequestLimits& limits,
                            CompletionRequest* out, ApiError* error);

}  // namespace ree::server
