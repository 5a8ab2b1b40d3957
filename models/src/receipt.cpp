#include "ree/models/receipt.h"

#include <openssl/evp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "ree/kernels/cpu_parallel.h"
#include "ree/models/builtin.h"
#include "ree/models/checkpoint.h"
#include "ree/models/tokenizer.h"

namespace ree {
namespace {

using Json = nlohmann::json;
constexpr const char* kFormat = "ree-receipt/1";
constexpr const char* kChainDomain = "ree-logits-chain/1";

std::string hex(const unsigned char* digest, size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    out += digits[digest[i] >> 4];
    out += digits[digest[i] & 15];
  }
  return out;
}

bool isHex64(const std::string& s) {
  return s.size() == 64 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

std::vector<unsigned char> unhex(const std::string& s) {
  std::vector<unsigned char> out(s.size() / 2);
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = static_cast<unsigned char>(std::stoi(s.substr(2 * i, 2), nullptr, 16));
  return out;
}

Status readFile(const std::string& path, std::string* bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return REE_FAIL(Status::kIoError, "%s: cannot open", path.c_str());
  std::ostringstream s;
  s << in.rdbuf();
  *bytes = s.str();
  return Status::kSuccess;
}

// The canonical serialisation the receipt hash covers: JSON, keys sorted, no whitespace, UTF-8
// (invalid sequences replaced by U+FFFD), no floats. Python: json.dumps(obj, sort_keys=True,
// separators=(",", ":"), ensure_ascii=False) gives the same bytes.
std::string canonical(const Json& value) {
  return value.dump(-1, ' ', false, Json::error_handler_t::replace);
}

// chain_0 = SHA-256(domain); chain_{t+1} = SHA-256(chain_t || digest_t) over raw 32-byte digests.
std::string logitsChain(const std::vector<std::string>& steps) {
  std::vector<unsigned char> chain(32);
  unsigned int n = 0;
  EVP_Digest(kChainDomain, std::strlen(kChainDomain), chain.data(), &n, EVP_sha256(), nullptr);
  for (const std::string& step : steps) {
    std::vector<unsigned char> buffer = chain;
    std::vector<unsigned char> digest = unhex(step);
    buffer.insert(buffer.end(), digest.begin(), digest.end());
    EVP_Digest(buffer.data(), buffer.size(), chain.data(), &n, EVP_sha256(), nullptr);
  }
  return hex(chain.data(), chain.size());
}

// Floats are recorded as the shortest-round-trip-safe decimal of their float32 value ("%.9g").
std::string floatText(float value) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.9g", static_cast<double>(value));
  return buffer;
}

bool parseFloatText(const std::string& text, float* value) {
  char* end = nullptr;
  *value = std::strtof(text.c_str(), &end);
  return !text.empty() && end == text.c_str() + text.size() && floatText(*value) == text;
}

std::string dtypeOption(const std::optional<DType>& dtype) {
  if (!dtype) return "auto";
  return *dtype == DType::kF32 ? "f32" : *dtype == DType::kBF16 ? "bf16" : "f16";
}

Status resolveModel(const std::string& model, std::string* directory, bool* synthetic) {
  *synthetic = model.rfind("synthetic:", 0) == 0;
  if (*synthetic) {
    *directory = model.substr(std::strlen("synthetic:"));
  } else if (models::isBuiltinModel(model)) {
    REE_RETURN_IF_ERROR(models::materializeBuiltinModel(model, directory));
  } else {
    *directory = model;
  }
  if (!std::filesystem::exists(*directory + "/config.json")) {
    return REE_FAIL(Status::kIoError, "--model %s: no config.json in %s", model.c_str(),
                    directory->c_str());
  }
  return Status::kSuccess;
}

// Field access with errors that name the file and the JSON path.
class Fields {
 public:
  explicit Fields(std::string file) : file_(std::move(file)) {}

  Status object(const Json& parent, const char* key, const std::string& where, const Json** out) {
    return get(parent, key, where, Json::value_t::object, "an object", out);
  }
  Status array(const Json& parent, const char* key, const std::string& where, const Json** out) {
    return get(parent, key, where, Json::value_t::array, "an array", out);
  }
  Status string(const Json& parent, const char* key, const std::string& where, std::string* out) {
    const Json* v = nullptr;
    REE_RETURN_IF_ERROR(get(parent, key, where, Json::value_t::string, "a string", &v));
    *out = v->get<std::string>();
    return Status::kSuccess;
  }
  Status hash(const Json& parent, const char* key, const std::string& where, std::string* out) {
    REE_RETURN_IF_ERROR(string(parent, key, where, out));
    if (!isHex64(*out)) return bad(where + key, "expected 64 lowercase hex digits");
    return Status::kSuccess;
  }
  Status integer(const Json& parent, const char* key, const std::string& where, int64_t min,
                 int64_t max, int64_t* out) {
    if (!parent.contains(key)) return bad(where + key, "missing");
    return integerValue(parent[key], where + key, min, max, out);
  }
  Status integerValue(const Json& v, const std::string& path, int64_t min, int64_t max,
                      int64_t* out) {
    if (!v.is_number_integer()) return bad(path, "expected an integer");
    int64_t x =
        v.is_number_unsigned() && v.get<uint64_t>() > INT64_MAX ? INT64_MAX : v.get<int64_t>();
    if (x < min || x > max) {
      return bad(path, "integer " + std::to_string(x) + " outside [" + std::to_string(min) + ", " +
                           std::to_string(max) + "]");
    }
    *out = x;
    return Status::kSuccess;
  }
  Status boolean(const Json& parent, const char* key, const std::string& where, bool* out) {
    const Json* v = nullptr;
    REE_RETURN_IF_ERROR(get(parent, key, where, Json::value_t::boolean, "true or false", &v));
    *out = v->get<bool>();
    return Status::kSuccess;
  }
  Status bad(const std::string& path, const std::string& what, Status status = Status::kIoError) {
    return REE_FAIL(status, "%s: %s: %s", file_.c_str(), path.c_str(), what.c_str());
  }

 private:
  Status get(const Json& parent, const char* key, const std::string& where, Json::value_t type,
             const char* expected, const Json** out) {
    if (!parent.is_object() || !parent.contains(key)) return bad(where + key, "missing");
    const Json& v = parent[key];
    if (v.type() != type) return bad(where + key, std::string("expected ") + expected);
    *out = &v;
    return Status::kSuccess;
  }
  std::string file_;
};

// A request of a receipt, parsed.
struct ReceiptRequest {
  int64_t index = 0;
  bool has_text = false;
  std::string prompt_text;
  bool add_special_tokens = true;
  std::vector<int32_t> prompt_ids;
  int64_t max_new_tokens = 0;
  SamplingParams sampling;
  std::vector<int32_t> output_ids;
  std::string text;
  std::string finish_reason;
  std::vector<std::string> step_logits;
  std::vector<std::vector<std::string>> step_layers;
};

struct Receipt {
  Json json;
  std::string operation_set;
  std::string weight_dtype;
  int64_t max_context = 0;
  bool trace = false;
  std::string config_sha256, tokenizer_sha256, weights_sha256;
  std::vector<partitioner::Stage> plan;
  std::vector<ReceiptRequest> requests;
};

Status parseIds(Fields& f, const Json& parent, const char* key, const std::string& where,
                std::vector<int32_t>* ids) {
  const Json* array = nullptr;
  REE_RETURN_IF_ERROR(f.array(parent, key, where, &array));
  ids->clear();
  for (size_t i = 0; i < array->size(); ++i) {
    int64_t id = 0;
    REE_RETURN_IF_ERROR(f.integerValue((*array)[i], where + key + "[" + std::to_string(i) + "]", 0,
                                       0x7fffffff, &id));
    ids->push_back(static_cast<int32_t>(id));
  }
  return Status::kSuccess;
}

Status parseHashes(Fields& f, const Json& array, const std::string& path,
                   std::vector<std::string>* out) {
  if (!array.is_array()) return f.bad(path, "expected an array");
  out->clear();
  for (size_t i = 0; i < array.size(); ++i) {
    std::string p = path + "[" + std::to_string(i) + "]";
    if (!array[i].is_string() || !isHex64(array[i].get<std::string>())) {
      return f.bad(p, "expected 64 lowercase hex digits");
    }
    out->push_back(array[i].get<std::string>());
  }
  return Status::kSuccess;
}

// Parses and checks structure and internal consistency. Hash inconsistencies are kMismatch;
// malformed content is kIoError.
Status loadReceipt(const std::string& path, Receipt* r) {
  std::string bytes;
  REE_RETURN_IF_ERROR(readFile(path, &bytes));
  Fields f(path);
  r->json = Json::parse(bytes, nullptr, false);
  if (r->json.is_discarded()) return f.bad("(file)", "not valid JSON");
  if (!r->json.is_object()) return f.bad("(file)", "expected a JSON object");
  const Json& j = r->json;
  std::string format;
  REE_RETURN_IF_ERROR(f.string(j, "format", "", &format));
  if (format != kFormat) {
    return f.bad("format", "'" + format + "' is not " + kFormat + " (this runtime reads only it)");
  }
  const Json *runtime = nullptr, *model = nullptr, *run = nullptr, *execution = nullptr,
             *requests = nullptr;
  REE_RETURN_IF_ERROR(f.object(j, "runtime", "", &runtime));
  std::string ignored;
  REE_RETURN_IF_ERROR(f.string(*runtime, "version", "runtime.", &ignored));
  REE_RETURN_IF_ERROR(f.string(*runtime, "repops_spec", "runtime.", &ignored));
  REE_RETURN_IF_ERROR(f.object(j, "model", "", &model));
  REE_RETURN_IF_ERROR(f.hash(*model, "config_sha256", "model.", &r->config_sha256));
  REE_RETURN_IF_ERROR(f.hash(*model, "weights_sha256", "model.", &r->weights_sha256));
  REE_RETURN_IF_ERROR(f.string(*model, "tokenizer_sha256", "model.", &r->tokenizer_sha256));
  if (!r->tokenizer_sha256.empty() && !isHex64(r->tokenizer_sha256)) {
    return f.bad("model.tokenizer_sha256", "expected 64 lowercase hex digits or \"\"");
  }
  REE_RETURN_IF_ERROR(f.object(j, "run", "", &run));
  REE_RETURN_IF_ERROR(f.string(*run, "operation_set", "run.", &r->operation_set));
  OperationSetKind kind;
  if (parseOperationSet(r->operation_set, &kind) != Status::kSuccess) {
    return f.bad("run.operation_set", "unknown operation set '" + r->operation_set + "'");
  }
  REE_RETURN_IF_ERROR(f.string(*run, "weight_dtype", "run.", &r->weight_dtype));
  if (r->weight_dtype != "auto" && r->weight_dtype != "f32" && r->weight_dtype != "bf16" &&
      r->weight_dtype != "f16") {
    return f.bad("run.weight_dtype", "expected auto, f32, bf16 or f16");
  }
  REE_RETURN_IF_ERROR(f.integer(*run, "max_context", "run.", 1, 1 << 24, &r->max_context));
  REE_RETURN_IF_ERROR(f.boolean(*run, "trace_layer_hashes", "run.", &r->trace));
  REE_RETURN_IF_ERROR(f.object(j, "execution", "", &execution));
  const Json* plan = nullptr;
  REE_RETURN_IF_ERROR(f.array(*execution, "plan", "execution.", &plan));
  for (size_t s = 0; s < plan->size(); ++s) {
    std::string where = "execution.plan[" + std::to_string(s) + "].";
    partitioner::Stage stage;
    REE_RETURN_IF_ERROR(
        f.integer((*plan)[s], "first_layer", where, 0, 1 << 20, &stage.first_layer));
    REE_RETURN_IF_ERROR(f.integer((*plan)[s], "end_layer", where, 0, 1 << 20, &stage.end_layer));
    r->plan.push_back(stage);
  }
  REE_RETURN_IF_ERROR(f.array(j, "requests", "", &requests));
  if (requests->empty()) return f.bad("requests", "empty");
  for (size_t i = 0; i < requests->size(); ++i) {
    const Json& q = (*requests)[i];
    std::string where = "requests[" + std::to_string(i) + "].";
    if (!q.is_object()) return f.bad(where, "expected an object");
    ReceiptRequest req;
    REE_RETURN_IF_ERROR(f.integer(q, "index", where, 0, INT64_MAX, &req.index));
    if (!q.contains("prompt_text")) return f.bad(where + "prompt_text", "missing");
    if (q["prompt_text"].is_string()) {
      req.has_text = true;
      req.prompt_text = q["prompt_text"].get<std::string>();
    } else if (!q["prompt_text"].is_null()) {
      return f.bad(where + "prompt_text", "expected a string or null");
    }
    REE_RETURN_IF_ERROR(f.boolean(q, "add_special_tokens", where, &req.add_special_tokens));
    REE_RETURN_IF_ERROR(parseIds(f, q, "prompt_ids", where, &req.prompt_ids));
    if (req.prompt_ids.empty()) return f.bad(where + "prompt_ids", "empty");
    REE_RETURN_IF_ERROR(f.integer(q, "max_new_tokens", where, 1, 1 << 24, &req.max_new_tokens));
    const Json* sampling = nullptr;
    REE_RETURN_IF_ERROR(f.object(q, "sampling", where, &sampling));
    std::string sw = where + "sampling.";
    std::string text;
    REE_RETURN_IF_ERROR(f.string(*sampling, "temperature", sw, &text));
    if (!parseFloatText(text, &req.sampling.temperature)) {
      return f.bad(sw + "temperature", "'" + text + "' is not a float in %.9g form");
    }
    REE_RETURN_IF_ERROR(f.string(*sampling, "top_p", sw, &text));
    if (!parseFloatText(text, &req.sampling.top_p)) {
      return f.bad(sw + "top_p", "'" + text + "' is not a float in %.9g form");
    }
    int64_t top_k = 0;
    REE_RETURN_IF_ERROR(f.integer(*sampling, "top_k", sw, 0, 0x7fffffff, &top_k));
    req.sampling.top_k = static_cast<int>(top_k);
    REE_RETURN_IF_ERROR(f.string(*sampling, "seed", sw, &text));
    char* end = nullptr;
    req.sampling.seed = std::strtoull(text.c_str(), &end, 10);
    if (text.empty() || end != text.c_str() + text.size() ||
        std::to_string(req.sampling.seed) != text) {
      return f.bad(sw + "seed", "'" + text + "' is not a decimal unsigned 64-bit integer");
    }
    REE_RETURN_IF_ERROR(parseIds(f, q, "output_ids", where, &req.output_ids));
    if (req.output_ids.empty()) return f.bad(where + "output_ids", "empty");
    if (static_cast<int64_t>(req.output_ids.size()) > req.max_new_tokens) {
      return f.bad(where + "output_ids", "more tokens than max_new_tokens");
    }
    REE_RETURN_IF_ERROR(f.string(q, "text", where, &req.text));
    REE_RETURN_IF_ERROR(f.string(q, "finish_reason", where, &req.finish_reason));
    if (req.finish_reason != "eos" && req.finish_reason != "length") {
      return f.bad(where + "finish_reason", "expected \"eos\" or \"length\"");
    }
    const Json* steps = nullptr;
    REE_RETURN_IF_ERROR(f.array(q, "step_logits_sha256", where, &steps));
    REE_RETURN_IF_ERROR(parseHashes(f, *steps, where + "step_logits_sha256", &req.step_logits));
    if (req.step_logits.size() != req.output_ids.size()) {
      return f.bad(where + "step_logits_sha256",
                   std::to_string(req.step_logits.size()) + " hashes for " +
                       std::to_string(req.output_ids.size()) + " output ids");
    }
    if (r->trace) {
      const Json* layers = nullptr;
      REE_RETURN_IF_ERROR(f.array(q, "step_layer_sha256", where, &layers));
      if (layers->size() != req.output_ids.size()) {
        return f.bad(where + "step_layer_sha256", "one entry per output id expected");
      }
      for (size_t t = 0; t < layers->size(); ++t) {
        std::vector<std::string> step;
        REE_RETURN_IF_ERROR(parseHashes(
            f, (*layers)[t], where + "step_layer_sha256[" + std::to_string(t) + "]", &step));
        if (t > 0 && step.size() != req.step_layers[0].size()) {
          return f.bad(where + "step_layer_sha256[" + std::to_string(t) + "]",
                       "a different number of layers than step 0");
        }
        req.step_layers.push_back(std::move(step));
      }
    } else if (q.contains("step_layer_sha256")) {
      return f.bad(where + "step_layer_sha256", "present but run.trace_layer_hashes is false");
    }
    // Internal hashes.
    std::string recorded;
    REE_RETURN_IF_ERROR(f.hash(q, "output_ids_sha256", where, &recorded));
    if (recorded != sha256Hex(req.output_ids.data(), req.output_ids.size() * sizeof(int32_t))) {
      return f.bad(where + "output_ids_sha256", "does not match output_ids", Status::kMismatch);
    }
    REE_RETURN_IF_ERROR(f.hash(q, "logits_chain_sha256", where, &recorded));
    if (recorded != logitsChain(req.step_logits)) {
      return f.bad(where + "logits_chain_sha256", "does not match step_logits_sha256",
                   Status::kMismatch);
    }
    r->requests.push_back(std::move(req));
  }
  std::string recorded;
  REE_RETURN_IF_ERROR(f.hash(j, "receipt_sha256", "", &recorded));
  Json body = j;
  body.erase("receipt_sha256");
  std::string text = canonical(body);
  if (recorded != sha256Hex(text.data(), text.size())) {
    return f.bad("receipt_sha256", "does not match the receipt's content (edited after signing?)",
                 Status::kMismatch);
  }
  return Status::kSuccess;
}

}  // namespace

Status computeModelIdentity(const std::string& model, ModelIdentity* out) {
  REE_CHECK_ARG(out != nullptr, "computeModelIdentity: out is null");
  std::string directory;
  bool synthetic = false;
  REE_RETURN_IF_ERROR(resolveModel(model, &directory, &synthetic));
  std::string bytes;
  REE_RETURN_IF_ERROR(readFile(directory + "/config.json", &bytes));
  out->config_sha256 = sha256Hex(bytes.data(), bytes.size());
  out->tokenizer_sha256.clear();
  if (std::filesystem::exists(directory + "/tokenizer.json")) {
    REE_RETURN_IF_ERROR(readFile(directory + "/tokenizer.json", &bytes));
    out->tokenizer_sha256 = sha256Hex(bytes.data(), bytes.size());
  }
  if (synthetic) {
    // Values are a function of (seed, tensor name, index) and the config (Checkpoint::synthetic).
    const std::string id = "ree-synthetic-weights/1 seed=0";
    out->weights_sha256 = sha256Hex(id.data(), id.size());
    out->weights_kind = "synthetic";
    return Status::kSuccess;
  }
  std::unique_ptr<models::Checkpoint> checkpoint;
  REE_RETURN_IF_ERROR(models::Checkpoint::open(directory, &checkpoint));
  const std::vector<std::string>& names = checkpoint->tensorNames();  // sorted
  std::vector<std::string> lines(names.size());
  std::vector<Status> statuses(names.size(), Status::kSuccess);
  std::vector<std::string> errors(names.size());
  parallelFor(static_cast<int64_t>(names.size()), 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      models::TensorInfo info;
      models::TensorView view;
      Status st = checkpoint->info(names[i], &info);
      if (st == Status::kSuccess) st = checkpoint->view(names[i], &view);
      if (st != Status::kSuccess) {
        statuses[i] = st;
        errors[i] = lastErrorMessage();
        continue;
      }
      std::string shape;
      for (size_t d = 0; d < info.shape.size(); ++d)
        shape += (d ? "," : "") + std::to_string(info.shape[d]);
      lines[i] = names[i] + '\0' + models::dtypeName(info.dtype) + '\0' + shape + '\0' +
                 sha256Hex(view.data, view.bytes) + '\n';
    }
  });
  for (size_t i = 0; i < names.size(); ++i) {
    if (statuses[i] != Status::kSuccess) {
      return setError(statuses[i], nullptr, 0, "%s", errors[i].c_str());
    }
  }
  std::string all;
  for (const std::string& line : lines)
    all += line;
  out->weights_sha256 = sha256Hex(all.data(), all.size());
  out->weights_kind = "safetensors";
  return Status::kSuccess;
}

Status writeReceipt(const std::string& path, const ReceiptRunInfo& run,
                    const std::vector<GenerationRequest>& requests,
                    const std::vector<GenerationResult>& results) {
  REE_CHECK_ARG(requests.size() == results.size(), "writeReceipt: %zu requests, %zu results",
                requests.size(), results.size());
  Json j;
  j["format"] = kFormat;
  j["runtime"] = {
      {"name", "ree"}, {"version", kRuntimeVersion}, {"repops_spec", kRepOpsSpecVersion}};
  j["model"] = {{"source", run.model},
                {"config_sha256", run.identity.config_sha256},
                {"tokenizer_sha256", run.identity.tokenizer_sha256},
                {"weights_sha256", run.identity.weights_sha256},
                {"weights_kind", run.identity.weights_kind}};
  j["run"] = {{"operation_set", operationSetName(run.options.operation_set)},
              {"weight_dtype", dtypeOption(run.options.weight_dtype)},
              {"max_context", run.max_context},
              {"trace_layer_hashes", run.options.trace_layer_hashes}};
  Json plan = Json::array();
  for (const partitioner::Stage& stage : run.plan) {
    plan.push_back({{"first_layer", stage.first_layer},
                    {"end_layer", stage.end_layer},
                    {"embedding", stage.embedding},
                    {"head", stage.head}});
  }
  j["execution"] = {{"n_partitions", static_cast<int64_t>(run.plan.size())},
                    {"plan", plan},
                    {"stage_devices", run.stage_devices}};
  Json list = Json::array();
  for (size_t i = 0; i < requests.size(); ++i) {
    const GenerationRequest& q = requests[i];
    const GenerationResult& res = results[i];
    Json r;
    r["index"] = static_cast<int64_t>(i);
    r["prompt_text"] = q.prompt_ids.empty() ? Json(q.prompt_text) : Json(nullptr);
    r["add_special_tokens"] = q.add_special_tokens;
    r["prompt_ids"] = res.prompt_ids;
    r["max_new_tokens"] = q.max_new_tokens;
    r["sampling"] = {{"temperature", floatText(q.sampling.temperature)},
                     {"top_k", q.sampling.top_k},
                     {"top_p", floatText(q.sampling.top_p)},
                     {"seed", std::to_string(q.sampling.seed)}};
    r["output_ids"] = res.output_ids;
    r["text"] = res.text;
    r["finish_reason"] = res.finish_reason;
    r["output_ids_sha256"] = res.output_ids_sha256;
    r["step_logits_sha256"] = res.step_logits_sha256;
    r["logits_chain_sha256"] = logitsChain(res.step_logits_sha256);
    if (run.options.trace_layer_hashes) r["step_layer_sha256"] = res.step_layer_sha256;
    list.push_back(std::move(r));
  }
  j["requests"] = std::move(list);
  std::string body = canonical(j);
  j["receipt_sha256"] = sha256Hex(body.data(), body.size());
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  if (!file) return REE_FAIL(Status::kIoError, "--receipt-path %s: cannot write", path.c_str());
  file << j.dump(1, ' ', false, Json::error_handler_t::replace) << "\n";
  file.close();
  if (!file) return REE_FAIL(Status::kIoError, "--receipt-path %s: write failed", path.c_str());
  return Status::kSuccess;
}

Status validateReceiptFile(const std::string& path, std::string* summary) {
  Receipt receipt;
  REE_RETURN_IF_ERROR(loadReceipt(path, &receipt));
  if (summary != nullptr) {
    int64_t steps = 0;
    for (const ReceiptRequest& r : receipt.requests)
      steps += static_cast<int64_t>(r.output_ids.size());
    *summary = "valid: " + std::to_string(receipt.requests.size()) + " request(s), " +
               std::to_string(steps) + " step(s), " + receipt.operation_set + " operation set" +
               (receipt.trace ? ", layer hashes" : "") + "; receipt, output and logits-chain " +
               "hashes consistent";
  }
  return Status::kSuccess;
}

namespace {

void finishReport(VerifyReport* report) {
  Json j = {{"verdict", report->verdict == Verdict::kVerified   ? "verified"
                        : report->verdict == Verdict::kMismatch ? "mismatch"
                                                                : "could-not-verify"},
            {"summary", report->summary},
            {"requests_checked", report->requests_checked},
            {"steps_checked", report->steps_checked},
            {"replay_seconds", report->seconds}};
  if (report->verdict == Verdict::kMismatch) {
    j["first_divergence"] = {{"request", report->request},
                             {"step", report->step},
                             {"layer", report->layer},
                             {"stage", report->stage},
                             {"field", report->field}};
  }
  report->json = j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

Status mismatch(VerifyReport* report, const std::string& field, int64_t request, int64_t step,
                const std::string& what) {
  report->verdict = Verdict::kMismatch;
  report->field = field;
  report->request = request;
  report->step = step;
  report->summary = "mismatch: " + what;
  finishReport(report);
  return Status::kSuccess;
}

}  // namespace

Status verifyReceiptFile(const std::string& path, const VerifyOptions& options,
                         VerifyReport* report) {
  REE_CHECK_ARG(report != nullptr, "verifyReceiptFile: report is null");
  *report = VerifyReport();
  Receipt receipt;
  Status loaded = loadReceipt(path, &receipt);
  if (loaded == Status::kMismatch) {
    return mismatch(report, "receipt", -1, -1, lastErrorMessage());
  }
  if (loaded != Status::kSuccess) {
    report->summary = std::string("could not verify: ") + lastErrorMessage();
    finishReport(report);
    return loaded;
  }
  // The model must be the receipt's.
  ModelIdentity identity;
  Status st = computeModelIdentity(options.model, &identity);
  if (st != Status::kSuccess) {
    report->summary = std::string("could not verify: ") + lastErrorMessage();
    finishReport(report);
    return st;
  }
  if (identity.config_sha256 != receipt.config_sha256) {
    return mismatch(report, "model.config_sha256", -1, -1,
                    "--model " + options.model + ": config.json differs from the receipt's");
  }
  if (identity.tokenizer_sha256 != receipt.tokenizer_sha256) {
    return mismatch(report, "model.tokenizer_sha256", -1, -1,
                    "--model " + options.model + ": tokenizer.json differs from the receipt's");
  }
  if (identity.weights_sha256 != receipt.weights_sha256) {
    return mismatch(report, "model.weights_sha256", -1, -1,
                    "--model " + options.model + ": the weights differ from the receipt's");
  }
  EngineOptions engine_options;
  engine_options.model = options.model;
  parseOperationSet(receipt.operation_set, &engine_options.operation_set);
  if (receipt.weight_dtype == "f32") engine_options.weight_dtype = DType::kF32;
  if (receipt.weight_dtype == "bf16") engine_options.weight_dtype = DType::kBF16;
  if (receipt.weight_dtype == "f16") engine_options.weight_dtype = DType::kF16;
  engine_options.device = options.device;
  engine_options.n_partitions = options.n_partitions;
  engine_options.partition_layers = options.partition_layers;
  engine_options.stage_devices = options.stage_devices;
  engine_options.max_batch = 1;
  engine_options.max_context = static_cast<int>(receipt.max_context);
  engine_options.trace_layer_hashes = receipt.trace;
  std::unique_ptr<Engine> engine;
  st = Engine::create(engine_options, &engine);
  if (st != Status::kSuccess) {
    report->summary = std::string("could not verify: ") + lastErrorMessage();
    finishReport(report);
    return st;
  }
  const std::vector<int64_t> eos = engine->eosTokenIds();
  for (const ReceiptRequest& req : receipt.requests) {
    if (req.has_text && engine->tokenizer() != nullptr) {
      std::vector<int32_t> ids;
      REE_RETURN_IF_ERROR(
          engine->tokenizer()->encode(req.prompt_text, req.add_special_tokens, &ids));
      if (ids != req.prompt_ids) {
        return mismatch(report, "prompt_ids", req.index, -1,
                        "request " + std::to_string(req.index) +
                            ": prompt_ids are not the tokenization of prompt_text");
      }
    }
    ReplayRequest replay;
    replay.prompt_ids = req.prompt_ids;
    replay.output_ids = req.output_ids;
    replay.sampling = req.sampling;
    replay.request_index = static_cast<uint64_t>(req.index);
    replay.trace_layer_hashes = receipt.trace;
    ReplayResult again;
    auto start = std::chrono::steady_clock::now();
    st = engine->replay(replay, &again);
    report->seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (st != Status::kSuccess) {
      report->summary = std::string("could not verify: ") + lastErrorMessage();
      finishReport(report);
      return st;
    }
    for (size_t t = 0; t < req.output_ids.size(); ++t) {
      std::string where = "request " + std::to_string(req.index) + " step " + std::to_string(t);
      if (receipt.trace) {
        const std::vector<std::string>& claimed = req.step_layers[t];
        const std::vector<std::string>& actual = again.step_layer_sha256[t];
        for (size_t l = 0; l < std::max(claimed.size(), actual.size()); ++l) {
          if (l >= claimed.size() || l >= actual.size() || claimed[l] != actual[l]) {
            int64_t stage = -1;
            for (size_t s = 0; s < receipt.plan.size(); ++s) {
              if (static_cast<int64_t>(l) >= receipt.plan[s].first_layer &&
                  static_cast<int64_t>(l) < receipt.plan[s].end_layer)
                stage = static_cast<int64_t>(s);
            }
            mismatch(report, "step_layer_sha256", req.index, static_cast<int64_t>(t),
                     where + ": first divergent layer " + std::to_string(l) + " (stage " +
                         std::to_string(stage) + " of the receipt's plan)");
            report->layer = static_cast<int64_t>(l);
            report->stage = stage;
            finishReport(report);
            return Status::kSuccess;
          }
        }
      }
      if (again.step_logits_sha256[t] != req.step_logits[t]) {
        return mismatch(report, "step_logits_sha256", req.index, static_cast<int64_t>(t),
                        where + ": the logits hash differs");
      }
      if (again.tokens[t] != req.output_ids[t]) {
        return mismatch(report, "output_ids", req.index, static_cast<int64_t>(t),
                        where + ": the token is " + std::to_string(req.output_ids[t]) +
                            " but the logits and sampler give " + std::to_string(again.tokens[t]));
      }
    }
    int32_t last = req.output_ids.back();
    bool is_eos = std::find(eos.begin(), eos.end(), last) != eos.end();
    bool at_length =
        static_cast<int64_t>(req.output_ids.size()) == req.max_new_tokens ||
        static_cast<int64_t>(req.prompt_ids.size() + req.output_ids.size()) >= receipt.max_context;
    bool eos_inside = std::any_of(req.output_ids.begin(), req.output_ids.end() - 1, [&](int32_t t) {
      return std::find(eos.begin(), eos.end(), t) != eos.end();
    });
    if (eos_inside || (req.finish_reason == "eos" && !is_eos) ||
        (req.finish_reason == "length" && (is_eos || !at_length))) {
      return mismatch(report, "finish_reason", req.index, -1,
                      "request " + std::to_string(req.index) + ": finish_reason '" +
                          req.finish_reason + "' does not follow from the output ids");
    }
    if (engine->tokenizer() != nullptr) {
      std::string text;
      REE_RETURN_IF_ERROR(engine->tokenizer()->decode(req.output_ids, true, &text));
      Json a = text, b = req.text;  // compare as the receipt stores text (invalid UTF-8 replaced)
      if (canonical(a) != canonical(b)) {
        return mismatch(
            report, "text", req.index, -1,
            "request " + std::to_string(req.index) + ": text is not the decoding of output_ids");
      }
    }
    report->requests_checked += 1;
    report->steps_checked += static_cast<int64_t>(req.output_ids.size());
  }
  report->verdict = Verdict::kVerified;
  report->summary = "verified: " + std::to_string(report->requests_checked) + " request(s), " +
                    std::to_string(report->steps_checked) + " step(s) re-derived in " +
                    std::to_string(report->seconds) + " s (one prefill per request)";
  finishReport(report);
  return Status::kSuccess;
}

}  // namespace ree
