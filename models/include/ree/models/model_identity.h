// A model's identity for receipts (docs/receipt.md, "Model identity"): SHA-256 of config.json, of
// tokenizer.json, and of the weights as a set of named tensors, so that the same tensors give the
// same identity however they are sharded and ordered in the files.
#pragma once

#include <string>

#include "ree/core/status.h"

namespace ree {

struct ModelIdentity {
  std::string config_sha256;     // raw bytes of config.json
  std::string tokenizer_sha256;  // raw bytes of tokenizer.json; "" when there is none
  std::string weights_sha256;    // of the weights manifest (docs/receipt.md)
  std::string weights_kind;      // the format (WeightSource::formatName): "safetensors", or
                                 // "synthetic"
};

// First line of the weights manifest; changing the manifest layout means a new version here.
inline constexpr const char* kWeightsManifestVersion = "ree-weights/1";

// `model` as --model takes it: a Hugging Face model directory, builtin:NAME (materialised first)
// or synthetic:DIR. Reads and hashes every tensor's bytes (any dtype, through the checkpoint's
// WeightSource, whatever the loading rules: extra tensors and non-finite values are hashed, not
// judged), tensors in parallel (cpuThreads()): a checkpoint of N GB reads N GB. config.json and
// tokenizer.json must be regular files within the loaders' size limits. Errors name the directory
// and the file or tensor.
Status computeModelIdentity(const std::string& model, ModelIdentity* out);

// The weights manifest whose SHA-256 is weights_sha256 (for tests and `--explain` style tools):
// "ree-weights/1\n" then one line per tensor, in ascending byte order of names:
// NAME \t DTYPE \t DIMS \t SHA256(raw data bytes) \n, DIMS comma-separated decimals ("" = scalar).
Status weightsManifest(const std::string& model, std::string* manifest);

}  // namespace ree
