// Receipts, the format: a finished run -> Receipt (makeReceipt), Receipt -> JSON (the canonical
// body that receipt_sha256 covers, and the file), and the hashes docs/receipt.md specifies.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>

#include "receipt_json.h"

namespace ree {
namespace receipt_detail {

std::string canonicalJson(const Json& value) {
  return value.dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::string validUtf8(const std::string& text) {
  return Json::parse(Json(text).dump(-1, ' ', false, Json::error_handler_t::replace))
      .get<std::string>();
}

std::string floatDecimal(float value) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.9g", static_cast<double>(value));
  return buffer;
}

std::string bitsHex(float value) {
  uint32_t bits = 0;
  std::memcpy(&bits, &value, 4);
  char buffer[16];
  std::snprintf(buffer, sizeof(buffer), "%08x", bits);
  return buffer;
}

bool isLowerHex(const std::string& s, size_t digits) {
  return s.size() == digits && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

namespace {

std::vector<unsigned char> unhex(const std::string& s) {
  auto nibble = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
  std::vector<unsigned char> out(s.size() / 2);
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = static_cast<unsigned char>(nibble(s[2 * i]) * 16 + nibble(s[2 * i + 1]));
  return out;
}

// "auto" (as stored) or the dtype's name ("f32", "bf16", "f16"), as --dtype spells it.
std::string weightDtypeName(const std::optional<DType>& dtype) {
  return dtype ? dtypeName(*dtype) : "auto";
}

Json requestJson(const ReceiptRequest& r, bool trace) {
  Json j;
  j["index"] = r.index;
  j["prompt_text"] = r.has_prompt_text ? Json(r.prompt_text) : Json(nullptr);
  j["add_special_tokens"] = r.add_special_tokens;
  j["prompt_ids"] = r.prompt_ids;
  j["prompt_ids_sha256"] = r.prompt_ids_sha256;
  j["max_new_tokens"] = r.max_new_tokens;
  j["sampling"] = {{"temperature", floatDecimal(r.sampling.temperature)},
                   {"temperature_f32", bitsHex(r.sampling.temperature)},
                   {"top_k", r.sampling.top_k},
                   {"top_p", floatDecimal(r.sampling.top_p)},
                   {"top_p_f32", bitsHex(r.sampling.top_p)},
                   {"seed", std::to_string(r.sampling.seed)}};
  j["output_ids"] = r.output_ids;
  j["text"] = r.text;
  j["finish_reason"] = r.finish_reason;
  j["output_ids_sha256"] = r.output_ids_sha256;
  j["step_logits_sha256"] = r.step_logits_sha256;
  j["logits_chain_sha256"] = r.logits_chain_sha256;
  if (trace) j["step_layer_sha256"] = r.step_layer_sha256;
  return j;
}

// One request of a finished run, with its hashes.
ReceiptRequest receiptRequest(size_t index, const GenerationRequest& q, const GenerationResult& res,
                              bool trace) {
  ReceiptRequest req;
  req.index = static_cast<int64_t>(q.sampling_index.value_or(index));
  req.has_prompt_text = q.prompt_ids.empty();
  if (req.has_prompt_text) req.prompt_text = validUtf8(q.prompt_text);
  req.add_special_tokens = q.add_special_tokens;
  req.prompt_ids = res.prompt_ids;
  req.prompt_ids_sha256 = idsSha256(req.prompt_ids);
  req.max_new_tokens = q.max_new_tokens;
  req.sampling = q.sampling;
  req.output_ids = res.output_ids;
  req.text = validUtf8(res.text);
  req.finish_reason = res.finish_reason;
  req.output_ids_sha256 = idsSha256(req.output_ids);
  req.step_logits_sha256 = res.step_logits_sha256;
  req.logits_chain_sha256 = logitsChainSha256(req.prompt_ids_sha256, req.step_logits_sha256);
  if (trace) req.step_layer_sha256 = res.step_layer_sha256;
  return req;
}

}  // namespace

Json receiptBodyJson(const Receipt& r) {
  Json j;
  j["format"] = r.format;
  j["runtime"] = {
      {"name", r.runtime_name}, {"version", r.runtime_version}, {"repops_spec", r.repops_spec}};
  j["model"] = {{"source", r.model_source},
                {"config_sha256", r.identity.config_sha256},
                {"tokenizer_sha256", r.identity.tokenizer_sha256},
                {"weights_sha256", r.identity.weights_sha256},
                {"weights_kind", r.identity.weights_kind}};
  // Only when the model is a directory, so that a GGUF receipt, and one of a release before these
  // files were bound, keeps the form it always had (receipt_sha256 covers the keys present).
  if (!r.identity.generation_config_sha256.empty()) {
    j["model"]["generation_config_sha256"] = r.identity.generation_config_sha256;
  }
  if (!r.identity.chat_template_sha256.empty()) {
    j["model"]["chat_template_sha256"] = r.identity.chat_template_sha256;
  }
  j["run"] = {{"operation_set", r.operation_set},
              {"weight_dtype", r.weight_dtype},
              {"max_context", r.max_context},
              {"trace_layer_hashes", r.trace_layer_hashes}};
  if (r.allow_extra_tensors) j["run"]["allow_extra_tensors"] = true;
  if (r.allow_non_finite_weights) j["run"]["allow_non_finite_weights"] = true;
  Json plan = Json::array();
  for (const partitioner::Stage& stage : r.plan) {
    plan.push_back({{"first_layer", stage.first_layer},
                    {"end_layer", stage.end_layer},
                    {"embedding", stage.embedding},
                    {"head", stage.head}});
  }
  j["execution"] = {
      {"n_partitions", r.n_partitions}, {"plan", plan}, {"stage_devices", r.stage_devices}};
  Json requests = Json::array();
  for (const ReceiptRequest& request : r.requests)
    requests.push_back(requestJson(request, r.trace_layer_hashes));
  j["requests"] = std::move(requests);
  return j;
}

}  // namespace receipt_detail

using receipt_detail::Json;

std::string idsSha256(const std::vector<int32_t>& ids) {
  // Little-endian int32 (x86-64 and aarch64 hosts store them so).
  return sha256Hex(ids.data(), ids.size() * sizeof(int32_t));
}

std::string logitsChainSha256(const std::string& prompt_ids_sha256,
                              const std::vector<std::string>& step_logits_sha256) {
  using receipt_detail::unhex;
  std::vector<unsigned char> buffer(kLogitsChainDomain,
                                    kLogitsChainDomain + std::strlen(kLogitsChainDomain));
  std::vector<unsigned char> prompt = unhex(prompt_ids_sha256);
  buffer.insert(buffer.end(), prompt.begin(), prompt.end());
  std::string chain = sha256Hex(buffer.data(), buffer.size());
  for (const std::string& step : step_logits_sha256) {
    buffer = unhex(chain);
    std::vector<unsigned char> digest = unhex(step);
    buffer.insert(buffer.end(), digest.begin(), digest.end());
    chain = sha256Hex(buffer.data(), buffer.size());
  }
  return chain;
}

Status makeReceipt(const ReceiptRunInfo& run, const std::vector<GenerationRequest>& requests,
                   const std::vector<GenerationResult>& results, Receipt* out) {
  using receipt_detail::validUtf8;
  REE_CHECK_ARG(out != nullptr, "makeReceipt: out is null");
  REE_CHECK_ARG(requests.size() == results.size() && !requests.empty(),
                "makeReceipt: %zu requests but %zu results", requests.size(), results.size());
  REE_CHECK_ARG(!run.plan.empty(), "makeReceipt: the run's plan is empty");
  std::string weight_dtype = receipt_detail::weightDtypeName(run.options.weight_dtype);
  REE_CHECK_ARG(weight_dtype != "unsupported", "makeReceipt: weight dtype is not f32/bf16/f16");
  Receipt r;
  r.runtime_version = run.runtime_version;
  r.repops_spec = repOpsSpecName(run.options.repops_spec);
  r.model_source = validUtf8(run.model);
  r.identity = run.identity;
  r.operation_set = operationSetName(run.options.operation_set);
  r.weight_dtype = weight_dtype;
  r.max_context = run.max_context;
  r.trace_layer_hashes = run.options.trace_layer_hashes;
  r.allow_extra_tensors = run.options.allow_extra_tensors;
  r.allow_non_finite_weights = run.options.allow_non_finite_weights;
  r.n_partitions = static_cast<int64_t>(run.plan.size());
  r.plan = run.plan;
  r.stage_devices = run.stage_devices;
  r.stage_devices.resize(run.plan.size());
  for (std::string& device : r.stage_devices)
    device = validUtf8(device);
  std::set<uint64_t> indices;
  for (size_t i = 0; i < requests.size(); ++i) {
    const GenerationResult& res = results[i];
    const uint64_t index = requests[i].sampling_index.value_or(i);
    REE_CHECK_ARG(index <= static_cast<uint64_t>(INT32_MAX) && indices.insert(index).second,
                  "makeReceipt: request %zu's sampling index %llu is beyond 2^31 - 1 or repeats "
                  "another request's",
                  i, static_cast<unsigned long long>(index));
    REE_CHECK_ARG(!res.output_ids.empty() && res.step_logits_sha256.size() == res.output_ids.size(),
                  "makeReceipt: result %zu has %zu output ids and %zu step hashes", i,
                  res.output_ids.size(), res.step_logits_sha256.size());
    REE_CHECK_ARG(!r.trace_layer_hashes || res.step_layer_sha256.size() == res.output_ids.size(),
                  "makeReceipt: result %zu has %zu steps of layer hashes for %zu output ids", i,
                  res.step_layer_sha256.size(), res.output_ids.size());
    r.requests.push_back(receipt_detail::receiptRequest(i, requests[i], res, r.trace_layer_hashes));
  }
  std::string body;
  REE_RETURN_IF_ERROR(canonicalReceiptBody(r, &body));
  r.receipt_sha256 = sha256Hex(body.data(), body.size());
  *out = std::move(r);
  return Status::kSuccess;
}

Status canonicalReceiptBody(const Receipt& receipt, std::string* bytes) {
  REE_CHECK_ARG(bytes != nullptr, "canonicalReceiptBody: bytes is null");
  *bytes = receipt_detail::canonicalJson(receipt_detail::receiptBodyJson(receipt));
  return Status::kSuccess;
}

Status receiptFileText(const Receipt& receipt, std::string* text) {
  REE_CHECK_ARG(text != nullptr, "receiptFileText: text is null");
  Json j = receipt_detail::receiptBodyJson(receipt);
  j["receipt_sha256"] = receipt.receipt_sha256;
  *text = j.dump(1, ' ', false, Json::error_handler_t::replace) + "\n";
  return Status::kSuccess;
}

Status writeReceipt(const std::string& path, const Receipt& receipt) {
  std::string text;
  REE_RETURN_IF_ERROR(receiptFileText(receipt, &text));
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  if (!file) return REE_FAIL(Status::kIoError, "receipt %s: cannot write", path.c_str());
  file.write(text.data(), static_cast<std::streamsize>(text.size()));
  file.close();
  if (!file) return REE_FAIL(Status::kIoError, "receipt %s: write failed", path.c_str());
  return Status::kSuccess;
}

}  // namespace ree
