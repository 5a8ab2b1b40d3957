#include "cli.h"

#include <cxxopts.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "ree/core/device.h"

namespace ree::launcher {
namespace {

constexpr const char* kDescription =
    "REE: reproducible LLM inference. With --operation-set reproducible the output ids and logits\n"
    "are bitwise identical on every supported CPU and GPU, for any batch composition.";

Status parseIds(const std::string& text, std::vector<int32_t>* ids) {
  std::stringstream stream(text);
  std::string item;
  while (std::getline(stream, item, ',')) {
    size_t used = 0;
    long long value = 0;
    try {
      value = std::stoll(item, &used);
    } catch (...) {
      used = 0;
    }
    if (used == 0 || used != item.size() || value < 0 || value > 0x7fffffff) {
      return REE_FAIL(Status::kInvalidArgument,
                      "--prompt-ids: '%s' is not a token id (expected comma-separated integers)",
                      item.c_str());
    }
    ids->push_back(static_cast<int32_t>(value));
  }
  if (ids->empty()) return REE_FAIL(Status::kInvalidArgument, "--prompt-ids is empty");
  return Status::kSuccess;
}

// JSONL: each non-empty line is a JSON string, an object with a "prompt" string, or an object with
// "prompt_ids" (token ids, bypassing the tokenizer).
struct FilePrompt {
  std::string text;
  std::vector<int32_t> ids;
};

Status readPromptFile(const std::string& path, std::vector<FilePrompt>* prompts) {
  std::ifstream file(path);
  if (!file) return REE_FAIL(Status::kIoError, "--prompt-file %s: cannot open", path.c_str());
  std::string line;
  int number = 0;
  while (std::getline(file, line)) {
    ++number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json value = nlohmann::json::parse(line, nullptr, false);
    if (value.is_discarded()) {
      return REE_FAIL(Status::kInvalidArgument, "--prompt-file %s:%d: not valid JSON", path.c_str(),
                      number);
    }
    FilePrompt prompt;
    if (value.is_string()) {
      prompt.text = value.get<std::string>();
    } else if (value.is_object() && value.contains("prompt") && value["prompt"].is_string()) {
      prompt.text = value["prompt"].get<std::string>();
    } else if (value.is_object() && value.contains("prompt_ids") &&
               value["prompt_ids"].is_array() && !value["prompt_ids"].empty()) {
      for (const auto& id : value["prompt_ids"]) {
        if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > 0x7fffffff) {
          return REE_FAIL(Status::kInvalidArgument,
                          "--prompt-file %s:%d: prompt_ids must be non-negative integers",
                          path.c_str(), number);
        }
        prompt.ids.push_back(id.get<int32_t>());
      }
    } else {
      return REE_FAIL(Status::kInvalidArgument,
                      "--prompt-file %s:%d: expected a JSON string, {\"prompt\": \"...\"} or "
                      "{\"prompt_ids\": [...]}",
                      path.c_str(), number);
    }
    prompts->push_back(std::move(prompt));
  }
  if (prompts->empty()) {
    return REE_FAIL(Status::kInvalidArgument, "--prompt-file %s: no prompts", path.c_str());
  }
  return Status::kSuccess;
}

}  // namespace

Status parseDeviceList(const std::string& text, std::vector<Device>* devices) {
  std::stringstream list(text);
  std::string item;
  while (std::getline(list, item, ',')) {
    Device device;
    if (parseDevice(item, &device) != Status::kSuccess) {
      // parseDevice's message already says where it came from.
      return setError(Status::kInvalidArgument, nullptr, 0, "--stage-devices: %s",
                      lastErrorMessage());
    }
    devices->push_back(device);
  }
  return Status::kSuccess;
}

Status parseCommandLine(int argc, const char* const* argv, LaunchOptions* out) {
  cxxopts::Options options("ree-launch", kDescription);
  options.custom_help(
      "[run] --model DIR|builtin:tiny-llama (--prompt-text TEXT | --prompt-file "
      "FILE.jsonl | --prompt-ids IDS) [options]");
  // clang-format off
  options.add_options("Model")
    ("model", "Hugging Face model directory (config.json, *.safetensors, tokenizer.json), or "
              "builtin:tiny-llama (random weights generated from a seed)", cxxopts::value<std::string>())
    ("model-name", "Alias of --model", cxxopts::value<std::string>())
    ("dtype", "Weight dtype: auto (as stored), f32, bf16, f16", cxxopts::value<std::string>()->default_value("auto"));
  options.add_options("Prompt")
    ("prompt-text", "Prompt text", cxxopts::value<std::string>())
    ("prompt-file", "JSONL file: one JSON string, {\"prompt\": ...} or {\"prompt_ids\": [...]} per line", cxxopts::value<std::string>())
    ("prompt-ids", "Comma-separated prompt token ids (bypasses the tokenizer)", cxxopts::value<std::string>())
    ("no-special-tokens", "Do not add the tokenizer's BOS/template tokens to the prompt");
  options.add_options("Generation")
    ("max-new-tokens", "Tokens to generate per prompt", cxxopts::value<int>()->default_value("64"))
    ("temperature", "Sampling temperature; 0 = greedy (argmax, lowest id wins ties)", cxxopts::value<float>()->default_value("0"))
    ("top-k", "Keep the k most likely tokens; 0 = all", cxxopts::value<int>()->default_value("0"))
    ("top-p", "Nucleus sampling threshold in (0, 1]", cxxopts::value<float>()->default_value("1"))
    ("seed", "Seed of the counter-based sampler (Philox keyed by seed, prompt index, step)", cxxopts::value<uint64_t>()->default_value("0"))
    ("max-batch", "Prompts decoded together", cxxopts::value<int>()->default_value("8"))
    ("max-context", "Tokens per sequence (prompt + output); 0 = min(model's maximum, 4096)", cxxopts::value<int>()->default_value("0"));
  options.add_options("Execution")
    ("operation-set", "default (ATen: cuBLAS/SDPA), deterministic (ATen, deterministic algorithms), "
                      "reproducible (RepOps: identical bits on every device)", cxxopts::value<std::string>()->default_value("reproducible"))
    ("device", "cpu, cuda or cuda:N (default: cuda:0 when a GPU is visible, else cpu)", cxxopts::value<std::string>())
    ("cpu-only", "Run on the CPU (same as --device cpu)")
    ("threads", "CPU threads for CPU kernels (results never depend on it); 0 = all", cxxopts::value<int>()->default_value("0"));
  options.add_options("Pipeline")
    ("n-partitions", "Pipeline stages. Under mpirun: one rank per stage (-n must match); "
                     "without: all stages in this process", cxxopts::value<int>()->default_value("1"))
    ("partition-layers", "Explicit layers per stage, e.g. 8,8,7,9 (default: balanced by the partitioner)", cxxopts::value<std::string>())
    ("stage-devices", "Single process: the device of each stage, e.g. cuda:0,cuda:1 (default: all on --device)", cxxopts::value<std::string>())
    ("micro-batches", "Micro-batches in flight; 0 = one per stage (results never depend on it)", cxxopts::value<int>()->default_value("0"))
    ("memory-budget-gib", "Per-device memory for a stage's weights + KV cache; 0 = the device's memory", cxxopts::value<double>()->default_value("0"))
    ("transport", "Between GPU ranks: auto (NCCL when every stage is on a GPU), nccl, mpi", cxxopts::value<std::string>()->default_value("auto"))
    ("comm-timeout", "Seconds a stage waits for a peer before declaring it lost", cxxopts::value<double>()->default_value("20"))
    ("plan", "Print the partition plan (layers, parameter and KV bytes per stage) and exit");
  options.add_options("Verification")
    ("receipt-path", "Write a receipt of the run (docs/receipt.md) to this file", cxxopts::value<std::string>())
    ("trace-hashes", "Also hash every layer's output at every step (receipt: narrows a dispute to a layer)");
  options.add_options("Output")
    ("json", "Print one JSON object per prompt (ids, text, finish reason, timing, SHA-256 of the output ids)")
    ("version", "Print the version")
    ("h,help", "Print this help");
  // clang-format on
  out->help_text =
      options.help(
          {"Model", "Prompt", "Generation", "Execution", "Pipeline", "Verification", "Output"}) +
      "\nSubcommands:\n  ree-launch validate RECEIPT            check a receipt's structure and "
      "hashes\n  ree-launch verify RECEIPT --model DIR  re-execute a receipt and check every "
      "hash\n\nMulti-process pipeline: mpirun -n N ree-launch --n-partitions N ...\n";

  std::vector<const char*> args(argv, argv + argc);
  if (args.size() > 1 && std::string(args[1]) == "run") args.erase(args.begin() + 1);
  cxxopts::ParseResult parsed;
  try {
    parsed = options.parse(static_cast<int>(args.size()), args.data());
  } catch (const std::exception& error) {
    return REE_FAIL(Status::kInvalidArgument, "%s (see ree-launch --help)", error.what());
  }
  if (!parsed.unmatched().empty()) {
    return REE_FAIL(Status::kInvalidArgument, "unexpected argument '%s' (see ree-launch --help)",
                    parsed.unmatched().front().c_str());
  }
  if (parsed.count("help")) {
    out->help = true;
    return Status::kSuccess;
  }
  if (parsed.count("version")) {
    out->version = true;
    return Status::kSuccess;
  }
  try {
    EngineOptions& engine = out->engine;
    if (parsed.count("model") && parsed.count("model-name")) {
      return REE_FAIL(Status::kInvalidArgument,
                      "--model and --model-name are the same flag: give one");
    }
    if (parsed.count("model")) engine.model = parsed["model"].as<std::string>();
    if (parsed.count("model-name")) engine.model = parsed["model-name"].as<std::string>();
    if (engine.model.empty()) {
      return REE_FAIL(Status::kInvalidArgument,
                      "--model is required (a model directory or builtin:tiny-llama)");
    }
    std::string dtype = parsed["dtype"].as<std::string>();
    if (dtype == "f32" || dtype == "float32") {
      engine.weight_dtype = DType::kF32;
    } else if (dtype == "bf16" || dtype == "bfloat16") {
      engine.weight_dtype = DType::kBF16;
    } else if (dtype == "f16" || dtype == "float16") {
      engine.weight_dtype = DType::kF16;
    } else if (dtype != "auto") {
      return REE_FAIL(Status::kInvalidArgument, "--dtype '%s' is not one of auto, f32, bf16, f16",
                      dtype.c_str());
    }
    REE_RETURN_IF_ERROR(
        parseOperationSet(parsed["operation-set"].as<std::string>(), &engine.operation_set));
    if (parsed.count("cpu-only") && parsed.count("device") &&
        parsed["device"].as<std::string>() != "cpu") {
      return REE_FAIL(Status::kInvalidArgument, "--cpu-only contradicts --device %s",
                      parsed["device"].as<std::string>().c_str());
    }
    if (parsed.count("cpu-only")) {
      engine.device = Device::cpu();
    } else if (parsed.count("device")) {
      REE_RETURN_IF_ERROR(parseDevice(parsed["device"].as<std::string>(), &engine.device));
    } else {
      engine.device = cudaDeviceCount() > 0 ? Device::cuda(0) : Device::cpu();
    }
    engine.max_batch = parsed["max-batch"].as<int>();
    engine.max_context = parsed["max-context"].as<int>();
    if (engine.max_batch < 1) {
      return REE_FAIL(Status::kInvalidArgument, "--max-batch must be >= 1 (got %d)",
                      engine.max_batch);
    }
    if (engine.max_context < 0) {
      return REE_FAIL(Status::kInvalidArgument, "--max-context must be >= 0 (got %d)",
                      engine.max_context);
    }
    out->cpu_threads = parsed["threads"].as<int>();
    if (out->cpu_threads < 0) {
      return REE_FAIL(Status::kInvalidArgument, "--threads must be >= 0 (got %d)",
                      out->cpu_threads);
    }
    out->json = parsed.count("json") > 0;
    out->device_given = parsed.count("device") + parsed.count("cpu-only") > 0;

    engine.n_partitions = parsed["n-partitions"].as<int>();
    if (engine.n_partitions < 1) {
      return REE_FAIL(Status::kInvalidArgument, "--n-partitions must be >= 1 (got %d)",
                      engine.n_partitions);
    }
    if (parsed.count("partition-layers")) {
      REE_RETURN_IF_ERROR(partitioner::parseLayerList(parsed["partition-layers"].as<std::string>(),
                                                      &engine.partition_layers));
      if (static_cast<int>(engine.partition_layers.size()) != engine.n_partitions) {
        return REE_FAIL(Status::kInvalidArgument,
                        "--partition-layers lists %zu stages but --n-partitions is %d",
                        engine.partition_layers.size(), engine.n_partitions);
      }
    }
    if (parsed.count("stage-devices")) {
      REE_RETURN_IF_ERROR(
          parseDeviceList(parsed["stage-devices"].as<std::string>(), &engine.stage_devices));
      if (static_cast<int>(engine.stage_devices.size()) != engine.n_partitions) {
        return REE_FAIL(Status::kInvalidArgument,
                        "--stage-devices lists %zu devices but --n-partitions is %d",
                        engine.stage_devices.size(), engine.n_partitions);
      }
    }
    engine.micro_batches = parsed["micro-batches"].as<int>();
    if (engine.micro_batches < 0) {
      return REE_FAIL(Status::kInvalidArgument, "--micro-batches must be >= 0 (got %d)",
                      engine.micro_batches);
    }
    double budget_gib = parsed["memory-budget-gib"].as<double>();
    if (!(budget_gib >= 0.0) || budget_gib > 1e6) {
      return REE_FAIL(Status::kInvalidArgument, "--memory-budget-gib must be in [0, 1e6] (got %g)",
                      budget_gib);
    }
    engine.memory_budget_bytes = static_cast<int64_t>(budget_gib * 1073741824.0);
    out->transport = parsed["transport"].as<std::string>();
    if (out->transport != "auto" && out->transport != "nccl" && out->transport != "mpi") {
      return REE_FAIL(Status::kInvalidArgument, "--transport '%s' is not one of auto, nccl, mpi",
                      out->transport.c_str());
    }
    out->comm_timeout_s = parsed["comm-timeout"].as<double>();
    if (!(out->comm_timeout_s >= 0.1) || out->comm_timeout_s > 86400.0) {
      return REE_FAIL(Status::kInvalidArgument, "--comm-timeout must be in [0.1, 86400] s (got %g)",
                      out->comm_timeout_s);
    }
    out->plan_only = parsed.count("plan") > 0;
    engine.trace_layer_hashes = parsed.count("trace-hashes") > 0;
    if (parsed.count("receipt-path")) {
      out->receipt_path = parsed["receipt-path"].as<std::string>();
      if (out->receipt_path.empty()) {
        return REE_FAIL(Status::kInvalidArgument, "--receipt-path is empty");
      }
    }
    if (out->plan_only) return Status::kSuccess;  // no prompt needed to print a plan

    GenerationRequest base;
    base.max_new_tokens = parsed["max-new-tokens"].as<int>();
    if (base.max_new_tokens < 1) {
      return REE_FAIL(Status::kInvalidArgument, "--max-new-tokens must be >= 1 (got %d)",
                      base.max_new_tokens);
    }
    base.sampling.temperature = parsed["temperature"].as<float>();
    base.sampling.top_k = parsed["top-k"].as<int>();
    base.sampling.top_p = parsed["top-p"].as<float>();
    base.sampling.seed = parsed["seed"].as<uint64_t>();
    if (!(base.sampling.temperature >= 0.0f) || base.sampling.temperature > 1e4f) {
      return REE_FAIL(Status::kInvalidArgument, "--temperature must be in [0, 1e4] (got %g)",
                      static_cast<double>(base.sampling.temperature));
    }
    if (base.sampling.top_k < 0) {
      return REE_FAIL(Status::kInvalidArgument, "--top-k must be >= 0 (got %d)",
                      base.sampling.top_k);
    }
    if (!(base.sampling.top_p > 0.0f && base.sampling.top_p <= 1.0f)) {
      return REE_FAIL(Status::kInvalidArgument, "--top-p must be in (0, 1] (got %g)",
                      static_cast<double>(base.sampling.top_p));
    }
    base.add_special_tokens = parsed.count("no-special-tokens") == 0;

    int sources = static_cast<int>(parsed.count("prompt-text") + parsed.count("prompt-file") +
                                   parsed.count("prompt-ids"));
    if (sources != 1) {
      return REE_FAIL(Status::kInvalidArgument,
                      "give exactly one of --prompt-text, --prompt-file, --prompt-ids");
    }
    if (parsed.count("prompt-text")) {
      GenerationRequest request = base;
      request.prompt_text = parsed["prompt-text"].as<std::string>();
      out->requests.push_back(request);
    } else if (parsed.count("prompt-ids")) {
      GenerationRequest request = base;
      REE_RETURN_IF_ERROR(parseIds(parsed["prompt-ids"].as<std::string>(), &request.prompt_ids));
      out->requests.push_back(request);
    } else {
      std::vector<FilePrompt> prompts;
      REE_RETURN_IF_ERROR(readPromptFile(parsed["prompt-file"].as<std::string>(), &prompts));
      for (const FilePrompt& prompt : prompts) {
        GenerationRequest request = base;
        request.prompt_text = prompt.text;
        request.prompt_ids = prompt.ids;
        out->requests.push_back(request);
      }
    }
  } catch (const std::exception& error) {
    return REE_FAIL(Status::kInvalidArgument, "%s (see ree-launch --help)", error.what());
  }
  return Status::kSuccess;
}

}  // namespace ree::launcher
