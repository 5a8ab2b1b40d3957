#include "prompt_file.h"

#include <nlohmann/json.hpp>

#include "ree/core/file.h"
#include "ree/core/json_guard.h"
#include "ree/core/text.h"

namespace ree::launcher {
namespace {

constexpr int64_t kMaxTokenId = 0x7fffffff;

Status badLine(const std::string& origin, size_t number, const char* why) {
  return REE_FAIL(Status::kInvalidArgument, "%s:%zu: %s", origin.c_str(), number, why);
}

Status parseIdArray(const nlohmann::json& ids, const std::string& origin, size_t number,
                    std::vector<int32_t>* out) {
  if (!ids.is_array() || ids.empty()) {
    return badLine(origin, number, "\"prompt_ids\" must be a non-empty array of token ids");
  }
  out->reserve(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    const nlohmann::json& id = ids[i];
    // Unsigned or signed integers only: 1.0, "1", true and null are not token ids.
    bool integer = id.is_number_integer();
    int64_t value = integer && id.is_number_unsigned()
                        ? (id.get<uint64_t>() > static_cast<uint64_t>(kMaxTokenId)
                               ? -1
                               : static_cast<int64_t>(id.get<uint64_t>()))
                        : (integer ? id.get<int64_t>() : -1);
    if (!integer || value < 0 || value > kMaxTokenId) {
      return REE_FAIL(Status::kInvalidArgument,
                      "%s:%zu: prompt_ids[%zu] is %s, not a token id (an integer in [0, %lld])",
                      origin.c_str(), number, i, printableText(id.dump(), 40).c_str(),
                      static_cast<long long>(kMaxTokenId));
    }
    out->push_back(static_cast<int32_t>(value));
  }
  return Status::kSuccess;
}

// One non-blank line, already checked by the JSON guard.
Status parseLine(std::string_view line, const std::string& origin, size_t number,
                 FilePrompt* prompt) {
  nlohmann::json value = nlohmann::json::parse(line.begin(), line.end(), nullptr, false);
  if (value.is_discarded()) return badLine(origin, number, "not valid JSON");
  if (value.is_string()) {
    prompt->text = value.get<std::string>();
    return Status::kSuccess;
  }
  const char* expected =
      "expected a JSON string, {\"prompt\": \"...\"} or {\"prompt_ids\": [...]} (one key)";
  if (!value.is_object() || value.size() != 1) return badLine(origin, number, expected);
  auto item = value.begin();
  if (item.key() == "prompt") {
    if (!item.value().is_string()) {
      return badLine(origin, number, "\"prompt\" must be a string");
    }
    prompt->text = item.value().get<std::string>();
    return Status::kSuccess;
  }
  if (item.key() == "prompt_ids") return parseIdArray(item.value(), origin, number, &prompt->ids);
  return REE_FAIL(Status::kInvalidArgument, "%s:%zu: unknown key '%s'; %s", origin.c_str(), number,
                  printableText(item.key(), 40).c_str(), expected);
}

bool isBlank(std::string_view line) {
  return line.find_first_not_of(" \t\r") == std::string_view::npos;
}

}  // namespace

Status parsePromptLines(std::string_view bytes, const std::string& origin,
                        std::vector<FilePrompt>* prompts, const PromptFileLimits& limits) {
  REE_CHECK_ARG(prompts != nullptr, "parsePromptLines: prompts is null");
  if (bytes.size() > limits.max_file_bytes) {
    return REE_FAIL(Status::kIoError, "%s: %zu bytes is larger than the limit of %llu bytes",
                    origin.c_str(), bytes.size(),
                    static_cast<unsigned long long>(limits.max_file_bytes));
  }
  std::vector<FilePrompt> parsed;
  size_t number = 0;
  for (size_t begin = 0; begin < bytes.size();) {
    size_t end = bytes.find('\n', begin);
    if (end == std::string_view::npos) end = bytes.size();
    std::string_view line = bytes.substr(begin, end - begin);
    begin = end + 1;
    ++number;
    if (line.size() > limits.max_line_bytes) {
      return REE_FAIL(Status::kIoError, "%s:%zu: line of %zu bytes is longer than the limit of %zu",
                      origin.c_str(), number, line.size(), limits.max_line_bytes);
    }
    if (isBlank(line)) continue;
    if (parsed.size() >= limits.max_prompts) {
      return REE_FAIL(Status::kInvalidArgument, "%s:%zu: more than %zu prompts (the limit)",
                      origin.c_str(), number, limits.max_prompts);
    }
    std::string where = origin + ":" + std::to_string(number);
    REE_RETURN_IF_ERROR(checkJsonText(line, where));
    FilePrompt prompt;
    REE_RETURN_IF_ERROR(parseLine(line, origin, number, &prompt));
    parsed.push_back(std::move(prompt));
  }
  if (parsed.empty()) {
    return REE_FAIL(Status::kInvalidArgument, "%s: no prompts (the file has no non-blank line)",
                    origin.c_str());
  }
  for (FilePrompt& prompt : parsed)
    prompts->push_back(std::move(prompt));
  return Status::kSuccess;
}

Status readPromptFile(const std::string& path, std::vector<FilePrompt>* prompts,
                      const PromptFileLimits& limits) {
  std::string origin = "--prompt-file '" + printableText(path) + "'";
  std::string bytes;
  REE_RETURN_IF_ERROR(readRegularFile(path, limits.max_file_bytes, "--prompt-file", &bytes));
  return parsePromptLines(bytes, origin, prompts, limits);
}

}  // namespace ree::launcher
