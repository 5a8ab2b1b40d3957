// Built-in models: small models whose weights are generated deterministically from a seed, so the
// README's command runs with nothing downloaded. THE WEIGHTS ARE RANDOM: the text they produce is
// meaningless; they exist to exercise the whole path (config, tokenizer, safetensors, generation).
//
// A built-in model is materialised once as an ordinary Hugging Face directory (config.json,
// generation_config.json, tokenizer.json, model.safetensors) under the cache directory
// ($REE_CACHE_DIR, else $XDG_CACHE_HOME/ree, else $HOME/.cache/ree), and then loaded like any
// other.
#pragma once

#include <string>
#include <vector>

#include "ree/core/status.h"

namespace ree::models {

// Names accepted after "builtin:" (e.g. "tiny-llama").
std::vector<std::string> builtinModelNames();

// True for "builtin:<name>".
bool isBuiltinModel(const std::string& model);

// Writes (if not already there) the directory of built-in `model` ("builtin:tiny-llama") and
// returns its path.
Status materializeBuiltinModel(const std::string& model, std::string* directory);

// Writes the built-in model's files into `directory` (created if needed), unconditionally.
Status writeBuiltinModel(const std::string& name, const std::string& directory);

}  // namespace ree::models
