// replay(): the verification core. A finished generation's prompt and every generated token but
// the last run as ONE prefill step (reproducible-mode logits of a position are identical in
// prefill and decode); every step's logits row is hashed and its token re-drawn with its key.
#include "engine_state.h"
#include "generation_sampling.h"

namespace ree {
namespace models {
namespace {

// The replay's single step: one sequence (its block table is the caller's), logits at every
// generated position.
Status buildReplayStep(const ReplayRequest& request, int64_t vocab, int max_context,
                       const std::string& context_name, StepWork* work) {
  work->ids = request.prompt_ids;
  work->ids.insert(work->ids.end(), request.output_ids.begin(), request.output_ids.end() - 1);
  for (size_t i = 0; i < work->ids.size(); ++i) {
    if (work->ids[i] < 0 || work->ids[i] >= vocab) {
      return REE_FAIL(Status::kInvalidArgument,
                      "replay: token %zu is id %d, outside the vocabulary [0, %lld)", i,
                      work->ids[i], static_cast<long long>(vocab));
    }
  }
  if (work->ids.size() > static_cast<size_t>(max_context)) {
    return REE_FAIL(Status::kInvalidArgument,
                    "replay: %zu tokens do not fit the context of %d (%s)", work->ids.size(),
                    max_context, context_name.c_str());
  }
  const int32_t total = static_cast<int32_t>(work->ids.size());
  const int32_t prompt = static_cast<int32_t>(request.prompt_ids.size());
  work->batch.query_offsets = {0, total};
  work->batch.cached_lens = {0};
  work->trace = request.trace_layer_hashes;
  // Step t's logits come from position prompt - 1 + t; its activations are the rows it fed: the
  // whole prompt for step 0, then the one token generated before it.
  for (size_t t = 0; t < request.output_ids.size(); ++t) {
    work->logits_rows.push_back(prompt - 1 + static_cast<int32_t>(t));
    work->rows.push_back({request.request_index, static_cast<uint64_t>(t), request.sampling});
    work->trace_group_ends.push_back(prompt + static_cast<int32_t>(t));
  }
  return Status::kSuccess;
}

}  // namespace
}  // namespace models

Status Engine::replay(const ReplayRequest& request, ReplayResult* result) {
  Impl& m = *impl_;
  REE_CHECK_ARG(result != nullptr, "Engine::replay: result is null");
  REE_CHECK_ARG(m.rank() == 0, "replay() runs on rank 0; rank %d calls serve()", m.rank());
  REE_CHECK_ARG(!m.shut_down, "replay() after shutdown()");
  REE_CHECK_ARG(!request.prompt_ids.empty(), "replay: the prompt is empty");
  REE_CHECK_ARG(!request.output_ids.empty(), "replay: no generated tokens to re-derive");
  REE_RETURN_IF_ERROR(models::validateSampling(request.sampling, request.request_index));
  m.dropStaleSteps();
  models::StepWork work;
  REE_RETURN_IF_ERROR(models::buildReplayStep(request, m.config.vocab_size, m.max_context,
                                              m.options.names.max_context, &work));
  REE_RETURN_IF_ERROR(m.soloBlockTable(work.batch.tokens(), &work.batch));
  REE_RETURN_IF_ERROR(m.submit(std::move(work)));
  models::StepOutput out;
  REE_RETURN_IF_ERROR(m.collect(&out));
  REE_RETURN_IF_ERROR(m.takeLogitsDigests(out.id, &out.logits_digests));
  if (out.logits_digests.size() != out.tokens.size()) {
    return REE_FAIL(Status::kCommError, "replay: %zu logits hashes for %zu tokens",
                    out.logits_digests.size(), out.tokens.size());
  }
  *result = ReplayResult();
  result->tokens = out.tokens;
  for (const models::Digest& d : out.logits_digests)
    result->step_logits_sha256.push_back(models::digestHex(d));
  if (request.trace_layer_hashes) {
    for (size_t t = 0; t < request.output_ids.size(); ++t) {
      std::vector<std::string> layers;
      for (const std::vector<models::Digest>& layer : out.layer_digests)
        layers.push_back(models::digestHex(layer.at(t)));
      result->step_layer_sha256.push_back(std::move(layers));
    }
  }
  return Status::kSuccess;
}

}  // namespace ree
