#include "ree/models/model_config.h"

#include <cmath>
#include <exception>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace ree::models {
namespace {

using Json = nlohmann::json;

// config files are a few kilobytes; anything this large is not one.
constexpr std::streamoff kMaxConfigFileBytes = 16 << 20;

// Typed, validated access to the fields of one JSON object; every error names the file and the
// field (with `prefix_`, e.g. "rope_scaling.", for nested objects). A JSON null counts as absent,
// as transformers treats it.
class FieldReader {
 public:
  FieldReader(const Json& object, std::string source, std::string prefix = "")
      : object_(object), source_(std::move(source)), prefix_(std::move(prefix)) {}

  const Json* find(const char* key) const {
    auto it = object_.find(key);
    if (it == object_.end() || it->is_null()) return nullptr;
    return &*it;
  }
  bool has(const char* key) const { return find(key) != nullptr; }

  Status fail(Status status, const char* key, const std::string& what) const {
    return REE_FAIL(status, "config file '%s': field '%s%s' %s", source_.c_str(), prefix_.c_str(),
                    key, what.c_str());
  }

  // Integer field >= min_value; absent: *out = fallback, or an error when fallback is empty.
  Status integer(const char* key, std::optional<int64_t> fallback, int64_t min_value,
                 int64_t* out) const {
    const Json* value = find(key);
    if (value == nullptr) {
      if (!fallback) return fail(Status::kInvalidArgument, key, "is missing");
      *out = *fallback;
      return Status::kSuccess;
    }
    if (value->is_number_unsigned()) {
      if (value->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
        return fail(Status::kInvalidArgument, key, "is too large");
      }
      *out = static_cast<int64_t>(value->get<uint64_t>());
    } else if (value->is_number_integer()) {
      *out = value->get<int64_t>();
    } else {
      return fail(Status::kInvalidArgument, key,
                  "is not an integer (" + printableText(value->dump(), 40) + ")");
    }
    if (*out < min_value) {
      return fail(Status::kInvalidArgument, key,
                  "is " + std::to_string(*out) + ", must be >= " + std::to_string(min_value));
    }
    return Status::kSuccess;
  }

  // Finite number > 0 (when positive) or >= 0.
  Status number(const char* key, std::optional<double> fallback, bool strictly_positive,
                double* out) const {
    const Json* value = find(key);
    if (value == nullptr) {
      if (!fallback) return fail(Status::kInvalidArgument, key, "is missing");
      *out = *fallback;
      return Status::kSuccess;
    }
    if (!value->is_number()) {
      return fail(Status::kInvalidArgument, key,
                  "is not a number (" + printableText(value->dump(), 40) + ")");
    }
    *out = value->get<double>();
    if (!std::isfinite(*out) || *out < 0.0 || (strictly_positive && *out == 0.0)) {
      return fail(Status::kInvalidArgument, key,
                  "is " + value->dump() + ", must be " + (strictly_positive ? "> 0" : ">= 0"));
    }
    return Status::kSuccess;
  }

  Status boolean(const char* key, bool fallback, bool* out) const {
    const Json* value = find(key);
    if (value == nullptr) {
      *out = fallback;
      return Status::kSuccess;
    }
    if (!value->is_boolean()) return fail(Status::kInvalidArgument, key, "is not a boolean");
    *out = value->get<bool>();
    return Status::kSuccess;
  }

  Status string(const char* key, const std::string& fallback, std::string* out) const {
    const Json* value = find(key);
    if (value == nullptr) {
      *out = fallback;
      return Status::kSuccess;
    }
    if (!value->is_string()) return fail(Status::kInvalidArgument, key, "is not a string");
    *out = value->get<std::string>();
    return Status::kSuccess;
  }

  // A token id in [0, vocab_size) (no upper bound when vocab_size <= 0).
  Status tokenId(const char* key, const Json& value, int64_t vocab_size, int64_t* out) const {
    if (!value.is_number_integer()) {
      return fail(Status::kInvalidArgument, key,
                  "holds a non-integer token id (" + printableText(value.dump(), 40) + ")");
    }
    if (value.is_number_unsigned() && value.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
      return fail(Status::kInvalidArgument, key, "holds a token id that is too large");
    }
    *out = value.get<int64_t>();
    if (*out < 0 || (vocab_size > 0 && *out >= vocab_size)) {
      return fail(Status::kInvalidArgument, key,
                  "holds token id " + std::to_string(*out) + ", outside the vocabulary [0, " +
                      std::to_string(vocab_size) + ")");
    }
    return Status::kSuccess;
  }

  // bos/pad style: an int or null.
  Status optionalTokenId(const char* key, std::optional<int64_t> fallback, int64_t vocab_size,
                         std::optional<int64_t>* out) const {
    auto it = object_.find(key);
    if (it == object_.end()) {
      *out = fallback;
      if (fallback && vocab_size > 0 && (*fallback < 0 || *fallback >= vocab_size)) {
        return fail(Status::kInvalidArgument, key,
                    "is absent and its default " + std::to_string(*fallback) +
                        " lies outside the vocabulary");
      }
      return Status::kSuccess;
    }
    out->reset();
    if (it->is_null()) return Status::kSuccess;
    int64_t id = 0;
    REE_RETURN_IF_ERROR(tokenId(key, *it, vocab_size, &id));
    *out = id;
    return Status::kSuccess;
  }

  // eos style: an int, a list of ints, or null.
  Status tokenIdList(const char* key, std::optional<int64_t> fallback, int64_t vocab_size,
                     std::vector<int64_t>* out) const {
    out->clear();
    auto it = object_.find(key);
    if (it == object_.end()) {
      std::optional<int64_t> single;
      REE_RETURN_IF_ERROR(optionalTokenId(key, fallback, vocab_size, &single));
      if (single) out->push_back(*single);
      return Status::kSuccess;
    }
    if (it->is_null()) return Status::kSuccess;
    if (it->is_array()) {
      if (it->empty()) return fail(Status::kInvalidArgument, key, "is an empty list");
      for (const Json& element : *it) {
        int64_t id = 0;
        REE_RETURN_IF_ERROR(tokenId(key, element, vocab_size, &id));
        out->push_back(id);
      }
      return Status::kSuccess;
    }
    int64_t id = 0;
    REE_RETURN_IF_ERROR(tokenId(key, *it, vocab_size, &id));
    out->push_back(id);
    return Status::kSuccess;
  }

  const std::string& source() const { return source_; }

 private:
  const Json& object_;
  std::string source_;
  std::string prefix_;
};

Status architectureFromModelType(const std::string& model_type, Architecture* out) {
  static const std::pair<const char*, Architecture> kTypes[] = {{"llama", Architecture::kLlama},
                                                                {"mistral", Architecture::kMistral},
                                                                {"qwen2", Architecture::kQwen2},
                                                                {"qwen3", Architecture::kQwen3},
                                                                {"gpt2", Architecture::kGpt2}};
  for (const auto& [name, architecture] : kTypes) {
    if (model_type == name) {
      *out = architecture;
      return Status::kSuccess;
    }
  }
  return Status::kUnsupported;
}

Status architectureFromClass(const std::string& name, Architecture* out) {
  static const std::pair<const char*, Architecture> kClasses[] = {
      {"LlamaForCausalLM", Architecture::kLlama},
      {"MistralForCausalLM", Architecture::kMistral},
      {"Qwen2ForCausalLM", Architecture::kQwen2},
      {"Qwen3ForCausalLM", Architecture::kQwen3},
      {"GPT2LMHeadModel", Architecture::kGpt2}};
  for (const auto& [class_name, architecture] : kClasses) {
    if (name == class_name) {
      *out = architecture;
      return Status::kSuccess;
    }
  }
  return Status::kUnsupported;
}

Status readArchitecture(const Json& root, const FieldReader& reader, ModelConfig* config) {
  const char* source = reader.source().c_str();
  std::optional<Architecture> from_class, from_type;
  if (const Json* list = reader.find("architectures")) {
    if (!list->is_array() || list->empty() || !(*list)[0].is_string()) {
      return reader.fail(Status::kInvalidArgument, "architectures",
                         "is not a non-empty list of strings");
    }
    config->architecture_class = (*list)[0].get<std::string>();
    Architecture architecture;
    if (architectureFromClass(config->architecture_class, &architecture) != Status::kSuccess) {
      return REE_FAIL(Status::kUnsupported,
                      "config file '%s': field 'architectures': unsupported architecture '%s' "
                      "(supported: LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, "
                      "Qwen3ForCausalLM, GPT2LMHeadModel)",
                      source, printableText(config->architecture_class, 80).c_str());
    }
    from_class = architecture;
  }
  REE_RETURN_IF_ERROR(reader.string("model_type", "", &config->model_type));
  if (!config->model_type.empty()) {
    Architecture architecture;
    if (architectureFromModelType(config->model_type, &architecture) != Status::kSuccess) {
      return REE_FAIL(Status::kUnsupported,
                      "config file '%s': field 'model_type': unsupported model type '%s' "
                      "(supported: llama, mistral, qwen2, qwen3, gpt2)",
                      source, printableText(config->model_type, 80).c_str());
    }
    from_type = architecture;
  }
  (void)root;
  if (!from_class && !from_type) {
    return REE_FAIL(Status::kInvalidArgument,
                    "config file '%s': fields 'architectures' and 'model_type' are both missing",
                    source);
  }
  if (from_class && from_type && *from_class != *from_type) {
    return REE_FAIL(Status::kInvalidArgument,
                    "config file '%s': field 'model_type' ('%s') contradicts 'architectures' "
                    "('%s')",
                    source, config->model_type.c_str(), config->architecture_class.c_str());
  }
  config->architecture = from_class ? *from_class : *from_type;
  if (config->model_type.empty()) config->model_type = architectureName(config->architecture);
  return Status::kSuccess;
}

Status readDType(const FieldReader& reader, ModelConfig* config) {
  // transformers 5 writes "dtype"; 4.x wrote "torch_dtype".
  const char* key = reader.has("dtype") ? "dtype" : "torch_dtype";
  std::string name;
  REE_RETURN_IF_ERROR(reader.string(key, "", &name));
  if (name.empty() || name == "auto") {
    config->dtype.reset();
  } else if (name == "float32") {
    config->dtype = DType::kF32;
  } else if (name == "float16") {
    config->dtype = DType::kF16;
  } else if (name == "bfloat16") {
    config->dtype = DType::kBF16;
  } else {
    return reader.fail(Status::kUnsupported, key,
                       "names dtype '" + printableText(name, 40) +
                           "', unsupported (float32, float16, bfloat16 are)");
  }
  return Status::kSuccess;
}

Status readActivation(const FieldReader& reader, const char* key, const char* fallback,
                      ModelConfig* config) {
  REE_RETURN_IF_ERROR(reader.string(key, fallback, &config->hidden_act));
  const std::string& act = config->hidden_act;
  if (act == "silu" || act == "swish") {
    config->activation = Activation::kSilu;
  } else if (act == "gelu_new" || act == "gelu_pytorch_tanh") {
    config->activation = Activation::kGeluTanh;
  } else if (act == "gelu") {
    config->activation = Activation::kGelu;
  } else {
    return reader.fail(Status::kUnsupported, key,
                       "names activation '" + printableText(act, 40) + "', unsupported");
  }
  return Status::kSuccess;
}

// Rotary embedding: theta and scaling from "rope_parameters" (transformers 5) or "rope_theta" +
// "rope_scaling" (4.x).
Status readRope(const Json& root, const FieldReader& reader, ModelConfig* config) {
  const Json* parameters = reader.find("rope_parameters");
  if (parameters != nullptr && !parameters->is_object()) {
    return reader.fail(Status::kInvalidArgument, "rope_parameters", "is not an object");
  }
  const Json* scaling = reader.find("rope_scaling");
  if (scaling != nullptr && !scaling->is_object()) {
    return reader.fail(Status::kInvalidArgument, "rope_scaling", "is not an object");
  }
  config->rope_theta = 10000.0;
  if (parameters != nullptr && parameters->contains("rope_theta")) {
    FieldReader nested(*parameters, reader.source(), "rope_parameters.");
    REE_RETURN_IF_ERROR(nested.number("rope_theta", std::nullopt, true, &config->rope_theta));
  } else {
    REE_RETURN_IF_ERROR(reader.number("rope_theta", 10000.0, true, &config->rope_theta));
  }

  // The scaling object: rope_parameters when it names a type, else rope_scaling.
  const Json* chosen = nullptr;
  std::string prefix;
  if (parameters != nullptr &&
      (parameters->contains("rope_type") || parameters->contains("type"))) {
    chosen = parameters;
    prefix = "rope_parameters.";
  } else if (scaling != nullptr) {
    chosen = scaling;
    prefix = "rope_scaling.";
  }
  config->rope_type = RopeType::kDefault;
  if (chosen == nullptr) return Status::kSuccess;
  FieldReader nested(*chosen, reader.source(), prefix);
  std::string type, legacy_type;
  REE_RETURN_IF_ERROR(nested.string("rope_type", "", &type));
  REE_RETURN_IF_ERROR(nested.string("type", "", &legacy_type));
  if (!type.empty() && !legacy_type.empty() && type != legacy_type) {
    return nested.fail(Status::kInvalidArgument, "rope_type",
                       "('" + printableText(type, 40) + "') contradicts field 'type' ('" +
                           printableText(legacy_type, 40) + "')");
  }
  if (type.empty()) type = legacy_type;
  if (type.empty()) return nested.fail(Status::kInvalidArgument, "rope_type", "is missing");
  if (type == "default") return Status::kSuccess;
  if (type != "llama3") {
    return nested.fail(Status::kUnsupported, "rope_type",
                       "is '" + printableText(type, 40) + "', unsupported (default, llama3 are)");
  }
  config->rope_type = RopeType::kLlama3;
  REE_RETURN_IF_ERROR(nested.number("factor", std::nullopt, true, &config->llama3_factor));
  REE_RETURN_IF_ERROR(
      nested.number("low_freq_factor", std::nullopt, true, &config->llama3_low_freq_factor));
  REE_RETURN_IF_ERROR(
      nested.number("high_freq_factor", std::nullopt, true, &config->llama3_high_freq_factor));
  REE_RETURN_IF_ERROR(nested.integer("original_max_position_embeddings", std::nullopt, 1,
                                     &config->llama3_original_max_position_embeddings));
  // The same constraints as transformers' _validate_llama3_parameters.
  if (config->llama3_factor < 1.0) {
    return nested.fail(Status::kInvalidArgument, "factor", "is below 1");
  }
  if (!(config->llama3_high_freq_factor > config->llama3_low_freq_factor)) {
    return nested.fail(Status::kInvalidArgument, "high_freq_factor", "must exceed low_freq_factor");
  }
  (void)root;
  return Status::kSuccess;
}

// Llama, Mistral, Qwen2, Qwen3: the shared decoder layout.
Status readLlamaFamily(const Json& root, const FieldReader& reader, ModelConfig* config) {
  const Architecture arch = config->architecture;
  REE_RETURN_IF_ERROR(reader.integer("hidden_size", std::nullopt, 1, &config->hidden_size));
  REE_RETURN_IF_ERROR(
      reader.integer("intermediate_size", std::nullopt, 1, &config->intermediate_size));
  REE_RETURN_IF_ERROR(reader.integer("num_hidden_layers", std::nullopt, 1, &config->num_layers));
  REE_RETURN_IF_ERROR(reader.integer("num_attention_heads", std::nullopt, 1, &config->num_heads));
  REE_RETURN_IF_ERROR(reader.integer("vocab_size", std::nullopt, 1, &config->vocab_size));
  // The config classes' defaults: Llama copies num_attention_heads, Mistral says 8, Qwen 32.
  int64_t default_kv_heads = config->num_heads;
  if (arch == Architecture::kMistral) default_kv_heads = 8;
  if (arch == Architecture::kQwen2 || arch == Architecture::kQwen3) default_kv_heads = 32;
  REE_RETURN_IF_ERROR(
      reader.integer("num_key_value_heads", default_kv_heads, 1, &config->num_kv_heads));
  if (config->num_heads % config->num_kv_heads != 0) {
    return reader.fail(Status::kInvalidArgument, "num_attention_heads",
                       "(" + std::to_string(config->num_heads) +
                           ") is not divisible by num_key_value_heads (" +
                           std::to_string(config->num_kv_heads) + ")");
  }
  if (reader.has("head_dim")) {
    REE_RETURN_IF_ERROR(reader.integer("head_dim", std::nullopt, 1, &config->head_dim));
  } else if (arch == Architecture::kQwen3) {
    config->head_dim = 128;  // Qwen3Config's default, independent of hidden_size
  } else {
    if (config->hidden_size % config->num_heads != 0) {
      return reader.fail(Status::kInvalidArgument, "hidden_size",
                         "(" + std::to_string(config->hidden_size) +
                             ") is not divisible by num_attention_heads (" +
                             std::to_string(config->num_heads) + ") and head_dim is absent");
    }
    config->head_dim = config->hidden_size / config->num_heads;
  }
  int64_t default_max_positions = 2048;
  if (arch == Architecture::kMistral) default_max_positions = 4096 * 32;
  if (arch == Architecture::kQwen2 || arch == Architecture::kQwen3) default_max_positions = 32768;
  REE_RETURN_IF_ERROR(reader.integer("max_position_embeddings", default_max_positions, 1,
                                     &config->max_position_embeddings));
  config->norm = NormKind::kRmsNorm;
  REE_RETURN_IF_ERROR(reader.number("rms_norm_eps", 1e-6, true, &config->norm_eps));
  REE_RETURN_IF_ERROR(readActivation(reader, "hidden_act", "silu", config));
  REE_RETURN_IF_ERROR(readRope(root, reader, config));
  REE_RETURN_IF_ERROR(reader.boolean("tie_word_embeddings", false, &config->tie_word_embeddings));

  bool attention_bias = false;
  switch (arch) {
    case Architecture::kLlama:
      REE_RETURN_IF_ERROR(reader.boolean("attention_bias", false, &attention_bias));
      REE_RETURN_IF_ERROR(reader.boolean("mlp_bias", false, &config->mlp_bias));
      config->qkv_bias = config->o_proj_bias = attention_bias;
      break;
    case Architecture::kMistral:
      break;  // MistralAttention has no biases whatever the config says
    case Architecture::kQwen2:
      config->qkv_bias = true;  // Qwen2Attention: q/k/v biased, o_proj not
      break;
    case Architecture::kQwen3:
      REE_RETURN_IF_ERROR(reader.boolean("attention_bias", false, &attention_bias));
      config->qkv_bias = config->o_proj_bias = attention_bias;
      config->qk_norm = true;
      break;
    case Architecture::kGpt2:
      break;
  }

  config->sliding_window = 0;
  if (arch == Architecture::kMistral) {
    // MistralConfig: absent means 4096, null means full attention.
    auto it = root.find("sliding_window");
    if (it == root.end()) {
      config->sliding_window = 4096;
    } else if (!it->is_null()) {
      REE_RETURN_IF_ERROR(
          reader.integer("sliding_window", std::nullopt, 1, &config->sliding_window));
    }
  } else if (arch == Architecture::kQwen2 || arch == Architecture::kQwen3) {
    bool use_sliding_window = false;
    REE_RETURN_IF_ERROR(reader.boolean("use_sliding_window", false, &use_sliding_window));
    if (use_sliding_window) {
      // Qwen applies the window to layers >= max_window_layers only; not implemented.
      return reader.fail(Status::kUnsupported, "use_sliding_window",
                         "is true; Qwen's per-layer sliding window is unsupported");
    }
  }

  std::optional<int64_t> default_bos, default_eos;
  if (arch == Architecture::kLlama || arch == Architecture::kMistral) {
    default_bos = 1;
    default_eos = 2;
  }
  REE_RETURN_IF_ERROR(reader.optionalTokenId("bos_token_id", default_bos, config->vocab_size,
                                             &config->bos_token_id));
  REE_RETURN_IF_ERROR(
      reader.tokenIdList("eos_token_id", default_eos, config->vocab_size, &config->eos_token_ids));
  return Status::kSuccess;
}

Status readGpt2(const Json& root, const FieldReader& reader, ModelConfig* config) {
  (void)root;
  REE_RETURN_IF_ERROR(reader.integer("n_embd", std::nullopt, 1, &config->hidden_size));
  REE_RETURN_IF_ERROR(reader.integer("n_layer", std::nullopt, 1, &config->num_layers));
  REE_RETURN_IF_ERROR(reader.integer("n_head", std::nullopt, 1, &config->num_heads));
  REE_RETURN_IF_ERROR(reader.integer("vocab_size", std::nullopt, 1, &config->vocab_size));
  REE_RETURN_IF_ERROR(reader.integer("n_positions", 1024, 1, &config->max_position_embeddings));
  REE_RETURN_IF_ERROR(
      reader.integer("n_inner", 4 * config->hidden_size, 1, &config->intermediate_size));
  if (config->hidden_size % config->num_heads != 0) {
    return reader.fail(Status::kInvalidArgument, "n_embd",
                       "(" + std::to_string(config->hidden_size) +
                           ") is not divisible by n_head (" + std::to_string(config->num_heads) +
                           ")");
  }
  config->num_kv_heads = config->num_heads;
  config->head_dim = config->hidden_size / config->num_heads;
  config->norm = NormKind::kLayerNorm;
  REE_RETURN_IF_ERROR(reader.number("layer_norm_epsilon", 1e-5, true, &config->norm_eps));
  REE_RETURN_IF_ERROR(readActivation(reader, "activation_function", "gelu_new", config));
  config->rope_type = RopeType::kNone;
  config->rope_theta = 0.0;
  REE_RETURN_IF_ERROR(reader.boolean("tie_word_embeddings", true, &config->tie_word_embeddings));
  config->qkv_bias = config->o_proj_bias = config->mlp_bias = true;

  // Variants that change the arithmetic or add tensors.
  bool flag = false;
  REE_RETURN_IF_ERROR(reader.boolean("scale_attn_weights", true, &flag));
  if (!flag) {
    return reader.fail(Status::kUnsupported, "scale_attn_weights", "is false, unsupported");
  }
  REE_RETURN_IF_ERROR(reader.boolean("scale_attn_by_inverse_layer_idx", false, &flag));
  if (flag) {
    return reader.fail(Status::kUnsupported, "scale_attn_by_inverse_layer_idx",
                       "is true, unsupported");
  }
  REE_RETURN_IF_ERROR(reader.boolean("add_cross_attention", false, &flag));
  if (flag) {
    return reader.fail(Status::kUnsupported, "add_cross_attention", "is true, unsupported");
  }
  REE_RETURN_IF_ERROR(
      reader.optionalTokenId("bos_token_id", 50256, config->vocab_size, &config->bos_token_id));
  REE_RETURN_IF_ERROR(
      reader.tokenIdList("eos_token_id", 50256, config->vocab_size, &config->eos_token_ids));
  return Status::kSuccess;
}

Status parseJsonObject(const std::string& text, const std::string& source, Json* out) {
  *out = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (out->is_discarded()) {
    return REE_FAIL(Status::kIoError, "config file '%s': not valid JSON", source.c_str());
  }
  if (!out->is_object()) {
    return REE_FAIL(Status::kIoError, "config file '%s': not a JSON object", source.c_str());
  }
  return Status::kSuccess;
}

Status readFile(const std::string& path, std::string* text) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return REE_FAIL(Status::kIoError, "config file '%s': cannot open",
                    printableText(path, 400).c_str());
  }
  in.seekg(0, std::ios::end);
  std::streamoff size = in.tellg();
  if (size < 0 || size > kMaxConfigFileBytes) {
    return REE_FAIL(Status::kIoError, "config file '%s': unreadable or larger than %lld bytes",
                    printableText(path, 400).c_str(), static_cast<long long>(kMaxConfigFileBytes));
  }
  in.seekg(0, std::ios::beg);
  text->assign(static_cast<size_t>(size), '\0');
  if (size > 0 && !in.read(&(*text)[0], size)) {
    return REE_FAIL(Status::kIoError, "config file '%s': read failed",
                    printableText(path, 400).c_str());
  }
  return Status::kSuccess;
}

bool fileExists(const std::string& path) {
  std::ifstream in(path);
  return static_cast<bool>(in);
}

}  // namespace

const char* architectureName(Architecture architecture) {
  switch (architecture) {
    case Architecture::kLlama:
      return "llama";
    case Architecture::kMistral:
      return "mistral";
    case Architecture::kQwen2:
      return "qwen2";
    case Architecture::kQwen3:
      return "qwen3";
    case Architecture::kGpt2:
      return "gpt2";
  }
  return "?";
}

Status parseModelConfig(const std::string& json_text, const std::string& source, ModelConfig* out) {
  REE_CHECK_ARG(out != nullptr, "parseModelConfig: out is null");
  const std::string shown = printableText(source, 400);
  try {
    Json root;
    REE_RETURN_IF_ERROR(parseJsonObject(json_text, shown, &root));
    ModelConfig config;
    FieldReader reader(root, shown);
    REE_RETURN_IF_ERROR(readArchitecture(root, reader, &config));
    REE_RETURN_IF_ERROR(readDType(reader, &config));
    if (config.architecture == Architecture::kGpt2) {
      REE_RETURN_IF_ERROR(readGpt2(root, reader, &config));
    } else {
      REE_RETURN_IF_ERROR(readLlamaFamily(root, reader, &config));
    }
    *out = std::move(config);
    return Status::kSuccess;
  } catch (const std::exception& e) {
    return REE_FAIL(Status::kIoError, "config file '%s': %s", shown.c_str(), e.what());
  }
}

Status loadModelConfig(const std::string& path, ModelConfig* out) {
  std::string text;
  REE_RETURN_IF_ERROR(readFile(path, &text));
  return parseModelConfig(text, path, out);
}

Status parseGenerationConfig(const std::string& json_text, const std::string& source,
                             int64_t vocab_size, GenerationConfig* out) {
  REE_CHECK_ARG(out != nullptr, "parseGenerationConfig: out is null");
  const std::string shown = printableText(source, 400);
  try {
    Json root;
    REE_RETURN_IF_ERROR(parseJsonObject(json_text, shown, &root));
    GenerationConfig generation;
    FieldReader reader(root, shown);
    REE_RETURN_IF_ERROR(
        reader.optionalTokenId("bos_token_id", std::nullopt, vocab_size, &generation.bos_token_id));
    REE_RETURN_IF_ERROR(
        reader.tokenIdList("eos_token_id", std::nullopt, vocab_size, &generation.eos_token_ids));
    REE_RETURN_IF_ERROR(
        reader.optionalTokenId("pad_token_id", std::nullopt, vocab_size, &generation.pad_token_id));
    *out = std::move(generation);
    return Status::kSuccess;
  } catch (const std::exception& e) {
    return REE_FAIL(Status::kIoError, "config file '%s': %s", shown.c_str(), e.what());
  }
}

Status loadModelDirectoryConfigs(const std::string& directory, ModelConfig* config,
                                 GenerationConfig* generation) {
  REE_CHECK_ARG(config != nullptr, "loadModelDirectoryConfigs: config is null");
  REE_RETURN_IF_ERROR(loadModelConfig(directory + "/config.json", config));
  if (generation == nullptr) return Status::kSuccess;
  *generation = GenerationConfig();
  const std::string path = directory + "/generation_config.json";
  if (!fileExists(path)) return Status::kSuccess;
  std::string text;
  REE_RETURN_IF_ERROR(readFile(path, &text));
  return parseGenerationConfig(text, path, config->vocab_size, generation);
}

std::vector<int64_t> effectiveEosTokenIds(const ModelConfig& config,
                                          const GenerationConfig& generation) {
  return generation.eos_token_ids.empty() ? config.eos_token_ids : generation.eos_token_ids;
}

}  // namespace ree::models
