// Fuzz target: the server's request bodies (ree-launch serve; server/src/completion_request.h and
// chat_request.h). Every input is parsed as a POST /v1/completions body and as a
// POST /v1/chat/completions body (rendered with a small chat template). A refusal is a 4xx whose
// message is one line and whose JSON error body parses; an accepted request holds only values the
// engine accepts (ids in the vocabulary, counts and sampling parameters in range); parsing the same
// body twice gives the same request.
#include <cmath>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "api_error.h"
#include "chat_request.h"
#include "completion_request.h"
#include "fuzz_util.h"

using namespace ree;
using namespace ree::server;

namespace {

RequestLimits limits() {
  RequestLimits l;
  l.model_name = "m";
  l.vocab_size = 258;
  l.max_stop_strings = 4;
  l.max_stop_bytes = 64;
  l.max_n = 8;
  return l;
}

// A template that reads what clients send: roles, string or structured content, tool calls.
const char kTemplate[] =
    "{% for m in messages %}<|{{ m['role'] }}|>{% if m.content is string %}{{ m.content }}"
    "{% elif m.content %}{% for part in m.content %}{{ part.text | default('') }}{% endfor %}"
    "{% endif %}{% if m.tool_calls %}{{ m.tool_calls | tojson }}{% endif %}{{ eos_token }}"
    "{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}";

const ChatPrompter& prompter() {
  static const ChatPrompter* loaded = [] {
    const std::string dir = fuzz::scratchDirectory() + "/chat-model";
    std::filesystem::create_directories(dir);
    fuzz::writeFile(dir + "/chat_template.jinja", reinterpret_cast<const uint8_t*>(kTemplate),
                    sizeof(kTemplate) - 1);
    auto* p = new ChatPrompter();
    p->load(dir);
    fuzz::require(p->available(), "the fuzz target's chat template did not load",
                  p->unavailableReason());
    return p;
  }();
  return *loaded;
}

void checkRefusal(const ApiError& error, const char* what) {
  fuzz::require(error.http_status >= 400 && error.http_status < 500, "a refusal that is no 4xx",
                what);
  fuzz::require(!error.message.empty(), "a refusal without a message", what);
  fuzz::require(error.message.find('\n') == std::string::npos &&
                    error.message.find('\r') == std::string::npos,
                "a refusal message of more than one line", error.message);
  const std::string body = errorBody(error);
  fuzz::require(body.find('\n') == std::string::npos, "an error body of more than one line", body);
  const nlohmann::json parsed = nlohmann::json::parse(body, nullptr, false);
  fuzz::require(
      !parsed.is_discarded() && parsed.contains("error") && parsed["error"].contains("message"),
      "an error body that is not OpenAI's error JSON", body);
}

void checkAccepted(const CompletionRequest& r, const RequestLimits& l) {
  fuzz::require(r.max_tokens >= 1, "an accepted max_tokens below 1");
  fuzz::require(r.n >= 1 && r.n <= l.max_n, "an accepted n out of range");
  fuzz::require(r.prompt_is_ids ? !r.prompt_ids.empty() : !r.prompt_text.empty(),
                "an accepted empty prompt");
  for (int32_t id : r.prompt_ids)
    fuzz::require(id >= 0 && id < l.vocab_size, "an accepted id outside the vocabulary",
                  std::to_string(id));
  fuzz::require(r.stop.size() <= l.max_stop_strings, "more stop strings than the limit");
  for (const std::string& stop : r.stop)
    fuzz::require(!stop.empty() && stop.size() <= l.max_stop_bytes, "a stop string out of range");
  const SamplingParams& s = r.sampling;
  fuzz::require(std::isfinite(s.temperature) && s.temperature >= 0.0f,
                "an accepted temperature that no run takes");
  fuzz::require(s.top_p > 0.0f && s.top_p <= 1.0f, "an accepted top_p outside (0, 1]");
  fuzz::require(s.top_k >= 0, "an accepted negative top_k");
}

bool sameRequest(const CompletionRequest& a, const CompletionRequest& b) {
  return a.chat == b.chat && a.max_tokens_to_context == b.max_tokens_to_context &&
         a.prompt_is_ids == b.prompt_is_ids && a.prompt_text == b.prompt_text &&
         a.prompt_ids == b.prompt_ids && a.add_special_tokens == b.add_special_tokens &&
         a.max_tokens == b.max_tokens && a.stop == b.stop && a.n == b.n && a.stream == b.stream &&
         a.include_usage == b.include_usage && a.sampling.seed == b.sampling.seed &&
         a.sampling.top_k == b.sampling.top_k &&
         std::memcmp(&a.sampling.temperature, &b.sampling.temperature, sizeof(float)) == 0 &&
         std::memcmp(&a.sampling.top_p, &b.sampling.top_p, sizeof(float)) == 0;
}

template <typename Parse>
void parseTwice(const char* what, Parse parse) {
  const RequestLimits l = limits();
  CompletionRequest first;
  ApiError error;
  fuzz::beginInput();
  const bool accepted = parse(l, &first, &error);
  if (!accepted) {
    checkRefusal(error, what);
  } else {
    checkAccepted(first, l);
  }
  CompletionRequest second;
  ApiError again;
  fuzz::beginInput();
  const bool accepted_again = parse(l, &second, &again);
  fuzz::require(accepted == accepted_again, "the same body accepted once and refused once", what);
  if (accepted) {
    fuzz::require(sameRequest(first, second), "the same body parsed into two requests", what);
  } else {
    fuzz::require(error.message == again.message && error.param == again.param,
                  "the same body refused with two messages", what);
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::quietLogs();
  prompter();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string body(fuzz::asText(data, size));
  parseTwice("/v1/completions",
             [&](const RequestLimits& l, CompletionRequest* out, ApiError* error) {
               return parseCompletionRequest(body, l, out, error);
             });
  parseTwice("/v1/chat/completions",
             [&](const RequestLimits& l, CompletionRequest* out, ApiError* error) {
               return parseChatRequest(body, l, prompter(), out, error);
             });
  return 0;
}
