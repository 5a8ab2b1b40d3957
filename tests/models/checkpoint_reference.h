// The Python references of the checkpoint tests (scripts/reference/make_tiny_checkpoints.py),
// generated once per test process into REE_TEST_TMP. Skips when no usable Python is configured; a
// configured Python that cannot build the references is a failure, not a skip.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

namespace ree::models::test {

using Json = nlohmann::json;

inline std::string testRoot() {
  const char* tmp = std::getenv("REE_TEST_TMP");
  std::string root = (tmp != nullptr && *tmp != '\0') ? tmp : "/tmp/ree_models_checkpoint_test";
  std::filesystem::create_directories(root);
  return root;
}

class Reference {
 public:
  static Reference& get() {
    static Reference instance;
    return instance;
  }
  bool available() const { return available_; }
  const std::string& why() const { return why_; }
  const Json& manifest() const { return manifest_; }

 private:
  Reference() {
    const char* python = std::getenv("REE_PYTHON");
    const char* source = std::getenv("REE_SOURCE_DIR");
    if (python == nullptr || *python == '\0' || source == nullptr || *source == '\0') {
      why_ = "REE_PYTHON / REE_SOURCE_DIR not set (run through ctest)";
      return;
    }
    if (std::system((std::string("\"") + python +
                     "\" -c 'import torch, transformers, safetensors' >/dev/null 2>&1")
                        .c_str()) != 0) {
      why_ = std::string(python) + " lacks torch/transformers/safetensors";
      return;
    }
    std::string out = testRoot() + "/reference";
    std::filesystem::remove_all(out);
    std::string log = testRoot() + "/make_tiny_checkpoints.log";
    std::string command = std::string("\"") + python + "\" \"" + source +
                          "/scripts/reference/make_tiny_checkpoints.py\" \"" + out + "\" >\"" +
                          log + "\" 2>&1";
    if (std::system(command.c_str()) != 0) {
      ADD_FAILURE() << "make_tiny_checkpoints.py failed; see " << log;
      why_ = "reference generation failed";
      return;
    }
    std::ifstream in(out + "/manifest.json");
    manifest_ = Json::parse(in, nullptr, false);
    if (manifest_.is_discarded()) {
      ADD_FAILURE() << "manifest.json unreadable";
      why_ = "manifest unreadable";
      return;
    }
    available_ = true;
  }
  bool available_ = false;
  std::string why_;
  Json manifest_;
};

}  // namespace ree::models::test

#define REQUIRE_REFERENCE()                                        \
  do {                                                             \
    if (!::ree::models::test::Reference::get().available())        \
      GTEST_SKIP() << ::ree::models::test::Reference::get().why(); \
  } while (0)
