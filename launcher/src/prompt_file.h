// Prompt files (--prompt-file, JSONL): one prompt per non-blank line. The parser takes the bytes,
// not a path, so that a fuzz target can drive it directly (it depends on ree_core and nlohmann
// only).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ree/core/status.h"

namespace ree::launcher {

// One line of a prompt file: text for the tokenizer, or token ids that bypass it (exactly one is
// set).
struct FilePrompt {
  std::string text;
  std::vector<int32_t> ids;
};

// Stated in docs/usage.md ("Limits"); the file size limit is applied by readPromptFile before
// anything is read.
struct PromptFileLimits {
  uint64_t max_file_bytes = 256ull << 20;  // 256 MiB
  size_t max_line_bytes = 16u << 20;       // 16 MiB per line
  size_t max_prompts = 1000000;
};

// Parses JSONL prompt text. Each non-blank line is a JSON string, {"prompt": "..."} or
// {"prompt_ids": [non-negative integers < 2^31, at least one]}; an object holds exactly one of
// the two keys and nothing else, and no key repeats anywhere (ree/core/json_guard.h). Blank lines
// (spaces, tabs, CR) are skipped. Fails with kInvalidArgument (kIoError for the size limits) and a
// one-line message "ORIGIN:LINE: ..." naming the line and what was expected; `origin` names the
// source in messages (e.g. "--prompt-file 'p.jsonl'"). Appends to `prompts` only on success.
Status parsePromptLines(std::string_view bytes, const std::string& origin,
                        std::vector<FilePrompt>* prompts,
                        const PromptFileLimits& limits = PromptFileLimits());

// Reads `path` (a regular file only, at most limits.max_file_bytes, never blocking on a FIFO or
// device) and parses it with parsePromptLines. Messages start "--prompt-file 'PATH'".
Status readPromptFile(const std::string& path, std::vector<FilePrompt>* prompts,
                      const PromptFileLimits& limits = PromptFileLimits());

}  // namespace ree::launcher
