#include "ree/models/model_config.h"

#include <exception>
#include <filesystem>
#include <initializer_list>
#include <nlohmann/json.hpp>

#include "config_field_reader.h"
#include "ree/core/file.h"
#include "ree/core/json_guard.h"
#include "ree/core/text.h"
#include "ree/models/model_limits.h"

namespace ree::models {
namespace {

using Json = nlohmann::json;
using Reader = ConfigFieldReader;
namespace lim = limits;

// transformers' default window where a config turns sliding-window attention on without a size.
constexpr int64_t kDefaultSlidingWindow = 4096;

Status readArchitecture(const Reader& reader, ModelConfig* config) {
  const char* source = reader.source().c_str();
  const ArchitectureFacts* from_class = nullptr;
  const ArchitectureFacts* from_type = nullptr;
  if (const Json* list = reader.find("architectures")) {
    if (!list->is_array() || list->empty() || !(*list)[0].is_string()) {
      return reader.fail(Status::kInvalidArgument, "architectures",
                         "is not a non-empty list of strings");
    }
    config->architecture_class = (*list)[0].get<std::string>();
    from_class = findArchitectureByClass(config->architecture_class);
    if (from_class == nullptr) {
      return REE_FAIL(Status::kUnsupported,
                      "config file '%s': field 'architectures': unsupported architecture '%s' "
                      "(supported: %s)",
                      source, printableText(config->architecture_class, 80).c_str(),
                      supportedClassNames().c_str());
    }
  }
  REE_RETURN_IF_ERROR(reader.string("model_type", "", &config->model_type));
  if (!config->model_type.empty()) {
    from_type = findArchitectureByModelType(config->model_type);
    if (from_type == nullptr) {
      return REE_FAIL(Status::kUnsupported,
                      "config file '%s': field 'model_type': unsupported model type '%s' "
                      "(supported: %s)",
                      source, printableText(config->model_type, 80).c_str(),
                      supportedModelTypes().c_str());
    }
  }
  if (from_class == nullptr && from_type == nullptr) {
    return REE_FAIL(Status::kInvalidArgument,
                    "config file '%s': fields 'architectures' and 'model_type' are both missing",
                    source);
  }
  if (from_class != nullptr && from_type != nullptr && from_class != from_type) {
    return REE_FAIL(Status::kInvalidArgument,
                    "config file '%s': field 'model_type' ('%s') contradicts 'architectures' "
                    "('%s')",
                    source, printableText(config->model_type, 80).c_str(),
                    printableText(config->architecture_class, 80).c_str());
  }
  config->architecture = (from_class != nullptr ? from_class : from_type)->architecture;
  if (config->model_type.empty()) config->model_type = architectureName(config->architecture);
  return Status::kSuccess;
}

Status readDType(const Reader& reader, ModelConfig* config) {
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

Status readActivation(const Reader& reader, const char* key, const char* fallback,
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

// Llama 3.1's frequency-dependent scaling, from the chosen scaling object.
Status readLlama3Scaling(const Reader& nested, ModelConfig* config) {
  config->rope_type = RopeType::kLlama3;
  REE_RETURN_IF_ERROR(nested.number("factor", std::nullopt, 0.0, false, lim::kMaxRopeFactor,
                                    &config->llama3_factor));
  REE_RETURN_IF_ERROR(nested.number("low_freq_factor", std::nullopt, 0.0, false,
                                    lim::kMaxRopeFactor, &config->llama3_low_freq_factor));
  REE_RETURN_IF_ERROR(nested.number("high_freq_factor", std::nullopt, 0.0, false,
                                    lim::kMaxRopeFactor, &config->llama3_high_freq_factor));
  REE_RETURN_IF_ERROR(nested.integer("original_max_position_embeddings", std::nullopt, 1,
                                     lim::kMaxPositions,
                                     &config->llama3_original_max_position_embeddings));
  // The same constraints as transformers' _validate_llama3_parameters.
  if (config->llama3_factor < 1.0) {
    return nested.fail(Status::kInvalidArgument, "factor", "is below 1");
  }
  if (!(config->llama3_high_freq_factor > config->llama3_low_freq_factor)) {
    return nested.fail(Status::kInvalidArgument, "high_freq_factor", "must exceed low_freq_factor");
  }
  return Status::kSuccess;
}

// Rotary embedding: theta and scaling from "rope_parameters" (transformers 5) or "rope_theta" +
// "rope_scaling" (4.x).
Status readRope(const Reader& reader, ModelConfig* config) {
  const Json* parameters = reader.find("rope_parameters");
  if (parameters != nullptr && !parameters->is_object()) {
    return reader.fail(Status::kInvalidArgument, "rope_parameters", "is not an object");
  }
  const Json* scaling = reader.find("rope_scaling");
  if (scaling != nullptr && !scaling->is_object()) {
    return reader.fail(Status::kInvalidArgument, "rope_scaling", "is not an object");
  }
  // theta > 1: the rotary frequencies theta^(-2i/d) must fall with i (the RoPE kernels' rule).
  if (parameters != nullptr && parameters->contains("rope_theta")) {
    Reader nested(*parameters, reader.source(), "rope_parameters.");
    REE_RETURN_IF_ERROR(nested.number("rope_theta", std::nullopt, 1.0, false, lim::kMaxRopeTheta,
                                      &config->rope_theta));
  } else {
    REE_RETURN_IF_ERROR(
        reader.number("rope_theta", 10000.0, 1.0, false, lim::kMaxRopeTheta, &config->rope_theta));
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
  Reader nested(*chosen, reader.source(), prefix);
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
  return readLlama3Scaling(nested, config);
}

// "(a) is not divisible by b (n)" for the field `key`.
Status notDivisible(const Reader& reader, const char* key, int64_t value, const char* by,
                    int64_t divisor, const char* tail = "") {
  return reader.fail(Status::kInvalidArgument, key,
                     "(" + std::to_string(value) + ") is not divisible by " + by + " (" +
                         std::to_string(divisor) + ")" + tail);
}

// num_key_value_heads and head_dim, after hidden_size and num_attention_heads.
Status readHeadShape(const ArchitectureFacts& facts, const Reader& reader, ModelConfig* config) {
  const ConfigKeys& keys = facts.keys;
  config->num_kv_heads = config->num_heads;
  if (keys.num_kv_heads != nullptr) {
    const int64_t fallback =
        facts.defaults.num_kv_heads > 0 ? facts.defaults.num_kv_heads : config->num_heads;
    REE_RETURN_IF_ERROR(
        reader.integer(keys.num_kv_heads, fallback, 1, lim::kMaxHeads, &config->num_kv_heads));
    if (config->num_heads % config->num_kv_heads != 0) {
      return notDivisible(reader, keys.num_heads, config->num_heads, keys.num_kv_heads,
                          config->num_kv_heads);
    }
  }
  if (keys.head_dim != nullptr && reader.has(keys.head_dim)) {
    return reader.integer(keys.head_dim, std::nullopt, 1, lim::kMaxHeadDim, &config->head_dim);
  }
  if (facts.defaults.head_dim > 0) {
    config->head_dim = facts.defaults.head_dim;
    return Status::kSuccess;
  }
  if (config->hidden_size % config->num_heads != 0) {
    return notDivisible(reader, keys.hidden_size, config->hidden_size, keys.num_heads,
                        config->num_heads, keys.head_dim ? " and head_dim is absent" : "");
  }
  config->head_dim = config->hidden_size / config->num_heads;
  if (config->head_dim > lim::kMaxHeadDim) {
    return reader.fail(Status::kInvalidArgument, keys.hidden_size,
                       "/ " + std::string(keys.num_heads) + " gives head_dim " +
                           std::to_string(config->head_dim) + ", which exceeds the limit " +
                           std::to_string(lim::kMaxHeadDim));
  }
  return Status::kSuccess;
}

// The model's sizes, each within model_limits.h before any is multiplied.
Status readDimensions(const ArchitectureFacts& facts, const Reader& reader, ModelConfig* config) {
  const ConfigKeys& keys = facts.keys;
  REE_RETURN_IF_ERROR(
      reader.integer(keys.hidden_size, std::nullopt, 1, lim::kMaxHiddenSize, &config->hidden_size));
  std::optional<int64_t> default_intermediate;
  if (facts.defaults.intermediate_per_hidden > 0) {
    default_intermediate = facts.defaults.intermediate_per_hidden * config->hidden_size;
  }
  REE_RETURN_IF_ERROR(reader.integer(keys.intermediate_size, default_intermediate, 1,
                                     lim::kMaxIntermediateSize, &config->intermediate_size));
  REE_RETURN_IF_ERROR(
      reader.integer(keys.num_layers, std::nullopt, 1, lim::kMaxLayers, &config->num_layers));
  REE_RETURN_IF_ERROR(
      reader.integer(keys.num_heads, std::nullopt, 1, lim::kMaxHeads, &config->num_heads));
  REE_RETURN_IF_ERROR(
      reader.integer("vocab_size", std::nullopt, 1, lim::kMaxVocabSize, &config->vocab_size));
  REE_RETURN_IF_ERROR(readHeadShape(facts, reader, config));
  if (facts.rotary && config->head_dim % 2 != 0) {
    const bool explicit_head_dim = keys.head_dim != nullptr && reader.has(keys.head_dim);
    return reader.fail(Status::kInvalidArgument,
                       explicit_head_dim ? keys.head_dim : keys.hidden_size,
                       "gives head_dim " + std::to_string(config->head_dim) +
                           ", which rotary embeddings need even");
  }
  return reader.integer(keys.max_positions, facts.defaults.max_positions, 1, lim::kMaxPositions,
                        &config->max_position_embeddings);
}

bool biasFromRule(BiasRule rule, bool attention_bias, bool mlp_bias) {
  switch (rule) {
    case BiasRule::kNever:
      return false;
    case BiasRule::kAlways:
      return true;
    case BiasRule::kAttentionBias:
      return attention_bias;
    case BiasRule::kMlpBias:
      return mlp_bias;
  }
  return false;
}

Status readBiases(const ArchitectureFacts& facts, const Reader& reader, ModelConfig* config) {
  auto uses = [&](BiasRule rule) {
    return facts.qkv_bias == rule || facts.o_proj_bias == rule || facts.mlp_bias == rule;
  };
  bool attention_bias = false, mlp_bias = false;
  if (uses(BiasRule::kAttentionBias)) {
    REE_RETURN_IF_ERROR(reader.boolean("attention_bias", false, &attention_bias));
  }
  if (uses(BiasRule::kMlpBias)) {
    REE_RETURN_IF_ERROR(reader.boolean("mlp_bias", false, &mlp_bias));
  }
  config->qkv_bias = biasFromRule(facts.qkv_bias, attention_bias, mlp_bias);
  config->o_proj_bias = biasFromRule(facts.o_proj_bias, attention_bias, mlp_bias);
  config->mlp_bias = biasFromRule(facts.mlp_bias, attention_bias, mlp_bias);
  config->qk_norm = facts.qk_norm;
  return Status::kSuccess;
}

// "sliding_window": absent = `absent`, null = none (0), else an integer >= 1.
Status readWindowSize(const Reader& reader, int64_t absent, int64_t* out) {
  if (!reader.contains("sliding_window")) {
    *out = absent;
    return Status::kSuccess;
  }
  *out = 0;
  if (!reader.has("sliding_window")) return Status::kSuccess;
  return reader.integer("sliding_window", std::nullopt, 1, INT64_MAX, out);
}

// Qwen: whether any layer is a sliding one ("layer_types" when given, else the layers from
// max_window_layers on).
Status qwenHasSlidingLayer(const Reader& reader, const ModelConfig& config, bool* out) {
  if (const Json* types = reader.find("layer_types")) {
    if (!types->is_array() || static_cast<int64_t>(types->size()) != config.num_layers) {
      return reader.fail(
          Status::kInvalidArgument, "layer_types",
          "is not a list of num_hidden_layers (" + std::to_string(config.num_layers) + ") strings");
    }
    *out = false;
    for (const Json& type : *types) {
      if (!type.is_string()) {
        return reader.fail(Status::kInvalidArgument, "layer_types", "holds a non-string");
      }
      *out = *out || type.get<std::string>() == "sliding_attention";
    }
    return Status::kSuccess;
  }
  int64_t max_window_layers = 0;
  REE_RETURN_IF_ERROR(reader.integer("max_window_layers", 28, 0, INT64_MAX, &max_window_layers));
  *out = max_window_layers < config.num_layers;
  return Status::kSuccess;
}

Status readSlidingWindow(const ArchitectureFacts& facts, const Reader& reader,
                         ModelConfig* config) {
  config->sliding_window = 0;
  switch (facts.sliding_window) {
    case SlidingWindowRule::kNone:
      return Status::kSuccess;
    case SlidingWindowRule::kMistral:
      return readWindowSize(reader, kDefaultSlidingWindow, &config->sliding_window);
    case SlidingWindowRule::kQwen: {
      bool use_sliding_window = false;
      REE_RETURN_IF_ERROR(reader.boolean("use_sliding_window", false, &use_sliding_window));
      if (!use_sliding_window) return Status::kSuccess;
      int64_t window = 0;
      bool any_sliding_layer = false;
      REE_RETURN_IF_ERROR(readWindowSize(reader, kDefaultSlidingWindow, &window));
      REE_RETURN_IF_ERROR(qwenHasSlidingLayer(reader, *config, &any_sliding_layer));
      if (any_sliding_layer) config->sliding_window = window;
      return Status::kSuccess;
    }
  }
  return Status::kSuccess;
}

Status refuseVariants(const ArchitectureFacts& facts, const Reader& reader) {
  for (const VariantFlag* flag = facts.variant_flags; flag->key != nullptr; ++flag) {
    bool value = flag->fallback;
    REE_RETURN_IF_ERROR(reader.boolean(flag->key, flag->fallback, &value));
    if (value != flag->supported) {
      return reader.fail(Status::kUnsupported, flag->key,
                         std::string("is ") + (value ? "true" : "false") + ", unsupported");
    }
  }
  return Status::kSuccess;
}

// a * b, or nullopt when it overflows or either is negative.
std::optional<int64_t> checkedProduct(std::initializer_list<int64_t> factors) {
  int64_t product = 1;
  for (int64_t factor : factors) {
    if (factor < 0 || __builtin_mul_overflow(product, factor, &product)) return std::nullopt;
  }
  return product;
}

// The weights together, computed in checked 64-bit arithmetic, within kMaxParameters.
Status checkParameterCount(const ArchitectureFacts& facts, const Reader& reader,
                           const ModelConfig& c) {
  // Each factor is within its limit, so the per-layer and per-table products fit easily; the
  // products with the layer count are checked.
  const int64_t q = c.num_heads * c.head_dim, kv = c.num_kv_heads * c.head_dim;
  const int64_t attention = c.hidden_size * (q + 2 * kv) + q * c.hidden_size;
  const int64_t mlp =
      (facts.layout == LayerLayout::kGpt2 ? 2 : 3) * c.hidden_size * c.intermediate_size;
  const std::optional<int64_t> layers = checkedProduct({attention + mlp, c.num_layers});
  const int64_t tables = c.vocab_size * c.hidden_size * (c.tie_word_embeddings ? 1 : 2) +
                         (facts.rotary ? 0 : c.max_position_embeddings * c.hidden_size);
  if (!layers || *layers > lim::kMaxParameters - tables) {
    return REE_FAIL(Status::kInvalidArgument,
                    "config file '%s': the model's weights (from %s, %s, %s and vocab_size) "
                    "exceed the limit of %lld parameters",
                    reader.source().c_str(), facts.keys.hidden_size, facts.keys.intermediate_size,
                    facts.keys.num_layers, static_cast<long long>(lim::kMaxParameters));
  }
  return Status::kSuccess;
}

// Everything after the architecture, driven by its row of the table.
Status readModel(const ArchitectureFacts& facts, const Reader& reader, ModelConfig* config) {
  const ConfigDefaults& defaults = facts.defaults;
  REE_RETURN_IF_ERROR(readDimensions(facts, reader, config));
  config->norm = facts.norm;
  REE_RETURN_IF_ERROR(reader.number(facts.keys.norm_eps, defaults.norm_eps, lim::kMinNormEps, true,
                                    lim::kMaxNormEps, &config->norm_eps));
  REE_RETURN_IF_ERROR(readActivation(reader, facts.keys.activation, defaults.activation, config));
  if (facts.rotary) {
    REE_RETURN_IF_ERROR(readRope(reader, config));
  } else {
    config->rope_type = RopeType::kNone;
    config->rope_theta = 0.0;
  }
  REE_RETURN_IF_ERROR(reader.boolean("tie_word_embeddings", defaults.tie_word_embeddings,
                                     &config->tie_word_embeddings));
  REE_RETURN_IF_ERROR(readBiases(facts, reader, config));
  REE_RETURN_IF_ERROR(readSlidingWindow(facts, reader, config));
  REE_RETURN_IF_ERROR(refuseVariants(facts, reader));
  REE_RETURN_IF_ERROR(checkParameterCount(facts, reader, *config));
  auto token = [](int64_t id) { return id >= 0 ? std::optional<int64_t>(id) : std::nullopt; };
  REE_RETURN_IF_ERROR(reader.optionalTokenId("bos_token_id", token(defaults.bos_token_id),
                                             config->vocab_size, &config->bos_token_id));
  return reader.tokenIdList("eos_token_id", token(defaults.eos_token_id), config->vocab_size,
                            &config->eos_token_ids);
}

// Guards the text (no repeated keys, bounded depth), then parses it into an object.
Status parseJsonObject(const std::string& text, const std::string& source, Json* out) {
  REE_RETURN_IF_ERROR(checkJsonText(text, "config file '" + source + "'"));
  *out = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (out->is_discarded()) {
    return REE_FAIL(Status::kIoError, "config file '%s': not valid JSON", source.c_str());
  }
  if (!out->is_object()) {
    return REE_FAIL(Status::kIoError, "config file '%s': not a JSON object", source.c_str());
  }
  return Status::kSuccess;
}

Status readConfigFile(const std::string& path, std::string* text) {
  return readRegularFile(path, lim::kMaxConfigFileBytes, "config file", text);
}

}  // namespace

Status parseModelConfig(const std::string& json_text, const std::string& source, ModelConfig* out) {
  REE_CHECK_ARG(out != nullptr, "parseModelConfig: out is null");
  const std::string shown = printableText(source, 400);
  try {
    Json root;
    REE_RETURN_IF_ERROR(parseJsonObject(json_text, shown, &root));
    ModelConfig config;
    Reader reader(root, shown);
    REE_RETURN_IF_ERROR(readArchitecture(reader, &config));
    REE_RETURN_IF_ERROR(readDType(reader, &config));
    REE_RETURN_IF_ERROR(readModel(architectureFacts(config.architecture), reader, &config));
    *out = std::move(config);
    return Status::kSuccess;
  } catch (const std::exception& e) {
    return REE_FAIL(Status::kIoError, "config file '%s': %s", shown.c_str(), e.what());
  }
}

Status loadModelConfig(const std::string& path, ModelConfig* out) {
  std::string text;
  REE_RETURN_IF_ERROR(readConfigFile(path, &text));
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
    Reader reader(root, shown);
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
  std::error_code error;
  // Absent is fine (transformers then uses config.json's ids); anything else there must be a
  // readable regular file (readRegularFile says why not, without blocking on a FIFO).
  if (!std::filesystem::exists(std::filesystem::symlink_status(path, error))) {
    return Status::kSuccess;
  }
  std::string text;
  REE_RETURN_IF_ERROR(readConfigFile(path, &text));
  return parseGenerationConfig(text, path, config->vocab_size, generation);
}

Status checkContextAgainstSlidingWindow(const ModelConfig& config, int64_t context) {
  if (config.sliding_window <= 0 || context <= config.sliding_window) return Status::kSuccess;
  return REE_FAIL(Status::kUnsupported,
                  "config.json: field 'sliding_window' is %lld, below the context of %lld tokens "
                  "per sequence: sliding-window attention is not implemented (REE attends to the "
                  "whole context), so only a context of at most %lld tokens gives this model's "
                  "results",
                  static_cast<long long>(config.sliding_window), static_cast<long long>(context),
                  static_cast<long long>(config.sliding_window));
}

std::vector<int64_t> effectiveEosTokenIds(const ModelConfig& config,
                                          const GenerationConfig& generation) {
  return generation.eos_token_ids.empty() ? config.eos_token_ids : generation.eos_token_ids;
}

}  // namespace ree::models
