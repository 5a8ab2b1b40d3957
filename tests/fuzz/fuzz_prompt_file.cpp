// Fuzz target: the launcher's JSONL prompt file (--prompt-file), parsed from the bytes by
// parsePromptLines (launcher/src/prompt_file.h), once with the default limits and once with tight
// ones so that the limit paths run on small inputs. A failure appends nothing; an accepted file
// gives at most max_prompts prompts, each with either text or non-negative ids, never both.
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "prompt_file.h"

using namespace ree;
using namespace ree::launcher;

namespace {

void parseChecked(std::string_view bytes, const PromptFileLimits& limits) {
  fuzz::beginInput();
  std::vector<FilePrompt> prompts(1);  // a sentinel: failures must append nothing
  Status status = parsePromptLines(bytes, "--prompt-file 'fuzz.jsonl'", &prompts, limits);
  fuzz::checkStatus(status, "parsePromptLines");
  if (status != Status::kSuccess) {
    fuzz::require(prompts.size() == 1, "a refused prompt file appended prompts");
    return;
  }
  fuzz::require(prompts.size() >= 2, "an accepted prompt file gave no prompt");
  fuzz::require(prompts.size() - 1 <= limits.max_prompts, "more prompts than max_prompts");
  for (size_t i = 1; i < prompts.size(); ++i) {
    const FilePrompt& prompt = prompts[i];
    fuzz::require(prompt.text.empty() || prompt.ids.empty(), "a prompt with both text and ids");
    for (int32_t id : prompt.ids)
      fuzz::require(id >= 0, "an accepted prompt id is negative", std::to_string(id));
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::quietLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes = fuzz::asText(data, size);
  parseChecked(bytes, PromptFileLimits());
  PromptFileLimits tight;
  tight.max_file_bytes = 512;
  tight.max_line_bytes = 64;
  tight.max_prompts = 3;
  parseChecked(bytes, tight);
  return 0;
}
