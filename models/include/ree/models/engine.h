// ree::Engine: the library API behind ree-launch. Loads a Hugging Face model directory (or a
// built-in model), tokenizes prompts, runs batched generation (prefill, then decode with a KV
// cache) on the chosen operation set and device, and returns ids, text and hashes.
//
//   std::unique_ptr<ree::Engine> engine;
//   ree::EngineOptions options;
//   options.model = "builtin:tiny-llama";
//   if (ree::Engine::create(options, &engine) != ree::Status::kSuccess) { ... lastErrorMessage() }
//   ree::GenerationRequest request;
//   request.prompt_text = "Hello";
//   std::vector<ree::GenerationResult> results;
//   engine->generate({request}, &results);
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ree/core/status.h"
#include "ree/models/model_config.h"
#include "ree/partitioner/partition.h"
#include "ree/runtime/operation_set.h"
#include "ree/runtime/stage_transport.h"

namespace ree {

namespace models {
class Tokenizer;
}

// The runtime's version (receipts record it, and the RepOps spec of the run: EngineOptions).
inline constexpr const char* kRuntimeVersion = "0.3.0";
// The RepOps spec versions this release implements, oldest first (receipts of each verify).
inline constexpr const char* kRepOpsSpecVersions = "repops-1, repops-2, repops-3";

// How the engine's messages name the options that can come from elsewhere than ree-launch's
// flags: `verify` takes them from the receipt, and its errors must say so. Defaults: the flags.
struct EngineOptionNames {
  std::string operation_set = "--operation-set";
  std::string repops_spec = "--repops-spec";
  std::string max_batch = "--max-batch";
  std::string max_context = "--max-context";
  std::string kv_blocks = "--kv-blocks";
  std::string kv_memory_fraction = "--kv-memory-fraction";
  std::string prefill_chunk = "--prefill-chunk";
};

struct EngineOptions {
  // A model directory (config.json, *.safetensors, tokenizer.json, ...), or "builtin:tiny-llama".
  std::string model;
  OperationSetKind operation_set = OperationSetKind::kReproducible;
  // The arithmetic of the reproducible set (runtime/operation_set.h); only kReproducible uses it,
  // and the engine refuses another spec than the default with the ATen sets.
  RepOpsSpec repops_spec = kDefaultRepOpsSpec;
  Device device = Device::cpu();
  // Weights are converted to this dtype at load time when set (default: the checkpoint's dtype).
  std::optional<DType> weight_dtype;
  // Sequences decoded together and tokens per sequence (0: min(model's maximum, 4096)).
  int max_batch = 8;
  int max_context = 0;
  // The KV cache is a pool of blocks of kv_block_size positions (the reproducible set; the ATen
  // sets read one sequence per block, of max_context positions), shared by the running sequences
  // and sized after the weights are loaded: kv_blocks when > 0 (refused if the device cannot hold
  // it), else kv_memory_fraction (0: 0.9 on a GPU, 0.5 on the CPU) of the device's free memory
  // (GPU: free after the weights; host: available memory), never more than max_batch sequences
  // of max_context tokens need, and within memory_budget_bytes less the stage's weights. A
  // request is admitted when the pool has blocks for its prompt; when a running sequence needs a
  // block and none is free, the youngest sequence is preempted and later recomputed (in
  // reproducible mode with the same bits). Stages of a pipeline use the smallest stage's count.
  int kv_block_size = 16;
  int64_t kv_blocks = 0;
  double kv_memory_fraction = 0.0;
  // Prefix cache (reproducible set, without trace_layer_hashes): a request whose first
  // n x kv_block_size tokens equal those of a block still in the pool (of a running, finished or
  // preempted sequence, this generate() or an earlier one) reads those blocks instead of
  // recomputing them: the same bits, as a position's K/V depends only on the tokens up to it.
  bool prefix_caching = true;
  // Chunked prefill: a step of a micro-batch runs at most this many prompt tokens (0: prompts run
  // whole), its decoding sequences' tokens besides, so a long prompt does not stall the decodes
  // running with it; it runs over several steps. Off with trace_layer_hashes. In reproducible
  // mode the bits are those of a whole prefill.
  int prefill_chunk = 0;
  // Decode lookahead: while a micro-batch's decode step runs, its next step is queued with the
  // tokens that the device selects (greedy requests; single process, the first and last stages on
  // one device, a table that can be read with device ids), before the host has read them, so the
  // device need not wait for the host at the step boundary. A sequence that ends at a step (end of
  // sequence, stop flag) has its row of the step queued after it computed and dropped. Never
  // changes results. Off by default: on an H100 it gained 1.6% at batch 1 and nothing at batch 64
  // (docs/benchmarks.md).
  bool decode_lookahead = false;
  // CUDA graphs for the layers of steps of up to 256 tokens (CausalLM::setStepGraphs): recorded
  // per token count, replayed with the same kernels on the same buffers, so the same bits with far
  // fewer launches a step; rope and attention run eagerly between the graphs. GPU stages only.
  bool cuda_graphs = true;

  // Pipeline: the model is cut into n_partitions contiguous stages (partitioner/, or the explicit
  // layers per stage in partition_layers). Without a transport every stage runs in this process,
  // stage s on stage_devices[s] (empty: all on `device`).
  int n_partitions = 1;
  std::vector<int64_t> partition_layers;
  std::vector<Device> stage_devices;
  // Per-device memory budget for a stage's parameters + KV cache (0: the device's total memory).
  int64_t memory_budget_bytes = 0;
  // Multi-process pipeline: this process runs stage transport->rank() of transport->size()
  // (which must equal n_partitions) on transport->device(), and loads only that stage's weights.
  // Rank 0 calls generate()/replay() and then shutdown(); the other ranks call serve(). Not owned.
  StageTransport* transport = nullptr;
  // Sequences are grouped into this many micro-batches that are in flight together, so that every
  // stage has work during decode (0: n_partitions). Results never depend on it.
  int micro_batches = 0;
  // Also hash every layer's output activations of every step (GenerationResult::step_layer_sha256).
  bool trace_layer_hashes = false;
  // Relaxations of the checkpoint's load rules (models/checkpoint.h CheckpointOptions), for
  // research only; receipts record them. allow_extra_tensors: tensors the config does not expect
  // are ignored instead of refused. allow_non_finite_weights: NaN/Inf weights are loaded as they
  // are instead of refused.
  bool allow_extra_tensors = false;
  bool allow_non_finite_weights = false;
  EngineOptionNames names;
};

struct SamplingParams {
  float temperature = 0.0f;  // 0: greedy (argmax, lowest id wins ties)
  int top_k = 0;             // 0: no top-k cut
  float top_p = 1.0f;        // 1: no nucleus cut
  uint64_t seed = 0;
};

struct GenerationRequest {
  std::string prompt_text;
  std::vector<int32_t> prompt_ids;  // used instead of prompt_text when not empty
  int max_new_tokens = 64;
  SamplingParams sampling;
  bool add_special_tokens = true;  // tokenizer's BOS/template when encoding prompt_text
  // The sampler's sequence key (with the seed and the step, it keys the Philox draws): by default
  // the request's index in generate()'s list (generateFromFeed: its id). A server that batches
  // unrelated requests sets it, so that a request draws what it would alone at that index.
  // Receipts record it as "index".
  std::optional<uint64_t> sampling_index;
  // Optional stop flag, read (never written) by the engine at every step boundary, so another
  // thread (a server whose client went away, a TUI's Ctrl-C) or the token callback can stop this
  // request alone. Once set, the request finishes after the token being produced (at once when
  // no step of it is running: waiting, preempted, between steps), with finish_reason "stop"
  // unless that token ended it anyway ("eos", "length"); its KV blocks go back to the pool and
  // its result holds the tokens so far, each with its logits hash (possibly none, if it was
  // stopped before its first token). The other requests' results do not change.
  std::shared_ptr<const std::atomic<bool>> stop;
  // Log-probabilities (GenerationResult::token_logprobs): -1 off (no cost); 0..20: every produced
  // token's log-probability and this many most likely alternatives. Single-process engines only.
  int top_logprobs = -1;
};

// One token and its log-probability.
struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0.0f;
};

// A produced token's log-probability and the most likely tokens of its step. Computed on the host
// from the fp32 logits row that the token was drawn from (the row step_logits_sha256 hashes) by
// the CPU RepOps log_softmax (kernels/rowops.h: (x - max) - log(sum exp(x - max)), fixed order),
// so the values are the same bits on every device in reproducible mode. Unscaled: the model's
// distribution, before temperature, top-k and top-p.
struct TokenLogprobs {
  float logprob = 0.0f;
  // The top_logprobs largest, largest first; equal values by lower token id.
  std::vector<TokenLogprob> top;
};

struct GenerationResult {
  std::vector<int32_t> prompt_ids;
  std::vector<int32_t> output_ids;
  std::string text;  // decoded output_ids (special tokens skipped)
  // "eos", "length", or "stop" (GenerationRequest::stop was set; output_ids may then be empty)
  std::string finish_reason;
  // SHA-256 (hex) of the fp32 logits bytes that produced each output token, in order.
  std::vector<std::string> step_logits_sha256;
  // With GenerationRequest::top_logprobs >= 0: one per output token, in order (else empty). Filled
  // before the token callback runs for that token.
  std::vector<TokenLogprobs> token_logprobs;
  std::string output_ids_sha256;  // SHA-256 (hex) of output_ids as little-endian int32
  // With EngineOptions::trace_layer_hashes: [step][layer] SHA-256 (hex) of that layer's output
  // activations (as stored, row-major) for the token rows the step fed, in position order.
  std::vector<std::vector<std::string>> step_layer_sha256;
  double prefill_seconds = 0.0;  // from the start of the request's first step to its first token
  double decode_seconds = 0.0;   // from the first token to the last
};

// Re-execution of a finished generation for verification: the prompt and every generated token
// but the last run as ONE prefill pass (reproducible-mode logits of a position are identical in
// prefill and decode); each step's logits row is hashed and its token re-drawn with the same key.
struct ReplayRequest {
  std::vector<int32_t> prompt_ids;
  std::vector<int32_t> output_ids;  // the tokens to re-derive (>= 1)
  SamplingParams sampling;
  uint64_t request_index = 0;  // the request's index in its original batch (part of the RNG key)
  bool trace_layer_hashes = false;
};

struct ReplayResult {
  std::vector<int32_t> tokens;                  // re-derived token of every step
  std::vector<std::string> step_logits_sha256;  // as GenerationResult
  std::vector<std::vector<std::string>> step_layer_sha256;
};

// Called as each token is produced: request index, token id, and the text that became complete
// (UTF-8 is held back across token boundaries until a character is whole; may be empty).
using TokenCallback = std::function<void(size_t request, int32_t token, const std::string& text)>;

// ---- Continuous batching (Engine::generateFromFeed): requests that join a running generation.

// A request handed to the engine by a RequestFeed, with the caller's id for it (unique among the
// requests in flight; it names the request in the callbacks, and is the sampler's key unless
// request.sampling_index is set).
struct FedRequest {
  uint64_t id = 0;
  GenerationRequest request;
};

// Where generateFromFeed() takes its requests from. The engine calls poll() from its own thread at
// every step boundary with wait = false (return at once), and with wait = true when nothing runs
// or waits (block until a request arrives or the feed ends). poll() appends the requests that
// arrived to *arrived and returns false once the feed has ended: no request will come any more
// (those it appended in that call still run).
class RequestFeed {
 public:
  virtual ~RequestFeed() = default;
  virtual bool poll(bool wait, std::vector<FedRequest>* arrived) = 0;
};

// A RequestFeed that other threads push requests into: push() until close().
class RequestQueue : public RequestFeed {
 public:
  RequestQueue();
  ~RequestQueue() override;
  // Queues a request; false (and nothing queued) once close() was called.
  bool push(uint64_t id, GenerationRequest request);
  // No more requests: generateFromFeed() finishes what it has and returns.
  void close();
  size_t queued() const;  // pushed and not yet taken by the engine
  bool poll(bool wait, std::vector<FedRequest>* arrived) override;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// A produced token of a fed request: its id, the token, the text that became complete (as
// TokenCallback), and the request's result so far (output_ids, token_logprobs up to this token).
using FeedTokenCallback = std::function<void(uint64_t id, int32_t token, const std::string& text,
                                             const GenerationResult& so_far)>;
// A fed request ended: status kSuccess and its whole result (logits hashes included), or the
// error that ended it (`error` says why: a prompt the model cannot take, or a failed step, which
// ends every request in flight), with what it had.
using FeedFinishedCallback = std::function<void(uint64_t id, Status status,
                                                const std::string& error, GenerationResult result)>;

class Engine {
 public:
  static Status create(const EngineOptions& options, std::unique_ptr<Engine>* out);
  ~Engine();

  const models::ModelConfig& config() const;
  const models::Tokenizer* tokenizer() const;  // null when the model directory has none
  const EngineOptions& options() const;
  // The model directory in use (a built-in model's materialised directory; for synthetic:DIR, DIR).
  const std::string& modelDirectory() const;
  int maxContext() const;  // tokens per sequence in use
  // The KV cache pool in use: blocks (every stage holds as many) of kvCacheBlockSize() positions.
  int kvCacheBlocks() const;
  int kvCacheBlockSize() const;
  // Sequences preempted (and later recomputed) because the pool was full, over this engine's life.
  int64_t kvPreemptions() const;
  // Prompt positions read from the prefix cache instead of computed, over this engine's life.
  int64_t kvPrefixHitTokens() const;
  // Decode steps queued before the host had their tokens (EngineOptions::decode_lookahead), over
  // this engine's life.
  int64_t lookaheadSteps() const;
  // Steps whose layers ran from CUDA graphs (EngineOptions::cuda_graphs), summed over the stages
  // of this process, over this engine's life.
  int64_t graphSteps() const;
  // Blocks of the pool that running sequences hold now (cached but unreferenced blocks count as
  // free). Safe to read from another thread while generate() runs (a server's /metrics).
  int kvCacheBlocksUsed() const;
  std::vector<int64_t> eosTokenIds() const;

  // Generates for every request; requests beyond max_batch wait for a free slot. The result of a
  // request never depends on the others in reproducible mode.
  Status generate(const std::vector<GenerationRequest>& requests,
                  std::vector<GenerationResult>* results, const TokenCallback& on_token = {});

  // Continuous batching: runs the requests of `feed` as they arrive. At every step boundary the
  // engine polls the feed; new requests are checked (a bad one ends at once with its error) and
  // queued, and join the running sequences as generate() admits waiting ones (max_batch, the KV
  // pool, preemption, the prefix cache, chunked prefill all apply). Each request is reported once
  // to on_finished, as soon as it ends; on_token sees every token as it comes. Returns when the
  // feed has ended and every request taken from it has been reported (kSuccess), or after a
  // failed step (every request in flight reported with that error first). In reproducible mode a
  // request's result is that of generate() with it alone (its sampler key: sampling_index, else
  // its id), whatever else ran beside it and whenever it arrived. Single-process engines only:
  // the other ranks of a multi-process pipeline wait for every step within the transport's
  // deadline, which an idle feed would trip (use generate() there).
  Status generateFromFeed(RequestFeed& feed, const FeedTokenCallback& on_token,
                          const FeedFinishedCallback& on_finished);

  // Verification core (see ReplayRequest). Works on every pipeline layout.
  Status replay(const ReplayRequest& request, ReplayResult* result);

  // The stages in use (one entry per stage; a single stage without a pipeline).
  const std::vector<partitioner::Stage>& plan() const;
  // The stages `options` would use, from config.json and the checkpoint's headers alone (no
  // weights loaded, no transport used): what `ree-launch --plan` prints.
  static Status planStages(const EngineOptions& options, std::vector<partitioner::Stage>* stages);

  // Multi-process pipeline, ranks other than 0: serve rank 0's steps until it calls shutdown().
  Status serve();
  // Multi-process pipeline, rank 0: releases the other ranks from serve(). Idempotent.
  Status shutdown();

  // Logits [n, vocab] of every position of `ids` in ONE prefill pass (fresh cache slot), as
  // host fp32. Used by tests of prefill/decode identity. Single-process only.
  Status prefillLogits(const std::vector<int32_t>& ids, std::vector<float>* logits);

 private:
  struct Impl;
  explicit Engine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Hex SHA-256 of a byte buffer (OpenSSL).
std::string sha256Hex(const void* data, size_t bytes);

}  // namespace ree
