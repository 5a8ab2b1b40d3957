// Receipts, the strict reader: JSON text -> Receipt. Every field present, typed and in range, no
// unknown field, and the parsed receipt must re-serialise to the canonical bytes of the text, so
// that what was read is exactly what the hashes cover. Errors name the source and the field.
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <set>

#include "engine/generation_sampling.h"
#include "receipt_json.h"
#include "ree/core/file.h"
#include "ree/core/json_guard.h"
#include "ree/core/text.h"

namespace ree {
namespace {

using receipt_detail::floatDecimal;
using receipt_detail::isLowerHex;
using receipt_detail::Json;

// Field access whose errors name the source and the JSON path ("requests[0].seed").
class Reader {
 public:
  explicit Reader(std::string source) : source_(std::move(source)) {}

  Status fail(const std::string& path, const std::string& what) const {
    return REE_FAIL(Status::kIoError, "%s: %s: %s", source_.c_str(), path.c_str(), what.c_str());
  }
  // Relays the last error (which names the field and carries its origin), as kIoError.
  Status failWithLastError(const char* why) const {
    return setError(Status::kIoError, nullptr, 0, "%s: %s: %s", source_.c_str(), why,
                    lastErrorMessage());
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
      auto named = [&](const char* k) { return it.key() == k; };
      bool known = std::any_of(required.begin(), required.end(), named) ||
                   std::any_of(optional.begin(), optional.end(), named);
      if (!known) {
        return fail(join(path, printableText(it.key(), 80)),
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
    return fail(path, "'" + printableText(*out, 80) + "' is not one of " + list);
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
      return fail(join(path, key), "'" + printableText(decimal, 40) + "' disagrees with " +
                                       bits_key + " " + bits + " (whose %.9g form is '" +
                                       floatDecimal(value) + "')");
    }
    *out = value;
    return Status::kSuccess;
  }
  // A uint64 as a canonical decimal string (no sign, no leading zeros).
  Status decimalU64(const Json& v, const std::string& path, uint64_t* out) const {
    std::string text;
    REE_RETURN_IF_ERROR(string(v, path, &text));
    errno = 0;
    char* end = nullptr;
    unsigned long long value = std::strtoull(text.c_str(), &end, 10);
    if (text.empty() || text[0] == '-' || errno != 0 || end != text.c_str() + text.size() ||
        std::to_string(value) != text) {
      return fail(path, "'" + printableText(text, 40) +
                            "' is not a canonical decimal unsigned 64-bit integer");
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

Status parseSampling(const Reader& in, const Json& s, const std::string& sp, SamplingParams* out) {
  REE_RETURN_IF_ERROR(
      in.keys(s, sp, {"temperature", "temperature_f32", "top_k", "top_p", "top_p_f32", "seed"}));
  REE_RETURN_IF_ERROR(in.float32(s, sp, "temperature", &out->temperature));
  REE_RETURN_IF_ERROR(in.float32(s, sp, "top_p", &out->top_p));
  int64_t top_k = 0;
  REE_RETURN_IF_ERROR(in.integer(s["top_k"], Reader::join(sp, "top_k"), 0, INT32_MAX, &top_k));
  out->top_k = static_cast<int>(top_k);
  return in.decimalU64(s["seed"], Reader::join(sp, "seed"), &out->seed);
}

// step_layer_sha256: present exactly when the run traced layers; [step][layer].
Status parseLayerHashes(const Reader& in, const Json& q, const std::string& path, bool trace,
                        ReceiptRequest* r) {
  const std::string lp = Reader::join(path, "step_layer_sha256");
  if (!trace) {
    if (q.contains("step_layer_sha256")) {
      return in.fail(lp, "present but run.trace_layer_hashes is false");
    }
    return Status::kSuccess;
  }
  if (!q.contains("step_layer_sha256")) return in.fail(lp, "missing (run.trace_layer_hashes)");
  const Json& steps = q["step_layer_sha256"];
  if (!steps.is_array()) return in.fail(lp, "expected an array (one entry per step)");
  for (size_t t = 0; t < steps.size(); ++t) {
    std::vector<std::string> layers;
    REE_RETURN_IF_ERROR(in.hashes(steps[t], Reader::index(lp, t), &layers));
    r->step_layer_sha256.push_back(std::move(layers));
  }
  return Status::kSuccess;
}

Status parsePrompt(const Reader& in, const Json& q, const std::string& path, ReceiptRequest* r) {
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
  return in.sha256(q["prompt_ids_sha256"], Reader::join(path, "prompt_ids_sha256"),
                   &r->prompt_ids_sha256);
}

Status parseOutput(const Reader& in, const Json& q, const std::string& path, ReceiptRequest* r) {
  REE_RETURN_IF_ERROR(in.ids(q["output_ids"], Reader::join(path, "output_ids"), &r->output_ids));
  if (r->output_ids.empty()) return in.fail(Reader::join(path, "output_ids"), "empty");
  REE_RETURN_IF_ERROR(in.string(q["text"], Reader::join(path, "text"), &r->text));
  REE_RETURN_IF_ERROR(in.oneOf(q["finish_reason"], Reader::join(path, "finish_reason"),
                               {"eos", "length", "stop"}, &r->finish_reason));
  REE_RETURN_IF_ERROR(in.sha256(q["output_ids_sha256"], Reader::join(path, "output_ids_sha256"),
                                &r->output_ids_sha256));
  REE_RETURN_IF_ERROR(in.hashes(q["step_logits_sha256"], Reader::join(path, "step_logits_sha256"),
                                &r->step_logits_sha256));
  return in.sha256(q["logits_chain_sha256"], Reader::join(path, "logits_chain_sha256"),
                   &r->logits_chain_sha256);
}

Status parseRequest(const Reader& in, const Json& q, const std::string& path, bool trace,
                    ReceiptRequest* r) {
  REE_RETURN_IF_ERROR(
      in.keys(q, path,
              {"index", "prompt_text", "add_special_tokens", "prompt_ids", "prompt_ids_sha256",
               "max_new_tokens", "sampling", "output_ids", "text", "finish_reason",
               "output_ids_sha256", "step_logits_sha256", "logits_chain_sha256"},
              {"step_layer_sha256"}));
  REE_RETURN_IF_ERROR(in.integer(q["index"], Reader::join(path, "index"), 0, INT32_MAX, &r->index));
  REE_RETURN_IF_ERROR(parsePrompt(in, q, path, r));
  REE_RETURN_IF_ERROR(in.integer(q["max_new_tokens"], Reader::join(path, "max_new_tokens"), 1,
                                 INT32_MAX, &r->max_new_tokens));
  REE_RETURN_IF_ERROR(
      parseSampling(in, q["sampling"], Reader::join(path, "sampling"), &r->sampling));
  REE_RETURN_IF_ERROR(parseOutput(in, q, path, r));
  return parseLayerHashes(in, q, path, trace, r);
}

Status parseRuntimeAndModel(const Reader& in, const Json& j, Receipt* r) {
  const Json& runtime = j["runtime"];
  REE_RETURN_IF_ERROR(in.keys(runtime, "runtime", {"name", "version", "repops_spec"}));
  REE_RETURN_IF_ERROR(in.string(runtime["name"], "runtime.name", &r->runtime_name));
  REE_RETURN_IF_ERROR(in.string(runtime["version"], "runtime.version", &r->runtime_version));
  REE_RETURN_IF_ERROR(in.string(runtime["repops_spec"], "runtime.repops_spec", &r->repops_spec));
  RepOpsSpec spec;
  if (parseRepOpsSpec(r->repops_spec, "runtime.repops_spec", &spec) != Status::kSuccess) {
    return in.fail("runtime.repops_spec", "'" + printableText(r->repops_spec, 40) +
                                              "' is not a RepOps spec this release implements (" +
                                              kRepOpsSpecVersions + ")");
  }
  const Json& model = j["model"];
  REE_RETURN_IF_ERROR(
      in.keys(model, "model",
              {"source", "config_sha256", "tokenizer_sha256", "weights_sha256", "weights_kind"},
              {"generation_config_sha256", "chat_template_sha256"}));
  REE_RETURN_IF_ERROR(in.string(model["source"], "model.source", &r->model_source));
  REE_RETURN_IF_ERROR(
      in.sha256(model["config_sha256"], "model.config_sha256", &r->identity.config_sha256));
  REE_RETURN_IF_ERROR(in.sha256(model["tokenizer_sha256"], "model.tokenizer_sha256",
                                &r->identity.tokenizer_sha256, /*allow_empty=*/true));
  REE_RETURN_IF_ERROR(
      in.sha256(model["weights_sha256"], "model.weights_sha256", &r->identity.weights_sha256));
  // Optional: written only when the model is a directory (receipt_format.cpp); receipts written
  // before a directory's generation_config.json and chat template files were bound lack them.
  for (auto [key, digest] :
       {std::make_pair("generation_config_sha256", &r->identity.generation_config_sha256),
        std::make_pair("chat_template_sha256", &r->identity.chat_template_sha256)}) {
    if (!model.contains(key)) continue;
    const std::string path = std::string("model.") + key;
    if (model[key] == "") {
      return in.fail(path,
                     "is \"\", which is never written: a receipt without the key is one "
                     "written before these files were bound");
    }
    REE_RETURN_IF_ERROR(in.sha256(model[key], path, digest));
  }
  return in.oneOf(model["weights_kind"], "model.weights_kind", {"safetensors", "gguf", "synthetic"},
                  &r->identity.weights_kind);
}

Status parseRun(const Reader& in, const Json& run, Receipt* r) {
  REE_RETURN_IF_ERROR(
      in.keys(run, "run", {"operation_set", "weight_dtype", "max_context", "trace_layer_hashes"},
              {"allow_extra_tensors", "allow_non_finite_weights"}));
  REE_RETURN_IF_ERROR(in.string(run["operation_set"], "run.operation_set", &r->operation_set));
  OperationSetKind kind;
  if (parseOperationSet(r->operation_set, &kind) != Status::kSuccess) {
    return in.fail("run.operation_set",
                   "unknown operation set '" + printableText(r->operation_set, 40) + "'");
  }
  REE_RETURN_IF_ERROR(in.oneOf(run["weight_dtype"], "run.weight_dtype",
                               {"auto", "f32", "bf16", "f16"}, &r->weight_dtype));
  REE_RETURN_IF_ERROR(
      in.integer(run["max_context"], "run.max_context", 1, INT32_MAX, &r->max_context));
  REE_RETURN_IF_ERROR(
      in.boolean(run["trace_layer_hashes"], "run.trace_layer_hashes", &r->trace_layer_hashes));
  // Optional, and present only when true (receipt_format.cpp), so that one run has one form.
  for (auto [key, flag] :
       {std::make_pair("allow_extra_tensors", &r->allow_extra_tensors),
        std::make_pair("allow_non_finite_weights", &r->allow_non_finite_weights)}) {
    if (!run.contains(key)) continue;
    REE_RETURN_IF_ERROR(in.boolean(run[key], std::string("run.") + key, flag));
    if (!*flag) return in.fail(std::string("run.") + key, "is written only when true");
  }
  return Status::kSuccess;
}

// Informational (the result does not depend on it, so no verdict may): checked for form only,
// any values: an integer, stages of two integers and two booleans, one string per device entry.
Status parseExecution(const Reader& in, const Json& execution, Receipt* r) {
  REE_RETURN_IF_ERROR(in.keys(execution, "execution", {"n_partitions", "plan", "stage_devices"}));
  REE_RETURN_IF_ERROR(in.integer(execution["n_partitions"], "execution.n_partitions", INT64_MIN,
                                 INT64_MAX, &r->n_partitions));
  const Json& plan = execution["plan"];
  if (!plan.is_array()) return in.fail("execution.plan", "expected an array of stages");
  for (size_t s = 0; s < plan.size(); ++s) {
    std::string sp = Reader::index("execution.plan", s);
    REE_RETURN_IF_ERROR(in.keys(plan[s], sp, {"first_layer", "end_layer", "embedding", "head"}));
    partitioner::Stage stage;
    REE_RETURN_IF_ERROR(in.integer(plan[s]["first_layer"], Reader::join(sp, "first_layer"),
                                   INT64_MIN, INT64_MAX, &stage.first_layer));
    REE_RETURN_IF_ERROR(in.integer(plan[s]["end_layer"], Reader::join(sp, "end_layer"), INT64_MIN,
                                   INT64_MAX, &stage.end_layer));
    REE_RETURN_IF_ERROR(
        in.boolean(plan[s]["embedding"], Reader::join(sp, "embedding"), &stage.embedding));
    REE_RETURN_IF_ERROR(in.boolean(plan[s]["head"], Reader::join(sp, "head"), &stage.head));
    r->plan.push_back(stage);
  }
  const Json& devices = execution["stage_devices"];
  if (!devices.is_array())
    return in.fail("execution.stage_devices", "expected an array of strings");
  for (size_t s = 0; s < devices.size(); ++s) {
    std::string device;
    REE_RETURN_IF_ERROR(
        in.string(devices[s], Reader::index("execution.stage_devices", s), &device));
    r->stage_devices.push_back(std::move(device));
  }
  return Status::kSuccess;
}

Status parseRequests(const Reader& in, const Json& requests, Receipt* r) {
  if (!requests.is_array() || requests.empty()) {
    return in.fail("requests", "expected a non-empty array");
  }
  std::set<int64_t> seen;
  for (size_t i = 0; i < requests.size(); ++i) {
    ReceiptRequest request;
    std::string path = Reader::index("requests", i);
    REE_RETURN_IF_ERROR(parseRequest(in, requests[i], path, r->trace_layer_hashes, &request));
    // Out of the range every run enforces (the engine's limits), as an id outside [0, 2^31) is.
    if (models::validateSampling(request.sampling, i) != Status::kSuccess) {
      return in.failWithLastError("no run could have produced this receipt");
    }
    if (!seen.insert(request.index).second) {
      return in.fail(Reader::join(path, "index"),
                     "index " + std::to_string(request.index) + " appears twice");
    }
    r->requests.push_back(std::move(request));
  }
  return Status::kSuccess;
}

Status parseReceiptJson(const Reader& in, const Json& j, Receipt* r) {
  if (!j.is_object()) return in.fail("(top level)", "expected a JSON object");
  // The version first: another version's fields would give confusing errors.
  if (!j.contains("format")) return in.fail("format", "missing (not a REE receipt?)");
  REE_RETURN_IF_ERROR(in.string(j["format"], "format", &r->format));
  if (r->format != kReceiptFormat) {
    return in.fail("format", "'" + printableText(r->format, 40) + "' is not " + kReceiptFormat +
                                 " (the only receipt format this runtime reads)");
  }
  REE_RETURN_IF_ERROR(in.keys(
      j, "", {"format", "runtime", "model", "run", "execution", "requests", "receipt_sha256"}));
  REE_RETURN_IF_ERROR(parseRuntimeAndModel(in, j, r));
  REE_RETURN_IF_ERROR(parseRun(in, j["run"], r));
  REE_RETURN_IF_ERROR(parseExecution(in, j["execution"], r));
  REE_RETURN_IF_ERROR(parseRequests(in, j["requests"], r));
  return in.sha256(j["receipt_sha256"], "receipt_sha256", &r->receipt_sha256);
}

}  // namespace

Status parseReceipt(const std::string& text, const std::string& source, Receipt* out) {
  REE_CHECK_ARG(out != nullptr, "parseReceipt: out is null");
  Reader in(source);
  // A key repeated in an object would show readers that keep the first value a text that was
  // never verified (nlohmann, like Python, keeps the last): refused anywhere in the receipt.
  REE_RETURN_IF_ERROR(checkJsonText(text, source + ": (file)"));
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    // Say where: nlohmann's exception message has the byte position.
    try {
      Json unused = Json::parse(text);
      (void)unused;
    } catch (const std::exception& e) {
      return in.fail("(file)", "not valid JSON (" + printableText(e.what(), 200) + ")");
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
  if (receipt_detail::canonicalJson(body) != reserialised) {
    return in.fail("(file)",
                   std::string("content is not in the canonical form of ") + kReceiptFormat);
  }
  *out = std::move(r);
  return Status::kSuccess;
}

Status readReceipt(const std::string& path, Receipt* out) {
  REE_CHECK_ARG(out != nullptr, "readReceipt: out is null");
  std::string text;
  REE_RETURN_IF_ERROR(readRegularFile(path, kMaxReceiptBytes, "receipt", &text));
  return parseReceipt(text, path, out);
}

}  // namespace ree
