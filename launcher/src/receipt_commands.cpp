#include "receipt_commands.h"

#include "cli.h"

#include <cstdio>
#include <cxxopts.hpp>
#include <nlohmann/json.hpp>
#include <sstream>

#include "ree/core/device.h"
#include "ree/core/parallel.h"
#include "ree/models/model_identity.h"
#include "ree/models/receipt.h"

namespace ree::launcher {
namespace {

int error(const std::string& what) {
  std::fprintf(stderr, "ree-launch: error: %s\n", what.c_str());
  return 2;
}

// Prints a verdict: the one-line summary, or the report as JSON; notes go to stderr.
int conclude(const VerifyReport& report, bool json) {
  if (!report.note.empty()) std::fprintf(stderr, "ree-launch: note: %s\n", report.note.c_str());
  std::printf("%s\n", json ? report.json.c_str() : report.summary.c_str());
  return static_cast<int>(report.verdict);
}

// A verdict of "could not verify" from the last error (the JSON consumer still gets a report).
int couldNotVerify(bool json) {
  VerifyReport report;
  report.summary = std::string("could not verify: ") + lastErrorMessage();
  finishVerifyReport(&report);
  if (json) std::printf("%s\n", report.json.c_str());
  return error(lastErrorMessage());
}

}  // namespace

EngineFactory defaultEngineFactory() {
  return [](EngineOptions& options, std::unique_ptr<Engine>* out) {
    return Engine::create(options, out);
  };
}

int validateCommand(int argc, const char* const* argv) {
  const char* usage =
      "usage: ree-launch validate RECEIPT [--json]\n"
      "Checks a receipt's structure and internal hashes (docs/receipt.md) without running the "
      "model.\nExit: 0 valid, 1 internal hashes inconsistent, 2 unreadable or malformed.\n";
  std::string path;
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(usage, stdout);
      return 0;
    } else if (arg == "--json") {
      json = true;
    } else if (!arg.empty() && arg[0] == '-') {
      return error("validate: unknown option '" + arg + "' (see ree-launch validate --help)");
    } else if (path.empty()) {
      path = arg;
    } else {
      return error("validate: unexpected argument '" + arg + "' (one receipt at a time)");
    }
  }
  if (path.empty()) return error("validate: give the receipt file (ree-launch validate RECEIPT)");
  auto report = [&](const char* verdict, const std::string& message, int code) {
    if (json) {
      std::printf("%s\n", nlohmann::json({{"verdict", verdict}, {"summary", message}})
                              .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
                              .c_str());
    } else if (code == 0) {
      std::printf("%s: %s\n", path.c_str(), message.c_str());
    } else {
      std::fprintf(stderr, "ree-launch: %s: %s\n", code == 1 ? "invalid" : "error",
                   message.c_str());
    }
    return code;
  };
  Receipt receipt;
  if (readReceipt(path, &receipt) != Status::kSuccess) {
    return report("malformed", lastErrorMessage(), 2);
  }
  std::string summary;
  Status status = validateReceipt(receipt, &summary);
  if (status == Status::kMismatch) {
    return report("invalid", path + ": " + lastErrorMessage(), 1);
  }
  if (status != Status::kSuccess) return report("malformed", lastErrorMessage(), 2);
  return report("valid", summary, 0);
}

namespace {

cxxopts::Options verifyOptions() {
  cxxopts::Options options("ree-launch verify",
                           "Re-executes a receipt (prompt + generated tokens as ONE prefill per "
                           "request) and checks every hash (docs/receipt.md).");
  options.custom_help("RECEIPT --model DIR [options]");
  options.positional_help("");
  // clang-format off
  options.add_options()
    ("receipt", "Receipt file", cxxopts::value<std::string>())
    ("model", "The receipt's model: a directory, builtin:NAME or synthetic:DIR (required)", cxxopts::value<std::string>())
    ("device", "cpu, cuda or cuda:N (default: cuda:0 when a GPU is visible, else cpu)", cxxopts::value<std::string>())
    ("cpu-only", "Run on the CPU")
    ("n-partitions", "Pipeline stages (any count verifies the same receipt)", cxxopts::value<int>()->default_value("1"))
    ("partition-layers", "Explicit layers per stage, e.g. 2,2", cxxopts::value<std::string>())
    ("stage-devices", "The device of each stage, e.g. cuda:0,cuda:1", cxxopts::value<std::string>())
    ("threads", "CPU threads; 0 = all", cxxopts::value<int>()->default_value("0"))
    ("json", "Print the report as one JSON object")
    ("h,help", "Print this help");
  // clang-format on
  options.parse_positional({"receipt"});
  return options;
}

// verify's device and pipeline flags into `options` (the rest comes from the receipt). Returns
// 0, or the exit code after printing the error.
int deviceAndLayoutFromFlags(const cxxopts::ParseResult& parsed, EngineOptions* options) {
  try {
    if (parsed.count("cpu-only") && parsed.count("device")) {
      return error("--cpu-only contradicts --device");
    }
    if (parsed.count("device")) {
      if (parseDevice(parsed["device"].as<std::string>(), &options->device) != Status::kSuccess) {
        return error(std::string("--device: ") + lastErrorMessage());
      }
    } else if (!parsed.count("cpu-only") && cudaDeviceCount() > 0) {
      options->device = Device::cuda(0);
    }
    options->n_partitions = parsed["n-partitions"].as<int>();
    if (options->n_partitions < 1) return error("--n-partitions must be >= 1");
    if (parsed.count("partition-layers") &&
        partitioner::parseLayerList(parsed["partition-layers"].as<std::string>(),
                                    &options->partition_layers) != Status::kSuccess) {
      return error(lastErrorMessage());
    }
    if (parsed.count("stage-devices") &&
        parseDeviceList(parsed["stage-devices"].as<std::string>(), &options->stage_devices) !=
            Status::kSuccess) {
      return error(lastErrorMessage());
    }
    int threads = parsed["threads"].as<int>();
    if (threads < 0) return error("--threads must be >= 0");
    if (threads > 0) setCpuThreads(threads);
  } catch (const std::exception& e) {
    return error(e.what());
  }
  return 0;
}

// Reads, validates, checks the model's identity, then re-executes on an engine made from the
// receipt's options. Exit code as verifyCommand's.
int runVerification(const std::string& path, const std::string& model, bool json,
                    EngineOptions engine_options, const EngineFactory& make_engine) {
  Receipt receipt;
  if (readReceipt(path, &receipt) != Status::kSuccess) return couldNotVerify(json);
  VerifyReport report;
  Status status = validateReceipt(receipt, nullptr);
  if (status == Status::kMismatch) {
    report.verdict = Verdict::kMismatch;
    report.field = "receipt";
    report.summary = std::string("mismatch: the receipt is inconsistent: ") + lastErrorMessage();
    finishVerifyReport(&report);
    return conclude(report, json);
  }
  if (status != Status::kSuccess) return couldNotVerify(json);
  // The identity first: hashing the files is cheaper than loading a model that is not the one.
  ModelIdentity identity;
  if (computeModelIdentity(model, &identity) != Status::kSuccess) return couldNotVerify(json);
  if (!checkModelIdentity(receipt, identity, &report)) return conclude(report, json);
  if (receiptEngineOptions(receipt, &engine_options) != Status::kSuccess) {
    return couldNotVerify(json);
  }
  std::unique_ptr<Engine> engine;
  if (make_engine(engine_options, &engine) != Status::kSuccess || engine == nullptr) {
    return couldNotVerify(json);
  }
  status = verifyReceipt(receipt, *engine, identity, &report);
  Status shut = engine->shutdown();
  if (status != Status::kSuccess) {
    if (json) std::printf("%s\n", report.json.c_str());
    return error(report.summary);
  }
  if (shut != Status::kSuccess) return couldNotVerify(json);
  return conclude(report, json);
}

}  // namespace

int verifyCommand(int argc, const char* const* argv, const EngineFactory& make_engine) {
  cxxopts::Options options = verifyOptions();
  cxxopts::ParseResult parsed;
  try {
    parsed = options.parse(argc, argv);
  } catch (const std::exception& e) {
    return error(std::string(e.what()) + " (see ree-launch verify --help)");
  }
  if (parsed.count("help")) {
    std::printf("%s\nExit: 0 verified, 1 mismatch, 2 could not verify.\n", options.help().c_str());
    return 0;
  }
  if (!parsed.unmatched().empty()) {
    return error("verify: unexpected argument '" + parsed.unmatched().front() + "'");
  }
  if (!parsed.count("receipt")) return error("verify: give the receipt file");
  if (!parsed.count("model")) return error("verify: --model is required (the receipt's model)");
  const std::string model = parsed["model"].as<std::string>();
  if (model.empty()) return error("--model is empty");
  EngineOptions engine_options;
  engine_options.model = model;
  if (int code = deviceAndLayoutFromFlags(parsed, &engine_options); code != 0) return code;
  return runVerification(parsed["receipt"].as<std::string>(), model, parsed.count("json") > 0,
                         engine_options, make_engine);
}

Status writeRunReceipt(const std::string& path, const EngineOptions& options, const Engine& engine,
                       const std::vector<GenerationRequest>& requests,
                       const std::vector<GenerationResult>& results) {
  ReceiptRunInfo run;
  run.model = options.model;
  REE_RETURN_IF_ERROR(computeModelIdentity(options.model, &run.identity));
  run.options = engine.options();
  run.max_context = engine.maxContext();
  run.plan = engine.plan();
  for (size_t s = 0; s < run.plan.size(); ++s) {
    if (options.transport != nullptr) {
      run.stage_devices.push_back("rank " + std::to_string(s) + " " +
                                  (options.device.isCuda() ? "cuda" : "cpu"));
    } else {
      run.stage_devices.push_back(
          (options.stage_devices.size() > s ? options.stage_devices[s] : options.device).str());
    }
  }
  Receipt receipt;
  REE_RETURN_IF_ERROR(makeReceipt(run, requests, results, &receipt));
  Status status = writeReceipt(path, receipt);
  if (status != Status::kSuccess) {
    return setError(status, nullptr, 0, "--receipt-path: %s", lastErrorMessage());
  }
  return Status::kSuccess;
}

}  // namespace ree::launcher
