// The one list of reference models the model tests run for every supported architecture: each
// name is a model scripts/reference/hf_reference.py builds with transformers (its MODELS table).
// Adding an architecture adds its reference model(s) here and there; models_hf_parity_test fails
// while an architecture of the table (ree/models/architecture.h) has no reference model here.
#pragma once

#include <string>
#include <vector>

namespace ree::test {

inline const std::vector<std::string>& referenceModelNames() {
  static const std::vector<std::string> names = {"llama3", "llama2_tied", "mistral",
                                                 "qwen2",  "qwen3",       "gpt2"};
  return names;
}

}  // namespace ree::test
