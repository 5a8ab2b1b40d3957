// A model's identity for receipts (docs/receipt.md, "Model identity"): SHA-256 of config.json, of
// tokenizer.json, of the files that decide where generation stops and how a chat is rendered
// (generation_config.json; tokenizer_config.json and chat_template.jinja), and of the weights as a
// set of named tensors, so that the same tensors give the same identity however they are sharded
// and ordered in the files. A GGUF file's config is the one its metadata gives, its tokenizer the
// metadata entries the tokenizer, chat template and end-of-generation ids are built from.
#pragma once

#include <string>

#include "ree/core/status.h"

namespace ree {

namespace models {
class GgufFile;
}

struct ModelIdentity {
  std::string config_sha256;     // raw bytes of config.json (GGUF: the config it gives)
  std::string tokenizer_sha256;  // raw bytes of tokenizer.json (GGUF: ggufTokenizerIdentityBytes);
                                 // "" when there is none
  // A model directory's generation_config.json and chat template files (modelFilesIdentityBytes);
  // never "" for a directory, always "" for a GGUF file (its tokenizer_sha256 binds both).
  std::string generation_config_sha256;
  std::string chat_template_sha256;
  std::string weights_sha256;  // of the weights manifest (docs/receipt.md)
  std::string weights_kind;    // the format (WeightSource::formatName): "safetensors", "gguf"
                               // or "synthetic"
};

// First line of the weights manifest; changing the manifest layout means a new version here.
inline constexpr const char* kWeightsManifestVersion = "ree-weights/1";
// First line of a GGUF file's tokenizer bytes; a new layout means a new version here.
inline constexpr const char* kGgufTokenizerVersion = "ree-gguf-tokenizer/1";
// First lines of a model directory's generation-config and chat-template bytes.
inline constexpr const char* kGenerationConfigFilesVersion = "ree-generation-config/1";
inline constexpr const char* kChatTemplateFilesVersion = "ree-chat-template/1";

// `model` as --model takes it: a Hugging Face model directory, a GGUF file, builtin:NAME
// (materialised first) or synthetic:DIR. Reads and hashes every tensor's bytes (any dtype, through
// the checkpoint's WeightSource, whatever the loading rules: extra tensors and non-finite values
// are hashed, not judged), tensors in parallel (cpuThreads()): a checkpoint of N GB reads N GB.
// config.json and, when present, tokenizer.json, generation_config.json, tokenizer_config.json and
// chat_template.jinja must be regular files within the loaders' size limits. Errors name the
// directory and the file or tensor.
Status computeModelIdentity(const std::string& model, ModelIdentity* out);

// The weights manifest whose SHA-256 is weights_sha256 (for tests and `--explain` style tools):
// "ree-weights/1\n" then one line per tensor, in ascending byte order of names:
// NAME \t DTYPE \t DIMS \t SHA256(raw data bytes) \n, DIMS comma-separated decimals ("" = scalar).
Status weightsManifest(const std::string& model, std::string* manifest);

// The bytes whose SHA-256 is a GGUF file's tokenizer_sha256: "ree-gguf-tokenizer/1\n", then the
// metadata entries whose key begins with "tokenizer." (tokenizer.ggml.*, tokenizer.chat_template,
// ...) and general.architecture, in ascending byte order of the keys, each encoded as GGUF
// encodes an entry: uint64 key length, key, uint32 value type, value (little-endian scalars of
// their width, bool one byte; strings uint64 length + bytes; arrays uint32 element type, uint64
// count, the elements). Empty (tokenizer_sha256 "") when no key begins with "tokenizer.".
Status ggufTokenizerIdentityBytes(const models::GgufFile& file, std::string* bytes);
Status ggufTokenizerIdentityBytes(const std::string& path, std::string* bytes);

// Which files of a model directory an identity field binds.
enum class ModelFiles {
  kGenerationConfig,  // generation_config_sha256: generation_config.json
  kChatTemplate,      // chat_template_sha256: tokenizer_config.json, chat_template.jinja
};

// The bytes whose SHA-256 is a model directory's generation_config_sha256 or chat_template_sha256:
// the version line ("ree-generation-config/1\n", "ree-chat-template/1\n"), then for each file in
// the order above, NAME \t "-" \n when `directory`/NAME does not exist (symlinks followed), else
// NAME \t SIZE \n and the file's raw bytes (SIZE their count in decimal). The files REE reads are
// hashed as they are (not re-serialised), so whatever a later release reads from them is bound too.
// A file that exists but is not a regular file within the readers' limits is an error naming it.
Status modelFilesIdentityBytes(const std::string& directory, ModelFiles files, std::string* bytes);

}  // namespace ree
