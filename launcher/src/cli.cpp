#include "cli.h"

#include <sys/stat.h>

#include <map>
#include <sstream>

#include "cli_options.h"
#include "flag_values.h"
#include "prompt_sources.h"
#include "ree/core/device.h"
#include "ree/core/text.h"

namespace ree::launcher {
namespace {

// The parsed flags; every value is read strictly and its errors name the flag.
class Flags {
 public:
  explicit Flags(const cxxopts::ParseResult& parsed) : parsed_(parsed) {}
  bool given(const char* name) const { return parsed_.count(name) > 0; }
  std::string text(const char* name) const { return parsed_[name].as<std::string>(); }
  Status integer(const char* name, int min, int max, int* out) const {
    return parseIntFlag(("--" + std::string(name)).c_str(), text(name), min, max, out);
  }
  Status real(const char* name, double min, double max, bool min_excluded, double* out) const {
    return parseRealFlag(("--" + std::string(name)).c_str(), text(name), min, max, min_excluded,
                         out);
  }

 private:
  const cxxopts::ParseResult& parsed_;
};

constexpr int kIntMax = 0x7fffffff;

// cxxopts' own messages quote with U+2018/U+2019; one-line ASCII is easier to grep and log.
std::string plainQuotes(std::string message) {
  for (const char* quote : {"\xe2\x80\x98", "\xe2\x80\x99"}) {
    for (size_t at = message.find(quote); at != std::string::npos; at = message.find(quote, at)) {
      message.replace(at, 3, "'");
    }
  }
  return printableText(message, 300);
}

// Switches take no value: cxxopts would read "--json=false" as a given --json. (The argument after
// a flag that takes a value is that value, e.g. --prompt-text "--json=x", and is not looked at.)
Status refuseSwitchValues(const std::vector<const char*>& args) {
  for (size_t i = 1; i < args.size(); ++i) {
    std::string arg = args[i];
    if (arg == "--") break;
    if (arg.rfind("--", 0) != 0) continue;
    size_t equals = arg.find('=');
    std::string name = arg.substr(2, equals == std::string::npos ? std::string::npos : equals - 2);
    if (equals == std::string::npos) {
      if (!isSwitchFlag(name)) ++i;  // skip the value
    } else if (isSwitchFlag(name)) {
      return REE_FAIL(Status::kInvalidArgument, "--%s takes no value (got '%s')",
                      printableText(name, 40).c_str(), printableText(arg, 80).c_str());
    }
  }
  return Status::kSuccess;
}

Status parseArguments(const cxxopts::Options& options, int argc, const char* const* argv,
                      cxxopts::ParseResult* parsed) {
  std::vector<const char*> args(argv, argv + argc);
  if (args.size() > 1 && std::string(args[1]) == "run") args.erase(args.begin() + 1);
  REE_RETURN_IF_ERROR(refuseSwitchValues(args));
  try {
    cxxopts::Options copy = options;  // parse() is not const
    *parsed = copy.parse(static_cast<int>(args.size()), args.data());
  } catch (const std::exception& error) {
    return REE_FAIL(Status::kInvalidArgument, "%s (see ree-launch --help)",
                    plainQuotes(error.what()).c_str());
  }
  if (!parsed->unmatched().empty()) {
    return REE_FAIL(Status::kInvalidArgument, "unexpected argument '%s' (see ree-launch --help)",
                    printableText(parsed->unmatched().front(), 80).c_str());
  }
  // A repeated flag would silently keep one of its values.
  std::map<std::string, int> seen;
  for (const cxxopts::KeyValue& item : parsed->arguments()) {
    if (++seen[item.key()] == 2) {
      return REE_FAIL(Status::kInvalidArgument,
                      "--%s is given more than once (give each flag once)",
                      printableText(item.key(), 40).c_str());
    }
  }
  return Status::kSuccess;
}

Status readModelFlags(const Flags& flags, EngineOptions* engine) {
  if (flags.given("model") && flags.given("model-name")) {
    return REE_FAIL(Status::kInvalidArgument,
                    "--model and --model-name are the same flag: give one");
  }
  if (flags.given("model")) engine->model = flags.text("model");
  if (flags.given("model-name")) engine->model = flags.text("model-name");
  if (engine->model.empty()) {
    return REE_FAIL(Status::kInvalidArgument,
                    "--model is required (a model directory or builtin:tiny-llama)");
  }
  std::string dtype = flags.text("dtype");
  if (dtype == "f32" || dtype == "float32") {
    engine->weight_dtype = DType::kF32;
  } else if (dtype == "bf16" || dtype == "bfloat16") {
    engine->weight_dtype = DType::kBF16;
  } else if (dtype == "f16" || dtype == "float16") {
    engine->weight_dtype = DType::kF16;
  } else if (dtype != "auto") {
    return REE_FAIL(Status::kInvalidArgument, "--dtype '%s' is not one of auto, f32, bf16, f16",
                    printableText(dtype, 40).c_str());
  }
  engine->allow_extra_tensors = flags.given("allow-extra-tensors");
  engine->allow_non_finite_weights = flags.given("allow-non-finite-weights");
  return Status::kSuccess;
}

Status readExecutionFlags(const Flags& flags, LaunchOptions* out) {
  EngineOptions& engine = out->engine;
  REE_RETURN_IF_ERROR(parseOperationSet(flags.text("operation-set"), &engine.operation_set));
  REE_RETURN_IF_ERROR(
      parseRepOpsSpec(flags.text("repops-spec"), "--repops-spec", &engine.repops_spec));
  if (engine.repops_spec != kDefaultRepOpsSpec &&
      engine.operation_set != OperationSetKind::kReproducible) {
    return REE_FAIL(Status::kInvalidArgument,
                    "--repops-spec %s applies to --operation-set reproducible only (got %s)",
                    repOpsSpecName(engine.repops_spec), operationSetName(engine.operation_set));
  }
  if (flags.given("cpu-only") && flags.given("device") && flags.text("device") != "cpu") {
    return REE_FAIL(Status::kInvalidArgument, "--cpu-only contradicts --device %s",
                    printableText(flags.text("device"), 40).c_str());
  }
  if (flags.given("cpu-only")) {
    engine.device = Device::cpu();
  } else if (flags.given("device")) {
    REE_RETURN_IF_ERROR(parseDevice(flags.text("device"), &engine.device));
  } else {
    engine.device = cudaDeviceCount() > 0 ? Device::cuda(0) : Device::cpu();
  }
  out->device_given = flags.given("device") || flags.given("cpu-only");
  REE_RETURN_IF_ERROR(flags.integer("threads", 0, 4096, &out->cpu_threads));
  REE_RETURN_IF_ERROR(flags.integer("max-batch", 1, 1 << 20, &engine.max_batch));
  REE_RETURN_IF_ERROR(flags.integer("max-context", 0, kIntMax, &engine.max_context));
  REE_RETURN_IF_ERROR(
      flags.real("kv-memory-fraction", 0.0, 1.0, false, &engine.kv_memory_fraction));
  int kv_blocks = 0;
  REE_RETURN_IF_ERROR(flags.integer("kv-blocks", 0, kIntMax, &kv_blocks));
  engine.kv_blocks = kv_blocks;
  REE_RETURN_IF_ERROR(flags.integer("kv-block-size", 1, 1 << 20, &engine.kv_block_size));
  engine.prefix_caching = !flags.given("no-prefix-cache");
  engine.decode_lookahead = flags.given("decode-lookahead");
  engine.cuda_graphs = !flags.given("no-cuda-graphs");
  REE_RETURN_IF_ERROR(flags.integer("prefill-chunk", 0, kIntMax, &engine.prefill_chunk));
  out->json = flags.given("json");
  return Status::kSuccess;
}

// The receipt is written after the run: refuse a path that cannot be written before running.
Status checkReceiptPath(const std::string& path) {
  if (path.empty()) return REE_FAIL(Status::kInvalidArgument, "--receipt-path is empty");
  struct stat info {};
  if (::stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode)) {
    return REE_FAIL(Status::kInvalidArgument, "--receipt-path '%s' is a directory",
                    printableText(path).c_str());
  }
  size_t slash = path.find_last_of('/');
  std::string directory = slash == std::string::npos ? "." : path.substr(0, slash + 1);
  if (::stat(directory.c_str(), &info) != 0 || !S_ISDIR(info.st_mode)) {
    return REE_FAIL(Status::kInvalidArgument,
                    "--receipt-path '%s': no directory '%s' to write it in",
                    printableText(path).c_str(), printableText(directory).c_str());
  }
  return Status::kSuccess;
}

Status readStageLists(const Flags& flags, EngineOptions* engine) {
  if (flags.given("partition-layers")) {
    REE_RETURN_IF_ERROR(
        partitioner::parseLayerList(flags.text("partition-layers"), &engine->partition_layers));
    if (static_cast<int>(engine->partition_layers.size()) != engine->n_partitions) {
      return REE_FAIL(Status::kInvalidArgument,
                      "--partition-layers lists %zu stages but --n-partitions is %d",
                      engine->partition_layers.size(), engine->n_partitions);
    }
  }
  if (flags.given("stage-devices")) {
    REE_RETURN_IF_ERROR(parseDeviceList(flags.text("stage-devices"), &engine->stage_devices));
    if (static_cast<int>(engine->stage_devices.size()) != engine->n_partitions) {
      return REE_FAIL(Status::kInvalidArgument,
                      "--stage-devices lists %zu devices but --n-partitions is %d",
                      engine->stage_devices.size(), engine->n_partitions);
    }
  }
  return Status::kSuccess;
}

Status readPipelineFlags(const Flags& flags, LaunchOptions* out) {
  EngineOptions& engine = out->engine;
  REE_RETURN_IF_ERROR(flags.integer("n-partitions", 1, 4096, &engine.n_partitions));
  REE_RETURN_IF_ERROR(readStageLists(flags, &engine));
  REE_RETURN_IF_ERROR(flags.integer("micro-batches", 0, 65536, &engine.micro_batches));
  double budget_gib = 0;
  REE_RETURN_IF_ERROR(flags.real("memory-budget-gib", 0.0, 1e6, false, &budget_gib));
  engine.memory_budget_bytes = static_cast<int64_t>(budget_gib * 1073741824.0);
  out->transport = flags.text("transport");
  if (out->transport != "auto" && out->transport != "nccl" && out->transport != "mpi") {
    return REE_FAIL(Status::kInvalidArgument, "--transport '%s' is not one of auto, nccl, mpi",
                    printableText(out->transport, 40).c_str());
  }
  REE_RETURN_IF_ERROR(flags.real("comm-timeout", 0.1, 86400.0, false, &out->comm_timeout_s));
  out->plan_only = flags.given("plan");
  engine.trace_layer_hashes = flags.given("trace-hashes");
  if (flags.given("receipt-path")) {
    out->receipt_path = flags.text("receipt-path");
    REE_RETURN_IF_ERROR(checkReceiptPath(out->receipt_path));
  }
  return Status::kSuccess;
}

// The per-request flags (every request starts as a copy of `base`).
Status readGenerationFlags(const Flags& flags, GenerationRequest* base) {
  REE_RETURN_IF_ERROR(flags.integer("max-new-tokens", 1, kIntMax, &base->max_new_tokens));
  double temperature = 0;
  double top_p = 1;
  REE_RETURN_IF_ERROR(flags.real("temperature", 0.0, 1e4, false, &temperature));
  REE_RETURN_IF_ERROR(flags.integer("top-k", 0, kIntMax, &base->sampling.top_k));
  REE_RETURN_IF_ERROR(flags.real("top-p", 0.0, 1.0, true, &top_p));
  REE_RETURN_IF_ERROR(parseUint64Flag("--seed", flags.text("seed"), &base->sampling.seed));
  base->sampling.temperature = static_cast<float>(temperature);
  base->sampling.top_p = static_cast<float>(top_p);
  if (!(base->sampling.top_p > 0.0f)) {  // a positive double below FLT_TRUE_MIN rounds to 0
    return REE_FAIL(Status::kInvalidArgument,
                    "--top-p '%s': expected a finite number in (0, 1] (rounds to 0 in float32)",
                    printableText(flags.text("top-p"), 60).c_str());
  }
  base->add_special_tokens = !flags.given("no-special-tokens");
  return Status::kSuccess;
}

PromptFlags promptFlags(const Flags& flags, const std::string& model) {
  PromptFlags prompt;
  prompt.has_text = flags.given("prompt-text");
  prompt.has_ids = flags.given("prompt-ids");
  prompt.has_file = flags.given("prompt-file");
  prompt.has_chat = flags.given("chat");
  prompt.has_system = flags.given("system");
  prompt.given =
      int(prompt.has_text) + int(prompt.has_ids) + int(prompt.has_file) + int(prompt.has_chat);
  if (prompt.has_chat) prompt.chat = flags.text("chat");
  if (prompt.has_system) prompt.system = flags.text("system");
  prompt.model = model;
  if (prompt.has_text) prompt.text = flags.text("prompt-text");
  if (prompt.has_ids) prompt.ids = flags.text("prompt-ids");
  if (prompt.has_file) prompt.file = flags.text("prompt-file");
  return prompt;
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
  try {
    cxxopts::Options options = makeLaunchOptions();
    out->help_text = launchHelpText(options);
    cxxopts::ParseResult parsed;
    REE_RETURN_IF_ERROR(parseArguments(options, argc, argv, &parsed));
    Flags flags(parsed);
    out->help = flags.given("help");
    out->version = flags.given("version");
    if (out->help || out->version) return Status::kSuccess;
    // Every flag's value is checked, also under --plan (which needs no prompt).
    REE_RETURN_IF_ERROR(readModelFlags(flags, &out->engine));
    REE_RETURN_IF_ERROR(readExecutionFlags(flags, out));
    REE_RETURN_IF_ERROR(readPipelineFlags(flags, out));
    GenerationRequest base;
    REE_RETURN_IF_ERROR(readGenerationFlags(flags, &base));
    if (out->plan_only) return Status::kSuccess;
    return buildRequests(promptFlags(flags, out->engine.model), base, &out->requests);
  } catch (const std::exception& error) {
    return REE_FAIL(Status::kInvalidArgument, "%s (see ree-launch --help)",
                    plainQuotes(error.what()).c_str());
  }
}

}  // namespace ree::launcher
