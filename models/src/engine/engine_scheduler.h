// The scheduler behind generate() and generateFromFeed() (engine.h), in three files:
//   engine_scheduler.cpp         admission, preemption, building and collecting steps
//   engine_scheduler_results.cpp a request's tokens, its end (stop flags, eos, length), its
//                                logits hashes, and reporting it once it is whole
//   engine_scheduler_lookahead.cpp decode lookahead (EngineOptions::decode_lookahead): a group's
//                                next decode step queued before its tokens reach the host
//   engine_feed.cpp              generate(), generateFromFeed(), the feed's polling, RequestQueue
// Up to max_batch sequences run together (continuous batching), each holding the KV cache blocks
// of its positions (kv_blocks.h), grouped into micro-batches, each with at most one step in the
// pipeline at a time, so that with as many groups as stages every stage has work during decode.
// A request is admitted when the pool has blocks for its prompt and first token; when a running
// sequence needs a block and none is free, the youngest sequence not in flight is preempted: its
// blocks are freed, its tokens kept, and it later resumes with ONE prefill of its prompt and
// generated tokens. Requests may arrive while others run (a feed, polled at every step boundary):
// they wait behind the preempted sequences and the earlier arrivals. A request's result never
// depends on the others in reproducible mode (prefill == decode, bit for bit): the scheduler
// decides only which steps run together, never what a step computes. A request whose stop flag is
// set (GenerationRequest::stop) finishes at the next step boundary with the tokens it has.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine_state.h"
#include "kv_blocks.h"

namespace ree::models {

using SchedulerClock = std::chrono::steady_clock;

// A request the scheduler holds, from its arrival until it is reported. generate() points it at
// the caller's vectors (so a token callback may read the result so far); a fed request owns them.
struct RequestSlot {
  uint64_t id = 0;
  const GenerationRequest* request = nullptr;
  GenerationResult* result = nullptr;
  std::unique_ptr<GenerationRequest> own_request;
  std::unique_ptr<GenerationResult> own_result;
  int unresolved_digests = 0;  // logits hashes still being computed
  bool ended = false;          // finished; reported once its hashes are in
};

struct ActiveSequence {
  size_t request = 0;                // its slot
  uint64_t order = 0;                // admission order: the youngest is preempted first
  std::vector<int32_t> blocks;       // KV cache blocks of positions 0..cached + feed - 1
  std::vector<BlockKey> block_keys;  // prefix cache keys of its full blocks so far
  int group = 0;                     // micro-batch
  std::vector<int32_t> feed;         // tokens still to run (the prompt, then the last token)
  int step_tokens = 0;               // how many of them the group's next step runs
  int cached = 0;                    // tokens already in the KV cache
  int produced = 0;
  SchedulerClock::time_point start;
  SchedulerClock::time_point first_token;
  std::unique_ptr<DecodeStream> stream;
};

// A collected step whose logits digests are still being computed: for each of the step's rows,
// the request (slot) and the index of its placeholder in step_logits_sha256; kDroppedRow for a
// row whose sequence had ended before the step's token came (decode lookahead).
struct PendingDigests {
  static constexpr size_t kDroppedRow = SIZE_MAX;
  uint64_t step = 0;
  std::vector<std::pair<size_t, size_t>> slots;
};

// A step in flight: its micro-batch, its sequences (slots) that get a token and, for each, its
// trace group; and those that ran only a chunk of their prompt, with its length. engine_step is
// the engine's id of the step; greedy_decode says that every member decodes one token greedily
// (no log-probabilities, no trace), so a lookahead step may follow it; lookahead, that it is one.
struct StepInFlight {
  int group = 0;
  std::vector<size_t> members;
  std::vector<size_t> trace_groups;
  std::vector<std::pair<size_t, int>> chunks;
  uint64_t engine_step = 0;
  bool greedy_decode = false;
  bool lookahead = false;
};

class GenerationScheduler {
 public:
  // on_finished may be empty (generate(): the results are the caller's vectors already).
  GenerationScheduler(EngineState& engine, FeedTokenCallback on_token,
                      FeedFinishedCallback on_finished);
  // A checked request (prepareRequest) whose result lives at *result; queued behind the others.
  void add(uint64_t id, const GenerationRequest* request, GenerationResult* result);
  // A checked request the scheduler keeps until it reports it.
  void add(uint64_t id, GenerationRequest request, GenerationResult prepared);
  // Runs every request added; with a feed, also those it brings, until it ends.
  Status run(RequestFeed* feed);
  // After a failed run: reports every request still held with the failure.
  void failAll(Status status, const std::string& error);

 private:
  // ---- engine_scheduler.cpp
  bool nothingLeft() const {
    return steps_.empty() && active_.empty() && waiting_.empty() && preempted_.empty();
  }
  Status pollFeed(RequestFeed& feed, bool wait, bool* open);
  void admitWaiting();
  bool tryAdmit(ActiveSequence* seq);
  int leastLoadedGroup() const;
  bool ensureGroupBlocks(int group);
  int stepTokens(const ActiveSequence& seq, int64_t* chunk_budget) const;
  void advanceChunk(ActiveSequence& seq, int tokens);
  int youngestPreemptable() const;
  void preempt(size_t index);
  Status submitIdleGroups();
  Status buildGroupStep(int group, StepWork* work, StepInFlight* step) const;
  // ---- engine_scheduler_lookahead.cpp
  Status submitLookahead();
  bool lookaheadFits(const StepInFlight& step);
  Status buildLookaheadStep(const StepInFlight& source, StepWork* work, StepInFlight* step) const;
  Status collectStep();
  // ---- engine_scheduler_results.cpp
  Status acceptToken(ActiveSequence& seq, const StepOutput& out, size_t row, size_t trace_group,
                     bool* finished);
  bool stopRequested(size_t request) const;
  Status finishStopped();
  Status finishSequence(ActiveSequence& seq, const char* reason);
  Status completeResult(size_t request, const char* reason);
  void reportIfWhole(size_t request);
  void registerFullBlocks(ActiveSequence& seq);
  Status resolveDigests(size_t keep);

  const GenerationRequest& request(size_t slot) const { return *slots_.at(slot).request; }
  GenerationResult& result(size_t slot) { return *slots_.at(slot).result; }
  const GenerationResult& result(size_t slot) const { return *slots_.at(slot).result; }

  EngineState& m_;
  FeedTokenCallback on_token_;
  FeedFinishedCallback on_finished_;
  int groups_ = 1;
  KvBlockAllocator& blocks_;
  const bool prefix_caching_;
  uint64_t next_order_ = 0;
  size_t next_slot_ = 0;
  std::unordered_map<size_t, RequestSlot> slots_;
  size_t ended_unreported_ = 0;  // slots ended, waiting for their logits hashes
  std::deque<size_t> waiting_;
  // Preempted sequences, oldest first: they resume before any new request is admitted.
  std::deque<ActiveSequence> preempted_;
  std::vector<ActiveSequence> active_;
  std::vector<bool> group_busy_;  // a step of the group is in flight (two, with lookahead)
  std::vector<int> group_size_;
  // The steps in flight, in submission order.
  std::deque<StepInFlight> steps_;
  std::deque<PendingDigests> pending_digests_;
  // Single process: digests of older steps are long done; taking them bounds what is held.
  // Multi-process: every pending digest message precedes the next step's tokens on the wire.
  size_t keep_pending_ = 0;
};

}  // namespace ree::models
