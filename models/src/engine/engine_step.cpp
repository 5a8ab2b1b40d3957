// Stage execution: one step (StepWork) through the pipeline's stages. Single process: every stage
// runs at submission and the output waits in a queue. Multi-process: rank 0 runs the first stage
// and sends the step on (submit), the other ranks run theirs in serve(), and the last stage sends
// the tokens, then the logits hashes, back to rank 0 (collect, takeLogitsDigests).
#include <algorithm>
#include <cstring>

#include "engine_state.h"
#include "generation_sampling.h"
#include "token_logprobs.h"

namespace ree {
namespace models {
namespace {

using Clock = StepProfiler::Clock;

double secondsSince(Clock::time_point start, Clock::time_point end) {
  return std::chrono::duration<double>(end - start).count();
}

// Hashes each layer's output per trace group (the rows of one sequence) into *layer_digests.
CausalLM::LayerObserver layerTracer(OperationSet& ops, const StepWork& work,
                                    std::vector<std::vector<Digest>>* layer_digests,
                                    std::vector<uint8_t>* host) {
  return [&ops, &work, layer_digests, host](int64_t, const Tensor& h) -> Status {
    REE_RETURN_IF_ERROR(ops.synchronize());
    host->resize(h.nbytes());
    REE_RETURN_IF_ERROR(
        copyTensor(h, Tensor::wrap(host->data(), Device::cpu(), h.dtype(), h.shape())));
    size_t row_bytes = h.nbytes() / static_cast<size_t>(h.dim(0));
    std::vector<Digest> groups;
    int32_t begin = 0;
    for (int32_t end : work.trace_group_ends) {
      groups.push_back(sha256Digest(host->data() + begin * row_bytes,
                                    static_cast<size_t>(end - begin) * row_bytes));
      begin = end;
    }
    layer_digests->push_back(std::move(groups));
    return Status::kSuccess;
  };
}

// Log-probabilities of the rows whose request asked for them (GenerationRequest::top_logprobs),
// from the host logits that were sampled and are hashed; nothing when no row asked.
Status rowLogprobs(const std::vector<RowSampling>& rows, const float* host, int64_t vocab,
                   StepOutput* out) {
  std::vector<float> scratch;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i].top_logprobs < 0) continue;
    out->logprobs.resize(rows.size());
    REE_RETURN_IF_ERROR(computeTokenLogprobs(host + i * vocab, vocab, out->tokens[i],
                                             rows[i].top_logprobs, &scratch, &out->logprobs[i]));
  }
  return Status::kSuccess;
}

bool allGreedy(const StepWork& work) {
  return std::all_of(work.rows.begin(), work.rows.end(),
                     [](const RowSampling& row) { return row.sampling.temperature == 0.0f; });
}

}  // namespace

// Runs one stage's part of a step: the embedding on the first stage, then its layers, hashing
// each layer's output per trace group when tracing.
Status EngineState::computeStage(LocalStage& stage, const StepWork& work, Tensor& hidden,
                                 std::vector<std::vector<Digest>>* layer_digests, bool wait) {
  CausalLM& model = *stage.model;
  REE_RETURN_IF_ERROR(setCurrentDevice(stage.ops->device()));
  const auto started = Clock::now();
  if (stage.stage.embedding) profile.stepStarted(started);
  if (stage.stage.embedding) REE_RETURN_IF_ERROR(embedStep(model, work, &hidden));
  CausalLM::LayerObserver observer;
  std::vector<uint8_t> host;
  if (work.trace) observer = layerTracer(*stage.ops, work, layer_digests, &host);
  REE_RETURN_IF_ERROR(model.runLayers(hidden, work.batch, observer));
  if (!profile.measuring()) return wait ? stage.ops->synchronize() : Status::kSuccess;
  auto enqueued = Clock::now();
  Status status = stage.ops->synchronize();
  profile.stageTimed(secondsSince(started, enqueued), secondsSince(enqueued, Clock::now()));
  return status;
}

// The first stage's embedding: of the step's ids, or (decode lookahead) of the tokens that the
// queued step ids_of_step selects on the device, before the host has them.
Status EngineState::embedStep(CausalLM& model, const StepWork& work, Tensor* hidden) {
  if (!work.ids_of_step) return model.embed(work.ids, work.batch, hidden);
  REE_CHECK_ARG(lookaheadPossible(), "step %llu: decode lookahead is not possible here",
                static_cast<unsigned long long>(work.id));
  for (const QueuedStep& source : queued_steps) {
    if (source.out.id != *work.ids_of_step) continue;
    REE_CHECK_ARG(source.tokens != nullptr && source.tokens->rows() == work.batch.tokens(),
                  "step %llu: step %llu has no %d tokens selected on the device",
                  static_cast<unsigned long long>(work.id),
                  static_cast<unsigned long long>(source.out.id), work.batch.tokens());
    return model.embedDeviceIds(source.tokens->ids(), work.batch, hidden);
  }
  return REE_FAIL(Status::kInvalidArgument, "step %llu: step %llu is not queued",
                  static_cast<unsigned long long>(work.id),
                  static_cast<unsigned long long>(*work.ids_of_step));
}

bool EngineState::lookaheadPossible() const {
  return options.decode_lookahead && lookaheadUnavailableReason() == nullptr;
}

const char* EngineState::lookaheadUnavailableReason() const {
  if (multiProcess()) return "a pipeline of several processes";
  if (stages.empty()) return "no stage is loaded";
  if (stages.front().ops->device() != stages.back().ops->device()) {
    return "the first and last stages are on different devices";
  }
  if (!stages.front().model->embedsDeviceIds()) {
    return "this operation set or embedding table cannot read token ids in device memory "
           "(an ATen set on the CPU, quantized GGUF tables)";
  }
  return nullptr;
}

// The last stage: the logits of the requested rows, and their tokens selected where the logits
// are (TokenSelection: the argmax when every row is greedy, else the sampler) with the repops
// kernels of kernels/sampling.h, the same token on every device. On a GPU the 4-byte ids are
// copied ahead of the logits, which land in a pool buffer meanwhile; completeFinish waits for the
// ids alone (and for the logits only when a row asked for log-probabilities).
Status EngineState::queueFinish(LocalStage& stage, const StepWork& work, const Tensor& hidden,
                                QueuedStep* step) {
  step->out.id = work.id;
  step->rows = work.rows;
  step->started = Clock::now();
  if (work.logits_rows.empty()) return Status::kSuccess;
  Tensor logits;
  REE_RETURN_IF_ERROR(setCurrentDevice(stage.ops->device()));
  REE_RETURN_IF_ERROR(stage.model->logits(hidden, work.logits_rows, &logits));
  if (spare_tokens.empty()) spare_tokens.push_back(std::make_unique<TokenSelection>());
  step->tokens = std::move(spare_tokens.back());
  spare_tokens.pop_back();
  if (allGreedy(work)) {
    REE_RETURN_IF_ERROR(step->tokens->startArgmax(logits));
  } else {
    std::vector<repops::SamplingParams> params;
    for (const RowSampling& row : work.rows)
      params.push_back(toRepopsSampling(row.sampling, row.request, row.step));
    REE_RETURN_IF_ERROR(step->tokens->startSample(logits, params));
  }
  Landing& landing = step->landing;
  REE_RETURN_IF_ERROR(landing_pool.take(logits.numel(), logits.device().isCuda(), &landing.buffer));
  landing.step = work.id;
  landing.rows = work.rows.size();
  const Tensor host =
      Tensor::wrap(landing.buffer->data(), Device::cpu(), ::ree::DType::kF32, logits.shape());
  return PendingCopy::start(logits, host, &landing.copy);
}

Status EngineState::completeFinish(QueuedStep* step) {
  if (step->tokens != nullptr) {
    REE_RETURN_IF_ERROR(step->tokens->wait(&step->out.tokens));
    spare_tokens.push_back(std::move(step->tokens));
  }
  if (step->landing.buffer == nullptr) return Status::kSuccess;
  const auto copied = Clock::now();
  const bool logprobs = std::any_of(step->rows.begin(), step->rows.end(),
                                    [](const RowSampling& row) { return row.top_logprobs >= 0; });
  if (logprobs) {
    REE_RETURN_IF_ERROR(step->landing.copy.wait());
    REE_RETURN_IF_ERROR(
        rowLogprobs(step->rows, step->landing.buffer->as<float>(), config.vocab_size, &step->out));
  }
  landings.push_back(std::move(step->landing));
  profile.stepFinished(step->started, copied, Clock::now());
  return Status::kSuccess;
}

Status EngineState::flushLandings(uint64_t step) {
  while (!landings.empty() && landings.front().step <= step) {
    Landing landing = std::move(landings.front());
    landings.pop_front();
    REE_RETURN_IF_ERROR(landing.copy.wait());
    if (!digester) digester = std::make_unique<AsyncDigester>(AsyncDigester::defaultThreads());
    digest_tickets[landing.step] = digester->submit(std::move(landing.buffer), landing.rows,
                                                    static_cast<size_t>(config.vocab_size));
  }
  return Status::kSuccess;
}

// The digests of a step whose logits this process hashed (the last stage's), waiting for them.
Status EngineState::takeLocalDigests(uint64_t step_id, std::vector<Digest>* digests) {
  REE_RETURN_IF_ERROR(flushLandings(step_id));
  auto it = digest_tickets.find(step_id);
  REE_CHECK_ARG(it != digest_tickets.end() && digester != nullptr,
                "no logits digests queued for step %llu", static_cast<unsigned long long>(step_id));
  uint64_t ticket = it->second;
  digest_tickets.erase(it);
  REE_CHECK_ARG(digester->take(ticket, digests), "logits digests of step %llu were taken",
                static_cast<unsigned long long>(step_id));
  return Status::kSuccess;
}

// The logits digests of a collected step, in row order. Multi-process: the last stage sends them
// after the step's tokens, so a rank 0 that takes them before collecting the next step never
// waits longer than it would for that step.
Status EngineState::takeLogitsDigests(uint64_t step_id, std::vector<Digest>* digests) {
  if (!multiProcess()) return takeLocalDigests(step_id, digests);
  int last = nStages() - 1;
  std::vector<uint8_t> bytes;
  REE_RETURN_IF_ERROR(transport->recvMessage(last, kTagDigests, &bytes));
  uint64_t id = 0;
  REE_RETURN_IF_ERROR(decodeStepDigests(bytes, &id, digests));
  if (id != step_id) {
    return REE_FAIL(Status::kCommError,
                    "rank 0: stage %d sent the logits hashes of step %llu, "
                    "expected step %llu",
                    last, static_cast<unsigned long long>(id),
                    static_cast<unsigned long long>(step_id));
  }
  return Status::kSuccess;
}

void EngineState::dropStaleSteps() {
  queued_steps.clear();  // their copies are waited for by PendingCopy's destructor
  landings.clear();
  std::vector<Digest> unused;
  for (const auto& [step, ticket] : digest_tickets)
    digester->take(ticket, &unused);
  digest_tickets.clear();
}

Status EngineState::submit(StepWork work) {
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
      // The last stage's work need not be waited for: queueFinish's copy of the logits to the
      // host follows it on the device (one host round trip per step instead of two).
      const bool last_stage = s + 1 == stages.size();
      REE_RETURN_IF_ERROR(
          computeStage(stages[s], work, hidden, &work.layer_digests, /*wait=*/!last_stage));
    }
    QueuedStep step;
    REE_RETURN_IF_ERROR(queueFinish(stages.back(), work, hidden, &step));
    step.out.layer_digests = std::move(work.layer_digests);
    queued_steps.push_back(std::move(step));
    return Status::kSuccess;
  }
  // Over a transport that queues receives (NCCL), the header leaves before the stage's work is
  // even queued, so stage 1 queues its receive and layers while this GPU still computes; the
  // activations follow in device order. Otherwise, and when tracing (the header then carries
  // this stage's layer hashes), it follows the work: a receiver that blocks on the tensor would
  // only start its deadline early and blame the wrong rank for a stall.
  const bool early_header = earlyHeader(work);
  if (early_header)
    REE_RETURN_IF_ERROR(transport->sendMessage(1, kTagStep, encodeStepHeader(work)));
  Tensor hidden;
  REE_RETURN_IF_ERROR(
      computeStage(stages.front(), work, hidden, &work.layer_digests, /*wait=*/false));
  if (!early_header) {
    REE_RETURN_IF_ERROR(transport->sendMessage(1, kTagStep, encodeStepHeader(work)));
  }
  REE_RETURN_IF_ERROR(transport->sendTensor(1, hidden));
  in_flight.push_back(work.id);
  return Status::kSuccess;
}

Status EngineState::collect(StepOutput* out) {
  if (!multiProcess()) {
    REE_CHECK_ARG(!queued_steps.empty(), "collect() without a submitted step");
    QueuedStep& step = queued_steps.front();
    REE_RETURN_IF_ERROR(completeFinish(&step));
    // The logits of earlier steps were copied before this step ran on the device: hash them.
    if (step.out.id > 0) REE_RETURN_IF_ERROR(flushLandings(step.out.id - 1));
    *out = std::move(step.out);
    queued_steps.pop_front();
    return Status::kSuccess;
  }
  REE_CHECK_ARG(!in_flight.empty(), "collect() without a submitted step");
  int last = nStages() - 1;
  std::vector<uint8_t> bytes;
  REE_RETURN_IF_ERROR(transport->recvMessage(last, kTagResult, &bytes));
  REE_RETURN_IF_ERROR(decodeStepOutput(bytes, out));
  if (out->id != in_flight.front()) {
    return REE_FAIL(Status::kCommError, "rank 0: stage %d returned step %llu, expected %llu", last,
                    static_cast<unsigned long long>(out->id),
                    static_cast<unsigned long long>(in_flight.front()));
  }
  in_flight.pop_front();
  return Status::kSuccess;
}

Status EngineState::serveOneStep(bool* done) {
  const int rank = this->rank();
  const bool last = rank == nStages() - 1;
  LocalStage& stage = stages.front();
  std::vector<uint8_t> bytes;
  REE_RETURN_IF_ERROR(transport->recvMessage(rank - 1, kTagStep, &bytes));
  StepMessageKind kind;
  StepWork work;
  REE_RETURN_IF_ERROR(decodeStepHeader(bytes, &kind, &work));
  if (kind == StepMessageKind::kShutdown) {
    *done = true;
    if (!last) REE_RETURN_IF_ERROR(transport->sendMessage(rank + 1, kTagStep, bytes));
    return transport->flush();
  }
  Tensor hidden;
  REE_RETURN_IF_ERROR(Tensor::empty(stage.ops->device(), stage.model->activationDType(),
                                    {work.batch.tokens(), config.hidden_size}, &hidden));
  // The receive and the layers are queued without waiting for the bytes (the device orders
  // them); the host blocks only where it must read results, and first waits for the receive
  // under the transport's deadline, so a lost upstream peer is reported, never waited on.
  REE_RETURN_IF_ERROR(transport->recvTensorQueued(rank - 1, hidden));
  if (work.trace || profile.enabled()) REE_RETURN_IF_ERROR(transport->awaitReceives());
  const bool early_header = earlyHeader(work);  // as in submit()
  if (!last && early_header) {
    REE_RETURN_IF_ERROR(transport->sendMessage(rank + 1, kTagStep, encodeStepHeader(work)));
  }
  REE_RETURN_IF_ERROR(computeStage(stage, work, hidden, &work.layer_digests, /*wait=*/false));
  if (!last) {
    if (!early_header) {
      REE_RETURN_IF_ERROR(transport->sendMessage(rank + 1, kTagStep, encodeStepHeader(work)));
    }
    return transport->sendTensor(rank + 1, hidden);
  }
  REE_RETURN_IF_ERROR(transport->awaitReceives());
  QueuedStep step;
  REE_RETURN_IF_ERROR(queueFinish(stage, work, hidden, &step));
  REE_RETURN_IF_ERROR(completeFinish(&step));
  StepOutput& out = step.out;
  out.layer_digests = std::move(work.layer_digests);
  // Tokens first: rank 0 starts the next step while this rank hashes the logits.
  REE_RETURN_IF_ERROR(transport->sendMessage(0, kTagResult, encodeStepOutput(out)));
  if (work.logits_rows.empty()) return Status::kSuccess;
  std::vector<Digest> digests;
  REE_RETURN_IF_ERROR(takeLocalDigests(work.id, &digests));
  return transport->sendMessage(0, kTagDigests, encodeStepDigests(work.id, digests));
}

}  // namespace models

Status Engine::serve() {
  Impl& m = *impl_;
  if (!m.multiProcess()) return Status::kSuccess;
  REE_CHECK_ARG(m.rank() != 0, "serve() is for ranks other than 0 (rank 0 drives generation)");
  for (bool done = false; !done;)
    REE_RETURN_IF_ERROR(m.serveOneStep(&done));
  return Status::kSuccess;
}

Status Engine::shutdown() {
  Impl& m = *impl_;
  if (!m.multiProcess() || m.shut_down) return Status::kSuccess;
  REE_CHECK_ARG(m.rank() == 0, "shutdown() is for rank 0");
  m.shut_down = true;
  REE_RETURN_IF_ERROR(m.transport->sendMessage(1, models::kTagStep, models::encodeShutdown()));
  return m.transport->flush();
}

Status Engine::prefillLogits(const std::vector<int32_t>& ids, std::vector<float>* logits) {
  Impl& m = *impl_;
  REE_CHECK_ARG(logits != nullptr, "prefillLogits: logits is null");
  REE_CHECK_ARG(!m.multiProcess(), "prefillLogits: single-process engines only");
  REE_CHECK_ARG(!ids.empty() && ids.size() <= static_cast<size_t>(m.max_context),
                "prefillLogits: %zu tokens for a context of %d", ids.size(), m.max_context);
  StepBatch batch;
  batch.query_offsets = {0, static_cast<int32_t>(ids.size())};
  batch.cached_lens = {0};
  REE_RETURN_IF_ERROR(m.soloBlockTable(static_cast<int>(ids.size()), &batch));
  Tensor hidden, out;
  for (size_t s = 0; s < m.stages.size(); ++s) {
    models::CausalLM& model = *m.stages[s].model;
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
