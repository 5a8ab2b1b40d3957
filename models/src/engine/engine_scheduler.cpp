// generate(): the scheduler. Requests are checked and tokenized first; then up to max_batch
// sequences run together (continuous batching), each holding the KV cache blocks of its positions
// (kv_blocks.h), grouped into micro-batches, each with at most one step in the pipeline at a time,
// so that with as many groups as stages every stage has work during decode. A request is admitted
// when the pool has blocks for its prompt and first token; when a running sequence needs a block
// and none is free, the youngest sequence not in flight is preempted: its blocks are freed, its
// tokens kept, and it later resumes with ONE prefill of its prompt and generated tokens. A
// request's result never depends on the others in reproducible mode (prefill == decode, bit for
// bit): the scheduler decides only which steps run together, never what a step computes.
// A request whose stop flag is set (GenerationRequest::stop) finishes at the next step boundary
// with the tokens it has, its blocks freed: only which steps run changes, never what they compute.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <deque>

#include "engine_state.h"
#include "generation_sampling.h"
#include "kv_blocks.h"
#include "ree/core/log.h"
#include "token_logprobs.h"

namespace ree {
namespace models {

Status EngineState::prepareRequest(const GenerationRequest& req, size_t r,
                                   GenerationResult* res) const {
  if (!req.prompt_ids.empty()) {
    res->prompt_ids = req.prompt_ids;
  } else {
    if (!tokenizer) {
      return REE_FAIL(Status::kInvalidArgument,
                      "request %zu: the model has no tokenizer (no tokenizer.json, or a GGUF "
                      "file without tokenizer.ggml.* metadata); pass token ids (--prompt-ids)",
                      r);
    }
    REE_RETURN_IF_ERROR(
        tokenizer->encode(req.prompt_text, req.add_special_tokens, &res->prompt_ids));
  }
  if (res->prompt_ids.empty()) {
    return REE_FAIL(Status::kInvalidArgument, "request %zu: the prompt is empty", r);
  }
  const int64_t vocab = config.vocab_size;
  for (size_t i = 0; i < res->prompt_ids.size(); ++i) {
    if (res->prompt_ids[i] < 0 || res->prompt_ids[i] >= vocab) {
      return REE_FAIL(Status::kInvalidArgument,
                      "request %zu: prompt token %zu is id %d, outside the vocabulary [0, %lld)", r,
                      i, res->prompt_ids[i], static_cast<long long>(vocab));
    }
  }
  if (res->prompt_ids.size() >= static_cast<size_t>(max_context)) {
    return REE_FAIL(Status::kInvalidArgument,
                    "request %zu: the prompt has %zu tokens, the context holds %d (%s)", r,
                    res->prompt_ids.size(), max_context, options.names.max_context.c_str());
  }
  REE_CHECK_ARG(req.max_new_tokens >= 1, "request %zu: --max-new-tokens must be >= 1 (got %d)", r,
                req.max_new_tokens);
  // Alone in the pool, the request must reach its end: the positions it caches at most.
  const int64_t prompt = static_cast<int64_t>(res->prompt_ids.size());
  const int64_t longest =
      std::max(prompt + 1, std::min<int64_t>(prompt + req.max_new_tokens - 1, max_context));
  const int64_t blocks = (longest + kv_block_size - 1) / kv_block_size;
  if (blocks > kv_blocks) {
    return REE_FAIL(Status::kOutOfMemory,
                    "request %zu: %lld prompt tokens and up to %d new tokens need %lld KV cache "
                    "blocks of %d tokens, the pool holds %d; raise %s or %s",
                    r, static_cast<long long>(prompt), req.max_new_tokens,
                    static_cast<long long>(blocks), kv_block_size, kv_blocks,
                    options.names.kv_blocks.c_str(), options.names.kv_memory_fraction.c_str());
  }
  REE_CHECK_ARG(req.top_logprobs >= -1 && req.top_logprobs <= kMaxTopLogprobs,
                "request %zu: top_logprobs must be -1 (off) or in [0, %d], got %d", r,
                kMaxTopLogprobs, req.top_logprobs);
  REE_CHECK_ARG(req.top_logprobs < 0 || !multiProcess(),
                "request %zu: top_logprobs needs a single-process engine (the pipeline's last "
                "stage does not send log-probabilities)",
                r);
  return validateSampling(req.sampling, r);
}

namespace {

using Clock = std::chrono::steady_clock;

struct ActiveSequence {
  size_t request = 0;
  uint64_t order = 0;                // admission order: the youngest is preempted first
  std::vector<int32_t> blocks;       // KV cache blocks of positions 0..cached + feed - 1
  std::vector<BlockKey> block_keys;  // prefix cache keys of its full blocks so far
  int group = 0;                     // micro-batch
  std::vector<int32_t> feed;         // tokens still to run (the prompt, then the last token)
  int step_tokens = 0;               // how many of them the group's next step runs
  int cached = 0;                    // tokens already in the KV cache
  int produced = 0;
  Clock::time_point start;
  Clock::time_point first_token;
  std::unique_ptr<DecodeStream> stream;
};

// A collected step whose logits digests are still being computed: for each of the step's rows,
// the request and the index of its placeholder in step_logits_sha256.
struct PendingDigests {
  uint64_t step = 0;
  std::vector<std::pair<size_t, size_t>> slots;
};

// A step in flight: its micro-batch, its sequences (requests) that get a token and, for each,
// its trace group; and those that ran only a chunk of their prompt, with its length.
struct StepInFlight {
  int group = 0;
  std::vector<size_t> members;
  std::vector<size_t> trace_groups;
  std::vector<std::pair<size_t, int>> chunks;
};

class GenerationScheduler {
 public:
  GenerationScheduler(EngineState& engine, const std::vector<GenerationRequest>& requests,
                      std::vector<GenerationResult>& results, const TokenCallback& on_token);
  Status run();

 private:
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
  Status collectStep();
  Status acceptToken(ActiveSequence& seq, const StepOutput& out, size_t row, size_t trace_group,
                     bool* finished);
  bool stopRequested(size_t request) const;
  Status finishStopped();
  Status finishSequence(ActiveSequence& seq, const char* reason);
  Status completeResult(size_t request, const char* reason);
  void registerFullBlocks(ActiveSequence& seq);
  Status resolveDigests(size_t keep);

  EngineState& m_;
  const std::vector<GenerationRequest>& requests_;
  std::vector<GenerationResult>& results_;
  const TokenCallback& on_token_;
  int groups_ = 1;
  KvBlockAllocator& blocks_;
  const bool prefix_caching_;
  uint64_t next_order_ = 0;
  std::deque<size_t> waiting_;
  // Preempted sequences, oldest first: they resume before any new request is admitted.
  std::deque<ActiveSequence> preempted_;
  std::vector<ActiveSequence> active_;
  std::vector<bool> group_busy_;
  std::vector<int> group_size_;
  // The steps in flight, in submission order.
  std::deque<StepInFlight> steps_;
  std::deque<PendingDigests> pending_digests_;
  // Single process: digests of older steps are long done; taking them bounds what is held.
  // Multi-process: every pending digest message precedes the next step's tokens on the wire.
  size_t keep_pending_ = 0;
};

GenerationScheduler::GenerationScheduler(EngineState& engine,
                                         const std::vector<GenerationRequest>& requests,
                                         std::vector<GenerationResult>& results,
                                         const TokenCallback& on_token)
    : m_(engine),
      requests_(requests),
      results_(results),
      on_token_(on_token),
      blocks_(engine.generationBlocks()),
      prefix_caching_(engine.prefixCaching()) {
  const EngineOptions& o = engine.options;
  groups_ = o.micro_batches > 0 ? o.micro_batches : (engine.multiProcess() ? engine.nStages() : 1);
  groups_ = std::max(1, std::min(groups_, o.max_batch));
  for (size_t r = 0; r < requests.size(); ++r)
    waiting_.push_back(r);
  group_busy_.assign(groups_, false);
  group_size_.assign(groups_, 0);
  keep_pending_ = engine.multiProcess() ? 0 : 8;
}

Status GenerationScheduler::run() {
  for (;;) {
    REE_RETURN_IF_ERROR(finishStopped());
    admitWaiting();
    REE_RETURN_IF_ERROR(submitIdleGroups());
    m_.kv_blocks_used.store(blocks_.usedBlocks(), std::memory_order_relaxed);
    if (steps_.empty()) {
      if (active_.empty() && waiting_.empty() && preempted_.empty()) break;
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
    seq.feed = results_[seq.request].prompt_ids;
    seq.order = next_order_;
    if (!tryAdmit(&seq)) return;
    waiting_.pop_front();
    next_order_ += 1;
    ActiveSequence& admitted = active_.back();
    admitted.start = Clock::now();
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
  const GenerationResult& res = results_[seq.request];
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
      continue;
    }
    work->logits_rows.push_back(end - 1);
    // A resumed sequence's earlier rows form a trace group of their own: its group is the row of
    // its token, as the decode step it replaces hashed it.
    if (seq.produced > 0 && seq.feed.size() > 1) work->trace_group_ends.push_back(end - 1);
    work->trace_group_ends.push_back(end);
    step->trace_groups.push_back(work->trace_group_ends.size() - 1);
    const GenerationRequest& request = requests_[seq.request];
    work->rows.push_back({request.sampling_index.value_or(static_cast<uint64_t>(seq.request)),
                          static_cast<uint64_t>(seq.produced), request.sampling,
                          request.top_logprobs});
    step->members.push_back(seq.request);
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
  group_busy_[step.group] = false;
  if (out.tokens.size() != members.size()) {
    return REE_FAIL(Status::kCommError, "a pipeline step returned %zu tokens for %zu sequences",
                    out.tokens.size(), members.size());
  }
  if (!members.empty()) {  // a step of chunks only has no logits to hash
    pending_digests_.push_back({out.id, {}});
    pending_digests_.back().slots.resize(members.size());
  }
  std::vector<ActiveSequence> still_active;
  for (ActiveSequence& seq : active_) {
    bool finished = false;
    if (seq.group == step.group) {
      auto it = std::find(members.begin(), members.end(), seq.request);
      auto chunk = std::find_if(step.chunks.begin(), step.chunks.end(),
                                [&](const auto& c) { return c.first == seq.request; });
      if (it != members.end()) {
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

// Row `row` of `out` is `seq`'s next token: recorded, streamed, and the sequence finished at an
// end-of-sequence token or at its length limit.
Status GenerationScheduler::acceptToken(ActiveSequence& seq, const StepOutput& out, size_t row,
                                        size_t trace_group, bool* finished) {
  const GenerationRequest& req = requests_[seq.request];
  GenerationResult& res = results_[seq.request];
  const int32_t token = out.tokens[row];
  pending_digests_.back().slots[row] = {seq.request, res.step_logits_sha256.size()};
  res.step_logits_sha256.emplace_back();  // filled by resolveDigests
  if (m_.options.trace_layer_hashes) {
    std::vector<std::string> layers;
    for (const std::vector<Digest>& layer : out.layer_digests)
      layers.push_back(digestHex(layer.at(trace_group)));
    res.step_layer_sha256.push_back(std::move(layers));
  }
  seq.cached += static_cast<int>(seq.feed.size());
  seq.produced += 1;
  res.output_ids.push_back(token);
  if (req.top_logprobs >= 0) {
    REE_CHECK_ARG(row < out.logprobs.size(), "step %llu: no log-probabilities for row %zu",
                  static_cast<unsigned long long>(out.id), row);
    res.token_logprobs.push_back(out.logprobs[row]);
  }
  registerFullBlocks(seq);
  if (seq.produced == 1) seq.first_token = Clock::now();
  std::string piece;
  if (seq.stream) REE_RETURN_IF_ERROR(seq.stream->step(token, &piece));
  const bool is_eos = std::find(m_.eos.begin(), m_.eos.end(), token) != m_.eos.end();
  const bool at_length = seq.produced >= req.max_new_tokens || seq.cached + 1 >= m_.max_context;
  // A stop flag set by the time the token arrives ends the request here (the text held back for
  // an incomplete character goes out with it); one the callback sets ends it at the next step
  // boundary (finishStopped), before any other step of it.
  const bool stopped = stopRequested(seq.request);
  *finished = is_eos || at_length || stopped;
  if (*finished && seq.stream) {
    std::string tail;
    REE_RETURN_IF_ERROR(seq.stream->finish(&tail));
    piece += tail;
  }
  if (on_token_) on_token_(seq.request, token, piece);
  if (*finished) return finishSequence(seq, is_eos ? "eos" : at_length ? "length" : "stop");
  seq.feed.assign(1, token);
  return Status::kSuccess;
}

// Offers the blocks that the sequence's cached positions filled to the prefix cache.
void GenerationScheduler::registerFullBlocks(ActiveSequence& seq) {
  const int block_size = blocks_.blockSize();
  if (!prefix_caching_ || seq.cached / block_size <= static_cast<int>(seq.block_keys.size()))
    return;
  const GenerationResult& res = results_[seq.request];
  std::vector<int32_t> tokens = res.prompt_ids;
  tokens.insert(tokens.end(), res.output_ids.begin(), res.output_ids.end());
  blocks_.registerFull(tokens, seq.cached, seq.blocks, &seq.block_keys);
}

bool GenerationScheduler::stopRequested(size_t request) const {
  const std::shared_ptr<const std::atomic<bool>>& stop = requests_[request].stop;
  return stop != nullptr && stop->load(std::memory_order_acquire);
}

// Finishes, with finish_reason "stop", every request whose stop flag is set and that has no step
// in flight: waiting (no token yet), preempted (its blocks already freed), or running in an idle
// micro-batch. A sequence whose step is in flight finishes when its token arrives (acceptToken).
Status GenerationScheduler::finishStopped() {
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    if (!stopRequested(*it)) {
      ++it;
      continue;
    }
    REE_RETURN_IF_ERROR(completeResult(*it, "stop"));
    it = waiting_.erase(it);
  }
  for (auto it = preempted_.begin(); it != preempted_.end();) {
    if (!stopRequested(it->request)) {
      ++it;
      continue;
    }
    group_size_[it->group] += 1;  // preempt() took it out of its group; finishSequence does too
    REE_RETURN_IF_ERROR(finishSequence(*it, "stop"));
    it = preempted_.erase(it);
  }
  std::vector<ActiveSequence> still_active;
  for (ActiveSequence& seq : active_) {
    if (!group_busy_[seq.group] && stopRequested(seq.request)) {
      REE_RETURN_IF_ERROR(finishSequence(seq, "stop"));
    } else {
      still_active.push_back(std::move(seq));
    }
  }
  active_ = std::move(still_active);
  return Status::kSuccess;
}

Status GenerationScheduler::finishSequence(ActiveSequence& seq, const char* reason) {
  GenerationResult& res = results_[seq.request];
  if (seq.produced > 0) {
    auto end = Clock::now();
    res.prefill_seconds = std::chrono::duration<double>(seq.first_token - seq.start).count();
    res.decode_seconds = std::chrono::duration<double>(end - seq.first_token).count();
  }
  blocks_.release(&seq.blocks);
  group_size_[seq.group] -= 1;
  return completeResult(seq.request, reason);
}

// The result's finish reason, output hash and text, from the tokens it has.
Status GenerationScheduler::completeResult(size_t request, const char* reason) {
  GenerationResult& res = results_[request];
  res.finish_reason = reason;
  res.output_ids_sha256 = sha256Hex(res.output_ids.data(), res.output_ids.size() * sizeof(int32_t));
  if (m_.tokenizer) REE_RETURN_IF_ERROR(m_.tokenizer->decode(res.output_ids, true, &res.text));
  return Status::kSuccess;
}

// Fills the step_logits_sha256 placeholders of all but the `keep` most recent collected steps.
Status GenerationScheduler::resolveDigests(size_t keep) {
  while (pending_digests_.size() > keep) {
    PendingDigests& front = pending_digests_.front();
    std::vector<Digest> digests;
    REE_RETURN_IF_ERROR(m_.takeLogitsDigests(front.step, &digests));
    if (digests.size() != front.slots.size()) {
      return REE_FAIL(Status::kCommError, "step %llu: %zu logits hashes for %zu sequences",
                      static_cast<unsigned long long>(front.step), digests.size(),
                      front.slots.size());
    }
    for (size_t i = 0; i < digests.size(); ++i) {
      auto [request, index] = front.slots[i];
      results_[request].step_logits_sha256[index] = digestHex(digests[i]);
    }
    pending_digests_.pop_front();
  }
  return Status::kSuccess;
}

}  // namespace
}  // namespace models

Status Engine::generate(const std::vector<GenerationRequest>& requests,
                        std::vector<GenerationResult>* results, const TokenCallback& on_token) {
  REE_CHECK_ARG(results != nullptr, "Engine::generate: results is null");
  Impl& m = *impl_;
  REE_CHECK_ARG(m.rank() == 0, "generate() runs on rank 0; rank %d calls serve()", m.rank());
  REE_CHECK_ARG(!m.shut_down, "generate() after shutdown()");
  results->assign(requests.size(), GenerationResult());
  m.dropStaleDigests();
  // Every request is checked before any work, so a bad prompt fails fast.
  for (size_t r = 0; r < requests.size(); ++r)
    REE_RETURN_IF_ERROR(m.prepareRequest(requests[r], r, &(*results)[r]));
  models::GenerationScheduler scheduler(m, requests, *results, on_token);
  const int64_t preempted_before = m.kv_preemptions;
  Status status = scheduler.run();
  m.kv_blocks_used.store(m.kv_allocator.usedBlocks(), std::memory_order_relaxed);
  REE_RETURN_IF_ERROR(status);
  if (m.kv_preemptions > preempted_before) {
    logMessage(LogLevel::kInfo, "KV cache full: %lld preemptions (sequences recomputed)",
               static_cast<long long>(m.kv_preemptions - preempted_before));
  }
  return Status::kSuccess;
}

}  // namespace ree
