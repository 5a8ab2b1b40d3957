// ree-launch: generate text with a Hugging Face model on the default, deterministic or
// reproducible operation set, alone or as one rank of a pipeline (mpirun -n N ... --n-partitions
// N); `validate` and `verify` check receipts. Errors print one line on stderr and exit non-zero.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>

#include "cli.h"
#include "compile_command.h"
#include "process_role.h"
#include "receipt_commands.h"
#include "ree/core/parallel.h"
#include "ree/models/tokenizer.h"
#include "serve_command.h"
#include "tui_command.h"

namespace {

int fail(const char* what) {
  std::fprintf(stderr, "ree-launch: error: %s\n", what);
  return 2;
}

nlohmann::json resultJson(const ree::GenerationResult& result, const ree::EngineOptions& options,
                          double load_seconds) {
  return {{"model", options.model},
          {"operation_set", ree::operationSetName(options.operation_set)},
          {"repops_spec", ree::repOpsSpecName(options.repops_spec)},
          {"device", options.device.str()},
          {"n_partitions", options.n_partitions},
          {"prompt_ids", result.prompt_ids},
          {"output_ids", result.output_ids},
          {"text", result.text},
          {"finish_reason", result.finish_reason},
          {"output_ids_sha256", result.output_ids_sha256},
          {"step_logits_sha256", result.step_logits_sha256},
          {"timing",
           {{"load_seconds", load_seconds},
            {"prefill_seconds", result.prefill_seconds},
            {"decode_seconds", result.decode_seconds},
            {"generated_tokens", result.output_ids.size()}}}};
}

void printPlan(const std::vector<ree::partitioner::Stage>& stages,
               const ree::launcher::LaunchOptions& options, int world_size) {
  const ree::EngineOptions& engine = options.engine;
  std::printf("plan: %zu stage(s), %s\n", stages.size(),
              world_size > 1 ? "one MPI rank per stage" : "in this process");
  std::fputs(ree::partitioner::describe(stages).c_str(), stdout);
  for (size_t s = 0; s < stages.size(); ++s) {
    std::string device = world_size > 1                 ? "rank " + std::to_string(s)
                         : engine.stage_devices.empty() ? engine.device.str()
                                                        : engine.stage_devices[s].str();
    std::printf("stage %zu device: %s\n", s, device.c_str());
  }
}

// Ends a rank after a failure: the one-line message, then a clean exit when every rank knows
// (flags, agreed failures), or, as the last resort, aborting the job when peers may still wait on
// this rank (a failure in the middle of generation, a lost peer).
int failRank(ree::launcher::ProcessRole* role, ree::Status status, bool peers_may_wait) {
  int code = fail(ree::lastErrorMessage());
  if (peers_may_wait || status == ree::Status::kTimeout || status == ree::Status::kCommError) {
    ree::launcher::abortJob(role, code);  // returns only without MPI, so with nothing to finish
    return code;
  }
  ree::launcher::finishProcess(role);
  return code;
}

int planMain(const ree::launcher::LaunchOptions& options, ree::launcher::ProcessRole* role) {
  std::vector<ree::partitioner::Stage> stages;
  ree::Status status = ree::Engine::planStages(options.engine, &stages);
  if (status != ree::Status::kSuccess) return failRank(role, status, false);
  if (role->rank == 0) printPlan(stages, options, role->world_size);
  ree::launcher::finishProcess(role);
  return 0;
}

void printResults(const std::vector<ree::GenerationResult>& results,
                  const ree::launcher::LaunchOptions& options, bool stream, double load_seconds,
                  double gen_seconds) {
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
  std::fflush(stdout);
  std::fprintf(stderr,
               "[ree] %zu tokens in %.3f s: %.1f tokens/s (model load %.2f s, %s%s%s, %s, %d "
               "stage(s))\n",
               tokens, gen_seconds, gen_seconds > 0 ? tokens / gen_seconds : 0.0, load_seconds,
               ree::operationSetName(options.engine.operation_set),
               options.engine.operation_set == ree::OperationSetKind::kReproducible ? " " : "",
               options.engine.operation_set == ree::OperationSetKind::kReproducible
                   ? ree::repOpsSpecName(options.engine.repops_spec)
                   : "",
               options.engine.device.str().c_str(), options.engine.n_partitions);
}

// Rank 0 (or the only process): generates, prints, writes the receipt.
int generateOnRankZero(ree::Engine* engine, const ree::launcher::LaunchOptions& options,
                       ree::launcher::ProcessRole* role, double load_seconds) {
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
  ree::Status status = engine->generate(options.requests, &results, on_token);
  if (status != ree::Status::kSuccess) {
    if (stream) std::fputs("\n", stdout);
    return failRank(role, status, true);
  }
  double gen_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - gen_start).count();
  status = engine->shutdown();
  if (status != ree::Status::kSuccess) return failRank(role, status, true);
  printResults(results, options, stream, load_seconds, gen_seconds);
  if (options.receipt_path.empty()) return 0;
  if (ree::launcher::writeRunReceipt(options.receipt_path, options.engine, *engine,
                                     options.requests, results) != ree::Status::kSuccess) {
    return fail(ree::lastErrorMessage());
  }
  std::fprintf(stderr, "[ree] receipt written to %s\n", options.receipt_path.c_str());
  return 0;
}

int generateMain(int argc, char** argv) {
  ree::launcher::LaunchOptions options;
  ree::Status parsed = ree::launcher::parseCommandLine(argc, argv, &options);
  std::string failure = parsed == ree::Status::kSuccess ? "" : ree::lastErrorMessage();
  // Under mpirun every rank joins the start-up exchange, also one whose flags were refused or
  // that only prints help, so that its peers learn at once that it is leaving.
  ree::launcher::ProcessRole role;
  ree::Status status = ree::launcher::setUpProcess(
      &options, ree::launcher::intentOf(options, parsed), failure, &role);
  if (status != ree::Status::kSuccess) return failRank(&role, status, false);
  if (options.help || options.version) {
    if (options.help) std::fputs(options.help_text.c_str(), stdout);
    if (options.version) {
      std::printf("ree-launch %s (RepOps specs %s; default %s)\n", ree::kRuntimeVersion,
                  ree::kRepOpsSpecVersions, ree::repOpsSpecName(ree::kDefaultRepOpsSpec));
    }
    ree::launcher::finishProcess(&role);
    return 0;
  }
  if (options.cpu_threads > 0) ree::setCpuThreads(options.cpu_threads);
  if (options.plan_only) return planMain(options, &role);

  auto start = std::chrono::steady_clock::now();
  std::unique_ptr<ree::Engine> engine;
  // Multi-process: create() agrees on failures, so every rank reports the same message.
  status = ree::Engine::create(options.engine, &engine);
  if (status != ree::Status::kSuccess) return failRank(&role, status, false);
  double load_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  int code = 0;
  if (role.rank != 0) {
    status = engine->serve();
    if (status != ree::Status::kSuccess) return failRank(&role, status, true);
  } else {
    code = generateOnRankZero(engine.get(), options, &role, load_seconds);
  }
  engine.reset();
  ree::launcher::finishProcess(&role);
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "validate") == 0) {
    ree::launcher::announceLeaving("it runs `ree-launch validate` and exits");
    return ree::launcher::validateCommand(argc - 1, argv + 1);
  }
  if (argc > 1 && std::strcmp(argv[1], "serve") == 0) {
    ree::launcher::announceLeaving("it runs `ree-launch serve`, which runs in one process");
    return ree::launcher::serveCommand(argc - 1, argv + 1);
  }
  if (argc > 1 && std::strcmp(argv[1], "compile") == 0) {
    return ree::launcher::compileCommand(argc - 1, argv + 1);  // announces itself (mpirun)
  }
  if (argc > 1 && std::strcmp(argv[1], "tui") == 0) {
    ree::launcher::announceLeaving("it runs `ree-launch tui`, which runs in one process");
    return ree::launcher::tuiCommand(argc - 1, argv + 1);
  }
  if (argc > 1 && std::strcmp(argv[1], "verify") == 0) {
    ree::launcher::announceLeaving("it runs `ree-launch verify`, which runs in one process");
    // Verification runs in one process; --n-partitions N runs N stages in it (any N verifies).
    if (ree::launcher::startedByMpirun() && std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr &&
        std::strcmp(std::getenv("OMPI_COMM_WORLD_SIZE"), "1") != 0) {
      return fail("verify runs in one process (use --n-partitions N without mpirun)");
    }
    return ree::launcher::verifyCommand(argc - 1, argv + 1);
  }
  return generateMain(argc, argv);
}
