// ree-launch: generate text with a Hugging Face model on the default, deterministic or
// reproducible operation set. Errors print one line on stderr and exit non-zero.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli.h"
#include "ree/kernels/cpu_parallel.h"
#include "ree/models/tokenizer.h"

namespace {

constexpr const char* kVersion = "0.1.0";

int fail(const char* what) {
  std::fprintf(stderr, "ree-launch: error: %s\n", what);
  return 2;
}

nlohmann::json resultJson(const ree::GenerationResult& result, const ree::EngineOptions& options,
                          double load_seconds) {
  return {{"model", options.model},
          {"operation_set", ree::operationSetName(options.operation_set)},
          {"device", options.device.str()},
          {"prompt_ids", result.prompt_ids},
          {"output_ids", result.output_ids},
          {"text", result.text},
          {"finish_reason", result.finish_reason},
          {"output_ids_sha256", result.output_ids_sha256},
          {"timing",
           {{"load_seconds", load_seconds},
            {"prefill_seconds", result.prefill_seconds},
            {"decode_seconds", result.decode_seconds},
            {"generated_tokens", result.output_ids.size()}}}};
}

}  // namespace

int main(int argc, char** argv) {
  ree::launcher::LaunchOptions options;
  if (ree::launcher::parseCommandLine(argc, argv, &options) != ree::Status::kSuccess) {
    return fail(ree::lastErrorMessage());
  }
  if (options.help) {
    std::fputs(options.help_text.c_str(), stdout);
    return 0;
  }
  if (options.version) {
    std::printf("ree-launch %s (RepOps spec repops-1)\n", kVersion);
    return 0;
  }
  if (options.cpu_threads > 0) ree::setCpuThreads(options.cpu_threads);

  auto start = std::chrono::steady_clock::now();
  std::unique_ptr<ree::Engine> engine;
  if (ree::Engine::create(options.engine, &engine) != ree::Status::kSuccess) {
    return fail(ree::lastErrorMessage());
  }
  double load_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  // Stream text to a terminal when there is one prompt; otherwise print each result at the end.
  bool stream = !options.json && options.requests.size() == 1 && isatty(STDOUT_FILENO);
  ree::TokenCallback on_token;
  if (stream) {
    on_token = [](size_t, int32_t, const std::string& text) {
      std::fputs(text.c_str(), stdout);
      std::fflush(stdout);
    };
  }
  std::vector<ree::GenerationResult> results;
  auto gen_start = std::chrono::steady_clock::now();
  if (engine->generate(options.requests, &results, on_token) != ree::Status::kSuccess) {
    if (stream) std::fputs("\n", stdout);
    return fail(ree::lastErrorMessage());
  }
  double gen_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - gen_start).count();
  size_t tokens = 0;
  for (size_t i = 0; i < results.size(); ++i) {
    const ree::GenerationResult& result = results[i];
    tokens += result.output_ids.size();
    if (options.json) {
      std::printf("%s\n", resultJson(result, options.engine, load_seconds).dump().c_str());
    } else if (stream) {
      std::fputs("\n", stdout);
    } else {
      if (results.size() > 1) std::printf("=== prompt %zu (%s)\n", i, result.finish_reason.c_str());
      std::printf("%s\n", result.text.c_str());
    }
  }
  std::fprintf(stderr, "[ree] %zu tokens in %.3f s: %.1f tokens/s (model load %.2f s, %s, %s)\n",
               tokens, gen_seconds, gen_seconds > 0 ? tokens / gen_seconds : 0.0, load_seconds,
               ree::operationSetName(options.engine.operation_set),
               options.engine.device.str().c_str());
  return 0;
}
