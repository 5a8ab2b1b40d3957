// Decode lookahead (EngineOptions::decode_lookahead): while a micro-batch's greedy decode step S
// is in flight, its next step is queued at once, fed with the tokens S selects on the device
// (EngineState::embedStep), so the device runs S + 1 while the host reads S's tokens. The
// lookahead step has S's rows in S's order, each one position further. A sequence that S ends
// (end of sequence, stop flag) has its row of S + 1 computed and dropped (collectStep finds it no
// longer active); its extra position lies in a block the prefix cache never holds (not full), and
// the work of any step queued later follows it on the device. Results are those without
// lookahead: a row's bits never depend on the other rows of its step.
#include <algorithm>

#include "engine_scheduler.h"

namespace ree::models {

// One lookahead step for every group whose only step in flight is a greedy decode step that it
// extends: every member still running and certain to run one more step unless S ends it (no
// length limit or stop flag reached), no other sequence waiting for the group's next step, and
// the blocks of one more position free.
Status GenerationScheduler::submitLookahead() {
  if (!m_.lookaheadPossible() || !waiting_.empty() || !preempted_.empty()) return Status::kSuccess;
  for (int g = 0; g < groups_; ++g) {
    const StepInFlight* source = nullptr;
    int in_flight = 0;
    for (const StepInFlight& step : steps_) {
      if (step.group != g) continue;
      source = &step;
      in_flight += 1;
    }
    if (in_flight != 1 || !lookaheadFits(*source)) continue;
    StepWork work;
    StepInFlight step;
    REE_RETURN_IF_ERROR(buildLookaheadStep(*source, &work, &step));
    step.engine_step = m_.next_step_id;  // the id submit() gives it
    REE_RETURN_IF_ERROR(m_.submit(std::move(work)));
    steps_.push_back(std::move(step));
    m_.lookahead_steps += 1;
  }
  return Status::kSuccess;
}

bool GenerationScheduler::lookaheadFits(const StepInFlight& step) {
  if (!step.greedy_decode || step.members.empty() ||
      static_cast<size_t>(group_size_[step.group]) != step.members.size()) {
    return false;
  }
  for (size_t member : step.members) {
    auto it = std::find_if(active_.begin(), active_.end(),
                           [&](const ActiveSequence& seq) { return seq.request == member; });
    if (it == active_.end() || it->feed.size() != 1 || stopRequested(member)) return false;
    // After `step`: produced + 1 tokens, cached + 1 positions; acceptToken ends the sequence
    // there when either reaches its limit, and then this step would be wasted.
    if (it->produced + 1 >= request(member).max_new_tokens || it->cached + 2 >= m_.max_context) {
      return false;
    }
  }
  for (size_t member : step.members) {
    auto it = std::find_if(active_.begin(), active_.end(),
                           [&](const ActiveSequence& seq) { return seq.request == member; });
    if (!blocks_.grow(&it->blocks, static_cast<int64_t>(it->cached) + 2)) return false;
  }
  return true;
}

// `source`'s rows one position further: row r feeds the token that source selects for row r.
Status GenerationScheduler::buildLookaheadStep(const StepInFlight& source, StepWork* work,
                                               StepInFlight* step) const {
  work->ids_of_step = source.engine_step;
  step->group = source.group;
  step->members = source.members;
  step->greedy_decode = true;
  step->lookahead = true;
  std::vector<const ActiveSequence*> rows;
  int blocks_per_seq = 1;
  for (size_t member : source.members) {
    auto it = std::find_if(active_.begin(), active_.end(),
                           [&](const ActiveSequence& seq) { return seq.request == member; });
    rows.push_back(&*it);
    blocks_per_seq = std::max(blocks_per_seq, static_cast<int>(it->blocks.size()));
  }
  StepBatch& batch = work->batch;
  batch.blocks_per_seq = blocks_per_seq;
  batch.query_offsets.push_back(0);
  for (const ActiveSequence* seq : rows) {
    const int32_t end = static_cast<int32_t>(batch.query_offsets.size());
    batch.query_offsets.push_back(end);
    batch.cached_lens.push_back(seq->cached + 1);  // source runs position cached
    batch.block_tables.insert(batch.block_tables.end(), seq->blocks.begin(), seq->blocks.end());
    batch.block_tables.resize(batch.block_tables.size() + blocks_per_seq - seq->blocks.size());
    work->logits_rows.push_back(end - 1);
    work->trace_group_ends.push_back(end);
    step->trace_groups.push_back(work->trace_group_ends.size() - 1);
    const GenerationRequest& req = request(seq->request);
    work->rows.push_back({req.sampling_index.value_or(slots_.at(seq->request).id),
                          static_cast<uint64_t>(seq->produced + 1), req.sampling,
                          req.top_logprobs});
  }
  return batch.finalize();
}

}  // namespace ree::models
