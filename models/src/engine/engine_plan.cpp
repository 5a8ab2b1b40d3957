// The run's plan: which model directory, the context in use, the pipeline's stages (the
// partitioner, bounded by the devices' memory), and the fingerprint the ranks of a multi-process
// pipeline compare before they run.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "engine_resident_bytes.h"
#include "engine_state.h"
#include "ree/core/file.h"
#include "ree/core/text.h"
#include "ree/models/builtin.h"
#include "ree/models/gguf_config.h"
#include "ree/models/gguf_source.h"
#include "ree/models/gguf_tokenizer.h"

namespace ree::models {
namespace {

// The fingerprint reads config.json and tokenizer.json again (after their loaders accepted them),
// within the loaders' limits, so that a file swapped meanwhile can neither block nor exhaust
// memory.
constexpr uint64_t kMaxConfigFileBytes = uint64_t{16} << 20;
constexpr uint64_t kMaxTokenizerFileBytes = uint64_t{128} << 20;

// config.json, a NUL, then tokenizer.json ("" when the model has none).
Status modelFilesText(const std::string& directory, std::string* text) {
  if (isGgufPath(directory)) return readGgufConfigJson(directory, text);
  REE_RETURN_IF_ERROR(
      readRegularFile(directory + "/config.json", kMaxConfigFileBytes, "config.json", text));
  *text += '\0';
  const std::string tokenizer_path = directory + "/tokenizer.json";
  if (!std::filesystem::exists(tokenizer_path)) return Status::kSuccess;
  std::string tokenizer;
  REE_RETURN_IF_ERROR(
      readRegularFile(tokenizer_path, kMaxTokenizerFileBytes, "tokenizer.json", &tokenizer));
  *text += tokenizer;
  return Status::kSuccess;
}

// The KV cache of one full-context sequence over all stages must be a 64-bit byte count (the
// partitioner sums and compares such counts): max_context x (bytes per token of every layer).
Status checkKvTotalFits(const std::vector<partitioner::Node>& graph, int64_t kv_tokens,
                        const EngineOptions& options, int max_context) {
  int64_t total = 0;
  for (const partitioner::Node& node : graph) {
    int64_t bytes = 0;
    if (!checkedMultiply(node.kv_bytes_per_token, kv_tokens, &bytes) ||
        __builtin_add_overflow(total, bytes, &total) ||
        __builtin_add_overflow(total, node.parameter_bytes, &total)) {
      return REE_FAIL(Status::kOutOfMemory,
                      "%s %d: the KV cache of one sequence would need more than 2^63 bytes",
                      options.names.max_context.c_str(), max_context);
    }
  }
  return Status::kSuccess;
}

// Every tensor's name, dtype, shape and (real checkpoints) first and last 64 bytes.
Status weightsFingerprintText(const Checkpoint& checkpoint, std::string* weights) {
  for (const std::string& name : checkpoint.tensorNames()) {
    TensorInfo info;
    REE_RETURN_IF_ERROR(checkpoint.info(name, &info));
    *weights += name;
    *weights += '\0';
    *weights += dtypeName(info.dtype);
    for (int64_t d : info.shape)
      *weights += "," + std::to_string(d);
    TensorView view;
    if (!checkpoint.isSynthetic() && checkpoint.view(name, &view) == Status::kSuccess &&
        view.bytes > 0) {
      const char* data = static_cast<const char*>(view.data);
      size_t edge = std::min<size_t>(64, view.bytes);
      weights->append(data, edge);
      weights->append(data + view.bytes - edge, edge);
    }
    *weights += '\n';
  }
  return Status::kSuccess;
}

}  // namespace

Status EngineState::createLocal() {
  REE_RETURN_IF_ERROR(openModel());
  REE_RETURN_IF_ERROR(chooseContext());
  return computePlan();
}

// The model directory (builtin models materialised, synthetic:DIR's weights generated), its
// configs, tokenizer and checkpoint.
Status EngineState::openModel() {
  directory = options.model;
  const std::string synthetic_prefix = "synthetic:";
  bool synthetic = options.model.rfind(synthetic_prefix, 0) == 0;
  if (synthetic) {
    directory = options.model.substr(synthetic_prefix.size());
    if (!std::filesystem::exists(directory + "/config.json")) {
      return REE_FAIL(Status::kIoError,
                      "--model %s: expected a directory with config.json after 'synthetic:'",
                      options.model.c_str());
    }
  } else if (isBuiltinModel(options.model)) {
    REE_RETURN_IF_ERROR(materializeBuiltinModel(options.model, &directory));
  } else if (!std::filesystem::is_directory(options.model) && !isGgufPath(options.model)) {
    return REE_FAIL(Status::kIoError,
                    "--model %s: not a directory (expected a Hugging Face model "
                    "directory with config.json and *.safetensors, a .gguf file, or "
                    "builtin:tiny-llama)",
                    options.model.c_str());
  }
  if (!synthetic && isGgufPath(directory)) {  // a .gguf file: config from its metadata
    REE_RETURN_IF_ERROR(loadGgufModelConfig(directory, &config, &generation));
  } else {
    REE_RETURN_IF_ERROR(loadModelDirectoryConfigs(directory, &config, &generation));
  }
  eos = effectiveEosTokenIds(config, generation);
  if (!synthetic && isGgufPath(directory)) {  // its tokenizer.ggml.* metadata, if any
    REE_RETURN_IF_ERROR(loadGgufTokenizer(directory, &tokenizer));
  }
  std::string tokenizer_path = directory + "/tokenizer.json";
  if (std::filesystem::exists(tokenizer_path)) {
    REE_RETURN_IF_ERROR(Tokenizer::load(tokenizer_path, &tokenizer));
    // An id beyond the embedding table would index past it: the tokenizer is not this model's.
    if (tokenizer->vocabSize() > config.vocab_size) {
      return REE_FAIL(Status::kInvalidArgument,
                      "tokenizer.json '%s': its ids reach %d, beyond config.json's vocab_size "
                      "%lld (the tokenizer does not belong to this model)",
                      printableText(tokenizer_path, 400).c_str(), tokenizer->vocabSize() - 1,
                      static_cast<long long>(config.vocab_size));
    }
  }
  if (synthetic) return Checkpoint::synthetic(config, /*seed=*/0, &checkpoint);
  CheckpointOptions load_rules;
  load_rules.allow_extra_tensors = options.allow_extra_tensors;
  load_rules.allow_non_finite_weights = options.allow_non_finite_weights;
  return Checkpoint::open(directory, &checkpoint, load_rules);
}

// Tokens per sequence: --max-context, else min(max_position_embeddings, 4096).
Status EngineState::chooseContext() {
  int64_t context = std::min<int64_t>(config.max_position_embeddings, 4096);
  if (options.max_context > 0) {
    if (options.max_context > config.max_position_embeddings) {
      return REE_FAIL(Status::kInvalidArgument,
                      "%s %d exceeds the model's max_position_embeddings %lld",
                      options.names.max_context.c_str(), options.max_context,
                      static_cast<long long>(config.max_position_embeddings));
    }
    context = options.max_context;
  }
  max_context = static_cast<int>(context);
  return Status::kSuccess;
}

// The per-stage budget when --memory-budget-gib is not given: the smallest device the stages run
// on bounds every stage, and stages sharing one device share its memory.
Status EngineState::defaultStageBudget(int64_t* budget) const {
  std::vector<Device> devices = options.stage_devices;
  if (devices.empty()) devices.assign(1, transport ? transport->device() : options.device);
  *budget = 0;
  for (const Device& device : devices) {
    int64_t total = 0;
    REE_RETURN_IF_ERROR(deviceMemoryBytes(device, &total));
    if (*budget == 0 || total < *budget) *budget = total;
  }
  if (options.stage_devices.empty() && transport == nullptr) *budget /= options.n_partitions;
  return Status::kSuccess;
}

Status EngineState::computePlan() {
  const EngineOptions& o = options;
  int n = o.n_partitions;
  REE_CHECK_ARG(n >= 1, "--n-partitions must be >= 1 (got %d)", n);
  if (transport != nullptr && transport->size() != n) {
    return REE_FAIL(Status::kInvalidArgument,
                    "--n-partitions %d does not match the MPI world size %d (run mpirun -n %d, one "
                    "rank per stage)",
                    n, transport->size(), n);
  }
  if (!o.stage_devices.empty() && static_cast<int>(o.stage_devices.size()) != n) {
    return REE_FAIL(Status::kInvalidArgument, "--stage-devices lists %zu devices for %d partitions",
                    o.stage_devices.size(), n);
  }
  TensorInfo first;
  const std::string& any = checkpoint->tensorNames().front();
  REE_RETURN_IF_ERROR(checkpoint->info(any, &first));
  int weight_bytes = o.weight_dtype ? static_cast<int>(::ree::dtypeSize(*o.weight_dtype))
                                    : static_cast<int>(dtypeSize(first.dtype));
  std::vector<partitioner::Node> graph;
  for (const NodeCost& node : modelGraphCosts(config, weight_bytes)) {
    graph.push_back(
        {node.name, node.parameter_bytes, node.parameter_bytes, node.kv_bytes_per_token});
  }
  // A GGUF model: each node holds (and reads every step) its tensors' resident bytes, blocks
  // included, not 4 bytes per parameter.
  const bool fp32_weights =
      o.weight_dtype ? *o.weight_dtype == ::ree::DType::kF32 : first.dtype == DType::kF32;
  std::vector<int64_t> resident;
  if (ggufResidentNodeBytes(config, *checkpoint, keepsGgufBlocks(o, fp32_weights), weight_bytes,
                            &resident)) {
    for (size_t i = 0; i < graph.size(); ++i)
      graph[i].cost = graph[i].parameter_bytes = resident[i];
  }
  partitioner::Options partition;
  partition.n = n;
  // The KV pool is sized after loading from what memory is left; a stage must hold at least one
  // sequence of the full context beside its weights.
  partition.kv_tokens = max_context;
  REE_RETURN_IF_ERROR(checkKvTotalFits(graph, partition.kv_tokens, o, max_context));
  partition.explicit_layers = o.partition_layers;
  partition.memory_budget_bytes = o.memory_budget_bytes;
  if (partition.memory_budget_bytes == 0) {
    REE_RETURN_IF_ERROR(defaultStageBudget(&partition.memory_budget_bytes));
  }
  Status status = partitioner::partition(graph, partition, &plan);
  if (status != Status::kOutOfMemory) return status;
  return explainNoFit(status, partition.memory_budget_bytes);
}

// The partitioner found no split within the budget: name the context (a stage holds at least one
// sequence of it) and the budget it was held to.
Status EngineState::explainNoFit(Status status, int64_t stage_budget) const {
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  char budget[96];
  if (options.memory_budget_bytes > 0) {
    std::snprintf(budget, sizeof(budget), "--memory-budget-gib %.6g",
                  static_cast<double>(options.memory_budget_bytes) / kGiB);
  } else {
    std::snprintf(budget, sizeof(budget), "the device memory (%.2f GiB per stage)",
                  static_cast<double>(stage_budget) / kGiB);
  }
  return setError(status, nullptr, 0, "the weights and one sequence of %s %d within %s: %s",
                  options.names.max_context.c_str(), max_context, budget, lastErrorMessage());
}

Status EngineState::runFingerprint(RunFingerprint* out) const {
  std::string files;
  REE_RETURN_IF_ERROR(modelFilesText(directory, &files));
  out->config = sha256Digest(files.data(), files.size());
  std::string weights;
  REE_RETURN_IF_ERROR(weightsFingerprintText(*checkpoint, &weights));
  out->weights = sha256Digest(weights.data(), weights.size());
  const EngineOptions& o = options;
  std::string text = std::string(operationSetName(o.operation_set)) + "|" +
                     repOpsSpecName(o.repops_spec) + "|" +
                     (o.weight_dtype ? ::ree::dtypeName(*o.weight_dtype) : "checkpoint") + "|" +
                     std::to_string(o.max_batch) + "|" + std::to_string(max_context) + "|" +
                     std::to_string(kvBlockSizeFor(o.operation_set)) + "|" +
                     std::to_string(o.trace_layer_hashes) + "|";
  for (const partitioner::Stage& stage : plan)
    text += std::to_string(stage.first_layer) + "-" + std::to_string(stage.end_layer) + ",";
  out->options = sha256Digest(text.data(), text.size());
  return Status::kSuccess;
}

// The ranks of a multi-process pipeline compare their fingerprints with rank 0's.
Status EngineState::checkSameRun() const {
  RunFingerprint mine;
  Status local = runFingerprint(&mine);
  REE_RETURN_IF_ERROR(transport->agree(local, local == Status::kSuccess ? "" : lastErrorMessage()));
  std::vector<uint8_t> bytes(sizeof(RunFingerprint));
  std::memcpy(bytes.data(), &mine, sizeof(mine));
  std::vector<std::vector<uint8_t>> all;
  REE_RETURN_IF_ERROR(transport->allGather(bytes, &all));
  for (size_t r = 0; r < all.size(); ++r) {
    if (all[r].size() != sizeof(RunFingerprint)) {
      return REE_FAIL(Status::kCommError, "rank %zu sent a fingerprint of %zu bytes", r,
                      all[r].size());
    }
  }
  RunFingerprint first;
  std::memcpy(&first, all[0].data(), sizeof(first));
  for (size_t r = 1; r < all.size(); ++r) {
    RunFingerprint other;
    std::memcpy(&other, all[r].data(), sizeof(other));
    const char* what =
        other.config != first.config     ? "config.json / tokenizer.json"
        : other.weights != first.weights ? "weights"
        : other.options != first.options
            ? "run options (operation set, dtype, batch, context, KV block size, trace, plan)"
            : nullptr;
    if (what != nullptr) {
      return REE_FAIL(Status::kMismatch,
                      "rank %zu was given a different model or options than rank 0: its %s "
                      "differ; every rank must run the same --model with the same flags",
                      r, what);
    }
  }
  return Status::kSuccess;
}

}  // namespace ree::models
