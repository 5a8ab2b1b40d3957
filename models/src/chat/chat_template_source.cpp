// Where a model keeps its chat template: a Hugging Face directory (chat_template.jinja,
// tokenizer_config.json) or a GGUF file's metadata.
#include <filesystem>
#include <nlohmann/json.hpp>

#include "ree/core/file.h"
#include "ree/core/json_guard.h"
#include "ree/core/text.h"
#include "ree/models/builtin.h"
#include "ree/models/chat_template.h"
#include "ree/models/gguf.h"

namespace ree::models {

namespace {

namespace fs = std::filesystem;
constexpr uint64_t kMaxConfigBytes = uint64_t{64} << 20;

// A special token in tokenizer_config.json: "<s>" or {"content": "<s>", ...}.
std::string tokenText(const nlohmann::json& config, const char* key) {
  const auto found = config.find(key);
  if (found == config.end()) return "";
  if (found->is_string()) return found->get<std::string>();
  if (found->is_object() && found->contains("content") && (*found)["content"].is_string()) {
    return (*found)["content"].get<std::string>();
  }
  return "";
}

// tokenizer_config.json's "chat_template": a string or a list of named templates.
Status templateFromConfig(const nlohmann::json& config, const std::string& where,
                          std::string* text) {
  const auto found = config.find("chat_template");
  if (found == config.end() || found->is_null()) {
    return REE_FAIL(Status::kUnsupported, "%s has no chat_template (not a chat model?)",
                    where.c_str());
  }
  if (found->is_string()) {
    *text = found->get<std::string>();
    return Status::kSuccess;
  }
  if (found->is_array()) {
    for (const auto& entry : *found) {
      if (entry.is_object() && entry.value("name", "") == "default" && entry.contains("template") &&
          entry["template"].is_string()) {
        *text = entry["template"].get<std::string>();
        return Status::kSuccess;
      }
    }
    return REE_FAIL(Status::kUnsupported, "%s: chat_template lists no template named \"default\"",
                    where.c_str());
  }
  return REE_FAIL(Status::kInvalidArgument,
                  "%s: chat_template must be a string or a list of "
                  "{\"name\", \"template\"}",
                  where.c_str());
}

Status loadFromDirectory(const fs::path& dir, std::string* text, std::string* source,
                         ModelChatTemplate* out) {
  const fs::path config_path = dir / "tokenizer_config.json";
  const std::string where = printableText(config_path.string(), 200);
  nlohmann::json config = nlohmann::json::object();
  std::error_code error;
  if (fs::exists(config_path, error)) {
    std::string config_text;
    REE_RETURN_IF_ERROR(readRegularFile(config_path.string(), kMaxConfigBytes,
                                        "tokenizer_config.json", &config_text));
    REE_RETURN_IF_ERROR(checkJsonText(config_text, config_path.string()));
    config = nlohmann::json::parse(config_text, nullptr, false);
    if (!config.is_object())
      return REE_FAIL(Status::kIoError, "%s: not a JSON object", where.c_str());
  }
  out->bos_token = tokenText(config, "bos_token");
  out->eos_token = tokenText(config, "eos_token");
  const fs::path jinja_path = dir / "chat_template.jinja";
  if (fs::exists(jinja_path, error)) {
    *source = jinja_path.string();
    return readRegularFile(jinja_path.string(), kMaxConfigBytes, "chat_template.jinja", text);
  }
  *source = config_path.string();
  return templateFromConfig(config, where, text);
}

std::string tokenById(const GgufFile& file, const char* key) {
  int64_t id = -1;
  const GgufValue* tokens = file.find("tokenizer.ggml.tokens");
  if (file.find(key) == nullptr || file.integer(key, &id) != Status::kSuccess ||
      tokens == nullptr || id < 0 || static_cast<uint64_t>(id) >= tokens->strings.size()) {
    clearError();
    return "";
  }
  return std::string(tokens->strings[static_cast<size_t>(id)]);
}

Status loadFromGguf(const std::string& path, std::string* text, std::string* source,
                    ModelChatTemplate* out) {
  std::unique_ptr<GgufFile> file;
  REE_RETURN_IF_ERROR(GgufFile::open(path, &file));
  if (file->find("tokenizer.chat_template") == nullptr) {
    return REE_FAIL(Status::kUnsupported, "%s has no tokenizer.chat_template (not a chat model?)",
                    printableText(path, 200).c_str());
  }
  REE_RETURN_IF_ERROR(file->string("tokenizer.chat_template", text));
  *source = path + " tokenizer.chat_template";
  out->bos_token = tokenById(*file, "tokenizer.ggml.bos_token_id");
  out->eos_token = tokenById(*file, "tokenizer.ggml.eos_token_id");
  return Status::kSuccess;
}

}  // namespace

Status loadModelChatTemplate(const std::string& model, ModelChatTemplate* out,
                             const ChatTemplateLimits& limits) {
  REE_CHECK_ARG(out != nullptr, "loadModelChatTemplate: out is null");
  const std::string where = printableText(model, 200);
  if (model.rfind("builtin:", 0) == 0) {
    return REE_FAIL(Status::kUnsupported, "%s has no chat template", where.c_str());
  }
  std::string text;
  std::string source;
  std::error_code error;
  std::string path = model;  // a packaged model's short name names its file (builtin.h)
  if (isPackagedModel(model)) REE_RETURN_IF_ERROR(findPackagedModel(model, &path));
  const bool is_gguf = path.size() > 5 && path.compare(path.size() - 5, 5, ".gguf") == 0;
  if (is_gguf) {
    REE_RETURN_IF_ERROR(loadFromGguf(path, &text, &source, out));
  } else if (fs::is_directory(path, error)) {
    REE_RETURN_IF_ERROR(loadFromDirectory(path, &text, &source, out));
  } else {
    return REE_FAIL(Status::kIoError, "%s: not a model directory or .gguf file", where.c_str());
  }
  return ChatTemplate::parse(text, source, &out->chat_template, limits);
}

}  // namespace ree::models
