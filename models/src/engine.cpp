#include "ree/models/engine.h"

#include <openssl/evp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "async_digester.h"
#include "generation_sampling.h"
#include "pipeline_step.h"
#include "ree/core/log.h"
#include "ree/models/builtin.h"
#include "ree/models/causal_lm.h"
#include "ree/models/checkpoint.h"
#include "ree/models/tokenizer.h"

namespace ree {

using models::CausalLM;
using models::Checkpoint;
using models::Tokenizer;

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

namespace {

// What every rank of a multi-process pipeline must agree on before it runs: the model (config,
// tokenizer and the weights' identity: every tensor's name, dtype, shape and first and last bytes,
// cheap to read from any rank whatever stage it holds) and the options that change the result.
struct RunFingerprint {
  models::Digest config{};
  models::Digest weights{};
  models::Digest options{};
};

}  // namespace

// One pipeline stage held by this process: its operation set and its part of the model.
struct LocalStage {
  partitioner::Stage stage;
  std::unique_ptr<OperationSet> ops;
  std::unique_ptr<CausalLM> model;
};

struct Engine::Impl {
  EngineOptions options;
  std::string directory;
  models::ModelConfig config;
  models::GenerationConfig generation;
  std::unique_ptr<Checkpoint> checkpoint;
  std::unique_ptr<Tokenizer> tokenizer;
  std::vector<int64_t> eos;
  int max_context = 0;
  std::vector<partitioner::Stage> plan;
  // Single process: every stage. Multi-process: this rank's stage only.
  std::vector<LocalStage> stages;
  StageTransport* transport = nullptr;  // null: single process
  bool shut_down = false;
  uint64_t next_step_id = 0;
  // Steps submitted and not yet collected (single process: computed at submission).
  std::deque<models::StepOutput> local_outputs;
  std::deque<uint64_t> in_flight;
  // Logits rows are hashed off the critical path (async_digester.h): the last stage queues them
  // and the digests are taken later, by step id (single process: ticket of each step).
  std::unique_ptr<models::AsyncDigester> digester;
  std::map<uint64_t, uint64_t> digest_tickets;
  // Host-side phases of every step, printed to stderr at destruction when REE_PROFILE_STEPS is
  // set (a diagnostic for benchmarks: where a step's wall time goes besides the GPU's kernels).
  struct StepProfile {
    bool enabled = std::getenv("REE_PROFILE_STEPS") != nullptr;
    long seen = 0;   // steps finished; the first (a prefill) is left out of the means
    long steps = 0;  // steps measured
    double enqueue = 0, wait = 0, logits = 0, hash_sample = 0, between = 0;
    std::chrono::steady_clock::time_point last_end;
    ~StepProfile() {
      if (!enabled || steps == 0) return;
      logMessage(LogLevel::kWarning,
                 "step profile, mean of %ld steps (ms): enqueue layers %.3f | wait for "
                 "layers %.3f | logits + copy to host %.3f | sample + queue hash %.3f | between "
                 "steps %.3f",
                 steps, 1e3 * enqueue / steps, 1e3 * wait / steps, 1e3 * logits / steps,
                 1e3 * hash_sample / steps, 1e3 * between / steps);
    }
  } profile;

  int rank() const { return transport ? transport->rank() : 0; }
  int nStages() const { return static_cast<int>(plan.size()); }
  bool multiProcess() const { return transport != nullptr && nStages() > 1; }

  Status createLocal();
  Status computePlan();
  Status loadStage(const partitioner::Stage& stage, Device device);
  Status loadStages();
  Status loadStagesOnDevices();
  Status runFingerprint(RunFingerprint* out) const;
  Status checkSameRun() const;
  // wait = false returns once the stage's work is queued (multi-process stages: the send of
  // `hidden` is ordered after it on the device); profiling always waits, to time the GPU.
  Status computeStage(LocalStage& stage, const models::StepWork& work, Tensor& hidden,
                      std::vector<std::vector<models::Digest>>* layer_digests, bool wait = true);
  Status finishStep(LocalStage& stage, const models::StepWork& work, const Tensor& hidden,
                    models::StepOutput* out, uint64_t* digest_ticket);
  // Multi-process: whether a stage sends the step header before queueing its own work.
  bool earlyHeader(const models::StepWork& work) const {
    return !work.trace && transport != nullptr && transport->queuesReceives();
  }
  Status takeLogitsDigests(uint64_t step_id, std::vector<models::Digest>* digests);
  // Digests queued by a generate() or replay() that failed before taking them.
  void dropStaleDigests() {
    std::vector<models::Digest> unused;
    for (const auto& [step, ticket] : digest_tickets)
      digester->take(ticket, &unused);
    digest_tickets.clear();
  }
  Status submit(models::StepWork work);
  Status collect(models::StepOutput* out);
};

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
std::vector<int64_t> Engine::eosTokenIds() const {
  return impl_->eos;
}

namespace {

using Clock = std::chrono::steady_clock;
using models::Digest;
using models::StepOutput;
using models::StepWork;

// Message tags between stages (StageTransport tags are the caller's).
constexpr int kTagStep = 1;     // stage k -> k+1: step header (then the activation tensor)
constexpr int kTagResult = 2;   // last stage -> stage 0: sampled tokens (and layer hashes)
constexpr int kTagDigests = 3;  // last stage -> stage 0: the step's logits hashes, sent after

std::string readFileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

}  // namespace

Status Engine::Impl::runFingerprint(RunFingerprint* out) const {
  const Impl& m = *this;
  std::string config = readFileBytes(m.directory + "/config.json");
  std::string tokenizer = readFileBytes(m.directory + "/tokenizer.json");
  config += '\0';
  config += tokenizer;
  out->config = models::sha256Digest(config.data(), config.size());
  std::string weights;
  for (const std::string& name : m.checkpoint->tensorNames()) {
    models::TensorInfo info;
    REE_RETURN_IF_ERROR(m.checkpoint->info(name, &info));
    weights += name;
    weights += '\0';
    weights += models::dtypeName(info.dtype);
    for (int64_t d : info.shape)
      weights += "," + std::to_string(d);
    models::TensorView view;
    if (!m.checkpoint->isSynthetic() && m.checkpoint->view(name, &view) == Status::kSuccess &&
        view.bytes > 0) {
      const char* data = static_cast<const char*>(view.data);
      size_t edge = std::min<size_t>(64, view.bytes);
      weights.append(data, edge);
      weights.append(data + view.bytes - edge, edge);
    }
    weights += '\n';
  }
  out->weights = models::sha256Digest(weights.data(), weights.size());
  const EngineOptions& o = m.options;
  std::string options = std::string(operationSetName(o.operation_set)) + "|" +
                        (o.weight_dtype ? dtypeName(*o.weight_dtype) : "checkpoint") + "|" +
                        std::to_string(o.max_batch) + "|" + std::to_string(m.max_context) + "|" +
                        std::to_string(o.trace_layer_hashes) + "|";
  for (const partitioner::Stage& stage : m.plan)
    options += std::to_string(stage.first_layer) + "-" + std::to_string(stage.end_layer) + ",";
  out->options = models::sha256Digest(options.data(), options.size());
  return Status::kSuccess;
}

// The ranks of a multi-process pipeline compare their fingerprints with rank 0's.
Status Engine::Impl::checkSameRun() const {
  const Impl& m = *this;
  RunFingerprint mine;
  Status local = runFingerprint(&mine);
  REE_RETURN_IF_ERROR(
      m.transport->agree(local, local == Status::kSuccess ? "" : lastErrorMessage()));
  std::vector<uint8_t> bytes(sizeof(RunFingerprint));
  std::memcpy(bytes.data(), &mine, sizeof(mine));
  std::vector<std::vector<uint8_t>> all;
  REE_RETURN_IF_ERROR(m.transport->allGather(bytes, &all));
  for (size_t r = 1; r < all.size(); ++r) {
    RunFingerprint other;
    if (all[r].size() != sizeof(other)) {
      return REE_FAIL(Status::kCommError, "rank %zu sent a fingerprint of %zu bytes", r,
                      all[r].size());
    }
    std::memcpy(&other, all[r].data(), sizeof(other));
    RunFingerprint first;
    std::memcpy(&first, all[0].data(), sizeof(first));
    const char* what = other.config != first.config     ? "config.json / tokenizer.json"
                       : other.weights != first.weights ? "weights"
                       : other.options != first.options
                           ? "run options (operation set, dtype, batch, context, trace, plan)"
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

Status Engine::Impl::computePlan() {
  Impl& m = *this;
  const EngineOptions& o = m.options;
  int n = o.n_partitions;
  REE_CHECK_ARG(n >= 1, "--n-partitions must be >= 1 (got %d)", n);
  if (m.transport != nullptr && m.transport->size() != n) {
    return REE_FAIL(Status::kInvalidArgument,
                    "--n-partitions %d does not match the MPI world size %d (run mpirun -n %d, one "
                    "rank per stage)",
                    n, m.transport->size(), n);
  }
  if (!o.stage_devices.empty() && static_cast<int>(o.stage_devices.size()) != n) {
    return REE_FAIL(Status::kInvalidArgument, "--stage-devices lists %zu devices for %d partitions",
                    o.stage_devices.size(), n);
  }
  models::TensorInfo first;
  const std::string& any = m.checkpoint->tensorNames().front();
  REE_RETURN_IF_ERROR(m.checkpoint->info(any, &first));
  int weight_bytes = o.weight_dtype ? static_cast<int>(dtypeSize(*o.weight_dtype))
                                    : static_cast<int>(models::dtypeSize(first.dtype));
  std::vector<partitioner::Node> graph;
  for (const models::NodeCost& node : models::modelGraphCosts(m.config, weight_bytes)) {
    graph.push_back(
        {node.name, node.parameter_bytes, node.parameter_bytes, node.kv_bytes_per_token});
  }
  partitioner::Options options;
  options.n = n;
  options.kv_tokens = static_cast<int64_t>(o.max_batch) * m.max_context;
  options.explicit_layers = o.partition_layers;
  options.memory_budget_bytes = o.memory_budget_bytes;
  if (options.memory_budget_bytes == 0) {
    // The smallest device the stages run on bounds every stage.
    std::vector<Device> devices = o.stage_devices;
    if (devices.empty()) devices.assign(1, m.transport ? m.transport->device() : o.device);
    for (const Device& device : devices) {
      int64_t total = 0;
      REE_RETURN_IF_ERROR(deviceMemoryBytes(device, &total));
      if (options.memory_budget_bytes == 0 || total < options.memory_budget_bytes)
        options.memory_budget_bytes = total;
    }
    // Several stages sharing one device share its memory.
    if (o.stage_devices.empty() && m.transport == nullptr) options.memory_budget_bytes /= n;
  }
  return partitioner::partition(graph, options, &m.plan);
}

Status Engine::Impl::loadStage(const partitioner::Stage& stage, Device device) {
  Impl& m = *this;
  LocalStage local;
  local.stage = stage;
  REE_RETURN_IF_ERROR(setCurrentDevice(device));
  REE_RETURN_IF_ERROR(createOperationSet(m.options.operation_set, device, &local.ops));
  models::LoadOptions load;
  load.weight_dtype = m.options.weight_dtype;
  models::LayerRange range{stage.first_layer, stage.end_layer, stage.embedding, stage.head};
  REE_RETURN_IF_ERROR(
      CausalLM::load(m.config, *m.checkpoint, *local.ops, range, &local.model, load));
  REE_RETURN_IF_ERROR(local.model->allocateCache(m.options.max_batch, m.max_context));
  m.stages.push_back(std::move(local));
  return Status::kSuccess;
}

// Everything of create() that can fail differently on different ranks.
Status Engine::Impl::createLocal() {
  Impl& m = *this;
  const EngineOptions& options = m.options;
  m.directory = options.model;
  const std::string synthetic_prefix = "synthetic:";
  bool synthetic = options.model.rfind(synthetic_prefix, 0) == 0;
  if (synthetic) {
    m.directory = options.model.substr(synthetic_prefix.size());
    if (!std::filesystem::exists(m.directory + "/config.json")) {
      return REE_FAIL(Status::kIoError,
                      "--model %s: expected a directory with config.json after 'synthetic:'",
                      options.model.c_str());
    }
  } else if (models::isBuiltinModel(options.model)) {
    REE_RETURN_IF_ERROR(models::materializeBuiltinModel(options.model, &m.directory));
  } else if (!std::filesystem::is_directory(options.model)) {
    return REE_FAIL(Status::kIoError,
                    "--model %s: not a directory (expected a Hugging Face model "
                    "directory with config.json and *.safetensors, or builtin:tiny-llama)",
                    options.model.c_str());
  }
  REE_RETURN_IF_ERROR(models::loadModelDirectoryConfigs(m.directory, &m.config, &m.generation));
  m.eos = models::effectiveEosTokenIds(m.config, m.generation);
  std::string tokenizer_path = m.directory + "/tokenizer.json";
  if (std::filesystem::exists(tokenizer_path)) {
    REE_RETURN_IF_ERROR(Tokenizer::load(tokenizer_path, &m.tokenizer));
  }
  if (synthetic) {
    REE_RETURN_IF_ERROR(Checkpoint::synthetic(m.config, /*seed=*/0, &m.checkpoint));
  } else {
    REE_RETURN_IF_ERROR(Checkpoint::open(m.directory, &m.checkpoint));
  }
  int64_t context = std::min<int64_t>(m.config.max_position_embeddings, 4096);
  if (options.max_context > 0) {
    if (options.max_context > m.config.max_position_embeddings) {
      return REE_FAIL(Status::kInvalidArgument,
                      "--max-context %d exceeds the model's max_position_embeddings %lld",
                      options.max_context,
                      static_cast<long long>(m.config.max_position_embeddings));
    }
    context = options.max_context;
  }
  m.max_context = static_cast<int>(context);
  return computePlan();
}

Status Engine::Impl::loadStages() {
  REE_RETURN_IF_ERROR(loadStagesOnDevices());
  // CPU stages use checkpoint memory in place; GPU stages hold copies, so generated values can go.
  bool all_gpu = true;
  for (const LocalStage& stage : stages)
    all_gpu = all_gpu && stage.ops->device().isCuda();
  if (all_gpu) checkpoint->releaseSyntheticData();
  return Status::kSuccess;
}

Status Engine::Impl::loadStagesOnDevices() {
  Impl& m = *this;
  if (m.transport != nullptr) {
    return loadStage(m.plan[m.transport->rank()], m.transport->device());
  }
  for (size_t s = 0; s < m.plan.size(); ++s) {
    Device device = m.options.stage_devices.empty() ? m.options.device : m.options.stage_devices[s];
    REE_RETURN_IF_ERROR(loadStage(m.plan[s], device));
  }
  return Status::kSuccess;
}

Status Engine::create(const EngineOptions& options, std::unique_ptr<Engine>* out) {
  REE_CHECK_ARG(out != nullptr, "Engine::create: out is null");
  REE_CHECK_ARG(!options.model.empty(),
                "--model is required (a model directory or builtin:tiny-llama)");
  REE_CHECK_ARG(options.max_batch >= 1, "--max-batch must be >= 1 (got %d)", options.max_batch);
  REE_CHECK_ARG(options.max_context >= 0, "--max-context must be >= 0 (got %d)",
                options.max_context);
  REE_CHECK_ARG(options.micro_batches >= 0, "--micro-batches must be >= 0 (got %d)",
                options.micro_batches);
  auto impl = std::make_unique<Impl>();
  Impl& m = *impl;
  m.options = options;
  m.transport = options.transport;
  if (m.transport == nullptr) {
    REE_RETURN_IF_ERROR(m.createLocal());
    REE_RETURN_IF_ERROR(m.loadStages());
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
  }
  out->reset(new Engine(std::move(impl)));
  return Status::kSuccess;
}

Status Engine::planStages(const EngineOptions& options, std::vector<partitioner::Stage>* stages) {
  REE_CHECK_ARG(stages != nullptr, "Engine::planStages: stages is null");
  Impl m;
  m.options = options;
  m.transport = nullptr;
  // Plan as the pipeline would: one stage per process when a world size is given.
  if (options.transport != nullptr) m.transport = options.transport;
  REE_RETURN_IF_ERROR(m.createLocal());
  *stages = m.plan;
  return Status::kSuccess;
}

const std::vector<partitioner::Stage>& Engine::plan() const {
  return impl_->plan;
}

// Runs one stage's part of a step: the embedding on the first stage, then its layers, hashing
// each layer's output per trace group when tracing.
Status Engine::Impl::computeStage(LocalStage& stage, const StepWork& work, Tensor& hidden,
                                  std::vector<std::vector<Digest>>* layer_digests, bool wait) {
  CausalLM& model = *stage.model;
  REE_RETURN_IF_ERROR(setCurrentDevice(stage.ops->device()));
  const auto started = Clock::now();
  if (profile.enabled && profile.seen > 0 && stage.stage.embedding) {
    profile.between += std::chrono::duration<double>(started - profile.last_end).count();
  }
  if (stage.stage.embedding) REE_RETURN_IF_ERROR(model.embed(work.ids, work.batch, &hidden));
  CausalLM::LayerObserver observer;
  std::vector<uint8_t> host;
  if (work.trace) {
    observer = [&](int64_t, const Tensor& h) -> Status {
      REE_RETURN_IF_ERROR(stage.ops->synchronize());
      host.resize(h.nbytes());
      REE_RETURN_IF_ERROR(
          copyTensor(h, Tensor::wrap(host.data(), Device::cpu(), h.dtype(), h.shape())));
      size_t row_bytes = h.nbytes() / static_cast<size_t>(h.dim(0));
      std::vector<Digest> groups;
      int32_t begin = 0;
      for (int32_t end : work.trace_group_ends) {
        groups.push_back(models::sha256Digest(host.data() + begin * row_bytes,
                                              static_cast<size_t>(end - begin) * row_bytes));
        begin = end;
      }
      layer_digests->push_back(std::move(groups));
      return Status::kSuccess;
    };
  }
  REE_RETURN_IF_ERROR(model.runLayers(hidden, work.batch, observer));
  if (!profile.enabled || profile.seen == 0) {
    return wait ? stage.ops->synchronize() : Status::kSuccess;
  }
  auto enqueued = Clock::now();
  profile.enqueue += std::chrono::duration<double>(enqueued - started).count();
  Status status = stage.ops->synchronize();
  profile.wait += std::chrono::duration<double>(Clock::now() - enqueued).count();
  return status;
}

// The last stage: logits of the requested rows and the sampled tokens. The rows' SHA-256 is
// queued on the digester (*digest_ticket); the caller takes it when the digests are needed.
Status Engine::Impl::finishStep(LocalStage& stage, const StepWork& work, const Tensor& hidden,
                                StepOutput* out, uint64_t* digest_ticket) {
  out->id = work.id;
  if (work.logits_rows.empty()) return Status::kSuccess;
  const auto started = Clock::now();
  Tensor logits;
  REE_RETURN_IF_ERROR(setCurrentDevice(stage.ops->device()));
  REE_RETURN_IF_ERROR(stage.model->logits(hidden, work.logits_rows, &logits));
  std::vector<float> host(static_cast<size_t>(logits.numel()));
  REE_RETURN_IF_ERROR(
      copyTensor(logits, Tensor::wrap(host.data(), Device::cpu(), DType::kF32, logits.shape())));
  const auto copied = Clock::now();
  int64_t vocab = config.vocab_size;
  for (size_t i = 0; i < work.rows.size(); ++i) {
    int32_t token = 0;
    REE_RETURN_IF_ERROR(models::sampleNextToken(host.data() + i * vocab, vocab,
                                                work.rows[i].sampling, work.rows[i].request,
                                                work.rows[i].step, &token));
    out->tokens.push_back(token);
  }
  if (!digester) {
    digester = std::make_unique<models::AsyncDigester>(models::AsyncDigester::defaultThreads());
  }
  *digest_ticket = digester->submit(std::move(host), work.rows.size(), static_cast<size_t>(vocab));
  if (profile.enabled) {
    profile.last_end = Clock::now();
    if (profile.seen++ > 0) {
      profile.logits += std::chrono::duration<double>(copied - started).count();
      profile.hash_sample += std::chrono::duration<double>(profile.last_end - copied).count();
      ++profile.steps;
    }
  }
  return Status::kSuccess;
}

// The logits digests of a collected step, in row order. Multi-process: the last stage sends them
// after the step's tokens, so a rank 0 that takes them before collecting the next step never
// waits longer than it would for that step.
Status Engine::Impl::takeLogitsDigests(uint64_t step_id, std::vector<Digest>* digests) {
  if (!multiProcess()) {
    auto it = digest_tickets.find(step_id);
    REE_CHECK_ARG(it != digest_tickets.end() && digester != nullptr,
                  "no logits digests queued for step %llu",
                  static_cast<unsigned long long>(step_id));
    uint64_t ticket = it->second;
    digest_tickets.erase(it);
    REE_CHECK_ARG(digester->take(ticket, digests), "logits digests of step %llu were taken",
                  static_cast<unsigned long long>(step_id));
    return Status::kSuccess;
  }
  int last = nStages() - 1;
  std::vector<uint8_t> bytes;
  REE_RETURN_IF_ERROR(transport->recvMessage(last, kTagDigests, &bytes));
  uint64_t id = 0;
  REE_RETURN_IF_ERROR(models::decodeStepDigests(bytes, &id, digests));
  if (id != step_id) {
    return REE_FAIL(Status::kCommError,
                    "rank 0: stage %d sent the logits hashes of step %llu, "
                    "expected step %llu",
                    last, static_cast<unsigned long long>(id),
                    static_cast<unsigned long long>(step_id));
  }
  return Status::kSuccess;
}

Status Engine::Impl::submit(StepWork work) {
  work.id = next_step_id++;
  if (work.trace) work.layer_digests.clear();
  if (!multiProcess()) {
    // Every stage in this process, one after another; activations move between devices.
    Tensor hidden;
    for (size_t s = 0; s < stages.size(); ++s) {
      if (s > 0 && hidden.device() != stages[s].ops->device()) {
        Tensor moved;
        REE_RETURN_IF_ERROR(toDevice(hidden, stages[s].ops->device(), &moved));
        hidden = moved;
      }
      // The last stage's work need not be waited for: finishStep's copy of the logits to the
      // host follows it on the device (one host round trip per step instead of two).
      const bool last_stage = s + 1 == stages.size();
      REE_RETURN_IF_ERROR(
          computeStage(stages[s], work, hidden, &work.layer_digests, /*wait=*/!last_stage));
    }
    StepOutput out;
    uint64_t ticket = 0;
    REE_RETURN_IF_ERROR(finishStep(stages.back(), work, hidden, &out, &ticket));
    if (!work.logits_rows.empty()) digest_tickets[work.id] = ticket;
    out.layer_digests = std::move(work.layer_digests);
    local_outputs.push_back(std::move(out));
    return Status::kSuccess;
  }
  // Over a transport that queues receives (NCCL), the header leaves before the stage's work is
  // even queued, so stage 1 queues its receive and layers while this GPU still computes; the
  // activations follow in device order. Otherwise, and when tracing (the header then carries
  // this stage's layer hashes), it follows the work: a receiver that blocks on the tensor would
  // only start its deadline early and blame the wrong rank for a stall.
  const bool early_header = earlyHeader(work);
  if (early_header) {
    REE_RETURN_IF_ERROR(transport->sendMessage(1, kTagStep, models::encodeStepHeader(work)));
  }
  Tensor hidden;
  REE_RETURN_IF_ERROR(
      computeStage(stages.front(), work, hidden, &work.layer_digests, /*wait=*/false));
  if (!early_header) {
    REE_RETURN_IF_ERROR(transport->sendMessage(1, kTagStep, models::encodeStepHeader(work)));
  }
  REE_RETURN_IF_ERROR(transport->sendTensor(1, hidden));
  in_flight.push_back(work.id);
  return Status::kSuccess;
}

Status Engine::Impl::collect(StepOutput* out) {
  if (!multiProcess()) {
    REE_CHECK_ARG(!local_outputs.empty(), "collect() without a submitted step");
    *out = std::move(local_outputs.front());
    local_outputs.pop_front();
    return Status::kSuccess;
  }
  REE_CHECK_ARG(!in_flight.empty(), "collect() without a submitted step");
  int last = nStages() - 1;
  std::vector<uint8_t> bytes;
  REE_RETURN_IF_ERROR(transport->recvMessage(last, kTagResult, &bytes));
  REE_RETURN_IF_ERROR(models::decodeStepOutput(bytes, out));
  if (out->id != in_flight.front()) {
    return REE_FAIL(Status::kCommError, "rank 0: stage %d returned step %llu, expected %llu", last,
                    static_cast<unsigned long long>(out->id),
                    static_cast<unsigned long long>(in_flight.front()));
  }
  in_flight.pop_front();
  return Status::kSuccess;
}

Status Engine::serve() {
  Impl& m = *impl_;
  if (!m.multiProcess()) return Status::kSuccess;
  int rank = m.rank();
  REE_CHECK_ARG(rank != 0, "serve() is for ranks other than 0 (rank 0 drives generation)");
  bool last = rank == m.nStages() - 1;
  LocalStage& stage = m.stages.front();
  for (;;) {
    std::vector<uint8_t> bytes;
    REE_RETURN_IF_ERROR(m.transport->recvMessage(rank - 1, kTagStep, &bytes));
    models::StepMessageKind kind;
    StepWork work;
    REE_RETURN_IF_ERROR(models::decodeStepHeader(bytes, &kind, &work));
    if (kind == models::StepMessageKind::kShutdown) {
      if (!last) REE_RETURN_IF_ERROR(m.transport->sendMessage(rank + 1, kTagStep, bytes));
      return m.transport->flush();
    }
    Tensor hidden;
    REE_RETURN_IF_ERROR(Tensor::empty(stage.ops->device(), stage.model->activationDType(),
                                      {work.batch.tokens(), m.config.hidden_size}, &hidden));
    // The receive and the layers are queued without waiting for the bytes (the device orders
    // them); the host blocks only where it must read results, and first waits for the receive
    // under the transport's deadline, so a lost upstream peer is reported, never waited on.
    REE_RETURN_IF_ERROR(m.transport->recvTensorQueued(rank - 1, hidden));
    if (work.trace || m.profile.enabled) REE_RETURN_IF_ERROR(m.transport->awaitReceives());
    const bool early_header = m.earlyHeader(work);  // as in submit()
    if (!last && early_header) {
      REE_RETURN_IF_ERROR(
          m.transport->sendMessage(rank + 1, kTagStep, models::encodeStepHeader(work)));
    }
    REE_RETURN_IF_ERROR(m.computeStage(stage, work, hidden, &work.layer_digests, /*wait=*/false));
    if (last) {
      REE_RETURN_IF_ERROR(m.transport->awaitReceives());
      StepOutput out;
      uint64_t ticket = 0;
      REE_RETURN_IF_ERROR(m.finishStep(stage, work, hidden, &out, &ticket));
      out.layer_digests = std::move(work.layer_digests);
      // Tokens first: rank 0 starts the next step while this rank hashes the logits.
      REE_RETURN_IF_ERROR(m.transport->sendMessage(0, kTagResult, models::encodeStepOutput(out)));
      if (!work.logits_rows.empty()) {
        std::vector<Digest> digests;
        m.digester->take(ticket, &digests);
        REE_RETURN_IF_ERROR(
            m.transport->sendMessage(0, kTagDigests, models::encodeStepDigests(work.id, digests)));
      }
    } else {
      if (!early_header) {
        REE_RETURN_IF_ERROR(
            m.transport->sendMessage(rank + 1, kTagStep, models::encodeStepHeader(work)));
      }
      REE_RETURN_IF_ERROR(m.transport->sendTensor(rank + 1, hidden));
    }
  }
}

Status Engine::shutdown() {
  Impl& m = *impl_;
  if (!m.multiProcess() || m.shut_down) return Status::kSuccess;
  REE_CHECK_ARG(m.rank() == 0, "shutdown() is for rank 0");
  m.shut_down = true;
  REE_RETURN_IF_ERROR(m.transport->sendMessage(1, kTagStep, models::encodeShutdown()));
  return m.transport->flush();
}

namespace {

struct ActiveSequence {
  size_t request = 0;
  int slot = 0;
  int group = 0;              // micro-batch
  std::vector<int32_t> feed;  // tokens to run in the next step
  int cached = 0;             // tokens already in the KV cache
  int produced = 0;
  Clock::time_point start;
  Clock::time_point first_token;
  std::unique_ptr<models::DecodeStream> stream;
};

}  // namespace

Status Engine::generate(const std::vector<GenerationRequest>& requests,
                        std::vector<GenerationResult>* results, const TokenCallback& on_token) {
  REE_CHECK_ARG(results != nullptr, "Engine::generate: results is null");
  Impl& m = *impl_;
  REE_CHECK_ARG(m.rank() == 0, "generate() runs on rank 0; rank %d calls serve()", m.rank());
  REE_CHECK_ARG(!m.shut_down, "generate() after shutdown()");
  results->assign(requests.size(), GenerationResult());
  m.dropStaleDigests();
  int64_t vocab = m.config.vocab_size;
  // Tokenize and validate every request before any work, so a bad prompt fails fast.
  for (size_t r = 0; r < requests.size(); ++r) {
    const GenerationRequest& req = requests[r];
    GenerationResult& res = (*results)[r];
    if (!req.prompt_ids.empty()) {
      res.prompt_ids = req.prompt_ids;
    } else {
      if (!m.tokenizer) {
        return REE_FAIL(Status::kInvalidArgument,
                        "request %zu: the model directory has no tokenizer.json; pass token ids "
                        "(--prompt-ids)",
                        r);
      }
      REE_RETURN_IF_ERROR(
          m.tokenizer->encode(req.prompt_text, req.add_special_tokens, &res.prompt_ids));
    }
    if (res.prompt_ids.empty()) {
      return REE_FAIL(Status::kInvalidArgument, "request %zu: the prompt is empty", r);
    }
    for (size_t i = 0; i < res.prompt_ids.size(); ++i) {
      if (res.prompt_ids[i] < 0 || res.prompt_ids[i] >= vocab) {
        return REE_FAIL(Status::kInvalidArgument,
                        "request %zu: prompt token %zu is id %d, outside the vocabulary [0, %lld)",
                        r, i, res.prompt_ids[i], static_cast<long long>(vocab));
      }
    }
    if (static_cast<int>(res.prompt_ids.size()) >= m.max_context) {
      return REE_FAIL(
          Status::kInvalidArgument,
          "request %zu: the prompt has %zu tokens, the context holds %d (--max-context)", r,
          res.prompt_ids.size(), m.max_context);
    }
    REE_CHECK_ARG(req.max_new_tokens >= 1, "request %zu: --max-new-tokens must be >= 1 (got %d)", r,
                  req.max_new_tokens);
    REE_RETURN_IF_ERROR(models::validateSampling(req.sampling, r));
  }

  // Sequences are split into micro-batches ("groups"); each group has at most one step in the
  // pipeline at a time, and with as many groups as stages every stage has work during decode.
  int groups =
      m.options.micro_batches > 0 ? m.options.micro_batches : (m.multiProcess() ? m.nStages() : 1);
  groups = std::max(1, std::min(groups, m.options.max_batch));
  std::deque<size_t> waiting;
  for (size_t r = 0; r < requests.size(); ++r)
    waiting.push_back(r);
  std::vector<int> free_slots;
  for (int s = m.options.max_batch - 1; s >= 0; --s)
    free_slots.push_back(s);
  std::vector<ActiveSequence> active;
  std::vector<bool> group_busy(groups, false);
  std::vector<int> group_size(groups, 0);
  // The sequences (requests) each in-flight step carries, by step id.
  std::deque<std::pair<int, std::vector<size_t>>> steps;
  // Collected steps whose logits digests are still being computed: for each of the step's rows,
  // the request and the index of its placeholder in step_logits_sha256.
  struct PendingDigests {
    uint64_t step = 0;
    std::vector<std::pair<size_t, size_t>> slots;
  };
  std::deque<PendingDigests> pending_digests;
  auto resolveDigests = [&](size_t keep) -> Status {
    while (pending_digests.size() > keep) {
      PendingDigests& front = pending_digests.front();
      std::vector<Digest> digests;
      REE_RETURN_IF_ERROR(m.takeLogitsDigests(front.step, &digests));
      if (digests.size() != front.slots.size()) {
        return REE_FAIL(Status::kCommError, "step %llu: %zu logits hashes for %zu sequences",
                        static_cast<unsigned long long>(front.step), digests.size(),
                        front.slots.size());
      }
      for (size_t i = 0; i < digests.size(); ++i) {
        auto [request, index] = front.slots[i];
        (*results)[request].step_logits_sha256[index] = models::digestHex(digests[i]);
      }
      pending_digests.pop_front();
    }
    return Status::kSuccess;
  };
  // Single process: digests of older steps are long done; taking them bounds what is held.
  // Multi-process: every pending digest message precedes the next step's tokens on the wire.
  const size_t keep_pending = m.multiProcess() ? 0 : 8;

  for (;;) {
    while (!waiting.empty() && !free_slots.empty()) {
      ActiveSequence seq;
      seq.request = waiting.front();
      waiting.pop_front();
      seq.slot = free_slots.back();
      free_slots.pop_back();
      // The least loaded group, preferring one that is idle so the sequence starts at once.
      int best = 0;
      for (int g = 1; g < groups; ++g) {
        auto key = [&](int x) { return std::make_pair(group_busy[x] ? 1 : 0, group_size[x]); };
        if (key(g) < key(best)) best = g;
      }
      seq.group = best;
      group_size[best] += 1;
      seq.feed = (*results)[seq.request].prompt_ids;
      seq.start = Clock::now();
      if (m.tokenizer) seq.stream = std::make_unique<models::DecodeStream>(*m.tokenizer, true);
      active.push_back(std::move(seq));
    }
    // Submit a step for every idle group that has sequences.
    for (int g = 0; g < groups; ++g) {
      if (group_busy[g] || group_size[g] == 0) continue;
      StepWork work;
      work.trace = m.options.trace_layer_hashes;
      work.batch.query_offsets.push_back(0);
      std::vector<size_t> members;
      for (ActiveSequence& seq : active) {
        if (seq.group != g) continue;
        work.ids.insert(work.ids.end(), seq.feed.begin(), seq.feed.end());
        int32_t end = static_cast<int32_t>(work.ids.size());
        work.batch.query_offsets.push_back(end);
        work.batch.cached_lens.push_back(seq.cached);
        work.batch.cache_slots.push_back(seq.slot);
        work.logits_rows.push_back(end - 1);
        work.trace_group_ends.push_back(end);
        work.rows.push_back({static_cast<uint64_t>(seq.request),
                             static_cast<uint64_t>(seq.produced), requests[seq.request].sampling});
        members.push_back(seq.request);
      }
      REE_RETURN_IF_ERROR(work.batch.finalize());
      REE_RETURN_IF_ERROR(m.submit(std::move(work)));
      group_busy[g] = true;
      steps.emplace_back(g, std::move(members));
    }
    if (steps.empty()) break;

    REE_RETURN_IF_ERROR(resolveDigests(keep_pending));
    StepOutput out;
    REE_RETURN_IF_ERROR(m.collect(&out));
    auto [group, members] = std::move(steps.front());
    steps.pop_front();
    group_busy[group] = false;
    if (out.tokens.size() != members.size()) {
      return REE_FAIL(Status::kCommError, "a pipeline step returned %zu tokens for %zu sequences",
                      out.tokens.size(), members.size());
    }
    pending_digests.push_back({out.id, {}});
    pending_digests.back().slots.resize(members.size());
    std::vector<ActiveSequence> still_active;
    for (ActiveSequence& seq : active) {
      auto it = std::find(members.begin(), members.end(), seq.request);
      if (seq.group != group || it == members.end()) {
        still_active.push_back(std::move(seq));
        continue;
      }
      size_t i = static_cast<size_t>(it - members.begin());
      const GenerationRequest& req = requests[seq.request];
      GenerationResult& res = (*results)[seq.request];
      int32_t token = out.tokens[i];
      pending_digests.back().slots[i] = {seq.request, res.step_logits_sha256.size()};
      res.step_logits_sha256.emplace_back();  // filled by resolveDigests
      if (m.options.trace_layer_hashes) {
        std::vector<std::string> layers;
        for (const std::vector<Digest>& layer : out.layer_digests)
          layers.push_back(models::digestHex(layer.at(i)));
        res.step_layer_sha256.push_back(std::move(layers));
      }
      seq.cached += static_cast<int>(seq.feed.size());
      seq.produced += 1;
      res.output_ids.push_back(token);
      if (seq.produced == 1) seq.first_token = Clock::now();
      std::string piece;
      if (seq.stream) REE_RETURN_IF_ERROR(seq.stream->step(token, &piece));
      bool is_eos = std::find(m.eos.begin(), m.eos.end(), token) != m.eos.end();
      bool at_length = seq.produced >= req.max_new_tokens || seq.cached + 1 >= m.max_context;
      if (is_eos || at_length) {
        std::string tail;
        if (seq.stream) REE_RETURN_IF_ERROR(seq.stream->finish(&tail));
        piece += tail;
      }
      if (on_token) on_token(seq.request, token, piece);
      if (is_eos || at_length) {
        res.finish_reason = is_eos ? "eos" : "length";
        auto end = Clock::now();
        res.prefill_seconds = std::chrono::duration<double>(seq.first_token - seq.start).count();
        res.decode_seconds = std::chrono::duration<double>(end - seq.first_token).count();
        res.output_ids_sha256 =
            sha256Hex(res.output_ids.data(), res.output_ids.size() * sizeof(int32_t));
        if (m.tokenizer) {
          REE_RETURN_IF_ERROR(m.tokenizer->decode(res.output_ids, true, &res.text));
        }
        free_slots.push_back(seq.slot);
        group_size[seq.group] -= 1;
      } else {
        seq.feed.assign(1, token);
        still_active.push_back(std::move(seq));
      }
    }
    active = std::move(still_active);
  }
  return resolveDigests(0);
}

Status Engine::replay(const ReplayRequest& request, ReplayResult* result) {
  Impl& m = *impl_;
  REE_CHECK_ARG(result != nullptr, "Engine::replay: result is null");
  REE_CHECK_ARG(m.rank() == 0, "replay() runs on rank 0; rank %d calls serve()", m.rank());
  REE_CHECK_ARG(!m.shut_down, "replay() after shutdown()");
  REE_CHECK_ARG(!request.prompt_ids.empty(), "replay: the prompt is empty");
  REE_CHECK_ARG(!request.output_ids.empty(), "replay: no generated tokens to re-derive");
  REE_RETURN_IF_ERROR(models::validateSampling(request.sampling, request.request_index));
  m.dropStaleDigests();
  int64_t vocab = m.config.vocab_size;
  StepWork work;
  work.ids = request.prompt_ids;
  work.ids.insert(work.ids.end(), request.output_ids.begin(), request.output_ids.end() - 1);
  for (size_t i = 0; i < work.ids.size(); ++i) {
    if (work.ids[i] < 0 || work.ids[i] >= vocab) {
      return REE_FAIL(Status::kInvalidArgument,
                      "replay: token %zu is id %d, outside the vocabulary [0, %lld)", i,
                      work.ids[i], static_cast<long long>(vocab));
    }
  }
  int32_t total = static_cast<int32_t>(work.ids.size());
  if (total > m.max_context) {
    return REE_FAIL(Status::kInvalidArgument,
                    "replay: %d tokens do not fit the context of %d (--max-context)", total,
                    m.max_context);
  }
  int32_t prompt = static_cast<int32_t>(request.prompt_ids.size());
  work.batch.query_offsets = {0, total};
  work.batch.cached_lens = {0};
  work.batch.cache_slots = {0};
  REE_RETURN_IF_ERROR(work.batch.finalize());
  work.trace = request.trace_layer_hashes;
  // Step t's logits come from position prompt - 1 + t; its activations are the rows it fed: the
  // whole prompt for step 0, then the one token generated before it.
  for (size_t t = 0; t < request.output_ids.size(); ++t) {
    work.logits_rows.push_back(prompt - 1 + static_cast<int32_t>(t));
    work.rows.push_back({request.request_index, static_cast<uint64_t>(t), request.sampling});
    work.trace_group_ends.push_back(prompt + static_cast<int32_t>(t));
  }
  REE_RETURN_IF_ERROR(m.submit(std::move(work)));
  StepOutput out;
  REE_RETURN_IF_ERROR(m.collect(&out));
  REE_RETURN_IF_ERROR(m.takeLogitsDigests(out.id, &out.logits_digests));
  if (out.logits_digests.size() != out.tokens.size()) {
    return REE_FAIL(Status::kCommError, "replay: %zu logits hashes for %zu tokens",
                    out.logits_digests.size(), out.tokens.size());
  }
  *result = ReplayResult();
  result->tokens = out.tokens;
  for (const Digest& d : out.logits_digests)
    result->step_logits_sha256.push_back(models::digestHex(d));
  if (request.trace_layer_hashes) {
    for (size_t t = 0; t < request.output_ids.size(); ++t) {
      std::vector<std::string> layers;
      for (const std::vector<Digest>& layer : out.layer_digests)
        layers.push_back(models::digestHex(layer.at(t)));
      result->step_layer_sha256.push_back(std::move(layers));
    }
  }
  return Status::kSuccess;
}

Status Engine::prefillLogits(const std::vector<int32_t>& ids, std::vector<float>* logits) {
  Impl& m = *impl_;
  REE_CHECK_ARG(logits != nullptr, "prefillLogits: logits is null");
  REE_CHECK_ARG(!m.multiProcess(), "prefillLogits: single-process engines only");
  REE_CHECK_ARG(!ids.empty() && static_cast<int>(ids.size()) <= m.max_context,
                "prefillLogits: %zu tokens for a context of %d", ids.size(), m.max_context);
  StepBatch batch;
  batch.query_offsets = {0, static_cast<int32_t>(ids.size())};
  batch.cached_lens = {0};
  batch.cache_slots = {0};
  REE_RETURN_IF_ERROR(batch.finalize());
  Tensor hidden, out;
  for (size_t s = 0; s < m.stages.size(); ++s) {
    CausalLM& model = *m.stages[s].model;
    REE_RETURN_IF_ERROR(setCurrentDevice(m.stages[s].ops->device()));
    if (s == 0) REE_RETURN_IF_ERROR(model.embed(ids, batch, &hidden));
    if (hidden.device() != m.stages[s].ops->device()) {
      REE_RETURN_IF_ERROR(m.stages[s - 1].ops->synchronize());
      Tensor moved;
      REE_RETURN_IF_ERROR(toDevice(hidden, m.stages[s].ops->device(), &moved));
      hidden = moved;
    }
    REE_RETURN_IF_ERROR(model.runLayers(hidden, batch));
  }
  std::vector<int32_t> rows(ids.size());
  for (size_t i = 0; i < rows.size(); ++i)
    rows[i] = static_cast<int32_t>(i);
  REE_RETURN_IF_ERROR(setCurrentDevice(m.stages.back().ops->device()));
  REE_RETURN_IF_ERROR(m.stages.back().model->logits(hidden, rows, &out));
  logits->resize(static_cast<size_t>(out.numel()));
  return copyTensor(out, Tensor::wrap(logits->data(), Device::cpu(), DType::kF32, out.shape()));
}

}  // namespace ree
