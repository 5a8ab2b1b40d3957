// Receipts: a run's claim (model identity, prompts, sampling, outputs, the SHA-256 of every step's
// logits and optionally of every layer's activations), as JSON whose bytes and hashes are
// specified in docs/receipt.md ("ree-receipt/1"), so anyone can recompute them with standard tools.
//
//   makeReceipt() + writeReceipt()    after Engine::generate()
//   readReceipt()                     strict parse: every field present, typed, in range
//   validateReceipt()                 internal hashes (no model needed)
//   verifyReceipt()                   re-execution: each request's prompt and generated tokens run
//                                     as ONE prefill (Engine::replay); first divergent
//                                     step / layer / stage
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ree/core/status.h"
#include "ree/models/engine.h"
#include "ree/models/model_identity.h"

namespace ree {

inline constexpr const char* kReceiptFormat = "ree-receipt/1";
inline constexpr const char* kLogitsChainDomain = "ree-logits-chain/1";
// readReceipt refuses larger files before reading them (a traced receipt of 8 requests of 4096
// steps on a 126-layer model is about 300 MB of hex; this is far above any real run's).
inline constexpr uint64_t kMaxReceiptBytes = uint64_t{1} << 30;

// Everything a run's receipt records besides the requests: what the launcher knows.
struct ReceiptRunInfo {
  std::string model;  // --model as given (informational)
  ModelIdentity identity;
  EngineOptions options;  // operation_set, weight_dtype, trace_layer_hashes are recorded
  int max_context = 0;    // in use (Engine::maxContext())
  std::vector<partitioner::Stage> plan;    // informational
  std::vector<std::string> stage_devices;  // informational, one per stage
  std::string runtime_version = kRuntimeVersion;
};

struct ReceiptRequest {
  int64_t index = 0;             // in the original batch: part of the sampler's key
  bool has_prompt_text = false;  // false: the request gave ids ("prompt_text": null)
  std::string prompt_text;
  bool add_special_tokens = true;
  std::vector<int32_t> prompt_ids;
  std::string prompt_ids_sha256;
  int64_t max_new_tokens = 0;
  SamplingParams sampling;
  std::vector<int32_t> output_ids;
  std::string text;
  std::string finish_reason;  // "eos", "length" or "stop" (stopped by the caller)
  std::string output_ids_sha256;
  std::vector<std::string> step_logits_sha256;
  std::string logits_chain_sha256;
  std::vector<std::vector<std::string>> step_layer_sha256;  // [step][layer]; empty without trace
};

struct Receipt {
  std::string format = kReceiptFormat;
  std::string runtime_name = "ree";
  std::string runtime_version;
  std::string repops_spec;
  std::string model_source;  // informational
  ModelIdentity identity;
  std::string operation_set;        // "reproducible", "deterministic", "default"
  std::string weight_dtype;         // "auto", "f32", "bf16", "f16"
  int64_t max_context = 0;          // of the run (finish_reason "length" follows from it)
  bool trace_layer_hashes = false;  // every request has step_layer_sha256
  // The checkpoint load rules the run relaxed (EngineOptions); written only when true, so that a
  // receipt of a run under the default rules has the form it always had. A verifier loads the
  // weights under the same rules.
  bool allow_extra_tensors = false;
  bool allow_non_finite_weights = false;
  // Informational: the result does not depend on them, so no verdict does either (they are
  // checked for form only, and covered by receipt_sha256 like every field).
  int64_t n_partitions = 1;
  std::vector<partitioner::Stage> plan;  // first_layer, end_layer, embedding, head
  std::vector<std::string> stage_devices;
  std::vector<ReceiptRequest> requests;
  std::string receipt_sha256;
};

// Builds the receipt of a finished Engine::generate() (requests[i] produced results[i]) and
// computes its hashes.
Status makeReceipt(const ReceiptRunInfo& run, const std::vector<GenerationRequest>& requests,
                   const std::vector<GenerationResult>& results, Receipt* out);

// The canonical serialisation that receipt_sha256 covers (everything but receipt_sha256):
// Python's json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False), UTF-8.
Status canonicalReceiptBody(const Receipt& receipt, std::string* bytes);
// The file's content (indented JSON with receipt_sha256, newline-terminated).
Status receiptFileText(const Receipt& receipt, std::string* text);
Status writeReceipt(const std::string& path, const Receipt& receipt);

// Strict parse. kIoError when the file cannot be read or is malformed (not JSON, a key repeated
// in an object, another format version, a field missing, of the wrong type, out of range,
// unknown, bad hex, counts that disagree); the message names the file and the field:
// "r.json: requests[0].output_ids[3]: expected an integer". `source` names the text in messages.
// readReceipt reads regular files only, of at most kMaxReceiptBytes.
Status parseReceipt(const std::string& text, const std::string& source, Receipt* out);
Status readReceipt(const std::string& path, Receipt* out);

// Internal consistency: prompt_ids_sha256, output_ids_sha256, logits_chain_sha256,
// receipt_sha256; sampling parameters a run accepts (the engine's limits); one layer hash per
// layer, the same count at every step; and that finish_reason "length" follows from the lengths
// ("stop": at least one output id and neither limit reached).
// kMismatch naming the field when one disagrees. `summary` (may be null): one line saying what
// was checked.
Status validateReceipt(const Receipt& receipt, std::string* summary);

// chain_0 = SHA-256(kLogitsChainDomain || prompt_ids digest); chain_t+1 = SHA-256(chain_t ||
// step_t digest), digests as raw 32 bytes; returns the hex of the last link.
std::string logitsChainSha256(const std::string& prompt_ids_sha256,
                              const std::vector<std::string>& step_logits_sha256);

// SHA-256 (hex) of ids as little-endian int32, as GenerationResult::output_ids_sha256.
std::string idsSha256(const std::vector<int32_t>& ids);

// The EngineOptions fields a verification must take from the receipt: operation_set,
// weight_dtype, trace_layer_hashes, max_batch 1 and a max_context that fits every request, with
// `names` saying where they came from (the engine's errors then name the receipt's field, not a
// flag the user never passed). The caller sets model, device and the pipeline layout (any
// layout verifies).
Status receiptEngineOptions(const Receipt& receipt, EngineOptions* options);

enum class Verdict { kVerified = 0, kMismatch = 1, kCouldNotVerify = 2 };
const char* verdictName(Verdict verdict);  // "verified", "mismatch", "could-not-verify"

struct VerifyReport {
  Verdict verdict = Verdict::kCouldNotVerify;
  std::string summary;  // one line: "verified: ...", "mismatch: ...", "could not verify: ..."
  std::string note;     // e.g. why a non-reproducible operation set limits what verify means
  // The first divergence (or the identity field that differs); -1 where not applicable.
  std::string field;  // "output_ids", "step_logits_sha256", "model.weights_sha256", ...
  int64_t request = -1;
  int64_t step = -1;
  int64_t layer = -1;
  int64_t stage = -1;  // the stage of the receipt's plan that ran `layer`
  int64_t requests_checked = 0;
  int64_t steps_checked = 0;
  double replay_seconds = 0.0;
  std::string json;  // the report as one JSON object (filled by every verify function)
};

// Compares the model's identity with the receipt's. Returns true when it matches; otherwise fills
// `report` (verdict kCouldNotVerify, field "model.config_sha256" / "model.tokenizer_sha256" /
// "model.generation_config_sha256" / "model.chat_template_sha256" / "model.weights_sha256"): a
// different model cannot confirm or refute the claim. A receipt of a build before a field was bound
// passes for that field, with report->note: a GGUF receipt whose tokenizer_sha256 is "", a model
// directory's receipt without generation_config_sha256 or chat_template_sha256 ("" in memory).
bool checkModelIdentity(const Receipt& receipt, const ModelIdentity& actual, VerifyReport* report);

// Re-executes `receipt` on `engine` (made with receiptEngineOptions() and the receipt's model):
// validateReceipt, identity, prompt re-tokenisation (when the receipt has prompt text and the
// model a tokenizer), ids in the vocabulary, one Engine::replay per request, then per step the
// layer hashes (traced receipts), the logits hash and the token, then finish_reason and text.
// Returns kSuccess when `report` holds a verdict (any of the three); an error status (report:
// kCouldNotVerify with the message) when the re-execution itself failed.
Status verifyReceipt(const Receipt& receipt, Engine& engine, const ModelIdentity& actual,
                     VerifyReport* report);
// As above, computing the identity of `model` (a directory, builtin:NAME or synthetic:DIR).
Status verifyReceipt(const Receipt& receipt, Engine& engine, const std::string& model,
                     VerifyReport* report);

// Fills report->json from the other fields.
void finishVerifyReport(VerifyReport* report);

}  // namespace ree
