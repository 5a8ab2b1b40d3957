#include "ree/models/model_identity.h"

#include <openssl/evp.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <vector>

#include "ree/core/parallel.h"
#include "ree/models/builtin.h"
#include "ree/models/checkpoint.h"
#include "ree/models/engine.h"
#include "ree/models/safetensors.h"

namespace ree {
namespace {

constexpr const char* kSyntheticPrefix = "synthetic:";

Status readWholeFile(const std::string& path, std::string* bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return REE_FAIL(Status::kIoError, "%s: cannot open", path.c_str());
  std::ostringstream contents;
  contents << in.rdbuf();
  if (in.bad()) return REE_FAIL(Status::kIoError, "%s: read failed", path.c_str());
  *bytes = contents.str();
  return Status::kSuccess;
}

Status resolveModel(const std::string& model, std::string* directory, bool* synthetic) {
  *synthetic = model.rfind(kSyntheticPrefix, 0) == 0;
  if (*synthetic) {
    *directory = model.substr(std::strlen(kSyntheticPrefix));
  } else if (models::isBuiltinModel(model)) {
    REE_RETURN_IF_ERROR(models::materializeBuiltinModel(model, directory));
  } else {
    *directory = model;
  }
  if (!std::filesystem::is_regular_file(*directory + "/config.json")) {
    return REE_FAIL(Status::kIoError, "model %s: no config.json in '%s'", model.c_str(),
                    directory->c_str());
  }
  return Status::kSuccess;
}

std::string toHex(const unsigned char* digest, size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    out += digits[digest[i] >> 4];
    out += digits[digest[i] & 15];
  }
  return out;
}

// SHA-256 of `bytes` bytes at `offset` of `path`, read in chunks (tensors whose dtype
// Checkpoint::view does not hand out: I64, U8, F8_*, ...).
Status hashFileRange(const std::string& path, uint64_t offset, uint64_t bytes, std::string* hex) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return REE_FAIL(Status::kIoError, "%s: cannot open", path.c_str());
  in.seekg(static_cast<std::streamoff>(offset));
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr);
  std::vector<char> buffer(1 << 20);
  while (bytes > 0) {
    size_t chunk = static_cast<size_t>(std::min<uint64_t>(bytes, buffer.size()));
    in.read(buffer.data(), static_cast<std::streamsize>(chunk));
    if (static_cast<size_t>(in.gcount()) != chunk) {
      return REE_FAIL(Status::kIoError, "%s: truncated tensor data at offset %llu", path.c_str(),
                      static_cast<unsigned long long>(offset));
    }
    EVP_DigestUpdate(ctx.get(), buffer.data(), chunk);
    bytes -= chunk;
  }
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_DigestFinal_ex(ctx.get(), digest, &length);
  *hex = toHex(digest, length);
  return Status::kSuccess;
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
  models::TensorInfo info;
  REE_RETURN_IF_ERROR(checkpoint.info(name, &info));
  std::string digest;
  if (models::isComputeDType(info.dtype)) {
    models::TensorView view;
    REE_RETURN_IF_ERROR(checkpoint.view(name, &view));
    digest = sha256Hex(view.data, view.bytes);
  } else {
    std::string file;
    REE_RETURN_IF_ERROR(checkpoint.shardOf(name, &file));
    const std::string path = directory + "/" + file;
    // The data section starts after the 8-byte header length and the header itself.
    std::ifstream in(path, std::ios::binary);
    unsigned char length_bytes[8] = {};
    in.read(reinterpret_cast<char*>(length_bytes), 8);
    if (in.gcount() != 8) return REE_FAIL(Status::kIoError, "%s: truncated", path.c_str());
    uint64_t header = 0;
    for (int i = 7; i >= 0; --i)
      header = (header << 8) | length_bytes[i];
    REE_RETURN_IF_ERROR(hashFileRange(path, 8 + header + info.data_begin, info.bytes(), &digest));
  }
  std::string dims;
  for (size_t d = 0; d < info.shape.size(); ++d)
    dims += (d ? "," : "") + std::to_string(info.shape[d]);
  *line = name + '\t' + models::dtypeName(info.dtype) + '\t' + dims + '\t' + digest + '\n';
  return Status::kSuccess;
}

Status buildManifest(const std::string& directory, std::string* manifest) {
  std::unique_ptr<models::Checkpoint> checkpoint;
  REE_RETURN_IF_ERROR(models::Checkpoint::open(directory, &checkpoint));
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
  *manifest = std::string(kWeightsManifestVersion) + "\n";
  for (const std::string& line : lines)
    *manifest += line;
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
  REE_RETURN_IF_ERROR(readWholeFile(directory + "/config.json", &bytes));
  identity.config_sha256 = sha256Hex(bytes.data(), bytes.size());
  if (std::filesystem::exists(directory + "/tokenizer.json")) {
    REE_RETURN_IF_ERROR(readWholeFile(directory + "/tokenizer.json", &bytes));
    identity.tokenizer_sha256 = sha256Hex(bytes.data(), bytes.size());
  }
  if (synthetic) {
    // Synthetic weights are a function of the config and the seed the engine uses (0).
    const std::string id = "ree-synthetic-weights/1 seed=0";
    identity.weights_sha256 = sha256Hex(id.data(), id.size());
    identity.weights_kind = "synthetic";
  } else {
    std::string manifest;
    REE_RETURN_IF_ERROR(buildManifest(directory, &manifest));
    identity.weights_sha256 = sha256Hex(manifest.data(), manifest.size());
    identity.weights_kind = "safetensors";
  }
  *out = std::move(identity);
  return Status::kSuccess;
}

}  // namespace ree
