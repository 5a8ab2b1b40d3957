// The bytes whose SHA-256 is a model directory's generation_config_sha256 or chat_template_sha256
// (docs/receipt.md, "Model identity"): the files REE reads the end-of-generation ids and the chat
// template from, as they are. A file's absence is recorded too, so that a directory's value is
// never "" and "" in a receipt can only mean one written before these files were bound.
#include <filesystem>
#include <vector>

#include "ree/core/file.h"
#include "ree/models/model_identity.h"
#include "ree/models/model_limits.h"

namespace ree {
namespace {

struct BoundFile {
  const char* name;
  uint64_t max_bytes;  // the limit of the loader that reads it: a larger file cannot be loaded
};

// model_config.cpp reads generation_config.json; chat_template_source.cpp tokenizer_config.json
// (chat_template, bos_token, eos_token) and chat_template.jinja, which wins when present.
constexpr uint64_t kMaxChatFileBytes = uint64_t{64} << 20;

std::vector<BoundFile> boundFiles(ModelFiles files) {
  if (files == ModelFiles::kGenerationConfig) {
    return {{"generation_config.json", models::limits::kMaxConfigFileBytes}};
  }
  return {{"tokenizer_config.json", kMaxChatFileBytes}, {"chat_template.jinja", kMaxChatFileBytes}};
}

}  // namespace

Status modelFilesIdentityBytes(const std::string& directory, ModelFiles files, std::string* bytes) {
  REE_CHECK_ARG(bytes != nullptr, "modelFilesIdentityBytes: bytes is null");
  std::string out = files == ModelFiles::kGenerationConfig ? kGenerationConfigFilesVersion
                                                           : kChatTemplateFilesVersion;
  out += '\n';
  for (const BoundFile& file : boundFiles(files)) {
    const std::string path = directory + "/" + file.name;
    std::error_code error;
    out += file.name;
    // The loaders treat a name that does not resolve as absent (a dangling symlink too); any other
    // failure to look is readRegularFile's to explain.
    if (!std::filesystem::exists(path, error) && !error) {
      out += "\t-\n";
      continue;
    }
    std::string content;
    REE_RETURN_IF_ERROR(readRegularFile(path, file.max_bytes, file.name, &content));
    out += '\t' + std::to_string(content.size()) + '\n';
    out += content;
  }
  *bytes = std::move(out);
  return Status::kSuccess;
}

}  // namespace ree
