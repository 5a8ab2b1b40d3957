// The scheduler's admissions, preemptions and steps (engine_scheduler.h says how it works).
#include "engine_scheduler.h"

#include <algorithm>
#include <cstdint>

#include "ree/core/log.h"

namespace ree::models {

GenerationScheduler::GenerationScheduler(EngineState& engine, FeedTokenCallback on_token,
                                         FeedFinishedCallback on_finished)
    : m_(engine),
      on_token_(std::move(on_token)),
      on_finished_(std::move(on_finished)),
      blocks_(engine.generationBlocks()),
      prefix_caching_(engine.prefixCaching()) {
  const EngineOptions& o = engine.options;
  groups_ = o.micro_batches > 0 ? o.micro_batches : (engine.multiProcess() ? engine.nStages() : 1);
  groups_ = std::max(1, std::min(groups_, o.max_batch));
  group_busy_.assign(groups_, false);
  group_size_.assign(groups_, 0);
  keep_pending_ = engine.multiProcess() ? 0 : 8;
}

void GenerationScheduler::add(uint64_t id, const GenerationRequest* request,
                              GenerationResult* result) {
  RequestSlot& slot = slots_[next_slot_];
  slot.id = id;
  slot.request = request;
  slot.result = result;
  waiting_.push_back(next_slot_++);
}

void GenerationScheduler::add(uint64_t id, GenerationRequest request, GenerationResult prepared) {
  auto own_request = std::make_unique<GenerationRequest>(std::move(request));
  auto own_result = std::make_unique<GenerationResult>(std::move(prepared));
  add(id, own_request.get(), own_result.get());
  RequestSlot& slot = slots_.at(next_slot_ - 1);
  slot.own_request = std::move(own_request);
  slot.own_result = std::move(own_result);
}

// Every step boundary: the feed's new requests (blocking on it when nothing is left to run), the
// stop flags, admissions, one step for every idle micro-batch; then the oldest step's tokens.
Status GenerationScheduler::run(RequestFeed* feed) {
  bool feed_open = feed != nullptr;
  for (;;) {
    // A fed request that ended is reported once its logits hashes are in: take them now rather
    // than keep_pending_ steps later (and before waiting on an idle feed). generate()'s results
    // are read when it returns.
    if (ended_unreported_ > 0 && on_finished_) REE_RETURN_IF_ERROR(resolveDigests(0));
    if (feed_open) {
      // Readers on other threads see the pool as it is while the engine waits on the feed.
      m_.kv_blocks_used.store(blocks_.usedBlocks(), std::memory_order_relaxed);
      REE_RETURN_IF_ERROR(pollFeed(*feed, nothingLeft(), &feed_open));
      if (feed_open && nothingLeft()) continue;  // every arrival was refused: wait again
    }
    REE_RETURN_IF_ERROR(finishStopped());
    admitWaiting();
    REE_RETURN_IF_ERROR(submitIdleGroups());
    REE_RETURN_IF_ERROR(submitLookahead());
    m_.kv_blocks_used.store(blocks_.usedBlocks(), std::memory_order_relaxed);
    if (steps_.empty()) {
      if (nothingLeft()) {
        if (feed_open) continue;
        break;
      }
      // Unreachable: with nothing in flight every sequence can be preempted but the oldest, and
      // prepareRequest checked that any one request fits the pool alone.
      return REE_FAIL(Status::kInternal,
                      "the scheduler cannot run %zu sequences with %zu waiting in a KV pool of %d "
                      "blocks (%d free)",
                      active_.size(), waiting_.size() + preempted_.size(), blocks_.numBlocks(),
                      blocks_.freeBlocks());
    }
    REE_RETURN_IF_ERROR(resolveDigests(keep_pending_));
    REE_RETURN_IF_ERROR(collectStep());
  }
  return resolveDigests(0);
}

// The feed's new requests, checked (a refused one is reported at once) and queued.
Status GenerationScheduler::pollFeed(RequestFeed& feed, bool wait, bool* open) {
  std::vector<FedRequest> arrived;
  *open = feed.poll(wait, &arrived);
  for (FedRequest& fed : arrived) {
    GenerationResult prepared;
    const Status status = m_.prepareRequest(fed.request, fed.id, &prepared);
    if (status != Status::kSuccess) {
      if (on_finished_) on_finished_(fed.id, status, lastErrorMessage(), std::move(prepared));
      continue;
    }
    add(fed.id, std::move(fed.request), std::move(prepared));
  }
  return Status::kSuccess;
}

// The least loaded group, preferring one that is idle so the sequence starts at once.
int GenerationScheduler::leastLoadedGroup() const {
  auto key = [&](int g) { return std::make_pair(group_busy_[g] ? 1 : 0, group_size_[g]); };
  int best = 0;
  for (int g = 1; g < groups_; ++g) {
    if (key(g) < key(best)) best = g;
  }
  return best;
}

// Preempted sequences, then waiting requests, join while fewer than max_batch run and the pool
// has blocks for what they feed plus their next token; in order, so none is overtaken.
void GenerationScheduler::admitWaiting() {
  while (static_cast<int>(active_.size()) < m_.options.max_batch) {
    if (!preempted_.empty()) {
      if (!tryAdmit(&preempted_.front())) return;
      preempted_.pop_front();
      continue;
    }
    if (waiting_.empty()) return;
    ActiveSequence seq;
    seq.request = waiting_.front();
    seq.feed = result(seq.request).prompt_ids;
    seq.order = next_order_;
    if (!tryAdmit(&seq)) return;
    waiting_.pop_front();
    next_order_ += 1;
    ActiveSequence& admitted = active_.back();
    admitted.start = SchedulerClock::now();
    if (m_.tokenizer) admitted.stream = std::make_unique<DecodeStream>(*m_.tokenizer, true);
  }
}

// Moves *seq (nothing cached, its tokens in feed) into the least loaded micro-batch when the pool
// has the blocks of its feed and one more token, after the prefix cache's blocks of its first
// tokens (all but the last: its logits are needed); false, *seq unchanged, otherwise.
bool GenerationScheduler::tryAdmit(ActiveSequence* seq) {
  const int64_t tokens = static_cast<int64_t>(seq->feed.size());
  int64_t matched = 0;
  if (prefix_caching_) {
    matched = blocks_.matchPrefix(seq->feed, tokens - 1, &seq->blocks, &seq->block_keys);
  }
  if (blocks_.blocksFor(tokens + 1) - static_cast<int64_t>(seq->blocks.size()) >
      blocks_.freeBlocks()) {
    blocks_.release(&seq->blocks);
    seq->block_keys.clear();
    return false;
  }
  blocks_.grow(&seq->blocks, tokens);
  seq->cached = static_cast<int>(matched);
  seq->feed.erase(seq->feed.begin(), seq->feed.begin() + matched);
  m_.kv_prefix_hit_tokens += matched;
  seq->group = leastLoadedGroup();
  group_size_[seq->group] += 1;
  active_.push_back(std::move(*seq));
  return true;
}

// Gives every sequence of `group` the tokens and blocks of its next step, preempting the youngest
// sequence not in flight while the pool is short (possibly one of the group's own). False when
// the group must wait for a step in flight to come back.
bool GenerationScheduler::ensureGroupBlocks(int group) {
  for (;;) {
    int64_t chunk_budget = m_.prefillChunk() > 0 ? m_.prefillChunk() : INT64_MAX;
    bool preempted = false;
    for (ActiveSequence& seq : active_) {
      if (seq.group != group) continue;
      seq.step_tokens = stepTokens(seq, &chunk_budget);
      if (seq.step_tokens == 0 ||
          blocks_.grow(&seq.blocks, static_cast<int64_t>(seq.cached) + seq.step_tokens)) {
        continue;
      }
      const int victim = youngestPreemptable();
      if (victim < 0) return false;
      preempt(static_cast<size_t>(victim));
      preempted = true;  // active_ changed: plan the group again
      break;
    }
    if (!preempted) return true;
  }
}

// A sequence's tokens in its group's next step: its last token, or of a prompt (or a resumed
// sequence's tokens) what is left of the step's --prefill-chunk budget, in admission order.
int GenerationScheduler::stepTokens(const ActiveSequence& seq, int64_t* chunk_budget) const {
  const int64_t pending = static_cast<int64_t>(seq.feed.size());
  if (pending <= 1) return static_cast<int>(pending);
  const int64_t tokens = std::min(pending, *chunk_budget);
  *chunk_budget -= tokens;
  return static_cast<int>(tokens);
}

// A chunk of the prompt ran: the sequence moves on to its next chunk.
void GenerationScheduler::advanceChunk(ActiveSequence& seq, int tokens) {
  seq.cached += tokens;
  seq.feed.erase(seq.feed.begin(), seq.feed.begin() + tokens);
  registerFullBlocks(seq);
}

int GenerationScheduler::youngestPreemptable() const {
  int best = -1;
  for (size_t i = 0; i < active_.size(); ++i) {
    if (group_busy_[active_[i].group]) continue;
    if (best < 0 || active_[i].order > active_[best].order) best = static_cast<int>(i);
  }
  return best;
}

// Frees the blocks of active_[index]; it resumes later by recomputing its prompt and generated
// tokens in one step (the same bits: prefill == decode).
void GenerationScheduler::preempt(size_t index) {
  ActiveSequence seq = std::move(active_[index]);
  active_.erase(active_.begin() + static_cast<std::ptrdiff_t>(index));
  blocks_.release(&seq.blocks);
  seq.block_keys.clear();
  group_size_[seq.group] -= 1;
  const GenerationResult& res = result(seq.request);
  seq.feed = res.prompt_ids;
  seq.feed.insert(seq.feed.end(), res.output_ids.begin(), res.output_ids.end());
  seq.cached = 0;
  m_.kv_preemptions += 1;
  auto at = std::find_if(preempted_.begin(), preempted_.end(),
                         [&](const ActiveSequence& other) { return other.order > seq.order; });
  preempted_.insert(at, std::move(seq));
}

// One step for every idle group that has sequences and the blocks for them.
Status GenerationScheduler::submitIdleGroups() {
  for (int g = 0; g < groups_; ++g) {
    if (group_busy_[g] || group_size_[g] == 0) continue;
    if (!ensureGroupBlocks(g) || group_size_[g] == 0) continue;
    StepWork work;
    StepInFlight step;
    step.group = g;
    REE_RETURN_IF_ERROR(buildGroupStep(g, &work, &step));
    step.engine_step = m_.next_step_id;  // the id submit() gives it
    REE_RETURN_IF_ERROR(m_.submit(std::move(work)));
    group_busy_[g] = true;
    steps_.push_back(std::move(step));
  }
  return Status::kSuccess;
}

// The step of `group`: each member's tokens of this step (its prompt or a chunk of it, then its
// last token; after a preemption all its tokens), and for each member whose pending tokens all
// run, logits for its last row, sampled with its request's parameters and key; block tables.
Status GenerationScheduler::buildGroupStep(int group, StepWork* work, StepInFlight* step) const {
  work->trace = m_.options.trace_layer_hashes;
  work->batch.query_offsets.push_back(0);
  step->greedy_decode = !work->trace;
  int blocks_per_seq = 1;
  for (const ActiveSequence& seq : active_) {
    if (seq.group == group && seq.step_tokens > 0)
      blocks_per_seq = std::max(blocks_per_seq, static_cast<int>(seq.blocks.size()));
  }
  work->batch.blocks_per_seq = blocks_per_seq;
  for (const ActiveSequence& seq : active_) {
    if (seq.group != group || seq.step_tokens == 0) continue;
    // Rows are int32 offsets: a step of all prompts at once must stay within them.
    if (work->ids.size() + seq.step_tokens > static_cast<size_t>(INT32_MAX)) {
      return REE_FAIL(Status::kInvalidArgument,
                      "a step of micro-batch %d would feed more than 2^31 - 1 tokens; lower "
                      "--max-batch or raise --micro-batches",
                      group);
    }
    work->ids.insert(work->ids.end(), seq.feed.begin(), seq.feed.begin() + seq.step_tokens);
    int32_t end = static_cast<int32_t>(work->ids.size());
    work->batch.query_offsets.push_back(end);
    work->batch.cached_lens.push_back(seq.cached);
    work->batch.block_tables.insert(work->batch.block_tables.end(), seq.blocks.begin(),
                                    seq.blocks.end());
    work->batch.block_tables.resize(work->batch.block_tables.size() + blocks_per_seq -
                                    seq.blocks.size());         // padding, never read
    if (seq.step_tokens < static_cast<int>(seq.feed.size())) {  // a chunk: no token yet
      work->trace_group_ends.push_back(end);
      step->chunks.emplace_back(seq.request, seq.step_tokens);
      step->greedy_decode = false;
      continue;
    }
    work->logits_rows.push_back(end - 1);
    // A resumed sequence's earlier rows form a trace group of their own: its group is the row of
    // its token, as the decode step it replaces hashed it.
    if (seq.produced > 0 && seq.feed.size() > 1) work->trace_group_ends.push_back(end - 1);
    work->trace_group_ends.push_back(end);
    step->trace_groups.push_back(work->trace_group_ends.size() - 1);
    const GenerationRequest& req = request(seq.request);
    work->rows.push_back({req.sampling_index.value_or(slots_.at(seq.request).id),
                          static_cast<uint64_t>(seq.produced), req.sampling, req.top_logprobs});
    step->members.push_back(seq.request);
    step->greedy_decode = step->greedy_decode && seq.step_tokens == 1 &&
                          req.sampling.temperature == 0.0f && req.top_logprobs < 0;
  }
  return work->batch.finalize();
}

// Collects the oldest step in flight and hands each of its sequences its token (or its next
// chunk).
Status GenerationScheduler::collectStep() {
  StepOutput out;
  REE_RETURN_IF_ERROR(m_.collect(&out));
  StepInFlight step = std::move(steps_.front());
  steps_.pop_front();
  const std::vector<size_t>& members = step.members;
  group_busy_[step.group] = std::any_of(
      steps_.begin(), steps_.end(), [&](const StepInFlight& s) { return s.group == step.group; });
  if (out.tokens.size() != members.size()) {
    return REE_FAIL(Status::kCommError, "a pipeline step returned %zu tokens for %zu sequences",
                    out.tokens.size(), members.size());
  }
  if (!members.empty()) {  // a step of chunks only has no logits to hash
    pending_digests_.push_back({out.id, {}});
    // Rows of sequences that ended at an earlier step (decode lookahead) stay dropped.
    pending_digests_.back().slots.assign(members.size(), {PendingDigests::kDroppedRow, 0});
  }
  // A lookahead step was queued before the host had the last step's tokens. A member stopped
  // before this step's tokens came (a callback of that step, another thread) would not have run
  // it without lookahead: the boundary in between (finishStopped) ended it, without this token.
  std::vector<bool> stopped_before(members.size(), false);
  for (size_t row = 0; row < members.size() && step.lookahead; ++row) {
    auto slot = slots_.find(members[row]);  // an ended member may be reported and gone
    stopped_before[row] =
        slot != slots_.end() && !slot->second.ended && stopRequested(members[row]);
  }
  std::vector<ActiveSequence> still_active;
  for (ActiveSequence& seq : active_) {
    bool finished = false;
    if (seq.group == step.group) {
      auto it = std::find(members.begin(), members.end(), seq.request);
      auto chunk = std::find_if(step.chunks.begin(), step.chunks.end(),
                                [&](const auto& c) { return c.first == seq.request; });
      if (it != members.end() && stopped_before[static_cast<size_t>(it - members.begin())]) {
        REE_RETURN_IF_ERROR(finishSequence(seq, "stop"));
        finished = true;
      } else if (it != members.end()) {
        const size_t row = static_cast<size_t>(it - members.begin());
        REE_RETURN_IF_ERROR(acceptToken(seq, out, row, step.trace_groups[row], &finished));
      } else if (chunk != step.chunks.end()) {
        advanceChunk(seq, chunk->second);
      }
    }
    if (!finished) still_active.push_back(std::move(seq));
  }
  active_ = std::move(still_active);
  return Status::kSuccess;
}

}  // namespace ree::models
