// Receipts, internal consistency (validate): every hash the receipt holds recomputed from what it
// claims, and the lengths and finish reasons its own limits allow. Needs no model; a valid receipt
// is consistent, and only verify (receipt_verify.cpp) says whether it is true.
#include <algorithm>

#include "receipt_json.h"

namespace ree {
namespace {

Status inconsistent(const std::string& path, const std::string& what) {
  return REE_FAIL(Status::kMismatch, "%s: %s", path.c_str(), what.c_str());
}

int64_t layerCount(const std::vector<partitioner::Stage>& plan) {
  return plan.empty() ? 0 : plan.back().end_layer;
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

Status validateLayerHashes(const ReceiptRequest& r, const std::string& path, int64_t layers) {
  if (r.step_layer_sha256.size() != r.output_ids.size()) {
    return inconsistent(path + ".step_layer_sha256",
                        std::to_string(r.step_layer_sha256.size()) + " steps for " +
                            std::to_string(r.output_ids.size()) + " output ids");
  }
  for (size_t t = 0; t < r.step_layer_sha256.size(); ++t) {
    if (static_cast<int64_t>(r.step_layer_sha256[t].size()) != layers) {
      return inconsistent(path + ".step_layer_sha256[" + std::to_string(t) + "]",
                          std::to_string(r.step_layer_sha256[t].size()) +
                              " layer hashes but the plan has " + std::to_string(layers) +
                              " layers");
    }
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
  return Status::kSuccess;
}

}  // namespace

Status validateReceipt(const Receipt& receipt, std::string* summary) {
  int64_t steps = 0;
  const int64_t layers = layerCount(receipt.plan);
  for (size_t i = 0; i < receipt.requests.size(); ++i) {
    const ReceiptRequest& r = receipt.requests[i];
    const std::string path = "requests[" + std::to_string(i) + "]";
    REE_RETURN_IF_ERROR(validateHashes(r, path));
    if (receipt.trace_layer_hashes) REE_RETURN_IF_ERROR(validateLayerHashes(r, path, layers));
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
  options->trace_layer_hashes = receipt.trace_layer_hashes;
  options->max_batch = 1;
  int64_t needed = 1;
  for (const ReceiptRequest& r : receipt.requests)
    needed = std::max<int64_t>(needed, r.prompt_ids.size() + r.output_ids.size());
  REE_CHECK_ARG(needed <= INT32_MAX, "receipt: %lld tokens in one request",
                static_cast<long long>(needed));
  options->max_context = static_cast<int>(needed);
  return Status::kSuccess;
}

}  // namespace ree
