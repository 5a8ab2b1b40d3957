// The scheduler's results: a request's tokens as they come, its end (end of sequence, length,
// stop flag), its logits hashes, and reporting it once it is whole (engine_scheduler.h).
#include <algorithm>

#include "engine_scheduler.h"
#include "generation_sampling.h"
#include "token_logprobs.h"

namespace ree::models {

// Row `row` of `out` is `seq`'s next token: recorded, streamed, and the sequence finished at an
// end-of-sequence token or at its length limit.
Status GenerationScheduler::acceptToken(ActiveSequence& seq, const StepOutput& out, size_t row,
                                        size_t trace_group, bool* finished) {
  const GenerationRequest& req = request(seq.request);
  GenerationResult& res = result(seq.request);
  const int32_t token = out.tokens[row];
  pending_digests_.back().slots[row] = {seq.request, res.step_logits_sha256.size()};
  res.step_logits_sha256.emplace_back();  // filled by resolveDigests
  slots_.at(seq.request).unresolved_digests += 1;
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
  if (seq.produced == 1) seq.first_token = SchedulerClock::now();
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
  if (on_token_) on_token_(slots_.at(seq.request).id, token, piece, res);
  if (*finished) return finishSequence(seq, is_eos ? "eos" : at_length ? "length" : "stop");
  seq.feed.assign(1, token);
  return Status::kSuccess;
}

// Offers the blocks that the sequence's cached positions filled to the prefix cache.
void GenerationScheduler::registerFullBlocks(ActiveSequence& seq) {
  const int block_size = blocks_.blockSize();
  if (!prefix_caching_ || seq.cached / block_size <= static_cast<int>(seq.block_keys.size()))
    return;
  const GenerationResult& res = result(seq.request);
  std::vector<int32_t> tokens = res.prompt_ids;
  tokens.insert(tokens.end(), res.output_ids.begin(), res.output_ids.end());
  blocks_.registerFull(tokens, seq.cached, seq.blocks, &seq.block_keys);
}

bool GenerationScheduler::stopRequested(size_t request) const {
  const std::shared_ptr<const std::atomic<bool>>& stop = this->request(request).stop;
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
  GenerationResult& res = result(seq.request);
  if (seq.produced > 0) {
    auto end = SchedulerClock::now();
    res.prefill_seconds = std::chrono::duration<double>(seq.first_token - seq.start).count();
    res.decode_seconds = std::chrono::duration<double>(end - seq.first_token).count();
  }
  blocks_.release(&seq.blocks);
  group_size_[seq.group] -= 1;
  return completeResult(seq.request, reason);
}

// The result's finish reason, output hash and text, from the tokens it has; reported once its
// logits hashes are in.
Status GenerationScheduler::completeResult(size_t request, const char* reason) {
  GenerationResult& res = result(request);
  res.finish_reason = reason;
  res.output_ids_sha256 = sha256Hex(res.output_ids.data(), res.output_ids.size() * sizeof(int32_t));
  if (m_.tokenizer) REE_RETURN_IF_ERROR(m_.tokenizer->decode(res.output_ids, true, &res.text));
  slots_.at(request).ended = true;
  ended_unreported_ += 1;
  reportIfWhole(request);
  return Status::kSuccess;
}

// An ended request whose logits hashes are all in goes to on_finished and leaves the scheduler.
void GenerationScheduler::reportIfWhole(size_t request) {
  auto it = slots_.find(request);
  if (it == slots_.end() || !it->second.ended || it->second.unresolved_digests > 0) return;
  ended_unreported_ -= 1;
  RequestSlot slot = std::move(it->second);
  slots_.erase(it);
  if (on_finished_) on_finished_(slot.id, Status::kSuccess, "", std::move(*slot.result));
}

void GenerationScheduler::failAll(Status status, const std::string& error) {
  std::vector<size_t> held;
  for (const auto& [index, slot] : slots_)
    held.push_back(index);
  std::sort(held.begin(), held.end());  // arrival order
  for (size_t index : held) {
    RequestSlot& slot = slots_.at(index);
    if (on_finished_) on_finished_(slot.id, status, error, std::move(*slot.result));
  }
  slots_.clear();
  ended_unreported_ = 0;
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
    PendingDigests done = std::move(front);
    pending_digests_.pop_front();
    for (size_t i = 0; i < digests.size(); ++i) {
      auto [request, index] = done.slots[i];
      if (request == PendingDigests::kDroppedRow) continue;
      RequestSlot& slot = slots_.at(request);
      slot.result->step_logits_sha256[index] = digestHex(digests[i]);
      slot.unresolved_digests -= 1;
      reportIfWhole(request);
    }
  }
  return Status::kSuccess;
}

}  // namespace ree::models
