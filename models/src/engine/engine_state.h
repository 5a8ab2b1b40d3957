// The state behind ree::Engine (engine.h), shared by the files that each do one of its jobs:
//   engine.cpp            create(), the accessors, loading the stages
//   engine_plan.cpp       the run's plan: model directory, context, partition, memory checks,
//                         and the fingerprint every rank of a pipeline must agree on
//   engine_kv_pool.cpp    the KV cache pool: its size from the devices' memory, agreed by the
//                         ranks, allocated (kv_blocks.h: the scheduler's block tables)
//   engine_step.cpp       stage execution: one step through the stages (submit / collect),
//                         serve() on the other ranks, shutdown(), prefillLogits()
//   engine_feed.cpp       generate(), generateFromFeed(), request checks, RequestQueue
//   engine_scheduler.*    the continuous-batching loop (engine_scheduler.h lists its files)
//   engine_replay.cpp     replay(): one prefill that re-derives a finished generation
//   engine_profile.*      the REE_PROFILE_STEPS step profiler
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "async_digester.h"
#include "engine_profile.h"
#include "kv_blocks.h"
#include "landing_pool.h"
#include "pipeline_step.h"
#include "ree/models/causal_lm.h"
#include "ree/models/checkpoint.h"
#include "ree/models/engine.h"
#include "ree/models/tokenizer.h"
#include "ree/runtime/pending_copy.h"
#include "ree/runtime/token_select.h"

namespace ree::models {

// Message tags between stages (StageTransport tags are the caller's).
constexpr int kTagStep = 1;     // stage k -> k+1: step header (then the activation tensor)
constexpr int kTagResult = 2;   // last stage -> stage 0: sampled tokens (and layer hashes)
constexpr int kTagDigests = 3;  // last stage -> stage 0: the step's logits hashes, sent after

// *product = a * b unless that overflows int64 (then false): size arithmetic on user numbers.
inline bool checkedMultiply(int64_t a, int64_t b, int64_t* product) {
  return !__builtin_mul_overflow(a, b, product);
}

// What every rank of a multi-process pipeline must agree on before it runs: the model (config,
// tokenizer and the weights' identity: every tensor's name, dtype, shape and first and last bytes,
// cheap to read from any rank whatever stage it holds) and the options that change the result.
struct RunFingerprint {
  Digest config{};
  Digest weights{};
  Digest options{};
};

// One pipeline stage held by this process: its operation set and its part of the model.
struct LocalStage {
  partitioner::Stage stage;
  std::unique_ptr<OperationSet> ops;
  std::unique_ptr<CausalLM> model;
  int64_t kv_cache_bytes = 0;  // its KV cache pool's size
};

struct EngineState {
  EngineOptions options;
  std::string directory;
  ModelConfig config;
  GenerationConfig generation;
  std::unique_ptr<Checkpoint> checkpoint;
  std::unique_ptr<Tokenizer> tokenizer;
  std::vector<int64_t> eos;
  int max_context = 0;
  // The KV cache pool every stage holds: kv_blocks blocks of kv_block_size positions.
  int kv_block_size = 0;
  int kv_blocks = 0;
  int64_t kv_preemptions = 0;
  int64_t kv_prefix_hit_tokens = 0;
  int64_t lookahead_steps = 0;
  // Blocks the running sequences hold, published by the scheduler for readers on other threads.
  std::atomic<int> kv_blocks_used{0};
  // Rank 0: the pool's blocks and prefix cache, kept across generate() calls.
  KvBlockAllocator kv_allocator;
  std::vector<partitioner::Stage> plan;
  // Single process: every stage. Multi-process: this rank's stage only.
  std::vector<LocalStage> stages;
  StageTransport* transport = nullptr;  // null: single process
  bool shut_down = false;
  uint64_t next_step_id = 0;
  // A step's logits on their way to the host, then to the digester (flushLandings).
  struct Landing {
    uint64_t step = 0;
    std::shared_ptr<Tensor> buffer;  // rows x vocab floats (landing_pool.h)
    size_t rows = 0;
    // Declared after `buffer`, so destroyed first: its destructor waits for the copy before the
    // buffer can go back to the pool (the copy holds only a view of it).
    PendingCopy copy;
  };
  // Single process: a step queued on the devices whose tokens collect() has not taken yet.
  struct QueuedStep {
    StepOutput out;                          // id and layer hashes; tokens at collect()
    std::vector<RowSampling> rows;           // the rows' sampling (log-probabilities)
    std::unique_ptr<TokenSelection> tokens;  // its tokens, selected where the logits are
    Landing landing;                         // its logits (no buffer: a step of prompt chunks)
    StepProfiler::Clock::time_point started;
  };
  // Single process: steps queued and not yet collected, oldest first. Their tokens are waited
  // for at collect(), so the next step can be queued first (EngineOptions::decode_lookahead).
  std::deque<QueuedStep> queued_steps;
  std::vector<std::unique_ptr<TokenSelection>> spare_tokens;  // of collected steps, for reuse
  // Multi-process rank 0: ids of the steps sent on and not yet collected.
  std::deque<uint64_t> in_flight;
  // The last stage's logits land in buffers of this pool (declared before the digester, which
  // holds some of them until it is destroyed).
  LandingPool landing_pool;
  // Logits rows are hashed off the critical path (async_digester.h): the last stage queues them
  // and the digests are taken later, by step id (the digester's ticket of each step).
  std::unique_ptr<AsyncDigester> digester;
  std::map<uint64_t, uint64_t> digest_tickets;
  // Collected steps' logits, possibly still being copied to the host when their tokens were
  // already known (tokens are selected where the logits are), oldest first: handed to the
  // digester by flushLandings(), at the next step's collect or when their digests are taken.
  std::deque<Landing> landings;
  StepProfiler profile;

  int rank() const { return transport ? transport->rank() : 0; }
  int nStages() const { return static_cast<int>(plan.size()); }
  bool multiProcess() const { return transport != nullptr && nStages() > 1; }

  // ---- engine_plan.cpp: everything of create() that can fail differently on different ranks.
  Status createLocal();
  Status openModel();
  Status chooseContext();
  Status computePlan();
  Status defaultStageBudget(int64_t* budget) const;
  Status explainNoFit(Status status, int64_t stage_budget) const;
  Status runFingerprint(RunFingerprint* out) const;
  Status checkSameRun() const;

  // ---- engine_kv_pool.cpp: the KV cache pool, once the weights are loaded.
  int kvBlockSizeFor(OperationSetKind kind) const;
  Status stageBlockBytes(const LocalStage& stage, int64_t* bytes) const;
  Status chooseKvBlocks();
  Status limitKvBlocks(int64_t room, int64_t block_bytes, const char* what, Device device,
                       int64_t* blocks) const;
  Status agreeKvBlocks();
  Status allocateKvCaches();
  std::string kvPoolSummary() const;
  // Traced runs hash each step's rows: prompts run whole, so their hashes are a solo run's.
  int prefillChunk() const { return options.trace_layer_hashes ? 0 : options.prefill_chunk; }
  bool prefixCaching() const {
    return options.prefix_caching && !options.trace_layer_hashes &&
           options.operation_set == OperationSetKind::kReproducible;
  }
  // The allocator for a generate(): the one kept since the last, unless that one ended with blocks
  // still held (a failed generate) or there is none yet.
  KvBlockAllocator& generationBlocks();
  // One sequence of `tokens` alone in the pool (replay, prefillLogits): blocks 0, 1, ... (the
  // prefix cache is forgotten); then batch->finalize().
  Status soloBlockTable(int tokens, StepBatch* batch);

  // ---- engine.cpp: loading (a stage's weights; then the KV pool's size).
  Status loadStage(const partitioner::Stage& stage, Device device);
  Status loadStages();
  Status loadStagesOnDevices();

  // ---- engine_step.cpp: stage execution.
  Status embedStep(CausalLM& model, const StepWork& work, Tensor* hidden);
  // wait = false returns once the stage's work is queued (multi-process stages: the send of
  // `hidden` is ordered after it on the device); profiling always waits, to time the GPU.
  Status computeStage(LocalStage& stage, const StepWork& work, Tensor& hidden,
                      std::vector<std::vector<Digest>>* layer_digests, bool wait = true);
  // The last stage's end of a step, in two halves: queueFinish() computes the logits and queues
  // the token selection and the logits' copy to a pool buffer; completeFinish() waits for the
  // tokens (and log-probabilities) and moves the logits to `landings`.
  Status queueFinish(LocalStage& stage, const StepWork& work, const Tensor& hidden,
                     QueuedStep* step);
  Status completeFinish(QueuedStep* step);
  // Hands the landings of steps up to `step` to the digester once their rows are on the host.
  Status flushLandings(uint64_t step);
  // Decode lookahead is possible: single process, the first and last stages on one device, an
  // embedding that reads ids in device memory (EngineOptions::decode_lookahead).
  bool lookaheadPossible() const;
  // Why not, when it is not (a warning for a run that asked for it).
  const char* lookaheadUnavailableReason() const;
  // Multi-process: whether a stage sends the step header before queueing its own work.
  bool earlyHeader(const StepWork& work) const {
    return !work.trace && transport != nullptr && transport->queuesReceives();
  }
  Status takeLogitsDigests(uint64_t step_id, std::vector<Digest>* digests);
  Status takeLocalDigests(uint64_t step_id, std::vector<Digest>* digests);
  // Steps and digests queued by a generate() or replay() that failed before taking them.
  void dropStaleSteps();
  Status submit(StepWork work);
  Status collect(StepOutput* out);
  // serve(): one step received from the previous rank, run and passed on. *done on shutdown.
  Status serveOneStep(bool* done);

  // ---- engine_feed.cpp: a request's prompt ids, checked against the model and the context.
  Status prepareRequest(const GenerationRequest& request, size_t index,
                        GenerationResult* result) const;
};

}  // namespace ree::models

namespace ree {
struct Engine::Impl : models::EngineState {};
}  // namespace ree
