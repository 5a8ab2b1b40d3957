// GGUF metadata -> the equivalent config.json -> ModelConfig (ree/models/gguf_config.h).
#include "ree/models/gguf_config.h"

#include <cstring>
#include <exception>
#include <memory>
#include <nlohmann/json.hpp>

#include "ree/core/text.h"
#include "ree/models/gguf_tokenizer.h"
#include "ree/models/model_limits.h"

namespace ree::models {
namespace {

using Json = nlohmann::json;
namespace lim = limits;

struct GgufArchitecture {
  const char* name;  // general.architecture
  const char* model_type;
  const char* class_name;
};

constexpr GgufArchitecture kArchitectures[] = {
    {"llama", "llama", "LlamaForCausalLM"},
    {"qwen2", "qwen2", "Qwen2ForCausalLM"},
    {"qwen3", "qwen3", "Qwen3ForCausalLM"},
};

class MetadataReader {
 public:
  MetadataReader(const GgufFile& file, std::string architecture)
      : file_(file),
        prefix_(std::move(architecture) + "."),
        shown_(printableText(file.path(), 400)) {}

  bool has(const std::string& key) const { return file_.find(prefix_ + key) != nullptr; }

  // <arch>.<key>, an integer in [low, high]; `fallback` when absent (nullptr: required).
  Status integer(const std::string& key, int64_t low, int64_t high, const int64_t* fallback,
                 int64_t* out) const {
    const std::string full = prefix_ + key;
    if (fallback != nullptr && file_.find(full) == nullptr) {
      *out = *fallback;
      return Status::kSuccess;
    }
    REE_RETURN_IF_ERROR(file_.integer(full, out));
    if (*out < low || *out > high) {
      return REE_FAIL(Status::kInvalidArgument,
                      "GGUF file '%s': metadata key '%s' is %lld, not within [%lld, %lld]",
                      shown_.c_str(), printableText(full).c_str(), static_cast<long long>(*out),
                      static_cast<long long>(low), static_cast<long long>(high));
    }
    return Status::kSuccess;
  }

  // <arch>.<key>, a finite number; `fallback` when absent (nullptr: required).
  Status number(const std::string& key, const double* fallback, double* out) const {
    const std::string full = prefix_ + key;
    if (fallback != nullptr && file_.find(full) == nullptr) {
      *out = *fallback;
      return Status::kSuccess;
    }
    REE_RETURN_IF_ERROR(file_.number(full, out));
    if (!(*out - *out == 0.0)) {
      return REE_FAIL(Status::kInvalidArgument, "GGUF file '%s': metadata key '%s' is not finite",
                      shown_.c_str(), printableText(full).c_str());
    }
    return Status::kSuccess;
  }

  const std::string& shown() const { return shown_; }

 private:
  const GgufFile& file_;
  std::string prefix_;
  std::string shown_;
};

Status findArchitecture(const GgufFile& file, const GgufArchitecture** out) {
  std::string name;
  REE_RETURN_IF_ERROR(file.string("general.architecture", &name));
  for (const GgufArchitecture& row : kArchitectures) {
    if (name == row.name) {
      *out = &row;
      return Status::kSuccess;
    }
  }
  return REE_FAIL(Status::kUnsupported,
                  "GGUF file '%s': metadata key 'general.architecture' is '%s', unsupported "
                  "(llama, qwen2, qwen3 are)",
                  printableText(file.path(), 400).c_str(), printableText(name, 60).c_str());
}

// Scaled RoPE in any of its GGUF spellings is refused.
Status refuseRopeScaling(const GgufFile& file, const MetadataReader& meta,
                         const std::string& arch) {
  const std::string key = arch + ".rope.scaling.type";
  if (file.find(key) != nullptr) {
    std::string type;
    REE_RETURN_IF_ERROR(file.string(key, &type));
    if (type != "none") {
      return REE_FAIL(Status::kUnsupported,
                      "GGUF file '%s': metadata key '%s' is '%s', unsupported (only unscaled RoPE "
                      "is read from GGUF)",
                      meta.shown().c_str(), key.c_str(), printableText(type, 40).c_str());
    }
  }
  if (file.findTensor("rope_freqs.weight") != nullptr) {
    return REE_FAIL(Status::kUnsupported,
                    "GGUF file '%s': tensor 'rope_freqs.weight' (Llama 3.1-style scaled RoPE) is "
                    "unsupported in GGUF files; load the Hugging Face checkpoint instead",
                    meta.shown().c_str());
  }
  return Status::kSuccess;
}

// vocab_size: token_embd.weight's rows, which <arch>.vocab_size and the tokenizer must not
// contradict.
Status readVocabulary(const GgufFile& file, const MetadataReader& meta, int64_t* vocab) {
  const char* f = meta.shown().c_str();
  const GgufTensorInfo* embedding = file.findTensor("token_embd.weight");
  if (embedding == nullptr || embedding->dims.size() != 2) {
    return REE_FAIL(Status::kIoError,
                    "GGUF file '%s': tensor 'token_embd.weight' is missing or not 2-dimensional",
                    f);
  }
  if (embedding->dims[1] > static_cast<uint64_t>(lim::kMaxVocabSize)) {
    return REE_FAIL(Status::kInvalidArgument,
                    "GGUF file '%s': tensor 'token_embd.weight' has %llu rows, above the "
                    "vocabulary limit %lld",
                    f, static_cast<unsigned long long>(embedding->dims[1]),
                    static_cast<long long>(lim::kMaxVocabSize));
  }
  *vocab = static_cast<int64_t>(embedding->dims[1]);
  if (meta.has("vocab_size")) {
    int64_t declared = 0;
    REE_RETURN_IF_ERROR(meta.integer("vocab_size", 1, lim::kMaxVocabSize, nullptr, &declared));
    if (declared != *vocab) {
      return REE_FAIL(Status::kInvalidArgument,
                      "GGUF file '%s': metadata vocab_size %lld disagrees with token_embd.weight's "
                      "%lld rows",
                      f, static_cast<long long>(declared), static_cast<long long>(*vocab));
    }
  }
  const GgufValue* tokens = file.find("tokenizer.ggml.tokens");
  if (tokens != nullptr && tokens->count > static_cast<uint64_t>(*vocab)) {
    return REE_FAIL(Status::kInvalidArgument,
                    "GGUF file '%s': metadata key 'tokenizer.ggml.tokens' lists %llu tokens, more "
                    "than token_embd.weight's %lld rows",
                    f, static_cast<unsigned long long>(tokens->count),
                    static_cast<long long>(*vocab));
  }
  return Status::kSuccess;
}

// head_dim from attention.key_length, else rope.dimension_count (absent: hidden / heads).
Status readHeadDim(const MetadataReader& meta, Json* config) {
  int64_t head_dim = 0;
  if (meta.has("attention.key_length")) {
    REE_RETURN_IF_ERROR(
        meta.integer("attention.key_length", 1, lim::kMaxHeadDim, nullptr, &head_dim));
    int64_t value_dim = head_dim;
    REE_RETURN_IF_ERROR(
        meta.integer("attention.value_length", 1, lim::kMaxHeadDim, &head_dim, &value_dim));
    if (value_dim != head_dim) {
      return REE_FAIL(Status::kUnsupported,
                      "GGUF file '%s': attention.key_length %lld differs from value_length %lld",
                      meta.shown().c_str(), static_cast<long long>(head_dim),
                      static_cast<long long>(value_dim));
    }
  } else if (meta.has("rope.dimension_count")) {
    REE_RETURN_IF_ERROR(
        meta.integer("rope.dimension_count", 1, lim::kMaxHeadDim, nullptr, &head_dim));
  }
  if (head_dim > 0) (*config)["head_dim"] = head_dim;
  return Status::kSuccess;
}

Status readDimensions(const MetadataReader& meta, Json* config) {
  struct Field {
    const char* gguf;
    const char* hf;
    int64_t limit;
  };
  const Field fields[] = {
      {"block_count", "num_hidden_layers", lim::kMaxLayers},
      {"embedding_length", "hidden_size", lim::kMaxHiddenSize},
      {"feed_forward_length", "intermediate_size", lim::kMaxIntermediateSize},
      {"attention.head_count", "num_attention_heads", lim::kMaxHeads},
      {"context_length", "max_position_embeddings", lim::kMaxPositions},
  };
  for (const Field& field : fields) {
    int64_t value = 0;
    REE_RETURN_IF_ERROR(meta.integer(field.gguf, 1, field.limit, nullptr, &value));
    (*config)[field.hf] = value;
  }
  int64_t kv_heads = 0;
  const int64_t heads = (*config)["num_attention_heads"].get<int64_t>();
  REE_RETURN_IF_ERROR(
      meta.integer("attention.head_count_kv", 1, lim::kMaxHeads, &heads, &kv_heads));
  (*config)["num_key_value_heads"] = kv_heads;
  double eps = 0.0, theta = 0.0;
  const double default_theta = 10000.0;
  REE_RETURN_IF_ERROR(meta.number("attention.layer_norm_rms_epsilon", nullptr, &eps));
  REE_RETURN_IF_ERROR(meta.number("rope.freq_base", &default_theta, &theta));
  (*config)["rms_norm_eps"] = eps;
  (*config)["rope_theta"] = theta;
  return readHeadDim(meta, config);
}

Status readTokenIds(const GgufFile& file, Json* config) {
  for (const char* which : {"bos", "eos"}) {
    const std::string key = std::string("tokenizer.ggml.") + which + "_token_id";
    if (file.find(key) == nullptr) continue;
    int64_t id = 0;
    REE_RETURN_IF_ERROR(file.integer(key, &id));
    (*config)[std::string(which) + "_token_id"] = id;
  }
  return Status::kSuccess;
}

Status buildConfig(const GgufFile& file, Json* config) {
  const GgufArchitecture* arch = nullptr;
  REE_RETURN_IF_ERROR(findArchitecture(file, &arch));
  MetadataReader meta(file, arch->name);
  REE_RETURN_IF_ERROR(refuseRopeScaling(file, meta, arch->name));
  (*config)["architectures"] = {arch->class_name};
  (*config)["model_type"] = arch->model_type;
  (*config)["torch_dtype"] = "float32";
  REE_RETURN_IF_ERROR(readDimensions(meta, config));
  int64_t vocab = 0;
  REE_RETURN_IF_ERROR(readVocabulary(file, meta, &vocab));
  (*config)["vocab_size"] = vocab;
  (*config)["tie_word_embeddings"] = file.findTensor("output.weight") == nullptr;
  if (std::strcmp(arch->name, "llama") == 0) {
    (*config)["attention_bias"] = file.findTensor("blk.0.attn_q.bias") != nullptr;
    (*config)["mlp_bias"] = file.findTensor("blk.0.ffn_gate.bias") != nullptr;
  }
  return readTokenIds(file, config);
}

// Partial rotary embeddings (rope.dimension_count below head_dim) are not implemented.
Status checkRotaryDims(const GgufFile& file, const ModelConfig& config) {
  const std::string key = config.model_type + ".rope.dimension_count";
  if (file.find(key) == nullptr) return Status::kSuccess;
  int64_t dims = 0;
  REE_RETURN_IF_ERROR(file.integer(key, &dims));
  if (dims == config.head_dim) return Status::kSuccess;
  return REE_FAIL(Status::kUnsupported,
                  "GGUF file '%s': metadata key '%s' is %lld, but head_dim is %lld (partial "
                  "rotary embeddings are unsupported)",
                  printableText(file.path(), 400).c_str(), key.c_str(),
                  static_cast<long long>(dims), static_cast<long long>(config.head_dim));
}

}  // namespace

Status ggufModelConfigJson(const GgufFile& file, std::string* json_text) {
  REE_CHECK_ARG(json_text != nullptr, "ggufModelConfigJson: json_text is null");
  try {
    Json config = Json::object();
    REE_RETURN_IF_ERROR(buildConfig(file, &config));
    *json_text = config.dump();
    return Status::kSuccess;
  } catch (const std::exception& e) {
    return REE_FAIL(Status::kIoError, "GGUF file '%s': %s", printableText(file.path(), 400).c_str(),
                    e.what());
  }
}

Status readGgufConfigJson(const std::string& path, std::string* json_text) {
  std::unique_ptr<GgufFile> file;
  REE_RETURN_IF_ERROR(GgufFile::open(path, &file));
  return ggufModelConfigJson(*file, json_text);
}

Status loadGgufModelConfig(const std::string& path, ModelConfig* config,
                           GenerationConfig* generation) {
  REE_CHECK_ARG(config != nullptr, "loadGgufModelConfig: config is null");
  std::unique_ptr<GgufFile> file;
  REE_RETURN_IF_ERROR(GgufFile::open(path, &file));
  std::string text;
  REE_RETURN_IF_ERROR(ggufModelConfigJson(*file, &text));
  ModelConfig parsed;
  REE_RETURN_IF_ERROR(parseModelConfig(text, path + " (GGUF metadata)", &parsed));
  REE_RETURN_IF_ERROR(checkRotaryDims(*file, parsed));
  // Generation ends at any of the end tokens the tokenizer names (eos, end of turn, end of
  // message), as generation_config.json's eos_token_id list says for a Hugging Face directory.
  std::vector<int64_t> end_ids;
  REE_RETURN_IF_ERROR(ggufEndTokenIds(*file, &end_ids));
  *config = std::move(parsed);
  if (generation != nullptr) {
    *generation = GenerationConfig();
    generation->eos_token_ids = std::move(end_ids);
  }
  return Status::kSuccess;
}

}  // namespace ree::models
