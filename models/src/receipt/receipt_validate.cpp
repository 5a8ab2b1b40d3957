// Receipts, internal consistency (validate): every hash the receipt holds recomputed from what it
// claims, and the lengths and finish reasons its own limits allow. Needs no model; a valid receipt
// is consistent, and only verify (receipt_verify.cpp) says whether it is true.
#include <algorithm>

#include "engine/generation_sampling.h"
#include "receipt_json.h"

namespace ree {
namespace {

Status inconsistent(const std::string& path, const std::string& what) {
  return REE_FAIL(Status::kMismatch, "%s: %s", path.c_str(), what.c_str());
}

Status validateHashes(const ReceiptRequest& r, const std::string& path) {
  if (idsSha256(r.prompt_ids) != r.prompt_ids_sha256) {
    return inconsistent(path + ".prompt_ids_sha256", "does not match prompt_ids");
  }
  if (idsSha256(r.output_ids) != r.output_ids_sha256) {
    return inconsistent(path + ".output_ids_sha256", "does not match output_ids");
  }
  if (r.step_logits_sha256.size() != r.output_ids.size()) {
    return inconsistent(path + ".step_logits_sha256",
                        std::to_string(r.step_logits_sha256.size()) + " step hashes for " +
                            std::to_string(r.output_ids.size()) + " output ids");
  }
  if (logitsChainSha256(r.prompt_ids_sha256, r.step_logits_sha256) != r.logits_chain_sha256) {
    return inconsistent(path + ".logits_chain_sha256", "does not match step_logits_sha256");
  }
  return Status::kSuccess;
}

// One step of layer hashes per output id, each with one hash per layer of the model: the same
// count at every step of every request (*layers: the first step's). The receipt's plan is
// informational and never consulted; verify compares the count with the model's.
Status validateLayerHashes(const ReceiptRequest& r, const std::string& path, size_t* layers) {
  if (r.step_layer_sha256.size() != r.output_ids.size()) {
    return inconsistent(path + ".step_layer_sha256",
                        std::to_string(r.step_layer_sha256.size()) + " steps for " +
                            std::to_string(r.output_ids.size()) + " output ids");
  }
  for (size_t t = 0; t < r.step_layer_sha256.size(); ++t) {
    const std::string step = path + ".step_layer_sha256[" + std::to_string(t) + "]";
    const size_t count = r.step_layer_sha256[t].size();
    if (count == 0) return inconsistent(step, "no layer hashes (one per layer expected)");
    if (*layers == 0) *layers = count;
    if (count != *layers) {
      return inconsistent(step, std::to_string(count) + " layer hashes, but " +
                                    std::to_string(*layers) + " at requests[0] step 0");
    }
  }
  return Status::kSuccess;
}

// Parameters the engine would have refused cannot have produced the receipt (the engine's own
// limits: validateSampling).
Status validateParameters(const ReceiptRequest& r, size_t i) {
  if (models::validateSampling(r.sampling, i) != Status::kSuccess) {
    return setError(Status::kMismatch, nullptr, 0, "no run could have produced this receipt: %s",
                    lastErrorMessage());
  }
  return Status::kSuccess;
}

// The lengths against max_new_tokens and run.max_context, and the finish reason they imply.
Status validateLengths(const ReceiptRequest& r, const std::string& path, int64_t max_context) {
  const int64_t n = static_cast<int64_t>(r.output_ids.size());
  if (n > r.max_new_tokens) {
    return inconsistent(path + ".output_ids", std::to_string(n) + " ids exceed max_new_tokens " +
                                                  std::to_string(r.max_new_tokens));
  }
  const int64_t total = static_cast<int64_t>(r.prompt_ids.size()) + n;
  if (total > max_context) {
    return inconsistent(path + ".output_ids", "prompt + output (" + std::to_string(total) +
                                                  " tokens) exceed run.max_context " +
                                                  std::to_string(max_context));
  }
  const bool at_length = n == r.max_new_tokens || total >= max_context;
  if (r.finish_reason == "length" && !at_length) {
    return inconsistent(path + ".finish_reason",
                        "'length' but neither max_new_tokens nor run.max_context was reached");
  }
  if (r.finish_reason == "eos" && n == 0) {
    return inconsistent(path + ".finish_reason", "'eos' without output ids");
  }
  // "stop": the caller stopped the generation before an end token or a limit (verify checks
  // the end token against the model's).
  if (r.finish_reason == "stop" && n == 0) {
    return inconsistent(path + ".finish_reason", "'stop' without output ids");
  }
  if (r.finish_reason == "stop" && at_length) {
    return inconsistent(path + ".finish_reason",
                        "'stop' but max_new_tokens or run.max_context was reached ('length')");
  }
  return Status::kSuccess;
}

}  // namespace

Status validateReceipt(const Receipt& receipt, std::string* summary) {
  if (receipt.repops_spec != repOpsSpecName(kDefaultRepOpsSpec) &&
      receipt.operation_set != operationSetName(OperationSetKind::kReproducible)) {
    return inconsistent("runtime.repops_spec",
                        "'" + receipt.repops_spec + "' with run.operation_set '" +
                            receipt.operation_set + "' (a RepOps spec applies to reproducible)");
  }
  int64_t steps = 0;
  size_t layers = 0;
  for (size_t i = 0; i < receipt.requests.size(); ++i) {
    const ReceiptRequest& r = receipt.requests[i];
    const std::string path = "requests[" + std::to_string(i) + "]";
    REE_RETURN_IF_ERROR(validateHashes(r, path));
    REE_RETURN_IF_ERROR(validateParameters(r, i));
    if (receipt.trace_layer_hashes) REE_RETURN_IF_ERROR(validateLayerHashes(r, path, &layers));
    REE_RETURN_IF_ERROR(validateLengths(r, path, receipt.max_context));
    steps += static_cast<int64_t>(r.output_ids.size());
  }
  std::string body;
  REE_RETURN_IF_ERROR(canonicalReceiptBody(receipt, &body));
  if (sha256Hex(body.data(), body.size()) != receipt.receipt_sha256) {
    return inconsistent("receipt_sha256",
                        "does not match the receipt's content (edited after it was written?)");
  }
  if (summary != nullptr) {
    *summary = "valid: " + std::to_string(receipt.requests.size()) + " request(s), " +
               std::to_string(steps) + " step(s), operation set " + receipt.operation_set +
               (receipt.operation_set == "reproducible" ? " (" + receipt.repops_spec + ")" : "") +
               (receipt.trace_layer_hashes ? ", layer hashes" : "") +
               "; receipt, prompt/output ids and logits-chain hashes consistent";
  }
  return Status::kSuccess;
}

Status receiptEngineOptions(const Receipt& receipt, EngineOptions* options) {
  REE_CHECK_ARG(options != nullptr, "receiptEngineOptions: options is null");
  REE_RETURN_IF_ERROR(parseOperationSet(receipt.operation_set, &options->operation_set));
  options->weight_dtype.reset();
  if (receipt.weight_dtype == "f32") options->weight_dtype = DType::kF32;
  if (receipt.weight_dtype == "bf16") options->weight_dtype = DType::kBF16;
  if (receipt.weight_dtype == "f16") options->weight_dtype = DType::kF16;
  REE_RETURN_IF_ERROR(
      parseRepOpsSpec(receipt.repops_spec, "receipt runtime.repops_spec", &options->repops_spec));
  options->trace_layer_hashes = receipt.trace_layer_hashes;
  options->allow_extra_tensors = receipt.allow_extra_tensors;
  options->allow_non_finite_weights = receipt.allow_non_finite_weights;
  options->max_batch = 1;
  int64_t needed = 1;
  size_t longest = 0;
  for (size_t i = 0; i < receipt.requests.size(); ++i) {
    const ReceiptRequest& r = receipt.requests[i];
    const int64_t tokens = static_cast<int64_t>(r.prompt_ids.size() + r.output_ids.size());
    if (tokens > needed) needed = tokens, longest = i;
  }
  REE_CHECK_ARG(needed <= INT32_MAX, "receipt: %lld tokens in one request",
                static_cast<long long>(needed));
  options->max_context = static_cast<int>(needed);
  // The engine's errors name these, not the flags: the user passed none of them to verify.
  options->names.operation_set = "the receipt's run.operation_set";
  options->names.repops_spec = "the receipt's runtime.repops_spec";
  options->names.max_batch = "verify's batch (one request at a time)";
  options->names.max_context = "the context of the receipt's longest request (requests[" +
                               std::to_string(longest) + "]: prompt_ids + output_ids, tokens)";
  return Status::kSuccess;
}

}  // namespace ree
