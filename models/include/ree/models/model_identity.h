// A model's identity for receipts (docs/receipt.md, "Model identity"): SHA-256 of config.json, of
// tokenizer.json, and of the weights as a set of named tensors, so that the same tensors give the
// same identity however they are sharded and ordered in the files. A GGUF file's config is the one
// its metadata gives, its tokenizer the metadata entries the tokenizer and chat template are built
// from.
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
  std::string weights_sha256;    // of the weights manifest (docs/receipt.md)
  std::string weights_kind;      // the format (WeightSource::formatName): "safetensors", "gguf"
                                 // or "synthetic"
};

// First line of the weights manifest; changing the manifest layout means a new version here.
inline constexpr const char* kWeightsManifestVersion = "ree-weights/1";
// First line of a GGUF file's tokenizer bytes; a new layout means a new version here.
inline constexpr const char* kGgufTokenizerVersion = "ree-gguf-tokenizer/1";

// `model` as --model takes it: a Hugging Face model directory, a GGUF file, builtin:NAME
// (materialised first) or synthetic:DIR. Reads and hashes every tensor's bytes (any dtype, through
// the checkpoint's WeightSource, whatever the loading rules: extra tensors and non-finite values
// are hashed, not judged), tensors in parallel (cpuThreads()): a checkpoint of N GB reads N GB.
// config.json and tokenizer.json must be regular files within the loaders' size limits. Errors name
// the directory and the file or tensor.
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

}  // namespace ree
