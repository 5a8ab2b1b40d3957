#include "ree/models/receipt.h"

#include <openssl/evp.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "ree/models/tokenizer.h"

namespace ree {
namespace {

using Json = nlohmann::json;

// ---- Small helpers --------------------------------------------------------------------------

bool isLowerHex(const std::string& s, size_t digits) {
  return s.size() == digits && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

std::vector<unsigned char> unhex(const std::string& s) {
  auto nibble = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
  std::vector<unsigned char> out(s.size() / 2);
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = static_cast<unsigned char>(nibble(s[2 * i]) * 16 + nibble(s[2 * i + 1]));
  return out;
}

// Canonical JSON: keys sorted (nlohmann's objects are std::maps: byte order, which is code point
// order for UTF-8, as Python's sort_keys), no whitespace, UTF-8 unescaped, control characters
// escaped as Python does. The receipt holds no floats, so number formatting cannot differ.
std::string canonicalJson(const Json& value) {
  return value.dump(-1, ' ', false, Json::error_handler_t::replace);
}

// Strings the receipt stores must be valid UTF-8 so that the bytes written are the bytes hashed;
// invalid sequences become U+FFFD exactly as nlohmann's dump writes them.
std::string validUtf8(const std::string& text) {
  return Json::parse(Json(text).dump(-1, ' ', false, Json::error_handler_t::replace))
      .get<std::string>();
}

// Decimal form of a float32 recorded next to its bits: "%.9g" round-trips every float32.
std::string floatDecimal(float value) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.9g", static_cast<double>(value));
  return buffer;
}

uint32_t floatBits(float value) {
  uint32_t bits = 0;
  std::memcpy(&bits, &value, 4);
  return bits;
}

std::string bitsHex(float value) {
  char buffer[16];
  std::snprintf(buffer, sizeof(buffer), "%08x", floatBits(value));
  return buffer;
}

// "auto" (as stored) or the dtype's name ("f32", "bf16", "f16"), as --dtype spells it.
std::string weightDtypeName(const std::optional<DType>& dtype) {
  return dtype ? dtypeName(*dtype) : "auto";
}

int64_t layerCount(const std::vector<partitioner::Stage>& plan) {
  return plan.empty() ? 0 : plan.back().end_layer;
}

// ---- Receipt -> JSON ------------------------------------------------------------------------

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
  j["run"] = {{"operation_set", r.operation_set},
              {"weight_dtype", r.weight_dtype},
              {"max_context", r.max_context},
              {"trace_layer_hashes", r.trace_layer_hashes}};
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

// ---- JSON -> Receipt (strict) ---------------------------------------------------------------

// Field access whose errors name the source and the JSON path ("requests[0].seed").
class Reader {
 public:
  explicit Reader(std::string source) : source_(std::move(source)) {}

  Status fail(const std::string& path, const std::string& what) const {
    return REE_FAIL(Status::kIoError, "%s: %s: %s", source_.c_str(), path.c_str(), what.c_str());
  }

  // `object` (at `path`) must have exactly `required` keys, plus any of `optional`.
  Status keys(const Json& object, const std::string& path,
              std::initializer_list<const char*> required,
              std::initializer_list<const char*> optional = {}) const {
    if (!object.is_object()) return fail(path.empty() ? "(top level)" : path, "expected an object");
    for (const char* key : required) {
      if (!object.contains(key)) return fail(join(path, key), "missing");
    }
    for (auto it = object.begin(); it != object.end(); ++it) {
      bool known = std::any_of(required.begin(), required.end(),
                               [&](const char* k) { return it.key() == k; }) ||
                   std::any_of(optional.begin(), optional.end(),
                               [&](const char* k) { return it.key() == k; });
      if (!known) {
        return fail(join(path, it.key()),
                    "unknown field (not part of " + std::string(kReceiptFormat) + ")");
      }
    }
    return Status::kSuccess;
  }

  Status string(const Json& v, const std::string& path, std::string* out) const {
    if (!v.is_string()) return fail(path, "expected a string");
    *out = v.get<std::string>();
    return Status::kSuccess;
  }
  Status oneOf(const Json& v, const std::string& path, std::initializer_list<const char*> allowed,
               std::string* out) const {
    REE_RETURN_IF_ERROR(string(v, path, out));
    for (const char* a : allowed) {
      if (*out == a) return Status::kSuccess;
    }
    std::string list;
    for (const char* a : allowed)
      list += std::string(list.empty() ? "" : ", ") + a;
    return fail(path, "'" + *out + "' is not one of " + list);
  }
  Status sha256(const Json& v, const std::string& path, std::string* out,
                bool allow_empty = false) const {
    REE_RETURN_IF_ERROR(string(v, path, out));
    if (allow_empty && out->empty()) return Status::kSuccess;
    if (!isLowerHex(*out, 64)) {
      return fail(
          path, std::string("expected 64 lowercase hex digits") + (allow_empty ? " or \"\"" : ""));
    }
    return Status::kSuccess;
  }
  Status boolean(const Json& v, const std::string& path, bool* out) const {
    if (!v.is_boolean()) return fail(path, "expected true or false");
    *out = v.get<bool>();
    return Status::kSuccess;
  }
  Status integer(const Json& v, const std::string& path, int64_t min, int64_t max,
                 int64_t* out) const {
    if (!v.is_number_integer()) return fail(path, "expected an integer");
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
      return fail(
          path, "integer out of range [" + std::to_string(min) + ", " + std::to_string(max) + "]");
    }
    int64_t x = v.get<int64_t>();
    if (x < min || x > max) {
      return fail(path, "integer " + std::to_string(x) + " outside [" + std::to_string(min) + ", " +
                            std::to_string(max) + "]");
    }
    *out = x;
    return Status::kSuccess;
  }
  Status ids(const Json& v, const std::string& path, std::vector<int32_t>* out) const {
    if (!v.is_array()) return fail(path, "expected an array of token ids");
    out->clear();
    for (size_t i = 0; i < v.size(); ++i) {
      int64_t id = 0;
      REE_RETURN_IF_ERROR(integer(v[i], index(path, i), 0, INT32_MAX, &id));
      out->push_back(static_cast<int32_t>(id));
    }
    return Status::kSuccess;
  }
  Status hashes(const Json& v, const std::string& path, std::vector<std::string>* out) const {
    if (!v.is_array()) return fail(path, "expected an array of SHA-256 hex strings");
    out->clear();
    for (size_t i = 0; i < v.size(); ++i) {
      std::string h;
      REE_RETURN_IF_ERROR(sha256(v[i], index(path, i), &h));
      out->push_back(std::move(h));
    }
    return Status::kSuccess;
  }
  // A float32 stored as its bits ("3f4ccccd") and the "%.9g" decimal of the same value.
  Status float32(const Json& object, const std::string& path, const char* key, float* out) const {
    std::string decimal, bits;
    std::string bits_key = std::string(key) + "_f32";
    REE_RETURN_IF_ERROR(string(object[key], join(path, key), &decimal));
    REE_RETURN_IF_ERROR(string(object[bits_key], join(path, bits_key), &bits));
    if (!isLowerHex(bits, 8)) return fail(join(path, bits_key), "expected 8 lowercase hex digits");
    uint32_t raw = static_cast<uint32_t>(std::strtoul(bits.c_str(), nullptr, 16));
    float value = 0.0f;
    std::memcpy(&value, &raw, 4);
    if (floatDecimal(value) != decimal) {
      return fail(join(path, key), "'" + decimal + "' disagrees with " + bits_key + " " + bits +
                                       " (whose %.9g form is '" + floatDecimal(value) + "')");
    }
    *out = value;
    return Status::kSuccess;
  }

  static std::string join(const std::string& path, const std::string& key) {
    return path.empty() ? key : path + "." + key;
  }
  static std::string index(const std::string& path, size_t i) {
    return path + "[" + std::to_string(i) + "]";
  }

 private:
  std::string source_;
};

Status parseRequest(const Reader& in, const Json& q, const std::string& path, bool trace,
                    ReceiptRequest* r) {
  REE_RETURN_IF_ERROR(
      in.keys(q, path,
              {"index", "prompt_text", "add_special_tokens", "prompt_ids", "prompt_ids_sha256",
               "max_new_tokens", "sampling", "output_ids", "text", "finish_reason",
               "output_ids_sha256", "step_logits_sha256", "logits_chain_sha256"},
              {"step_layer_sha256"}));
  REE_RETURN_IF_ERROR(in.integer(q["index"], Reader::join(path, "index"), 0, INT32_MAX, &r->index));
  if (q["prompt_text"].is_string()) {
    r->has_prompt_text = true;
    r->prompt_text = q["prompt_text"].get<std::string>();
  } else if (!q["prompt_text"].is_null()) {
    return in.fail(Reader::join(path, "prompt_text"), "expected a string or null");
  }
  REE_RETURN_IF_ERROR(in.boolean(q["add_special_tokens"], Reader::join(path, "add_special_tokens"),
                                 &r->add_special_tokens));
  REE_RETURN_IF_ERROR(in.ids(q["prompt_ids"], Reader::join(path, "prompt_ids"), &r->prompt_ids));
  if (r->prompt_ids.empty()) return in.fail(Reader::join(path, "prompt_ids"), "empty");
  REE_RETURN_IF_ERROR(in.sha256(q["prompt_ids_sha256"], Reader::join(path, "prompt_ids_sha256"),
                                &r->prompt_ids_sha256));
  REE_RETURN_IF_ERROR(in.integer(q["max_new_tokens"], Reader::join(path, "max_new_tokens"), 1,
                                 INT32_MAX, &r->max_new_tokens));
  const Json& s = q["sampling"];
  const std::string sp = Reader::join(path, "sampling");
  REE_RETURN_IF_ERROR(
      in.keys(s, sp, {"temperature", "temperature_f32", "top_k", "top_p", "top_p_f32", "seed"}));
  REE_RETURN_IF_ERROR(in.float32(s, sp, "temperature", &r->sampling.temperature));
  REE_RETURN_IF_ERROR(in.float32(s, sp, "top_p", &r->sampling.top_p));
  int64_t top_k = 0;
  REE_RETURN_IF_ERROR(in.integer(s["top_k"], Reader::join(sp, "top_k"), 0, INT32_MAX, &top_k));
  r->sampling.top_k = static_cast<int>(top_k);
  std::string seed;
  REE_RETURN_IF_ERROR(in.string(s["seed"], Reader::join(sp, "seed"), &seed));
  errno = 0;
  char* end = nullptr;
  unsigned long long value = std::strtoull(seed.c_str(), &end, 10);
  if (seed.empty() || seed[0] == '-' || errno != 0 || end != seed.c_str() + seed.size() ||
      std::to_string(value) != seed) {
    return in.fail(Reader::join(sp, "seed"),
                   "'" + seed + "' is not a canonical decimal unsigned 64-bit integer");
  }
  r->sampling.seed = value;
  REE_RETURN_IF_ERROR(in.ids(q["output_ids"], Reader::join(path, "output_ids"), &r->output_ids));
  if (r->output_ids.empty()) return in.fail(Reader::join(path, "output_ids"), "empty");
  REE_RETURN_IF_ERROR(in.string(q["text"], Reader::join(path, "text"), &r->text));
  REE_RETURN_IF_ERROR(in.oneOf(q["finish_reason"], Reader::join(path, "finish_reason"),
                               {"eos", "length"}, &r->finish_reason));
  REE_RETURN_IF_ERROR(in.sha256(q["output_ids_sha256"], Reader::join(path, "output_ids_sha256"),
                                &r->output_ids_sha256));
  REE_RETURN_IF_ERROR(in.hashes(q["step_logits_sha256"], Reader::join(path, "step_logits_sha256"),
                                &r->step_logits_sha256));
  REE_RETURN_IF_ERROR(in.sha256(q["logits_chain_sha256"], Reader::join(path, "logits_chain_sha256"),
                                &r->logits_chain_sha256));
  const std::string lp = Reader::join(path, "step_layer_sha256");
  if (trace) {
    if (!q.contains("step_layer_sha256")) return in.fail(lp, "missing (run.trace_layer_hashes)");
    const Json& steps = q["step_layer_sha256"];
    if (!steps.is_array()) return in.fail(lp, "expected an array (one entry per step)");
    for (size_t t = 0; t < steps.size(); ++t) {
      std::vector<std::string> layers;
      REE_RETURN_IF_ERROR(in.hashes(steps[t], Reader::index(lp, t), &layers));
      r->step_layer_sha256.push_back(std::move(layers));
    }
  } else if (q.contains("step_layer_sha256")) {
    return in.fail(lp, "present but run.trace_layer_hashes is false");
  }
  return Status::kSuccess;
}

Status parseReceiptJson(const Reader& in, const Json& j, Receipt* r) {
  if (!j.is_object()) return in.fail("(top level)", "expected a JSON object");
  // The version first: another version's fields would give confusing errors.
  if (!j.contains("format")) return in.fail("format", "missing (not a REE receipt?)");
  REE_RETURN_IF_ERROR(in.string(j["format"], "format", &r->format));
  if (r->format != kReceiptFormat) {
    return in.fail("format", "'" + r->format + "' is not " + kReceiptFormat +
                                 " (the only receipt format this runtime reads)");
  }
  REE_RETURN_IF_ERROR(in.keys(
      j, "", {"format", "runtime", "model", "run", "execution", "requests", "receipt_sha256"}));
  const Json& runtime = j["runtime"];
  REE_RETURN_IF_ERROR(in.keys(runtime, "runtime", {"name", "version", "repops_spec"}));
  REE_RETURN_IF_ERROR(in.string(runtime["name"], "runtime.name", &r->runtime_name));
  REE_RETURN_IF_ERROR(in.string(runtime["version"], "runtime.version", &r->runtime_version));
  REE_RETURN_IF_ERROR(in.string(runtime["repops_spec"], "runtime.repops_spec", &r->repops_spec));

  const Json& model = j["model"];
  REE_RETURN_IF_ERROR(
      in.keys(model, "model",
              {"source", "config_sha256", "tokenizer_sha256", "weights_sha256", "weights_kind"}));
  REE_RETURN_IF_ERROR(in.string(model["source"], "model.source", &r->model_source));
  REE_RETURN_IF_ERROR(
      in.sha256(model["config_sha256"], "model.config_sha256", &r->identity.config_sha256));
  REE_RETURN_IF_ERROR(in.sha256(model["tokenizer_sha256"], "model.tokenizer_sha256",
                                &r->identity.tokenizer_sha256, /*allow_empty=*/true));
  REE_RETURN_IF_ERROR(
      in.sha256(model["weights_sha256"], "model.weights_sha256", &r->identity.weights_sha256));
  REE_RETURN_IF_ERROR(in.oneOf(model["weights_kind"], "model.weights_kind",
                               {"safetensors", "synthetic"}, &r->identity.weights_kind));

  const Json& run = j["run"];
  REE_RETURN_IF_ERROR(
      in.keys(run, "run", {"operation_set", "weight_dtype", "max_context", "trace_layer_hashes"}));
  REE_RETURN_IF_ERROR(in.string(run["operation_set"], "run.operation_set", &r->operation_set));
  OperationSetKind kind;
  if (parseOperationSet(r->operation_set, &kind) != Status::kSuccess) {
    return in.fail("run.operation_set", "unknown operation set '" + r->operation_set + "'");
  }
  REE_RETURN_IF_ERROR(in.oneOf(run["weight_dtype"], "run.weight_dtype",
                               {"auto", "f32", "bf16", "f16"}, &r->weight_dtype));
  REE_RETURN_IF_ERROR(
      in.integer(run["max_context"], "run.max_context", 1, INT32_MAX, &r->max_context));
  REE_RETURN_IF_ERROR(
      in.boolean(run["trace_layer_hashes"], "run.trace_layer_hashes", &r->trace_layer_hashes));

  const Json& execution = j["execution"];
  REE_RETURN_IF_ERROR(in.keys(execution, "execution", {"n_partitions", "plan", "stage_devices"}));
  REE_RETURN_IF_ERROR(in.integer(execution["n_partitions"], "execution.n_partitions", 1, 1 << 20,
                                 &r->n_partitions));
  const Json& plan = execution["plan"];
  if (!plan.is_array() || plan.empty()) {
    return in.fail("execution.plan", "expected a non-empty array of stages");
  }
  for (size_t s = 0; s < plan.size(); ++s) {
    std::string sp = Reader::index("execution.plan", s);
    REE_RETURN_IF_ERROR(in.keys(plan[s], sp, {"first_layer", "end_layer", "embedding", "head"}));
    partitioner::Stage stage;
    int64_t expected_first = s == 0 ? 0 : r->plan.back().end_layer;
    REE_RETURN_IF_ERROR(in.integer(plan[s]["first_layer"], Reader::join(sp, "first_layer"),
                                   expected_first, expected_first, &stage.first_layer));
    REE_RETURN_IF_ERROR(in.integer(plan[s]["end_layer"], Reader::join(sp, "end_layer"),
                                   stage.first_layer + 1, 1 << 20, &stage.end_layer));
    REE_RETURN_IF_ERROR(
        in.boolean(plan[s]["embedding"], Reader::join(sp, "embedding"), &stage.embedding));
    REE_RETURN_IF_ERROR(in.boolean(plan[s]["head"], Reader::join(sp, "head"), &stage.head));
    r->plan.push_back(stage);
  }
  if (static_cast<int64_t>(r->plan.size()) != r->n_partitions) {
    return in.fail("execution.n_partitions", "is " + std::to_string(r->n_partitions) +
                                                 " but execution.plan has " +
                                                 std::to_string(r->plan.size()) + " stage(s)");
  }
  const Json& devices = execution["stage_devices"];
  if (!devices.is_array() || devices.size() != r->plan.size()) {
    return in.fail("execution.stage_devices", "expected an array of one string per stage");
  }
  for (size_t s = 0; s < devices.size(); ++s) {
    std::string device;
    REE_RETURN_IF_ERROR(
        in.string(devices[s], Reader::index("execution.stage_devices", s), &device));
    r->stage_devices.push_back(std::move(device));
  }

  const Json& requests = j["requests"];
  if (!requests.is_array() || requests.empty()) {
    return in.fail("requests", "expected a non-empty array");
  }
  std::set<int64_t> seen;
  for (size_t i = 0; i < requests.size(); ++i) {
    ReceiptRequest request;
    std::string path = Reader::index("requests", i);
    REE_RETURN_IF_ERROR(parseRequest(in, requests[i], path, r->trace_layer_hashes, &request));
    if (!seen.insert(request.index).second) {
      return in.fail(Reader::join(path, "index"),
                     "index " + std::to_string(request.index) + " appears twice");
    }
    r->requests.push_back(std::move(request));
  }
  REE_RETURN_IF_ERROR(in.sha256(j["receipt_sha256"], "receipt_sha256", &r->receipt_sha256));
  return Status::kSuccess;
}

Status inconsistent(const std::string& path, const std::string& what) {
  return REE_FAIL(Status::kMismatch, "%s: %s", path.c_str(), what.c_str());
}

}  // namespace

// ---- Public API ---------------------------------------------------------------------------

std::string idsSha256(const std::vector<int32_t>& ids) {
  // Little-endian int32 (x86-64 and aarch64 hosts store them so).
  return sha256Hex(ids.data(), ids.size() * sizeof(int32_t));
}

std::string logitsChainSha256(const std::string& prompt_ids_sha256,
                              const std::vector<std::string>& step_logits_sha256) {
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
  REE_CHECK_ARG(out != nullptr, "makeReceipt: out is null");
  REE_CHECK_ARG(requests.size() == results.size() && !requests.empty(),
                "makeReceipt: %zu requests but %zu results", requests.size(), results.size());
  REE_CHECK_ARG(!run.plan.empty(), "makeReceipt: the run's plan is empty");
  std::string weight_dtype = weightDtypeName(run.options.weight_dtype);
  REE_CHECK_ARG(weight_dtype != "unsupported", "makeReceipt: weight dtype is not f32/bf16/f16");
  Receipt r;
  r.runtime_version = run.runtime_version;
  r.repops_spec = run.repops_spec;
  r.model_source = validUtf8(run.model);
  r.identity = run.identity;
  r.operation_set = operationSetName(run.options.operation_set);
  r.weight_dtype = weight_dtype;
  r.max_context = run.max_context;
  r.trace_layer_hashes = run.options.trace_layer_hashes;
  r.n_partitions = static_cast<int64_t>(run.plan.size());
  r.plan = run.plan;
  r.stage_devices = run.stage_devices;
  r.stage_devices.resize(run.plan.size());
  for (std::string& device : r.stage_devices)
    device = validUtf8(device);
  for (size_t i = 0; i < requests.size(); ++i) {
    const GenerationRequest& q = requests[i];
    const GenerationResult& res = results[i];
    REE_CHECK_ARG(!res.output_ids.empty() && res.step_logits_sha256.size() == res.output_ids.size(),
                  "makeReceipt: result %zu has %zu output ids and %zu step hashes", i,
                  res.output_ids.size(), res.step_logits_sha256.size());
    REE_CHECK_ARG(!r.trace_layer_hashes || res.step_layer_sha256.size() == res.output_ids.size(),
                  "makeReceipt: result %zu has %zu steps of layer hashes for %zu output ids", i,
                  res.step_layer_sha256.size(), res.output_ids.size());
    ReceiptRequest req;
    req.index = static_cast<int64_t>(i);
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
    if (r.trace_layer_hashes) req.step_layer_sha256 = res.step_layer_sha256;
    r.requests.push_back(std::move(req));
  }
  std::string body;
  REE_RETURN_IF_ERROR(canonicalReceiptBody(r, &body));
  r.receipt_sha256 = sha256Hex(body.data(), body.size());
  *out = std::move(r);
  return Status::kSuccess;
}

Status canonicalReceiptBody(const Receipt& receipt, std::string* bytes) {
  REE_CHECK_ARG(bytes != nullptr, "canonicalReceiptBody: bytes is null");
  *bytes = canonicalJson(receiptBodyJson(receipt));
  return Status::kSuccess;
}

Status receiptFileText(const Receipt& receipt, std::string* text) {
  REE_CHECK_ARG(text != nullptr, "receiptFileText: text is null");
  Json j = receiptBodyJson(receipt);
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

Status parseReceipt(const std::string& text, const std::string& source, Receipt* out) {
  REE_CHECK_ARG(out != nullptr, "parseReceipt: out is null");
  Reader in(source);
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    // Say where: nlohmann's exception message has the byte position.
    try {
      Json unused = Json::parse(text);
      (void)unused;
    } catch (const std::exception& e) {
      return in.fail("(file)", std::string("not valid JSON (") + e.what() + ")");
    }
    return in.fail("(file)", "not valid JSON");
  }
  Receipt r;
  REE_RETURN_IF_ERROR(parseReceiptJson(in, j, &r));
  // Strictness makes the parsed receipt re-serialise to the bytes the file's content hashes to;
  // this catches any value the parser accepted but normalised.
  Json body = j;
  body.erase("receipt_sha256");
  std::string reserialised;
  REE_RETURN_IF_ERROR(canonicalReceiptBody(r, &reserialised));
  if (canonicalJson(body) != reserialised) {
    return in.fail("(file)",
                   std::string("content is not in the canonical form of ") + kReceiptFormat);
  }
  *out = std::move(r);
  return Status::kSuccess;
}

Status readReceipt(const std::string& path, Receipt* out) {
  REE_CHECK_ARG(out != nullptr, "readReceipt: out is null");
  std::ifstream in(path, std::ios::binary);
  if (!in) return REE_FAIL(Status::kIoError, "%s: cannot open the receipt", path.c_str());
  std::ostringstream contents;
  contents << in.rdbuf();
  if (in.bad()) return REE_FAIL(Status::kIoError, "%s: read failed", path.c_str());
  return parseReceipt(contents.str(), path, out);
}

Status validateReceipt(const Receipt& receipt, std::string* summary) {
  int64_t steps = 0;
  int64_t layers = layerCount(receipt.plan);
  for (size_t i = 0; i < receipt.requests.size(); ++i) {
    const ReceiptRequest& r = receipt.requests[i];
    const std::string path = "requests[" + std::to_string(i) + "]";
    const int64_t n = static_cast<int64_t>(r.output_ids.size());
    if (idsSha256(r.prompt_ids) != r.prompt_ids_sha256) {
      return inconsistent(path + ".prompt_ids_sha256", "does not match prompt_ids");
    }
    if (idsSha256(r.output_ids) != r.output_ids_sha256) {
      return inconsistent(path + ".output_ids_sha256", "does not match output_ids");
    }
    if (static_cast<int64_t>(r.step_logits_sha256.size()) != n) {
      return inconsistent(path + ".step_logits_sha256",
                          std::to_string(r.step_logits_sha256.size()) + " step hashes for " +
                              std::to_string(n) + " output ids");
    }
    if (logitsChainSha256(r.prompt_ids_sha256, r.step_logits_sha256) != r.logits_chain_sha256) {
      return inconsistent(path + ".logits_chain_sha256", "does not match step_logits_sha256");
    }
    if (receipt.trace_layer_hashes) {
      if (static_cast<int64_t>(r.step_layer_sha256.size()) != n) {
        return inconsistent(path + ".step_layer_sha256",
                            std::to_string(r.step_layer_sha256.size()) + " steps for " +
                                std::to_string(n) + " output ids");
      }
      for (size_t t = 0; t < r.step_layer_sha256.size(); ++t) {
        if (static_cast<int64_t>(r.step_layer_sha256[t].size()) != layers) {
          return inconsistent(path + ".step_layer_sha256[" + std::to_string(t) + "]",
                              std::to_string(r.step_layer_sha256[t].size()) +
                                  " layer hashes but the plan has " + std::to_string(layers) +
                                  " layers");
        }
      }
    }
    if (n > r.max_new_tokens) {
      return inconsistent(path + ".output_ids", std::to_string(n) + " ids exceed max_new_tokens " +
                                                    std::to_string(r.max_new_tokens));
    }
    const int64_t total = static_cast<int64_t>(r.prompt_ids.size()) + n;
    if (total > receipt.max_context) {
      return inconsistent(path + ".output_ids", "prompt + output (" + std::to_string(total) +
                                                    " tokens) exceed run.max_context " +
                                                    std::to_string(receipt.max_context));
    }
    const bool at_length = n == r.max_new_tokens || total >= receipt.max_context;
    if (r.finish_reason == "length" && !at_length) {
      return inconsistent(path + ".finish_reason",
                          "'length' but neither max_new_tokens nor run.max_context was reached");
    }
    if (r.finish_reason == "eos" && n == 0) {
      return inconsistent(path + ".finish_reason", "'eos' without output ids");
    }
    steps += n;
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

}  // namespace

bool checkModelIdentity(const Receipt& receipt, const ModelIdentity& actual, VerifyReport* report) {
  struct Field {
    const char* name;
    const std::string& claimed;
    const std::string& have;
    const char* what;
  } fields[] = {
      {"model.config_sha256", receipt.identity.config_sha256, actual.config_sha256, "config.json"},
      {"model.tokenizer_sha256", receipt.identity.tokenizer_sha256, actual.tokenizer_sha256,
       "tokenizer.json"},
      {"model.weights_sha256", receipt.identity.weights_sha256, actual.weights_sha256,
       "the weights"},
  };
  for (const Field& f : fields) {
    if (f.claimed != f.have) {
      concluded(report, Verdict::kCouldNotVerify, f.name, -1, -1,
                std::string("could not verify: model identity differs: ") + f.what +
                    " of --model (" + (f.have.empty() ? "absent" : f.have.substr(0, 16)) +
                    "...) is not the receipt's " + f.name + " (" +
                    (f.claimed.empty() ? "absent" : f.claimed.substr(0, 16)) + "...)");
      return false;
    }
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

  // The engine must compute what the receipt's run computed.
  EngineOptions wanted = engine.options();
  REE_RETURN_IF_ERROR(receiptEngineOptions(receipt, &wanted));
  if (engine.options().operation_set != wanted.operation_set ||
      engine.options().weight_dtype != wanted.weight_dtype) {
    status = REE_FAIL(Status::kInvalidArgument,
                      "the engine's operation set / weight dtype (%s) are not the receipt's (%s, "
                      "weight dtype %s): make it with receiptEngineOptions()",
                      operationSetName(engine.options().operation_set),
                      receipt.operation_set.c_str(), receipt.weight_dtype.c_str());
    return couldNotVerify(report, status);
  }
  // Only RepOps promises the same bits on other hardware and in one prefill instead of decode
  // steps; a numeric divergence under another operation set proves nothing.
  const bool numerics_conclusive =
      engine.options().operation_set == OperationSetKind::kReproducible;
  if (!numerics_conclusive) {
    report->note = "operation set '" + receipt.operation_set +
                   "' is not reproducible across hardware, nor between decode steps and the one "
                   "prefill verify runs: a numeric divergence is inconclusive";
  }
  const Verdict numeric_divergence =
      numerics_conclusive ? Verdict::kMismatch : Verdict::kCouldNotVerify;
  const char* numeric_word = numerics_conclusive ? "mismatch" : "could not verify (inconclusive)";

  const models::Tokenizer* tokenizer = engine.tokenizer();
  const int64_t vocab = engine.config().vocab_size;
  const std::vector<int64_t> eos = engine.eosTokenIds();
  auto is_eos = [&](int32_t id) { return std::find(eos.begin(), eos.end(), id) != eos.end(); };
  if (tokenizer == nullptr) {
    report->note += std::string(report->note.empty() ? "" : "; ") +
                    "the model has no tokenizer: prompt text and output text were not checked";
  }
  for (const ReceiptRequest& r : receipt.requests) {
    const std::string who = "request " + std::to_string(r.index);
    if (r.has_prompt_text && tokenizer != nullptr) {
      std::vector<int32_t> ids;
      status = tokenizer->encode(r.prompt_text, r.add_special_tokens, &ids);
      if (status != Status::kSuccess) return couldNotVerify(report, status);
      if (ids != r.prompt_ids) {
        return concluded(report, Verdict::kMismatch, "prompt_ids", r.index, -1,
                         "mismatch: " + who +
                             ": prompt_ids are not the tokenization of "
                             "prompt_text");
      }
    }
    for (size_t i = 0; i < r.prompt_ids.size(); ++i) {
      if (r.prompt_ids[i] >= vocab) {
        return concluded(report, Verdict::kMismatch, "prompt_ids", r.index, -1,
                         "mismatch: " + who + ": prompt id " + std::to_string(r.prompt_ids[i]) +
                             " is outside the vocabulary of " + std::to_string(vocab));
      }
    }
    for (size_t t = 0; t < r.output_ids.size(); ++t) {
      if (r.output_ids[t] >= vocab) {
        return concluded(report, Verdict::kMismatch, "output_ids", r.index, static_cast<int64_t>(t),
                         "mismatch: " + who + " step " + std::to_string(t) + ": output id " +
                             std::to_string(r.output_ids[t]) + " is outside the vocabulary of " +
                             std::to_string(vocab));
      }
    }
    ReplayRequest replay;
    replay.prompt_ids = r.prompt_ids;
    replay.output_ids = r.output_ids;
    replay.sampling = r.sampling;
    replay.request_index = static_cast<uint64_t>(r.index);
    replay.trace_layer_hashes = receipt.trace_layer_hashes;
    ReplayResult again;
    auto start = std::chrono::steady_clock::now();
    status = engine.replay(replay, &again);
    report->replay_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (status != Status::kSuccess) return couldNotVerify(report, status);
    if (again.tokens.size() != r.output_ids.size() ||
        again.step_logits_sha256.size() != r.output_ids.size() ||
        (receipt.trace_layer_hashes && again.step_layer_sha256.size() != r.output_ids.size())) {
      status = REE_FAIL(Status::kInternal, "%s: replay returned %zu steps for %zu output ids",
                        who.c_str(), again.tokens.size(), r.output_ids.size());
      return couldNotVerify(report, status);
    }
    for (size_t t = 0; t < r.output_ids.size(); ++t) {
      const int64_t step = static_cast<int64_t>(t);
      const std::string where = who + " step " + std::to_string(t);
      if (receipt.trace_layer_hashes) {
        const std::vector<std::string>& claimed = r.step_layer_sha256[t];
        const std::vector<std::string>& have = again.step_layer_sha256[t];
        for (size_t l = 0; l < std::max(claimed.size(), have.size()); ++l) {
          if (l < claimed.size() && l < have.size() && claimed[l] == have[l]) continue;
          const int64_t layer = static_cast<int64_t>(l);
          const int64_t stage = stageOfLayer(receipt.plan, layer);
          concluded(report, numeric_divergence, "step_layer_sha256", r.index, step,
                    std::string(numeric_word) + ": " + where + " (first divergent layer " +
                        std::to_string(layer) + ", stage " + std::to_string(stage) + ")");
          report->layer = layer;
          report->stage = stage;
          finishVerifyReport(report);
          return Status::kSuccess;
        }
      }
      if (again.step_logits_sha256[t] != r.step_logits_sha256[t]) {
        return concluded(report, numeric_divergence, "step_logits_sha256", r.index, step,
                         std::string(numeric_word) + ": " + where + " (the logits hash differs)");
      }
      if (again.tokens[t] != r.output_ids[t]) {
        // Same logits, different token: the sampler (or the receipt's token) disagrees, which
        // does not depend on the operation set's numerics.
        return concluded(
            report, Verdict::kMismatch, "output_ids", r.index, step,
            "mismatch: " + where + " (the receipt's token is " + std::to_string(r.output_ids[t]) +
                "; the logits and the sampler give " + std::to_string(again.tokens[t]) + ")");
      }
      if (t + 1 < r.output_ids.size() && is_eos(r.output_ids[t])) {
        return concluded(report, Verdict::kMismatch, "output_ids", r.index, step + 1,
                         "mismatch: " + who +
                             ": generation continues after the end-of-sequence "
                             "token at step " +
                             std::to_string(t));
      }
    }
    const bool ends_with_eos = is_eos(r.output_ids.back());
    if ((r.finish_reason == "eos") != ends_with_eos) {
      return concluded(report, Verdict::kMismatch, "finish_reason", r.index, -1,
                       "mismatch: " + who + ": finish_reason '" + r.finish_reason +
                           "' but the last token is " + (ends_with_eos ? "" : "not ") +
                           "an end-of-sequence token");
    }
    if (tokenizer != nullptr) {
      std::string text;
      status = tokenizer->decode(r.output_ids, /*skip_special_tokens=*/true, &text);
      if (status != Status::kSuccess) return couldNotVerify(report, status);
      if (validUtf8(text) != r.text) {
        return concluded(report, Verdict::kMismatch, "text", r.index, -1,
                         "mismatch: " + who + ": text is not the decoding of output_ids");
      }
    } else if (!r.text.empty()) {
      return concluded(report, Verdict::kMismatch, "text", r.index, -1,
                       "mismatch: " + who + ": text given but the model has no tokenizer");
    }
    report->requests_checked += 1;
    report->steps_checked += static_cast<int64_t>(r.output_ids.size());
  }
  char seconds[32];
  std::snprintf(seconds, sizeof(seconds), "%.3f", report->replay_seconds);
  return concluded(report, Verdict::kVerified, "", -1, -1,
                   "verified: " + std::to_string(report->requests_checked) + " request(s), " +
                       std::to_string(report->steps_checked) + " step(s), re-derived in " +
                       seconds + " s (one prefill per request)");
}

}  // namespace ree
