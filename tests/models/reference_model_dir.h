// The directory of a reference model that scripts/reference/hf_reference.py builds with
// transformers (architectures.h lists the names), made once per test process under REE_TEST_TMP;
// "builtin:..." names pass through. Shared by the GPU identity tests.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace ree::test {

inline std::string referenceModelDir(const std::string& name) {
  if (name.rfind("builtin:", 0) == 0) return name;
  static std::string dir = [] {
    const char* tmp = std::getenv("REE_TEST_TMP");
    std::string out = std::string(tmp ? tmp : "/tmp/ree_gpu_identity") + "/hf";
    if (!std::filesystem::exists(out + "/gpt2/reference.json")) {
      std::filesystem::create_directories(out);
      const char* python = std::getenv("REE_PYTHON");
      const char* source = std::getenv("REE_SOURCE_DIR");
      std::string cmd = std::string(python ? python : "python3") + " " + (source ? source : ".") +
                        "/scripts/reference/hf_reference.py " + out + " --steps 4 > " + out +
                        ".log 2>&1";
      if (std::system(cmd.c_str()) != 0) std::fprintf(stderr, "failed: %s\n", cmd.c_str());
    }
    return out;
  }();
  return dir + "/" + name;
}

}  // namespace ree::test
