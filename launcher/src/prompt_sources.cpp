#include "prompt_sources.h"

#include "chat_prompt.h"
#include "prompt_file.h"
#include "ree/core/text.h"

namespace ree::launcher {
namespace {

constexpr size_t kMaxIdDigits = 10;  // 2147483647

Status badIdItem(const std::string& text, size_t index, const std::string& item) {
  return REE_FAIL(Status::kInvalidArgument,
                  "--prompt-ids '%s': item %zu '%s' is not a token id (expected comma-separated "
                  "decimal integers in [0, 2147483647]: digits only, no spaces, signs or empty "
                  "items)",
                  printableText(text, 60).c_str(), index + 1, printableText(item, 20).c_str());
}

}  // namespace

Status parsePromptIdList(const std::string& text, std::vector<int32_t>* ids) {
  if (text.empty()) {
    return REE_FAIL(Status::kInvalidArgument,
                    "--prompt-ids is empty (expected comma-separated token ids, e.g. 1,2,3)");
  }
  std::vector<int32_t> parsed;
  size_t begin = 0;
  for (size_t index = 0;; ++index) {
    size_t end = text.find(',', begin);
    if (end == std::string::npos) end = text.size();
    std::string item = text.substr(begin, end - begin);
    bool digits = !item.empty() && item.size() <= kMaxIdDigits &&
                  item.find_first_not_of("0123456789") == std::string::npos;
    long long value = digits ? std::stoll(item) : -1;
    if (!digits || value > 0x7fffffff) return badIdItem(text, index, item);
    parsed.push_back(static_cast<int32_t>(value));
    if (end == text.size()) break;
    begin = end + 1;
  }
  *ids = std::move(parsed);
  return Status::kSuccess;
}

Status buildRequests(const PromptFlags& flags, const GenerationRequest& base,
                     std::vector<GenerationRequest>* requests) {
  if (flags.given != 1) {
    return REE_FAIL(
        Status::kInvalidArgument,
        "give exactly one of --prompt-text, --prompt-file, --prompt-ids, --chat (got %d)",
        flags.given);
  }
  if (flags.has_system && !flags.has_chat) {
    return REE_FAIL(Status::kInvalidArgument, "--system needs --chat (the user's message)");
  }
  if (flags.has_chat) {
    GenerationRequest request = base;
    REE_RETURN_IF_ERROR(renderChatPrompt(flags.model, flags.has_system ? &flags.system : nullptr,
                                         flags.chat, &request.prompt_text));
    request.add_special_tokens = false;  // the template wrote them
    requests->push_back(std::move(request));
  } else if (flags.has_text) {
    GenerationRequest request = base;
    request.prompt_text = flags.text;
    requests->push_back(std::move(request));
  } else if (flags.has_ids) {
    GenerationRequest request = base;
    REE_RETURN_IF_ERROR(parsePromptIdList(flags.ids, &request.prompt_ids));
    requests->push_back(std::move(request));
  } else {
    std::vector<FilePrompt> prompts;
    REE_RETURN_IF_ERROR(readPromptFile(flags.file, &prompts));
    for (FilePrompt& prompt : prompts) {
      GenerationRequest request = base;
      request.prompt_text = std::move(prompt.text);
      request.prompt_ids = std::move(prompt.ids);
      requests->push_back(std::move(request));
    }
  }
  return Status::kSuccess;
}

}  // namespace ree::launcher
