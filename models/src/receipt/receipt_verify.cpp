// Receipts, re-execution (verify): the receipt's model identity, then each request's prompt and
// generated tokens run as ONE prefill (Engine::replay) and every layer hash, logits hash, token,
// finish reason and text compared, reporting the first divergence.
#include <algorithm>
#include <chrono>
#include <cstdio>

#include "receipt_json.h"
#include "ree/models/tokenizer.h"

namespace ree {

using receipt_detail::Json;

const char* verdictName(Verdict verdict) {
  switch (verdict) {
    case Verdict::kVerified:
      return "verified";
    case Verdict::kMismatch:
      return "mismatch";
    default:
      return "could-not-verify";
  }
}

void finishVerifyReport(VerifyReport* report) {
  Json j = {{"verdict", verdictName(report->verdict)},
            {"summary", report->summary},
            {"note", report->note},
            {"requests_checked", report->requests_checked},
            {"steps_checked", report->steps_checked},
            {"replay_seconds", report->replay_seconds}};
  if (!report->field.empty()) {
    j["first_divergence"] = {{"field", report->field},
                             {"request", report->request},
                             {"step", report->step},
                             {"layer", report->layer},
                             {"stage", report->stage}};
  }
  report->json = j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

namespace {

Status concluded(VerifyReport* report, Verdict verdict, const std::string& field, int64_t request,
                 int64_t step, const std::string& summary) {
  report->verdict = verdict;
  report->field = field;
  report->request = request;
  report->step = step;
  report->summary = summary;
  finishVerifyReport(report);
  return Status::kSuccess;
}

Status couldNotVerify(VerifyReport* report, Status status) {
  report->verdict = Verdict::kCouldNotVerify;
  report->summary = std::string("could not verify: ") + lastErrorMessage();
  finishVerifyReport(report);
  return status;
}

int64_t stageOfLayer(const std::vector<partitioner::Stage>& plan, int64_t layer) {
  for (size_t s = 0; s < plan.size(); ++s) {
    if (layer >= plan[s].first_layer && layer < plan[s].end_layer) return static_cast<int64_t>(s);
  }
  return -1;
}

// What one verification knows besides the receipt: the engine's model, and how a numeric
// divergence is judged under the receipt's operation set.
class Verifier {
 public:
  Verifier(const Receipt& receipt, Engine& engine, VerifyReport* report)
      : receipt_(receipt), engine_(engine), report_(report) {}

  // The engine must compute what the receipt's run computed (*usable false and the report
  // concluded when it cannot); sets how a numeric divergence is judged.
  Status checkEngine(bool* usable);
  // One request through every check; *done when the report holds a verdict.
  Status verifyRequest(const ReceiptRequest& r, bool* done);

 private:
  Status checkInputs(const ReceiptRequest& r, bool* done);
  Status replay(const ReceiptRequest& r, ReplayResult* again, bool* done);
  Status compareStep(const ReceiptRequest& r, const ReplayResult& again, size_t t, bool* done);
  Status checkEnding(const ReceiptRequest& r, bool* done);
  bool isEos(int32_t id) const { return std::find(eos_.begin(), eos_.end(), id) != eos_.end(); }

  const Receipt& receipt_;
  Engine& engine_;
  VerifyReport* report_;
  const models::Tokenizer* tokenizer_ = nullptr;
  int64_t vocab_ = 0;
  std::vector<int64_t> eos_;
  // Only RepOps promises the same bits on other hardware and in one prefill instead of decode
  // steps; a numeric divergence under another operation set proves nothing.
  Verdict numeric_divergence_ = Verdict::kMismatch;
  const char* numeric_word_ = "mismatch";
};

Status Verifier::checkEngine(bool* usable) {
  *usable = false;
  EngineOptions wanted = engine_.options();
  REE_RETURN_IF_ERROR(receiptEngineOptions(receipt_, &wanted));
  if (engine_.options().operation_set != wanted.operation_set ||
      engine_.options().weight_dtype != wanted.weight_dtype) {
    Status status = REE_FAIL(Status::kInvalidArgument,
                             "the engine's operation set / weight dtype (%s) are not the "
                             "receipt's (%s, weight dtype %s): make it with receiptEngineOptions()",
                             operationSetName(engine_.options().operation_set),
                             receipt_.operation_set.c_str(), receipt_.weight_dtype.c_str());
    return couldNotVerify(report_, status);
  }
  if (engine_.options().operation_set != OperationSetKind::kReproducible) {
    report_->note += std::string(report_->note.empty() ? "" : "; ") + "operation set '" +
                     receipt_.operation_set +
                     "' is not reproducible across hardware, nor between decode steps and the one "
                     "prefill verify runs: a numeric divergence is inconclusive";
    numeric_divergence_ = Verdict::kCouldNotVerify;
    numeric_word_ = "could not verify (inconclusive)";
  }
  tokenizer_ = engine_.tokenizer();
  vocab_ = engine_.config().vocab_size;
  eos_ = engine_.eosTokenIds();
  if (tokenizer_ == nullptr) {
    report_->note += std::string(report_->note.empty() ? "" : "; ") +
                     "the model has no tokenizer: prompt text and output text were not checked";
  }
  *usable = true;
  return Status::kSuccess;
}

// prompt_text re-tokenises to prompt_ids; every id is inside the vocabulary.
Status Verifier::checkInputs(const ReceiptRequest& r, bool* done) {
  const std::string who = "request " + std::to_string(r.index);
  if (r.has_prompt_text && tokenizer_ != nullptr) {
    std::vector<int32_t> ids;
    Status status = tokenizer_->encode(r.prompt_text, r.add_special_tokens, &ids);
    if (status != Status::kSuccess) return couldNotVerify(report_, status);
    if (ids != r.prompt_ids) {
      *done = true;
      return concluded(report_, Verdict::kMismatch, "prompt_ids", r.index, -1,
                       "mismatch: " + who + ": prompt_ids are not the tokenization of prompt_text");
    }
  }
  for (int32_t id : r.prompt_ids) {
    if (id >= vocab_) {
      *done = true;
      return concluded(report_, Verdict::kMismatch, "prompt_ids", r.index, -1,
                       "mismatch: " + who + ": prompt id " + std::to_string(id) +
                           " is outside the vocabulary of " + std::to_string(vocab_));
    }
  }
  for (size_t t = 0; t < r.output_ids.size(); ++t) {
    if (r.output_ids[t] >= vocab_) {
      *done = true;
      return concluded(report_, Verdict::kMismatch, "output_ids", r.index, static_cast<int64_t>(t),
                       "mismatch: " + who + " step " + std::to_string(t) + ": output id " +
                           std::to_string(r.output_ids[t]) + " is outside the vocabulary of " +
                           std::to_string(vocab_));
    }
  }
  return Status::kSuccess;
}

Status Verifier::replay(const ReceiptRequest& r, ReplayResult* again, bool* done) {
  ReplayRequest replay;
  replay.prompt_ids = r.prompt_ids;
  replay.output_ids = r.output_ids;
  replay.sampling = r.sampling;
  replay.request_index = static_cast<uint64_t>(r.index);
  replay.trace_layer_hashes = receipt_.trace_layer_hashes;
  auto start = std::chrono::steady_clock::now();
  Status status = engine_.replay(replay, again);
  report_->replay_seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (status != Status::kSuccess) {
    *done = true;
    return couldNotVerify(report_, status);
  }
  const size_t n = r.output_ids.size();
  if (again->tokens.size() != n || again->step_logits_sha256.size() != n ||
      (receipt_.trace_layer_hashes && again->step_layer_sha256.size() != n)) {
    *done = true;
    status =
        REE_FAIL(Status::kInternal, "request %lld: replay returned %zu steps for %zu output ids",
                 static_cast<long long>(r.index), again->tokens.size(), n);
    return couldNotVerify(report_, status);
  }
  return Status::kSuccess;
}

// Step t: the layer hashes (traced receipts), the logits hash, the token, and no
// end-of-sequence token before the last step.
Status Verifier::compareStep(const ReceiptRequest& r, const ReplayResult& again, size_t t,
                             bool* done) {
  const int64_t step = static_cast<int64_t>(t);
  const std::string who = "request " + std::to_string(r.index);
  const std::string where = who + " step " + std::to_string(t);
  *done = true;
  if (receipt_.trace_layer_hashes) {
    const std::vector<std::string>& claimed = r.step_layer_sha256[t];
    const std::vector<std::string>& have = again.step_layer_sha256[t];
    for (size_t l = 0; l < std::max(claimed.size(), have.size()); ++l) {
      if (l < claimed.size() && l < have.size() && claimed[l] == have[l]) continue;
      const int64_t layer = static_cast<int64_t>(l);
      const int64_t stage = stageOfLayer(receipt_.plan, layer);
      concluded(report_, numeric_divergence_, "step_layer_sha256", r.index, step,
                std::string(numeric_word_) + ": " + where + " (first divergent layer " +
                    std::to_string(layer) + ", stage " + std::to_string(stage) + ")");
      report_->layer = layer;
      report_->stage = stage;
      finishVerifyReport(report_);
      return Status::kSuccess;
    }
  }
  if (again.step_logits_sha256[t] != r.step_logits_sha256[t]) {
    return concluded(report_, numeric_divergence_, "step_logits_sha256", r.index, step,
                     std::string(numeric_word_) + ": " + where + " (the logits hash differs)");
  }
  if (again.tokens[t] != r.output_ids[t]) {
    // Same logits, different token: the sampler (or the receipt's token) disagrees, which does
    // not depend on the operation set's numerics.
    return concluded(report_, Verdict::kMismatch, "output_ids", r.index, step,
                     "mismatch: " + where + " (the receipt's token is " +
                         std::to_string(r.output_ids[t]) + "; the logits and the sampler give " +
                         std::to_string(again.tokens[t]) + ")");
  }
  if (t + 1 < r.output_ids.size() && isEos(r.output_ids[t])) {
    return concluded(report_, Verdict::kMismatch, "output_ids", r.index, step + 1,
                     "mismatch: " + who +
                         ": generation continues after the end-of-sequence token at step " +
                         std::to_string(t));
  }
  *done = false;
  return Status::kSuccess;
}

// finish_reason "eos" exactly when the last token is one (so "length" and "stop", a generation
// the caller stopped, never end with one); text is the decoding of output_ids.
Status Verifier::checkEnding(const ReceiptRequest& r, bool* done) {
  const std::string who = "request " + std::to_string(r.index);
  *done = true;
  const bool ends_with_eos = isEos(r.output_ids.back());
  if ((r.finish_reason == "eos") != ends_with_eos) {
    return concluded(report_, Verdict::kMismatch, "finish_reason", r.index, -1,
                     "mismatch: " + who + ": finish_reason '" + r.finish_reason +
                         "' but the last token is " + (ends_with_eos ? "" : "not ") +
                         "an end-of-sequence token");
  }
  if (tokenizer_ != nullptr) {
    std::string text;
    Status status = tokenizer_->decode(r.output_ids, /*skip_special_tokens=*/true, &text);
    if (status != Status::kSuccess) return couldNotVerify(report_, status);
    if (receipt_detail::validUtf8(text) != r.text) {
      return concluded(report_, Verdict::kMismatch, "text", r.index, -1,
                       "mismatch: " + who + ": text is not the decoding of output_ids");
    }
  } else if (!r.text.empty()) {
    return concluded(report_, Verdict::kMismatch, "text", r.index, -1,
                     "mismatch: " + who + ": text given but the model has no tokenizer");
  }
  *done = false;
  return Status::kSuccess;
}

Status Verifier::verifyRequest(const ReceiptRequest& r, bool* done) {
  *done = false;
  Status status = checkInputs(r, done);
  if (status != Status::kSuccess || *done) {
    *done = true;
    return status;
  }
  ReplayResult again;
  REE_RETURN_IF_ERROR(replay(r, &again, done));
  if (*done) return Status::kSuccess;
  for (size_t t = 0; t < r.output_ids.size(); ++t) {
    REE_RETURN_IF_ERROR(compareStep(r, again, t, done));
    if (*done) return Status::kSuccess;
  }
  status = checkEnding(r, done);
  if (status != Status::kSuccess || *done) {
    *done = true;
    return status;
  }
  report_->requests_checked += 1;
  report_->steps_checked += static_cast<int64_t>(r.output_ids.size());
  return Status::kSuccess;
}

// One field of the model identity. `unbound_note`: the note saying what a receipt written before
// the field bound its files did not compare; such a receipt says "" there (a GGUF model's
// tokenizer_sha256, REE 0.3.0 and earlier) or lacks the key (a model directory's
// generation_config_sha256 and chat_template_sha256, REE 0.3.0 and earlier, read as ""). nullptr:
// "" is never exempt.
struct IdentityField {
  const char* name;
  const std::string& claimed;
  const std::string& have;
  const char* what;
  const char* unbound_note;
};

// A receipt from before the binding still verifies, with a note saying what was not compared; a
// receipt that names a hash must match it.
bool acceptedAsUnbound(const IdentityField& f, VerifyReport* report) {
  if (f.unbound_note == nullptr || !f.claimed.empty() || f.have.empty()) return false;
  if (report->note.find(f.unbound_note) == std::string::npos) {
    report->note += std::string(report->note.empty() ? "" : "; ") + f.unbound_note;
  }
  return true;
}

}  // namespace

bool checkModelIdentity(const Receipt& receipt, const ModelIdentity& actual, VerifyReport* report) {
  const bool gguf = actual.weights_kind == "gguf";
  const ModelIdentity& claimed = receipt.identity;
  const IdentityField fields[] = {
      {"model.config_sha256", claimed.config_sha256, actual.config_sha256,
       gguf ? "the config of the GGUF metadata" : "config.json", nullptr},
      {"model.tokenizer_sha256", claimed.tokenizer_sha256, actual.tokenizer_sha256,
       gguf ? "the GGUF tokenizer metadata" : "tokenizer.json",
       gguf ? "model.tokenizer_sha256 is \"\": the receipt predates the binding of a GGUF file's "
              "tokenizer metadata, so --model's tokenizer and chat template were not compared with "
              "the run's (prompt and output text are still re-derived with --model's tokenizer)"
            : nullptr},
      {"model.generation_config_sha256", claimed.generation_config_sha256,
       actual.generation_config_sha256, "generation_config.json",
       "model.generation_config_sha256 is absent: the receipt predates the binding of a model "
       "directory's generation_config.json, so --model's end-of-sequence ids were not compared "
       "with the run's (finish_reason, and no end token before the last step, are still checked "
       "with --model's ids)"},
      {"model.chat_template_sha256", claimed.chat_template_sha256, actual.chat_template_sha256,
       "the chat template files (tokenizer_config.json, chat_template.jinja)",
       "model.chat_template_sha256 is absent: the receipt predates the binding of a model "
       "directory's chat template files (tokenizer_config.json, chat_template.jinja), so --model's "
       "chat template was not compared with the run's (a --chat prompt is re-tokenised from the "
       "rendered prompt_text)"},
      {"model.weights_sha256", claimed.weights_sha256, actual.weights_sha256, "the weights",
       nullptr},
  };
  for (const IdentityField& f : fields) {
    if (f.claimed == f.have || acceptedAsUnbound(f, report)) continue;
    concluded(report, Verdict::kCouldNotVerify, f.name, -1, -1,
              std::string("could not verify: model identity differs: ") + f.what + " of --model (" +
                  (f.have.empty() ? "absent" : f.have.substr(0, 16)) +
                  "...) is not the receipt's " + f.name + " (" +
                  (f.claimed.empty() ? "absent" : f.claimed.substr(0, 16)) + "...)");
    return false;
  }
  return true;
}

Status verifyReceipt(const Receipt& receipt, Engine& engine, const std::string& model,
                     VerifyReport* report) {
  REE_CHECK_ARG(report != nullptr, "verifyReceipt: report is null");
  ModelIdentity actual;
  Status status = computeModelIdentity(model, &actual);
  if (status != Status::kSuccess) {
    *report = VerifyReport();
    return couldNotVerify(report, status);
  }
  return verifyReceipt(receipt, engine, actual, report);
}

Status verifyReceipt(const Receipt& receipt, Engine& engine, const ModelIdentity& actual,
                     VerifyReport* report) {
  REE_CHECK_ARG(report != nullptr, "verifyReceipt: report is null");
  *report = VerifyReport();
  Status status = validateReceipt(receipt, nullptr);
  if (status == Status::kMismatch) {
    return concluded(report, Verdict::kMismatch, "receipt", -1, -1,
                     std::string("mismatch: the receipt is inconsistent: ") + lastErrorMessage());
  }
  if (status != Status::kSuccess) return couldNotVerify(report, status);
  if (!checkModelIdentity(receipt, actual, report)) return Status::kSuccess;
  Verifier verifier(receipt, engine, report);
  bool usable = false;
  status = verifier.checkEngine(&usable);
  if (status != Status::kSuccess || !usable) return status;
  for (const ReceiptRequest& r : receipt.requests) {
    bool done = false;
    status = verifier.verifyRequest(r, &done);
    if (status != Status::kSuccess || done) return status;
  }
  char seconds[32];
  std::snprintf(seconds, sizeof(seconds), "%.3f", report->replay_seconds);
  return concluded(report, Verdict::kVerified, "", -1, -1,
                   "verified: " + std::to_string(report->requests_checked) + " request(s), " +
                       std::to_string(report->steps_checked) + " step(s), re-derived in " +
                       seconds + " s (one prefill per request)");
}

}  // namespace ree
