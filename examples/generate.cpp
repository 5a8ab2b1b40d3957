// Embedding REE in another program: load a model, generate reproducibly, print ids and text.
//
//   generate [MODEL] [PROMPT]     (defaults: builtin:tiny-llama, "Hello")
//
// Built against an installed REE with find_package(ree) (see tests/package/CMakeLists.txt).
#include <cstdio>
#include <memory>

#include "ree/models/engine.h"

int main(int argc, char** argv) {
  ree::EngineOptions options;
  options.model = argc > 1 ? argv[1] : "builtin:tiny-llama";
  options.operation_set = ree::OperationSetKind::kReproducible;
  options.device = ree::Device::cpu();
  std::unique_ptr<ree::Engine> engine;
  if (ree::Engine::create(options, &engine) != ree::Status::kSuccess) {
    std::fprintf(stderr, "error: %s\n", ree::lastErrorMessage());
    return 1;
  }
  ree::GenerationRequest request;
  request.prompt_text = argc > 2 ? argv[2] : "Hello";
  request.max_new_tokens = 16;
  std::vector<ree::GenerationResult> results;
  if (engine->generate({request}, &results) != ree::Status::kSuccess) {
    std::fprintf(stderr, "error: %s\n", ree::lastErrorMessage());
    return 1;
  }
  std::printf("output ids:");
  for (int32_t id : results[0].output_ids)
    std::printf(" %d", id);
  std::printf("\nsha256: %s\ntext: %s\n", results[0].output_ids_sha256.c_str(),
              results[0].text.c_str());
  return 0;
}
