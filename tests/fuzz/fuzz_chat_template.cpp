// Fuzz target: chat templates (ree/models/chat_template.h). The input is a template text: it is
// compiled, then rendered on a small conversation with and without the generation prompt. Besides
// not crashing or hanging (small limits keep each input fast), every refusal must be one line,
// and rendering is deterministic: the same template and conversation give the same bytes twice.
#include <memory>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "ree/core/text.h"
#include "ree/models/chat_template.h"

using namespace ree;
using namespace ree::models;

namespace {

ChatTemplateLimits smallLimits() {
  ChatTemplateLimits limits;
  limits.max_template_bytes = 64 << 10;
  limits.max_output_bytes = 256 << 10;
  limits.max_steps = 200000;
  limits.max_call_depth = 16;
  limits.max_nesting = 64;
  return limits;
}

const std::vector<ChatMessage>& conversation() {
  static const std::vector<ChatMessage> messages = {
      {"system", "Be brief."}, {"user", "Héllo {{ x }} 😀\n"}, {"assistant", " ok "}, {"user", ""}};
  return messages;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::quietLogs();
  fuzz::beginInput();
  const std::string text(fuzz::asText(data, size));
  std::unique_ptr<ChatTemplate> compiled;
  Status status = ChatTemplate::parse(text, "fuzz.jinja", &compiled, smallLimits());
  fuzz::checkStatus(status, "ChatTemplate::parse");
  if (status != Status::kSuccess) return 0;
  const bool uses_clock = text.find("strftime_now") != std::string::npos;
  for (const bool generation_prompt : {true, false}) {
    ChatRenderOptions options;
    options.add_generation_prompt = generation_prompt;
    options.bos_token = "<s>";
    options.eos_token = "</s>";
    options.extra_variables_json =
        R"({"tools": [{"name": "f", "arguments": {"a": [1, 2.5, null]}}]})";
    std::string first;
    fuzz::beginInput();
    status = compiled->render(conversation(), options, &first);
    fuzz::checkStatus(status, "ChatTemplate::render");
    const std::string first_error = status == Status::kSuccess ? "" : lastErrorMessage();
    std::string second;
    fuzz::beginInput();
    const Status again = compiled->render(conversation(), options, &second);
    if (uses_clock) continue;
    fuzz::require(again == status && second == first &&
                      (status == Status::kSuccess || first_error == lastErrorMessage()),
                  "rendering twice gave different results", printableText(text, 300));
  }
  return 0;
}
