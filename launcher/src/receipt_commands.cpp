#include "receipt_commands.h"

#include <cstdio>
#include <cxxopts.hpp>
#include <sstream>

#include "ree/kernels/cpu_parallel.h"
#include "ree/kernels/device.h"
#include "ree/models/receipt.h"

namespace ree::launcher {
namespace {

int error(const char* what) {
  std::fprintf(stderr, "ree-launch: error: %s\n", what);
  return 2;
}

}  // namespace

int validateCommand(int argc, const char* const* argv) {
  if (argc != 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
    std::fprintf(argc == 2 ? stdout : stderr,
                 "usage: ree-launch validate RECEIPT\n"
                 "Checks a receipt's structure and internal hashes (docs/receipt.md) without "
                 "running the model.\nExit: 0 valid, 1 hashes inconsistent, 2 unreadable or "
                 "malformed.\n");
    return argc == 2 ? 0 : 2;
  }
  std::string summary;
  Status status = validateReceiptFile(argv[1], &summary);
  if (status == Status::kMismatch) {
    std::fprintf(stderr, "ree-launch: invalid: %s\n", lastErrorMessage());
    return 1;
  }
  if (status != Status::kSuccess) return error(lastErrorMessage());
  std::printf("%s: %s\n", argv[1], summary.c_str());
  return 0;
}

int verifyCommand(int argc, const char* const* argv) {
  cxxopts::Options options("ree-launch verify",
                           "Re-executes a receipt (prompt + generated tokens as one prefill per "
                           "request) and checks every hash.");
  options.custom_help("RECEIPT --model DIR [options]");
  options.positional_help("RECEIPT");
  // clang-format off
  options.add_options()
    ("receipt", "Receipt file", cxxopts::value<std::string>())
    ("model", "The model to re-execute with (directory, builtin:NAME or synthetic:DIR)", cxxopts::value<std::string>())
    ("device", "cpu, cuda or cuda:N (default: cuda:0 when a GPU is visible, else cpu)", cxxopts::value<std::string>())
    ("cpu-only", "Run on the CPU")
    ("n-partitions", "Pipeline stages in this process (any count verifies the same receipt)", cxxopts::value<int>()->default_value("1"))
    ("partition-layers", "Explicit layers per stage, e.g. 2,2", cxxopts::value<std::string>())
    ("stage-devices", "The device of each stage, e.g. cuda:0,cuda:1", cxxopts::value<std::string>())
    ("threads", "CPU threads; 0 = all", cxxopts::value<int>()->default_value("0"))
    ("json", "Print the report as JSON")
    ("h,help", "Print this help");
  // clang-format on
  options.parse_positional({"receipt"});
  cxxopts::ParseResult parsed;
  try {
    parsed = options.parse(argc, argv);
  } catch (const std::exception& e) {
    return error((std::string(e.what()) + " (see ree-launch verify --help)").c_str());
  }
  if (parsed.count("help")) {
    std::printf("%s\nExit: 0 verified, 1 mismatch, 2 could not verify.\n", options.help().c_str());
    return 0;
  }
  if (!parsed.unmatched().empty()) {
    return error(("unexpected argument '" + parsed.unmatched().front() + "'").c_str());
  }
  if (!parsed.count("receipt")) return error("verify: give the receipt file");
  if (!parsed.count("model")) return error("verify: --model is required");
  VerifyOptions verify;
  try {
    verify.model = parsed["model"].as<std::string>();
    if (parsed.count("cpu-only") && parsed.count("device")) {
      return error("--cpu-only contradicts --device");
    }
    if (parsed.count("device")) {
      if (parseDevice(parsed["device"].as<std::string>(), &verify.device) != Status::kSuccess) {
        return error(lastErrorMessage());
      }
    } else if (!parsed.count("cpu-only") && cudaDeviceCount() > 0) {
      verify.device = Device::cuda(0);
    }
    verify.n_partitions = parsed["n-partitions"].as<int>();
    if (verify.n_partitions < 1) return error("--n-partitions must be >= 1");
    if (parsed.count("partition-layers") &&
        partitioner::parseLayerList(parsed["partition-layers"].as<std::string>(),
                                    &verify.partition_layers) != Status::kSuccess) {
      return error(lastErrorMessage());
    }
    if (parsed.count("stage-devices")) {
      std::stringstream list(parsed["stage-devices"].as<std::string>());
      std::string item;
      while (std::getline(list, item, ',')) {
        Device device;
        if (parseDevice(item, &device) != Status::kSuccess) return error(lastErrorMessage());
        verify.stage_devices.push_back(device);
      }
    }
    int threads = parsed["threads"].as<int>();
    if (threads < 0) return error("--threads must be >= 0");
    if (threads > 0) setCpuThreads(threads);
  } catch (const std::exception& e) {
    return error(e.what());
  }
  VerifyReport report;
  Status status = verifyReceiptFile(parsed["receipt"].as<std::string>(), verify, &report);
  if (parsed.count("json")) std::printf("%s\n", report.json.c_str());
  if (status != Status::kSuccess) {
    if (!parsed.count("json")) std::fprintf(stderr, "ree-launch: %s\n", report.summary.c_str());
    return 2;
  }
  if (!parsed.count("json")) {
    std::FILE* stream = report.verdict == Verdict::kVerified ? stdout : stderr;
    std::fprintf(stream, "%s\n", report.summary.c_str());
  }
  return report.verdict == Verdict::kVerified ? 0 : 1;
}

Status writeRunReceipt(const std::string& path, const EngineOptions& options, const Engine& engine,
                       const std::vector<GenerationRequest>& requests,
                       const std::vector<GenerationResult>& results) {
  ReceiptRunInfo run;
  run.model = options.model;
  REE_RETURN_IF_ERROR(computeModelIdentity(options.model, &run.identity));
  run.options = options;
  run.max_context = engine.maxContext();
  run.plan = engine.plan();
  for (size_t s = 0; s < run.plan.size(); ++s) {
    if (options.transport != nullptr) {
      run.stage_devices.push_back("rank " + std::to_string(s) + " " +
                                  (options.device.isCuda() ? "cuda" : "cpu"));
    } else {
      run.stage_devices.push_back(
          (options.stage_devices.empty() ? options.device : options.stage_devices[s]).str());
    }
  }
  return writeReceipt(path, run, requests, results);
}

}  // namespace ree::launcher
