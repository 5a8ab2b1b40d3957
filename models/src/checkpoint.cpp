#include "ree/models/checkpoint.h"

#include <sys/stat.h>

#include <algorithm>
#include <exception>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "ree/core/parallel.h"
#include "ree/kernels/numeric.h"

namespace ree::models {
namespace {

using Json = nlohmann::json;

constexpr const char* kSingleFile = "model.safetensors";
constexpr const char* kIndexFile = "model.safetensors.index.json";
// The index of a 400B-parameter model is a few megabytes.
constexpr std::streamoff kMaxIndexBytes = 256 << 20;

bool isRegularFile(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool isDirectory(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// A shard name must stay inside the model directory.
bool isPlainFileName(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
         name.find('\0') == std::string::npos;
}

std::string shapeString(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(shape[i]);
  }
  return out + "]";
}

bool endsWith(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Buffers that transformers keeps in some checkpoints and that no REE model reads.
bool isIgnorableBuffer(const std::string& name) {
  return endsWith(name, ".rotary_emb.inv_freq") || endsWith(name, ".attn.bias") ||
         endsWith(name, ".attn.masked_bias");
}

Status readIndex(const std::string& path, Json* index) {
  const std::string shown = printableText(path, 400);
  std::ifstream in(path, std::ios::binary);
  if (!in) return REE_FAIL(Status::kIoError, "index file '%s': cannot open", shown.c_str());
  in.seekg(0, std::ios::end);
  std::streamoff size = in.tellg();
  if (size < 0 || size > kMaxIndexBytes) {
    return REE_FAIL(Status::kIoError, "index file '%s': unreadable or larger than %lld bytes",
                    shown.c_str(), static_cast<long long>(kMaxIndexBytes));
  }
  in.seekg(0, std::ios::beg);
  std::string text(static_cast<size_t>(size), '\0');
  if (size > 0 && !in.read(&text[0], size)) {
    return REE_FAIL(Status::kIoError, "index file '%s': read failed", shown.c_str());
  }
  // Duplicate weight_map keys would be ambiguous; the DOM would silently keep the last.
  std::string duplicate;
  std::vector<std::set<std::string>> open_objects;
  auto callback = [&](int, Json::parse_event_t event, Json& parsed) -> bool {
    if (event == Json::parse_event_t::object_start) open_objects.emplace_back();
    if (event == Json::parse_event_t::object_end && !open_objects.empty()) open_objects.pop_back();
    if (event == Json::parse_event_t::key && !open_objects.empty() && parsed.is_string() &&
        !open_objects.back().insert(parsed.get<std::string>()).second && duplicate.empty()) {
      duplicate = parsed.get<std::string>();
    }
    return true;
  };
  *index = Json::parse(text, callback, /*allow_exceptions=*/false);
  if (index->is_discarded() || !index->is_object()) {
    return REE_FAIL(Status::kIoError, "index file '%s': not a valid JSON object", shown.c_str());
  }
  if (!duplicate.empty()) {
    return REE_FAIL(Status::kIoError, "index file '%s': repeats the key '%s'", shown.c_str(),
                    printableText(duplicate).c_str());
  }
  return Status::kSuccess;
}

void addTensor(std::vector<ExpectedTensor>* out, std::string name, std::vector<int64_t> shape,
               TensorStage stage, int64_t layer = -1) {
  out->push_back(ExpectedTensor{std::move(name), std::move(shape), stage, layer});
}

void addLlamaFamilyLayer(const ModelConfig& c, const std::string& prefix, int64_t layer,
                         std::vector<ExpectedTensor>* out) {
  const std::string base = prefix + "layers." + std::to_string(layer) + ".";
  const int64_t hidden = c.hidden_size;
  const int64_t q_out = c.num_heads * c.head_dim;
  const int64_t kv_out = c.num_kv_heads * c.head_dim;
  const int64_t inter = c.intermediate_size;
  auto add = [&](const std::string& name, std::vector<int64_t> shape) {
    addTensor(out, base + name, std::move(shape), TensorStage::kLayer, layer);
  };
  add("input_layernorm.weight", {hidden});
  add("self_attn.q_proj.weight", {q_out, hidden});
  if (c.qkv_bias) add("self_attn.q_proj.bias", {q_out});
  add("self_attn.k_proj.weight", {kv_out, hidden});
  if (c.qkv_bias) add("self_attn.k_proj.bias", {kv_out});
  add("self_attn.v_proj.weight", {kv_out, hidden});
  if (c.qkv_bias) add("self_attn.v_proj.bias", {kv_out});
  add("self_attn.o_proj.weight", {hidden, q_out});
  if (c.o_proj_bias) add("self_attn.o_proj.bias", {hidden});
  if (c.qk_norm) {
    add("self_attn.q_norm.weight", {c.head_dim});
    add("self_attn.k_norm.weight", {c.head_dim});
  }
  add("post_attention_layernorm.weight", {hidden});
  add("mlp.gate_proj.weight", {inter, hidden});
  if (c.mlp_bias) add("mlp.gate_proj.bias", {inter});
  add("mlp.up_proj.weight", {inter, hidden});
  if (c.mlp_bias) add("mlp.up_proj.bias", {inter});
  add("mlp.down_proj.weight", {hidden, inter});
  if (c.mlp_bias) add("mlp.down_proj.bias", {hidden});
}

// GPT-2 uses Conv1D: weights are stored [in_features, out_features], the transpose of nn.Linear.
void addGpt2Layer(const ModelConfig& c, const std::string& prefix, int64_t layer,
                  std::vector<ExpectedTensor>* out) {
  const std::string base = prefix + "h." + std::to_string(layer) + ".";
  const int64_t hidden = c.hidden_size;
  const int64_t inter = c.intermediate_size;
  auto add = [&](const std::string& name, std::vector<int64_t> shape) {
    addTensor(out, base + name, std::move(shape), TensorStage::kLayer, layer);
  };
  add("ln_1.weight", {hidden});
  add("ln_1.bias", {hidden});
  add("attn.c_attn.weight", {hidden, 3 * hidden});
  add("attn.c_attn.bias", {3 * hidden});
  add("attn.c_proj.weight", {hidden, hidden});
  add("attn.c_proj.bias", {hidden});
  add("ln_2.weight", {hidden});
  add("ln_2.bias", {hidden});
  add("mlp.c_fc.weight", {hidden, inter});
  add("mlp.c_fc.bias", {inter});
  add("mlp.c_proj.weight", {inter, hidden});
  add("mlp.c_proj.bias", {hidden});
}

}  // namespace

Status Checkpoint::open(const std::string& path, std::unique_ptr<Checkpoint>* out) {
  REE_CHECK_ARG(out != nullptr, "Checkpoint::open: out is null");
  out->reset();
  const std::string shown = printableText(path, 400);
  std::unique_ptr<Checkpoint> checkpoint(new Checkpoint());
  checkpoint->path_ = path;

  std::string single_path;
  if (isRegularFile(path)) {
    single_path = path;
    size_t slash = path.rfind('/');
    checkpoint->directory_ = slash == std::string::npos ? "." : path.substr(0, slash);
  } else if (isDirectory(path)) {
    checkpoint->directory_ = path;
    if (isRegularFile(path + "/" + kSingleFile)) single_path = path + "/" + kSingleFile;
  } else {
    return REE_FAIL(Status::kIoError, "checkpoint '%s': no such file or directory", shown.c_str());
  }

  if (!single_path.empty()) {
    std::unique_ptr<SafetensorsFile> file;
    REE_RETURN_IF_ERROR(SafetensorsFile::open(single_path, &file));
    size_t slash = single_path.rfind('/');
    checkpoint->shard_files_.push_back(slash == std::string::npos ? single_path
                                                                  : single_path.substr(slash + 1));
    for (const TensorInfo& info : file->tensors()) {
      checkpoint->names_.push_back(info.name);
      checkpoint->shard_of_.emplace(info.name, 0);
    }
    std::sort(checkpoint->names_.begin(), checkpoint->names_.end());
    checkpoint->shards_.push_back(std::move(file));
    *out = std::move(checkpoint);
    return Status::kSuccess;
  }

  const std::string index_path = path + "/" + kIndexFile;
  if (!isRegularFile(index_path)) {
    return REE_FAIL(Status::kIoError, "checkpoint '%s': neither %s nor %s exists", shown.c_str(),
                    kSingleFile, kIndexFile);
  }
  const std::string index_shown = printableText(index_path, 400);
  try {
    Json index;
    REE_RETURN_IF_ERROR(readIndex(index_path, &index));
    auto map_it = index.find("weight_map");
    if (map_it == index.end() || !map_it->is_object() || map_it->empty()) {
      return REE_FAIL(Status::kIoError,
                      "index file '%s': field 'weight_map' missing, not an object or empty",
                      index_shown.c_str());
    }
    auto metadata_it = index.find("metadata");
    if (metadata_it != index.end() && !metadata_it->is_object() && !metadata_it->is_null()) {
      return REE_FAIL(Status::kIoError, "index file '%s': field 'metadata' is not an object",
                      index_shown.c_str());
    }
    checkpoint->sharded_ = true;
    std::map<std::string, std::vector<std::string>> tensors_of_shard;
    for (auto it = map_it->begin(); it != map_it->end(); ++it) {
      if (!it.value().is_string() || !isPlainFileName(it.value().get<std::string>())) {
        return REE_FAIL(Status::kIoError,
                        "index file '%s': field 'weight_map.%s' is not a file name in the model "
                        "directory",
                        index_shown.c_str(), printableText(it.key()).c_str());
      }
      tensors_of_shard[it.value().get<std::string>()].push_back(it.key());
    }
    for (const auto& [shard, tensors] : tensors_of_shard) {
      if (!isRegularFile(checkpoint->directory_ + "/" + shard)) {
        return REE_FAIL(Status::kIoError,
                        "index file '%s': shard '%s' (holding tensor '%s') is missing",
                        index_shown.c_str(), printableText(shard).c_str(),
                        printableText(tensors.front()).c_str());
      }
      size_t shard_index = checkpoint->shard_files_.size();
      checkpoint->shard_files_.push_back(shard);
      for (const std::string& name : tensors) {
        checkpoint->shard_of_.emplace(name, shard_index);
        checkpoint->names_.push_back(name);
      }
    }
  } catch (const std::exception& e) {
    return REE_FAIL(Status::kIoError, "index file '%s': %s", index_shown.c_str(), e.what());
  }
  std::sort(checkpoint->names_.begin(), checkpoint->names_.end());
  checkpoint->shards_.resize(checkpoint->shard_files_.size());
  *out = std::move(checkpoint);
  return Status::kSuccess;
}

Status Checkpoint::shardOf(const std::string& name, std::string* file) const {
  REE_CHECK_ARG(file != nullptr, "Checkpoint::shardOf: file is null");
  auto it = shard_of_.find(name);
  if (it == shard_of_.end()) {
    return REE_FAIL(Status::kInvalidArgument, "checkpoint '%s': no tensor '%s'",
                    printableText(path_, 400).c_str(), printableText(name).c_str());
  }
  *file = shard_files_[it->second];
  return Status::kSuccess;
}

Status Checkpoint::shardFile(size_t shard, const SafetensorsFile** out) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!shards_[shard]) {
    std::unique_ptr<SafetensorsFile> file;
    REE_RETURN_IF_ERROR(SafetensorsFile::open(directory_ + "/" + shard_files_[shard], &file));
    // The index must not promise tensors the shard lacks.
    for (const auto& [name, index] : shard_of_) {
      if (index == shard && file->find(name) == nullptr) {
        return REE_FAIL(Status::kIoError,
                        "checkpoint '%s': index puts tensor '%s' in shard '%s', which lacks it",
                        printableText(path_, 400).c_str(), printableText(name).c_str(),
                        printableText(shard_files_[shard]).c_str());
      }
    }
    shards_[shard] = std::move(file);
  }
  *out = shards_[shard].get();
  return Status::kSuccess;
}

Status Checkpoint::lookup(const std::string& name, const SafetensorsFile** file) const {
  auto it = shard_of_.find(name);
  if (it == shard_of_.end()) {
    return REE_FAIL(Status::kInvalidArgument, "checkpoint '%s': no tensor '%s'",
                    printableText(path_, 400).c_str(), printableText(name).c_str());
  }
  return shardFile(it->second, file);
}

namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t nameHash(const std::string& name) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : name)
    h = (h ^ c) * 1099511628211ull;
  return h;
}

// Fills `bytes` with the synthetic values of tensor `info` (see Checkpoint::synthetic).
void generateSynthetic(const TensorInfo& info, uint64_t seed, std::vector<uint8_t>* bytes) {
  bytes->resize(info.bytes());
  const int64_t n = info.numel();
  const bool is_bias =
      info.name.size() > 5 && info.name.compare(info.name.size() - 5, 5, ".bias") == 0;
  float constant = info.shape.size() == 1 ? (is_bias ? 0.0f : 1.0f) : -1.0f;
  // Linear weights are [out, in] (GPT-2's Conv1D: [in, out]); either way +-1/sqrt(fan-in) keeps
  // activations of any depth in range.
  int64_t fan_in = info.shape.size() == 2 ? (info.name.rfind("transformer.", 0) == 0 &&
                                                     info.name.find(".h.") != std::string::npos
                                                 ? info.shape[0]
                                                 : info.shape[1])
                                          : 1;
  float scale = 1.0f;
  while (scale * scale * static_cast<float>(fan_in) > 1.0f)
    scale *= 0.5f;  // a power of two near 1/sqrt(fan_in): exact, no libm
  const uint64_t key = splitmix64(seed ^ nameHash(info.name));
  uint8_t* out = bytes->data();
  const DType dtype = info.dtype;
  parallelFor(n, 1 << 16, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      float value = constant;
      if (constant < 0.0f) {
        // 24 random bits -> uniform in [-1, 1) exactly representable in fp32.
        uint64_t r = splitmix64(key + static_cast<uint64_t>(i)) >> 40;
        value = (static_cast<float>(r) * (1.0f / 8388608.0f) - 1.0f) * scale;
      }
      if (dtype == DType::kBF16) {
        reinterpret_cast<bf16_t*>(out)[i] = toBF16(value);
      } else if (dtype == DType::kF16) {
        reinterpret_cast<f16_t*>(out)[i] = toF16(value);
      } else {
        reinterpret_cast<float*>(out)[i] = value;
      }
    }
  });
}

}  // namespace

Status Checkpoint::synthetic(const ModelConfig& config, uint64_t seed,
                             std::unique_ptr<Checkpoint>* out) {
  REE_CHECK_ARG(out != nullptr, "Checkpoint::synthetic: out is null");
  std::unique_ptr<Checkpoint> checkpoint(new Checkpoint());
  checkpoint->path_ = "synthetic:" + std::to_string(seed);
  checkpoint->synthetic_ = true;
  checkpoint->seed_ = seed;
  DType dtype = config.dtype ? *config.dtype : DType::kBF16;
  std::string prefix = config.architecture == Architecture::kGpt2 ? "transformer." : "model.";
  for (const ExpectedTensor& tensor : expectedTensors(config, prefix)) {
    TensorInfo info;
    info.name = tensor.name;
    info.dtype = dtype;
    info.shape = tensor.shape;
    uint64_t numel = 1;
    for (int64_t d : tensor.shape)
      numel *= static_cast<uint64_t>(d);
    info.data_begin = 0;
    info.data_end = numel * dtypeSize(dtype);
    checkpoint->synthetic_infos_[tensor.name] = info;
    checkpoint->shard_of_[tensor.name] = 0;
    checkpoint->names_.push_back(tensor.name);
  }
  std::sort(checkpoint->names_.begin(), checkpoint->names_.end());
  checkpoint->shard_files_ = {checkpoint->path_};
  *out = std::move(checkpoint);
  return Status::kSuccess;
}

void Checkpoint::releaseSyntheticData() const {
  std::lock_guard<std::mutex> lock(mutex_);
  synthetic_data_.clear();
}

Status Checkpoint::info(const std::string& name, TensorInfo* out) const {
  REE_CHECK_ARG(out != nullptr, "Checkpoint::info: out is null");
  if (synthetic_) {
    auto it = synthetic_infos_.find(name);
    if (it == synthetic_infos_.end()) {
      return REE_FAIL(Status::kInvalidArgument, "checkpoint '%s': no tensor '%s'", path_.c_str(),
                      printableText(name).c_str());
    }
    *out = it->second;
    return Status::kSuccess;
  }
  const SafetensorsFile* file = nullptr;
  REE_RETURN_IF_ERROR(lookup(name, &file));
  *out = *file->find(name);  // shardFile() checked that it is there
  return Status::kSuccess;
}

Status Checkpoint::view(const std::string& name, TensorView* out) const {
  REE_CHECK_ARG(out != nullptr, "Checkpoint::view: out is null");
  if (synthetic_) {
    TensorInfo tensor;
    REE_RETURN_IF_ERROR(info(name, &tensor));
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<uint8_t>& bytes = synthetic_data_[name];
    if (bytes.size() != tensor.bytes()) generateSynthetic(tensor, seed_, &bytes);
    *out = TensorView{bytes.empty() ? nullptr : bytes.data(), tensor.dtype, tensor.shape,
                      tensor.bytes()};
    return Status::kSuccess;
  }
  const SafetensorsFile* file = nullptr;
  REE_RETURN_IF_ERROR(lookup(name, &file));
  return file->view(name, out);
}

size_t Checkpoint::mappedShardCount() const {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t count = 0;
  for (const auto& shard : shards_)
    count += shard ? 1 : 0;
  return count;
}

std::vector<ExpectedTensor> expectedTensors(const ModelConfig& config, const std::string& prefix) {
  std::vector<ExpectedTensor> out;
  const int64_t hidden = config.hidden_size;
  const int64_t vocab = config.vocab_size;
  if (config.architecture == Architecture::kGpt2) {
    addTensor(&out, prefix + "wte.weight", {vocab, hidden}, TensorStage::kEmbedding);
    addTensor(&out, prefix + "wpe.weight", {config.max_position_embeddings, hidden},
              TensorStage::kEmbedding);
    for (int64_t layer = 0; layer < config.num_layers; ++layer) {
      addGpt2Layer(config, prefix, layer, &out);
    }
    addTensor(&out, prefix + "ln_f.weight", {hidden}, TensorStage::kHead);
    addTensor(&out, prefix + "ln_f.bias", {hidden}, TensorStage::kHead);
  } else {
    addTensor(&out, prefix + "embed_tokens.weight", {vocab, hidden}, TensorStage::kEmbedding);
    for (int64_t layer = 0; layer < config.num_layers; ++layer) {
      addLlamaFamilyLayer(config, prefix, layer, &out);
    }
    addTensor(&out, prefix + "norm.weight", {hidden}, TensorStage::kHead);
  }
  if (!config.tie_word_embeddings) {
    addTensor(&out, "lm_head.weight", {vocab, hidden}, TensorStage::kHead);
  }
  return out;
}

std::string tensorNamePrefix(const ModelConfig& config, const Checkpoint& checkpoint) {
  if (config.architecture != Architecture::kGpt2) return "model.";
  if (!checkpoint.contains("transformer.wte.weight") && checkpoint.contains("wte.weight")) {
    return "";
  }
  return "transformer.";
}

Status validateCheckpoint(const ModelConfig& config, const Checkpoint& checkpoint,
                          const ValidateOptions& options) {
  const std::string where = printableText(checkpoint.path(), 400);
  const char* w = where.c_str();
  const int64_t end_layer = options.end_layer < 0 ? config.num_layers : options.end_layer;
  REE_CHECK_ARG(options.first_layer >= 0 && options.first_layer <= end_layer &&
                    end_layer <= config.num_layers,
                "validateCheckpoint: layer range [%lld, %lld) is not within [0, %lld]",
                static_cast<long long>(options.first_layer), static_cast<long long>(end_layer),
                static_cast<long long>(config.num_layers));

  const std::vector<ExpectedTensor> expected =
      expectedTensors(config, tensorNamePrefix(config, checkpoint));
  std::optional<DType> dtype = config.dtype;
  std::string dtype_source = "config.json's dtype";
  auto checkDType = [&](const TensorInfo& info) -> Status {
    if (!isComputeDType(info.dtype)) {
      return REE_FAIL(Status::kUnsupported,
                      "checkpoint '%s': tensor '%s' has dtype %s, unsupported (F32, F16 and BF16 "
                      "are)",
                      w, printableText(info.name).c_str(), dtypeName(info.dtype));
    }
    if (!dtype) {
      dtype = info.dtype;
      dtype_source = "tensor '" + printableText(info.name) + "'";
    }
    if (info.dtype != *dtype) {
      return REE_FAIL(Status::kMismatch, "checkpoint '%s': tensor '%s' has dtype %s, but %s is %s",
                      w, printableText(info.name).c_str(), dtypeName(info.dtype),
                      dtype_source.c_str(), dtypeName(*dtype));
    }
    return Status::kSuccess;
  };

  for (const ExpectedTensor& tensor : expected) {
    const bool wanted = (tensor.stage == TensorStage::kEmbedding && options.embedding) ||
                        (tensor.stage == TensorStage::kHead && options.head) ||
                        (tensor.stage == TensorStage::kLayer &&
                         tensor.layer >= options.first_layer && tensor.layer < end_layer);
    if (!wanted) continue;
    if (!checkpoint.contains(tensor.name)) {
      return REE_FAIL(Status::kIoError,
                      "checkpoint '%s': missing tensor '%s' (expected by the %s config with %lld "
                      "layers)",
                      w, tensor.name.c_str(), architectureName(config.architecture),
                      static_cast<long long>(config.num_layers));
    }
    TensorInfo info;
    REE_RETURN_IF_ERROR(checkpoint.info(tensor.name, &info));
    if (info.shape != tensor.shape) {
      return REE_FAIL(
          Status::kMismatch, "checkpoint '%s': tensor '%s' has shape %s, the config expects %s", w,
          tensor.name.c_str(), shapeString(info.shape).c_str(), shapeString(tensor.shape).c_str());
    }
    REE_RETURN_IF_ERROR(checkDType(info));
  }

  const bool whole_model = options.first_layer == 0 && end_layer == config.num_layers &&
                           options.embedding && options.head;
  if (!whole_model || options.allow_unexpected) return Status::kSuccess;
  std::set<std::string> known;
  for (const ExpectedTensor& tensor : expected)
    known.insert(tensor.name);
  for (const std::string& name : checkpoint.tensorNames()) {
    if (known.count(name) != 0 || isIgnorableBuffer(name)) continue;
    if (name == "lm_head.weight" && config.tie_word_embeddings) {
      // Some tied checkpoints store the head anyway; it must at least fit.
      TensorInfo info;
      REE_RETURN_IF_ERROR(checkpoint.info(name, &info));
      const std::vector<int64_t> shape = {config.vocab_size, config.hidden_size};
      if (info.shape != shape) {
        return REE_FAIL(Status::kMismatch,
                        "checkpoint '%s': tensor 'lm_head.weight' has shape %s, the config "
                        "expects %s",
                        w, shapeString(info.shape).c_str(), shapeString(shape).c_str());
      }
      REE_RETURN_IF_ERROR(checkDType(info));
      continue;
    }
    return REE_FAIL(Status::kMismatch,
                    "checkpoint '%s': tensor '%s' is not expected by the %s config with %lld "
                    "layers",
                    w, printableText(name).c_str(), architectureName(config.architecture),
                    static_cast<long long>(config.num_layers));
  }
  return Status::kSuccess;
}

}  // namespace ree::models
