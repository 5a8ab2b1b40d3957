#include "completion_request.h"

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "ree/core/json_guard.h"
#include "ree/core/text.h"

namespace ree::server {
namespace {

using Json = nlohmann::json;

// Fields a completion request may carry. Others are refused: a parameter silently ignored would
// change what the client believes it asked for.
const std::set<std::string>& knownFields() {
  static const std::set<std::string> fields = {"model",
                                               "prompt",
                                               "max_tokens",
                                               "temperature",
                                               "top_p",
                                               "top_k",
                                               "seed",
                                               "stop",
                                               "stream",
                                               "stream_options",
                                               "n",
                                               "logprobs",
                                               "echo",
                                               "best_of",
                                               "presence_penalty",
                                               "frequency_penalty",
                                               "logit_bias",
                                               "suffix",
                                               "user",
                                               "add_special_tokens"};
  return fields;
}

bool fail(ApiError* error, const std::string& param, const std::string& message) {
  *error = badRequest(param, message);
  return false;
}

bool readIds(const Json& list, int64_t vocab, std::vector<int32_t>* ids, ApiError* error) {
  if (list.empty()) return fail(error, "prompt", "prompt is an empty list of token ids");
  for (size_t i = 0; i < list.size(); ++i) {
    const Json& id = list[i];
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= vocab) {
      return fail(error, "prompt",
                  "prompt[" + std::to_string(i) + "] must be a token id in [0, " +
                      std::to_string(vocab) + ")");
    }
    ids->push_back(static_cast<int32_t>(id.get<int64_t>()));
  }
  return true;
}

bool readPrompt(const Json& body, const RequestLimits& limits, CompletionRequest* out,
                ApiError* error) {
  if (!body.contains("prompt")) return fail(error, "prompt", "prompt is required");
  const Json& prompt = body["prompt"];
  if (prompt.is_string()) {
    out->prompt_text = prompt.get<std::string>();
    if (out->prompt_text.empty()) return fail(error, "prompt", "prompt is an empty string");
    return true;
  }
  if (prompt.is_array() && !prompt.empty() && prompt[0].is_array()) {
    return fail(error, "prompt", "one prompt per request (a list of prompts is not supported)");
  }
  if (prompt.is_array() && !prompt.empty() && prompt[0].is_string()) {
    return fail(error, "prompt", "one prompt per request (a list of strings is not supported)");
  }
  if (!prompt.is_array()) {
    return fail(error, "prompt", "prompt must be a string or a list of token ids");
  }
  out->prompt_is_ids = true;
  return readIds(prompt, limits.vocab_size, &out->prompt_ids, error);
}

// A number field within [min, max] (min excluded when asked); absent or null keeps `*value`.
bool readNumber(const Json& body, const char* key, double min, double max, bool min_excluded,
                double* value, ApiError* error) {
  if (!body.contains(key) || body[key].is_null()) return true;
  const Json& field = body[key];
  double number = field.is_number() ? field.get<double>() : std::nan("");
  bool in_range =
      std::isfinite(number) && number <= max && (min_excluded ? number > min : number >= min);
  if (!field.is_number() || !in_range) {
    char range[96];
    std::snprintf(range, sizeof(range), "%s%g, %g]", min_excluded ? "(" : "[", min, max);
    return fail(error, key, std::string(key) + " must be a finite number in " + range);
  }
  *value = number;
  return true;
}

bool readInteger(const Json& body, const char* key, int64_t min, int64_t max, int64_t* value,
                 ApiError* error) {
  if (!body.contains(key) || body[key].is_null()) return true;
  const Json& field = body[key];
  // nlohmann reads a non-negative integer as unsigned: compare in that type so 2^64-1 is no -1.
  bool ok =
      field.is_number_unsigned()
          ? field.get<uint64_t>() <= static_cast<uint64_t>(max) &&
                (min <= 0 || field.get<uint64_t>() >= static_cast<uint64_t>(min))
          : field.is_number_integer() && field.get<int64_t>() >= min && field.get<int64_t>() <= max;
  if (!ok) {
    return fail(error, key,
                std::string(key) + " must be an integer in [" + std::to_string(min) + ", " +
                    std::to_string(max) + "]");
  }
  *value = field.get<int64_t>();
  return true;
}

bool readSampling(const Json& body, CompletionRequest* out, ApiError* error) {
  double temperature = 1.0;  // OpenAI's default
  double top_p = 1.0;
  if (!readNumber(body, "temperature", 0.0, 1e4, false, &temperature, error)) return false;
  if (!readNumber(body, "top_p", 0.0, 1.0, true, &top_p, error)) return false;
  int64_t top_k = 0;
  if (body.contains("top_k") && body["top_k"].is_number_integer() &&
      body["top_k"].get<int64_t>() == -1) {
    top_k = 0;  // vLLM's spelling of "no cut"
  } else if (!readInteger(body, "top_k", 0, std::numeric_limits<int32_t>::max(), &top_k, error)) {
    return false;
  }
  out->sampling.temperature = static_cast<float>(temperature);
  out->sampling.top_p = static_cast<float>(top_p);
  out->sampling.top_k = static_cast<int>(top_k);
  if (!(out->sampling.top_p > 0.0f)) return fail(error, "top_p", "top_p rounds to 0 in float32");
  if (body.contains("seed") && !body["seed"].is_null()) {
    const Json& seed = body["seed"];
    if (!seed.is_number_integer() || (!seed.is_number_unsigned() && seed.get<int64_t>() < 0)) {
      return fail(error, "seed", "seed must be an integer in [0, 18446744073709551615]");
    }
    out->sampling.seed = seed.get<uint64_t>();
  }
  return true;
}

bool readStop(const Json& body, const RequestLimits& limits, CompletionRequest* out,
              ApiError* error) {
  if (!body.contains("stop") || body["stop"].is_null()) return true;
  const Json& stop = body["stop"];
  Json list = stop.is_string() ? Json::array({stop}) : stop;
  if (!list.is_array() || list.size() > limits.max_stop_strings) {
    return fail(error, "stop",
                "stop must be a string or a list of at most " +
                    std::to_string(limits.max_stop_strings) + " strings");
  }
  for (const Json& item : list) {
    if (!item.is_string() || item.get<std::string>().empty() ||
        item.get<std::string>().size() > limits.max_stop_bytes) {
      return fail(error, "stop",
                  "each stop string must be a non-empty string of at most " +
                      std::to_string(limits.max_stop_bytes) + " bytes");
    }
    out->stop.push_back(item.get<std::string>());
  }
  return true;
}

bool readStreaming(const Json& body, CompletionRequest* out, ApiError* error) {
  if (body.contains("stream") && !body["stream"].is_null()) {
    if (!body["stream"].is_boolean()) return fail(error, "stream", "stream must be a boolean");
    out->stream = body["stream"].get<bool>();
  }
  if (!body.contains("stream_options") || body["stream_options"].is_null()) return true;
  const Json& options = body["stream_options"];
  if (!out->stream) return fail(error, "stream_options", "stream_options needs stream: true");
  if (!options.is_object())
    return fail(error, "stream_options", "stream_options must be an object");
  for (auto it = options.begin(); it != options.end(); ++it) {
    if (it.key() != "include_usage" || !it.value().is_boolean()) {
      return fail(error, "stream_options",
                  "stream_options takes include_usage (a boolean) only, got '" +
                      printableText(it.key(), 40) + "'");
    }
    out->include_usage = it.value().get<bool>();
  }
  return true;
}

// Completions' logprobs: the number of alternatives per token, 0..20 (absent, null, false: none).
bool readLogprobs(const Json& body, CompletionRequest* out, ApiError* error) {
  // false, as before this field was implemented: none.
  if (!body.contains("logprobs") || body["logprobs"].is_null() || body["logprobs"] == false)
    return true;
  int64_t top = 0;
  if (body["logprobs"].is_boolean() ||
      !readInteger(body, "logprobs", 0, kMaxLogprobs, &top, error)) {
    return fail(error, "logprobs",
                "logprobs must be an integer in [0, " + std::to_string(kMaxLogprobs) + "]");
  }
  out->top_logprobs = static_cast<int>(top);
  return true;
}

// Parameters this server does not implement yet are accepted only at their neutral value.
bool refuseUnsupported(const Json& body, ApiError* error) {
  auto neutral = [&](const char* key, const Json& value) {
    return !body.contains(key) || body[key].is_null() || body[key] == value;
  };
  const Json n = body.contains("n") && !body["n"].is_null() ? body["n"] : Json(1);
  if (!neutral("best_of", n)) {
    return fail(error, "best_of", "best_of must equal n (no candidates are discarded)");
  }
  if (!neutral("echo", false)) return fail(error, "echo", "echo is not supported");
  if (!neutral("suffix", "")) return fail(error, "suffix", "suffix is not supported");
  if (!neutral("presence_penalty", 0) || !neutral("frequency_penalty", 0)) {
    return fail(error, "presence_penalty", "presence and frequency penalties are not supported");
  }
  if (!neutral("logit_bias", Json::object())) {
    return fail(error, "logit_bias", "logit_bias is not supported");
  }
  if (body.contains("user") && !body["user"].is_string() && !body["user"].is_null()) {
    return fail(error, "user", "user must be a string");
  }
  return true;
}

bool readModelAndOptions(const Json& body, const RequestLimits& limits, CompletionRequest* out,
                         ApiError* error) {
  for (auto it = body.begin(); it != body.end(); ++it) {
    if (knownFields().count(it.key()) == 0) {
      return fail(error, it.key(), "unknown field '" + printableText(it.key(), 60) + "'");
    }
  }
  if (body.contains("model") && !body["model"].is_null()) {
    if (!body["model"].is_string() || body["model"].get<std::string>() != limits.model_name) {
      ApiError unknown = badRequest(
          "model", "the model '" + printableText(body["model"].dump(), 80) +
                       "' does not exist (this server serves '" + limits.model_name + "')");
      unknown.http_status = 404;
      unknown.code = "model_not_found";
      *error = unknown;
      return false;
    }
  }
  if (body.contains("add_special_tokens") && !body["add_special_tokens"].is_null()) {
    if (!body["add_special_tokens"].is_boolean()) {
      return fail(error, "add_special_tokens", "add_special_tokens must be a boolean");
    }
    out->add_special_tokens = body["add_special_tokens"].get<bool>();
  }
  if (!readLogprobs(body, out, error)) return false;
  return refuseUnsupported(body, error);
}

}  // namespace

bool parseCompletionRequest(const std::string& body, const RequestLimits& limits,
                            CompletionRequest* out, ApiError* error) {
  if (checkJsonText(body, "the request body") != Status::kSuccess) {
    return fail(error, "", "malformed JSON: " + clientMessage(lastErrorMessage()));
  }
  Json json = Json::parse(body, nullptr, false);
  if (json.is_discarded()) return fail(error, "", "malformed JSON");
  if (!json.is_object()) return fail(error, "", "the request body must be a JSON object");
  CompletionRequest request;
  if (!readModelAndOptions(json, limits, &request, error)) return false;
  if (!readPrompt(json, limits, &request, error)) return false;
  int64_t max_tokens = request.max_tokens;
  if (!readInteger(json, "max_tokens", 1, std::numeric_limits<int32_t>::max(), &max_tokens,
                   error)) {
    return false;
  }
  request.max_tokens = static_cast<int>(max_tokens);
  int64_t n = 1;
  if (!readInteger(json, "n", 1, limits.max_n, &n, error)) return false;
  request.n = static_cast<int>(n);
  if (!readSampling(json, &request, error)) return false;
  if (!readStop(json, limits, &request, error)) return false;
  if (!readStreaming(json, &request, error)) return false;
  *out = std::move(request);
  return true;
}

}  // namespace ree::server
