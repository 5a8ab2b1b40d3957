// ree::Engine: creation, the accessors and loading the stages. The other jobs live beside it
// (engine_state.h lists them).
#include "ree/models/engine.h"

#include <openssl/evp.h>

#include "engine_state.h"
#include "ree/core/log.h"

namespace ree {

using models::CausalLM;
using models::LocalStage;

std::string sha256Hex(const void* data, size_t bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_Digest(data, bytes, digest, &length, EVP_sha256(), nullptr);
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < length; ++i) {
    out += hex[digest[i] >> 4];
    out += hex[digest[i] & 15];
  }
  return out;
}

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Engine::~Engine() = default;

const models::ModelConfig& Engine::config() const {
  return impl_->config;
}
const models::Tokenizer* Engine::tokenizer() const {
  return impl_->tokenizer.get();
}
const EngineOptions& Engine::options() const {
  return impl_->options;
}
const std::string& Engine::modelDirectory() const {
  return impl_->directory;
}
int Engine::maxContext() const {
  return impl_->max_context;
}
int Engine::kvCacheBlocks() const {
  return impl_->kv_blocks;
}
int Engine::kvCacheBlockSize() const {
  return impl_->kv_block_size;
}
int64_t Engine::kvPreemptions() const {
  return impl_->kv_preemptions;
}
int64_t Engine::kvPrefixHitTokens() const {
  return impl_->kv_prefix_hit_tokens;
}
int64_t Engine::lookaheadSteps() const {
  return impl_->lookahead_steps;
}
int64_t Engine::graphSteps() const {
  int64_t steps = 0;
  for (const models::LocalStage& stage : impl_->stages)
    steps += stage.model->graphReplayedSteps();
  return steps;
}
int Engine::kvCacheBlocksUsed() const {
  return impl_->kv_blocks_used.load(std::memory_order_relaxed);
}
std::vector<int64_t> Engine::eosTokenIds() const {
  return impl_->eos;
}
const std::vector<partitioner::Stage>& Engine::plan() const {
  return impl_->plan;
}

namespace models {

Status EngineState::loadStage(const partitioner::Stage& stage, Device device) {
  LocalStage local;
  local.stage = stage;
  REE_RETURN_IF_ERROR(setCurrentDevice(device));
  Status status =
      createOperationSet(options.operation_set, device, options.repops_spec, &local.ops);
  if (status != Status::kSuccess &&
      options.names.operation_set != EngineOptionNames().operation_set) {
    return setError(status, nullptr, 0, "%s '%s': %s", options.names.operation_set.c_str(),
                    operationSetName(options.operation_set), lastErrorMessage());
  }
  REE_RETURN_IF_ERROR(status);
  LoadOptions load;
  load.weight_dtype = options.weight_dtype;
  LayerRange range{stage.first_layer, stage.end_layer, stage.embedding, stage.head};
  REE_RETURN_IF_ERROR(CausalLM::load(config, *checkpoint, *local.ops, range, &local.model, load));
  local.model->setStepGraphs(options.cuda_graphs);
  stages.push_back(std::move(local));
  return Status::kSuccess;
}

Status EngineState::loadStages() {
  REE_RETURN_IF_ERROR(loadStagesOnDevices());
  // CPU stages use checkpoint memory in place; GPU stages hold copies, so generated values can go.
  bool all_gpu = true;
  for (const LocalStage& stage : stages)
    all_gpu = all_gpu && stage.ops->device().isCuda();
  if (all_gpu) checkpoint->releaseSyntheticData();
  return Status::kSuccess;
}

// Every stage's weights first, then the KV pool's size from the memory they left.
Status EngineState::loadStagesOnDevices() {
  if (transport != nullptr) {
    REE_RETURN_IF_ERROR(loadStage(plan[transport->rank()], transport->device()));
  } else {
    for (size_t s = 0; s < plan.size(); ++s) {
      Device device = options.stage_devices.empty() ? options.device : options.stage_devices[s];
      REE_RETURN_IF_ERROR(loadStage(plan[s], device));
    }
  }
  return chooseKvBlocks();
}

}  // namespace models

Status Engine::create(const EngineOptions& options, std::unique_ptr<Engine>* out) {
  REE_CHECK_ARG(out != nullptr, "Engine::create: out is null");
  REE_CHECK_ARG(!options.model.empty(),
                "--model is required (a model directory or builtin:tiny-llama)");
  REE_CHECK_ARG(options.max_batch >= 1, "%s must be >= 1 (got %d)", options.names.max_batch.c_str(),
                options.max_batch);
  REE_CHECK_ARG(options.max_context >= 0, "%s must be >= 0 (got %d)",
                options.names.max_context.c_str(), options.max_context);
  REE_CHECK_ARG(options.prefill_chunk >= 0, "%s must be >= 0 (got %d)",
                options.names.prefill_chunk.c_str(), options.prefill_chunk);
  REE_CHECK_ARG(options.micro_batches >= 0, "--micro-batches must be >= 0 (got %d)",
                options.micro_batches);
  REE_CHECK_ARG(options.repops_spec == kDefaultRepOpsSpec ||
                    options.operation_set == OperationSetKind::kReproducible,
                "%s %s applies to the reproducible operation set only (%s is %s)",
                options.names.repops_spec.c_str(), repOpsSpecName(options.repops_spec),
                options.names.operation_set.c_str(), operationSetName(options.operation_set));
  auto impl = std::make_unique<Impl>();
  Impl& m = *impl;
  m.options = options;
  m.transport = options.transport;
  if (m.transport == nullptr) {
    REE_RETURN_IF_ERROR(m.createLocal());
    REE_RETURN_IF_ERROR(m.loadStages());
    REE_RETURN_IF_ERROR(m.allocateKvCaches());
  } else {
    // Every rank must fail together (with the first failing rank's message), never leave its
    // peers waiting: agree after each phase that can fail on some ranks only.
    Status local = m.createLocal();
    REE_RETURN_IF_ERROR(
        m.transport->agree(local, local == Status::kSuccess ? "" : lastErrorMessage()));
    REE_RETURN_IF_ERROR(m.checkSameRun());
    local = m.loadStages();
    REE_RETURN_IF_ERROR(
        m.transport->agree(local, local == Status::kSuccess ? "" : lastErrorMessage()));
    REE_RETURN_IF_ERROR(m.agreeKvBlocks());
    local = m.allocateKvCaches();
    REE_RETURN_IF_ERROR(
        m.transport->agree(local, local == Status::kSuccess ? "" : lastErrorMessage()));
    // A rank whose allocation had to shrink its pool: every rank uses the smallest.
    REE_RETURN_IF_ERROR(m.agreeKvBlocks());
  }
  if (options.decode_lookahead && !m.lookaheadPossible() && m.rank() == 0) {
    logMessage(LogLevel::kWarning, "decode lookahead is off for this run: %s",
               m.lookaheadUnavailableReason());
  }
  out->reset(new Engine(std::move(impl)));
  return Status::kSuccess;
}

Status Engine::planStages(const EngineOptions& options, std::vector<partitioner::Stage>* stages) {
  REE_CHECK_ARG(stages != nullptr, "Engine::planStages: stages is null");
  Impl m;
  m.options = options;
  // Plan as the pipeline would: one stage per process when a world size is given.
  m.transport = options.transport;
  REE_RETURN_IF_ERROR(m.createLocal());
  *stages = m.plan;
  return Status::kSuccess;
}

}  // namespace ree
