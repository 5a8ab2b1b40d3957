#include "ree/models/model_identity.h"

#include <cstring>
#include <filesystem>
#include <memory>
#include <vector>

#include "ree/core/file.h"
#include "ree/core/parallel.h"
#include "ree/core/text.h"
#include "ree/models/builtin.h"
#include "ree/models/checkpoint.h"
#include "ree/models/engine.h"
#include "ree/models/gguf.h"
#include "ree/models/gguf_config.h"
#include "ree/models/gguf_source.h"
#include "ree/models/safetensors.h"

namespace ree {
namespace {

constexpr const char* kSyntheticPrefix = "synthetic:";

// The loaders' own limits (model_config.cpp, tokenizer_load.h): a larger file could not be loaded,
// so its identity is refused too, before anything is allocated.
constexpr uint64_t kMaxConfigBytes = uint64_t{16} << 20;
constexpr uint64_t kMaxTokenizerBytes = uint64_t{128} << 20;

Status resolveModel(const std::string& model, std::string* directory, bool* synthetic) {
  *synthetic = model.rfind(kSyntheticPrefix, 0) == 0;
  if (*synthetic) {
    *directory = model.substr(std::strlen(kSyntheticPrefix));
  } else if (models::isBuiltinModel(model)) {
    REE_RETURN_IF_ERROR(models::materializeBuiltinModel(model, directory));
  } else {
    *directory = model;
  }
  // A GGUF file holds its config: the identity hashes the config it gives (gguf_config.h).
  if (models::isGgufPath(*directory)) return statRegularFile(*directory, "GGUF file", nullptr);
  if (!std::filesystem::exists(*directory + "/config.json")) {
    return REE_FAIL(Status::kIoError, "model %s: no config.json in '%s'",
                    printableText(model, 400).c_str(), printableText(*directory, 400).c_str());
  }
  // A directory or FIFO in its place: the real cause, without opening it.
  return statRegularFile(*directory + "/config.json", "config.json", nullptr);
}

// One manifest line for tensor `name` (see weightsManifest()).
Status manifestLine(const models::Checkpoint& checkpoint, const std::string& directory,
                    const std::string& name, std::string* line) {
  if (name.find_first_of(std::string("\t\n\0", 3)) != std::string::npos) {
    return REE_FAIL(Status::kUnsupported,
                    "%s: tensor name %s contains a tab, newline or NUL, which the weights "
                    "manifest cannot represent",
                    directory.c_str(), printableText(name).c_str());
  }
  // The stored bytes of any dtype, mapped: I64, U8 and F8_* buffers count as much as weights.
  models::TensorView view;
  REE_RETURN_IF_ERROR(checkpoint.bytes(name, &view));
  const std::string digest = sha256Hex(view.data, view.bytes);
  std::string dims;
  for (size_t d = 0; d < view.shape.size(); ++d)
    dims += (d ? "," : "") + std::to_string(view.shape[d]);
  *line = name + '\t' + models::dtypeName(view.dtype) + '\t' + dims + '\t' + digest + '\n';
  return Status::kSuccess;
}

// The manifest of `directory`'s weights, and the name of their format ("safetensors").
Status buildManifest(const std::string& directory, std::string* manifest,
                     std::string* format = nullptr) {
  // The identity is of the bytes, whatever the loading rules: a checkpoint the engine would refuse
  // (extra tensors, non-finite values) still has one, so that a receipt can name it.
  models::CheckpointOptions bytes_only;
  bytes_only.allow_extra_tensors = true;
  bytes_only.allow_non_finite_weights = true;
  std::unique_ptr<models::Checkpoint> checkpoint;
  REE_RETURN_IF_ERROR(models::Checkpoint::open(directory, &checkpoint, bytes_only));
  const std::vector<std::string>& names = checkpoint->tensorNames();  // sorted bytewise
  std::vector<std::string> lines(names.size());
  std::vector<Status> statuses(names.size(), Status::kSuccess);
  std::vector<std::string> errors(names.size());
  // One tensor per task: hashing is I/O- and SHA-bound, and tensors are independent.
  parallelFor(static_cast<int64_t>(names.size()), 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      statuses[i] = manifestLine(*checkpoint, directory, names[i], &lines[i]);
      if (statuses[i] != Status::kSuccess) errors[i] = lastErrorMessage();
    }
  });
  for (size_t i = 0; i < names.size(); ++i) {
    if (statuses[i] != Status::kSuccess) {
      return setError(statuses[i], nullptr, 0, "%s", errors[i].c_str());
    }
  }
  if (format != nullptr) *format = checkpoint->source().formatName();
  *manifest = std::string(kWeightsManifestVersion) + "\n";
  for (const std::string& line : lines)
    *manifest += line;
  return Status::kSuccess;
}

// A GGUF file's config_sha256 (the config.json its metadata gives) and tokenizer_sha256 (its
// tokenizer metadata entries, ggufTokenizerIdentityBytes; "" when it has none).
Status ggufConfigAndTokenizer(const std::string& path, ModelIdentity* identity) {
  std::unique_ptr<models::GgufFile> file;
  REE_RETURN_IF_ERROR(models::GgufFile::open(path, &file));
  std::string bytes;
  REE_RETURN_IF_ERROR(models::ggufModelConfigJson(*file, &bytes));
  identity->config_sha256 = sha256Hex(bytes.data(), bytes.size());
  REE_RETURN_IF_ERROR(ggufTokenizerIdentityBytes(*file, &bytes));
  if (!bytes.empty()) identity->tokenizer_sha256 = sha256Hex(bytes.data(), bytes.size());
  return Status::kSuccess;
}

// generation_config_sha256 or chat_template_sha256 of a model directory.
Status hashModelFiles(const std::string& directory, ModelFiles files, std::string* digest) {
  std::string bytes;
  REE_RETURN_IF_ERROR(modelFilesIdentityBytes(directory, files, &bytes));
  *digest = sha256Hex(bytes.data(), bytes.size());
  return Status::kSuccess;
}

}  // namespace

Status weightsManifest(const std::string& model, std::string* manifest) {
  REE_CHECK_ARG(manifest != nullptr, "weightsManifest: manifest is null");
  std::string directory;
  bool synthetic = false;
  REE_RETURN_IF_ERROR(resolveModel(model, &directory, &synthetic));
  REE_CHECK_ARG(!synthetic, "weightsManifest: %s has no weight files", model.c_str());
  return buildManifest(directory, manifest);
}

Status computeModelIdentity(const std::string& model, ModelIdentity* out) {
  REE_CHECK_ARG(out != nullptr, "computeModelIdentity: out is null");
  std::string directory;
  bool synthetic = false;
  REE_RETURN_IF_ERROR(resolveModel(model, &directory, &synthetic));
  ModelIdentity identity;
  std::string bytes;
  if (models::isGgufPath(directory)) {
    REE_RETURN_IF_ERROR(ggufConfigAndTokenizer(directory, &identity));
  } else {
    REE_RETURN_IF_ERROR(
        readRegularFile(directory + "/config.json", kMaxConfigBytes, "config.json", &bytes));
    identity.config_sha256 = sha256Hex(bytes.data(), bytes.size());
  }
  if (!models::isGgufPath(directory)) {
    REE_RETURN_IF_ERROR(hashModelFiles(directory, ModelFiles::kGenerationConfig,
                                       &identity.generation_config_sha256));
    REE_RETURN_IF_ERROR(
        hashModelFiles(directory, ModelFiles::kChatTemplate, &identity.chat_template_sha256));
  }
  if (std::filesystem::exists(directory + "/tokenizer.json")) {
    REE_RETURN_IF_ERROR(readRegularFile(directory + "/tokenizer.json", kMaxTokenizerBytes,
                                        "tokenizer.json", &bytes));
    identity.tokenizer_sha256 = sha256Hex(bytes.data(), bytes.size());
  }
  if (synthetic) {
    // Synthetic weights are a function of the config and the seed the engine uses (0).
    const std::string id = "ree-synthetic-weights/1 seed=0";
    identity.weights_sha256 = sha256Hex(id.data(), id.size());
    identity.weights_kind = "synthetic";
  } else {
    std::string manifest;
    REE_RETURN_IF_ERROR(buildManifest(directory, &manifest, &identity.weights_kind));
    identity.weights_sha256 = sha256Hex(manifest.data(), manifest.size());
  }
  *out = std::move(identity);
  return Status::kSuccess;
}

}  // namespace ree
