#include "ree/models/checkpoint.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <unordered_set>

#include "ree/core/text.h"
#include "ree/models/gguf_source.h"
#include "ree/models/safetensors_source.h"
#include "ree/models/weight_values.h"
#include "synthetic_source.h"

namespace ree::models {
namespace {

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

Status Checkpoint::open(const std::string& path, std::unique_ptr<Checkpoint>* out,
                        const CheckpointOptions& options) {
  REE_CHECK_ARG(out != nullptr, "Checkpoint::open: out is null");
  out->reset();
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return REE_FAIL(Status::kIoError, "checkpoint '%s': %s", printableText(path, 400).c_str(),
                    std::strerror(errno));
  }
  // The reader is chosen by the path: a *.gguf file, else safetensors (a directory or file).
  if (isGgufPath(path)) {
    std::unique_ptr<GgufSource> gguf;
    REE_RETURN_IF_ERROR(GgufSource::open(path, &gguf));
    std::unique_ptr<Checkpoint> checkpoint(new Checkpoint());
    checkpoint->gguf_ = gguf.get();
    checkpoint->source_ = std::move(gguf);
    checkpoint->options_ = options;
    *out = std::move(checkpoint);
    return Status::kSuccess;
  }
  std::unique_ptr<SafetensorsSource> source;
  REE_RETURN_IF_ERROR(SafetensorsSource::open(path, &source));
  std::unique_ptr<Checkpoint> checkpoint(new Checkpoint());
  checkpoint->sharded_ = source->sharded();
  checkpoint->source_ = std::move(source);
  checkpoint->options_ = options;
  *out = std::move(checkpoint);
  return Status::kSuccess;
}

Status Checkpoint::synthetic(const ModelConfig& config, uint64_t seed,
                             std::unique_ptr<Checkpoint>* out) {
  REE_CHECK_ARG(out != nullptr, "Checkpoint::synthetic: out is null");
  std::unique_ptr<Checkpoint> checkpoint(new Checkpoint());
  auto source = std::make_unique<SyntheticSource>(config, seed);
  checkpoint->synthetic_ = source.get();
  checkpoint->source_ = std::move(source);
  *out = std::move(checkpoint);
  return Status::kSuccess;
}

Checkpoint::~Checkpoint() = default;

uint64_t Checkpoint::syntheticSeed() const {
  return synthetic_ != nullptr ? synthetic_->seed() : 0;
}

void Checkpoint::releaseSyntheticData() const {
  if (synthetic_ != nullptr) synthetic_->release();
  if (gguf_ != nullptr) gguf_->releaseDequantized();
}

Status Checkpoint::info(const std::string& name, TensorInfo* out) const {
  REE_CHECK_ARG(out != nullptr, "Checkpoint::info: out is null");
  return source_->info(name, out);
}

Status Checkpoint::bytes(const std::string& name, TensorView* out) const {
  REE_CHECK_ARG(out != nullptr, "Checkpoint::bytes: out is null");
  return source_->bytes(name, out);
}

Status Checkpoint::view(const std::string& name, TensorView* out) const {
  REE_CHECK_ARG(out != nullptr, "Checkpoint::view: out is null");
  TensorView view;
  REE_RETURN_IF_ERROR(source_->bytes(name, &view));
  if (!isComputeDType(view.dtype)) {
    return REE_FAIL(Status::kUnsupported,
                    "checkpoint '%s': tensor '%s' has dtype %s, unsupported (F32, F16 and BF16 "
                    "are)",
                    printableText(path(), 400).c_str(), printableText(name).c_str(),
                    dtypeName(view.dtype));
  }
  // Synthetic values are finite by construction. A tensor is scanned once; two threads viewing
  // it for the first time may both scan it, which is harmless.
  if (synthetic_ == nullptr && !options_.allow_non_finite_weights) {
    bool checked = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      checked = checked_finite_.count(name) != 0;
    }
    if (!checked) {
      REE_RETURN_IF_ERROR(checkFiniteWeights(view, name, path()));
      std::lock_guard<std::mutex> lock(mutex_);
      checked_finite_.insert(name);
    }
  }
  *out = std::move(view);
  return Status::kSuccess;
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

namespace {

constexpr size_t kNamesShown = 5;

// "'a', 'b', 'c' and 7 more": the first few of `names`, quoted and made printable.
std::string nameList(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < kNamesShown; ++i) {
    out += (i ? ", '" : "'") + printableText(names[i], 100) + "'";
  }
  if (names.size() > kNamesShown)
    out += " and " + std::to_string(names.size() - kNamesShown) + " more";
  return out;
}

std::string configName(const ModelConfig& config) {
  return std::string("the ") + architectureName(config.architecture) + " config with " +
         std::to_string(config.num_layers) + " layers";
}

// Every checkpoint tensor must be expected by the whole config (not only the range checked): a
// stage refuses a checkpoint with more layers than the config as surely as a single process.
Status checkUnexpectedNames(const ModelConfig& config, const Checkpoint& checkpoint,
                            const std::vector<ExpectedTensor>& expected) {
  if (checkpoint.options().allow_extra_tensors) return Status::kSuccess;
  std::unordered_set<std::string> known;
  known.reserve(expected.size());
  for (const ExpectedTensor& tensor : expected)
    known.insert(tensor.name);
  std::vector<std::string> extra;
  for (const std::string& name : checkpoint.tensorNames()) {
    if (known.count(name) != 0 || isIgnorableBuffer(name)) continue;
    if (name == "lm_head.weight" && config.tie_word_embeddings) continue;  // shape checked later
    extra.push_back(name);
  }
  if (extra.empty()) return Status::kSuccess;
  const std::string where = printableText(checkpoint.path(), 400);
  const char* relax = "allow_extra_tensors (--allow-extra-tensors) ignores them";
  if (extra.size() == 1) {
    return REE_FAIL(Status::kMismatch, "checkpoint '%s': tensor %s is not expected by %s; %s",
                    where.c_str(), nameList(extra).c_str(), configName(config).c_str(), relax);
  }
  return REE_FAIL(Status::kMismatch, "checkpoint '%s': %zu tensors are not expected by %s: %s; %s",
                  where.c_str(), extra.size(), configName(config).c_str(), nameList(extra).c_str(),
                  relax);
}

Status checkMissingNames(const ModelConfig& config, const Checkpoint& checkpoint,
                         const std::vector<const ExpectedTensor*>& wanted) {
  std::vector<std::string> missing;
  for (const ExpectedTensor* tensor : wanted) {
    if (!checkpoint.contains(tensor->name)) missing.push_back(tensor->name);
  }
  if (missing.empty()) return Status::kSuccess;
  const std::string where = printableText(checkpoint.path(), 400);
  if (missing.size() == 1) {
    return REE_FAIL(Status::kIoError, "checkpoint '%s': missing tensor %s (expected by %s)",
                    where.c_str(), nameList(missing).c_str(), configName(config).c_str());
  }
  return REE_FAIL(Status::kIoError, "checkpoint '%s': missing %zu tensors expected by %s: %s",
                  where.c_str(), missing.size(), configName(config).c_str(),
                  nameList(missing).c_str());
}

// The dtype every checked tensor must have: config.json's, else the first tensor's.
class DTypeAgreement {
 public:
  DTypeAgreement(const ModelConfig& config, std::string where)
      : dtype_(config.dtype), where_(std::move(where)) {}

  Status check(const TensorInfo& info) {
    const char* w = where_.c_str();
    if (!isComputeDType(info.dtype)) {
      return REE_FAIL(Status::kUnsupported,
                      "checkpoint '%s': tensor '%s' has dtype %s, unsupported (F32, F16 and BF16 "
                      "are)",
                      w, printableText(info.name).c_str(), dtypeName(info.dtype));
    }
    if (!dtype_) {
      dtype_ = info.dtype;
      source_ = "tensor '" + printableText(info.name) + "'";
    }
    if (info.dtype != *dtype_) {
      return REE_FAIL(Status::kMismatch, "checkpoint '%s': tensor '%s' has dtype %s, but %s is %s",
                      w, printableText(info.name).c_str(), dtypeName(info.dtype), source_.c_str(),
                      dtypeName(*dtype_));
    }
    return Status::kSuccess;
  }

 private:
  std::optional<DType> dtype_;
  std::string where_;
  std::string source_ = "config.json's dtype";
};

Status checkShape(const TensorInfo& info, const std::vector<int64_t>& shape, const char* where) {
  if (info.shape == shape) return Status::kSuccess;
  return REE_FAIL(Status::kMismatch,
                  "checkpoint '%s': tensor '%s' has shape %s, the config expects %s", where,
                  printableText(info.name).c_str(), shapeString(info.shape).c_str(),
                  shapeString(shape).c_str());
}

}  // namespace

Status validateCheckpoint(const ModelConfig& config, const Checkpoint& checkpoint,
                          const ValidateOptions& options) {
  const std::string where = printableText(checkpoint.path(), 400);
  const int64_t end_layer = options.end_layer < 0 ? config.num_layers : options.end_layer;
  REE_CHECK_ARG(options.first_layer >= 0 && options.first_layer <= end_layer &&
                    end_layer <= config.num_layers,
                "validateCheckpoint: layer range [%lld, %lld) is not within [0, %lld]",
                static_cast<long long>(options.first_layer), static_cast<long long>(end_layer),
                static_cast<long long>(config.num_layers));

  const std::vector<ExpectedTensor> expected =
      expectedTensors(config, tensorNamePrefix(config, checkpoint));
  std::vector<const ExpectedTensor*> wanted;
  for (const ExpectedTensor& tensor : expected) {
    if ((tensor.stage == TensorStage::kEmbedding && options.embedding) ||
        (tensor.stage == TensorStage::kHead && options.head) ||
        (tensor.stage == TensorStage::kLayer && tensor.layer >= options.first_layer &&
         tensor.layer < end_layer)) {
      wanted.push_back(&tensor);
    }
  }
  REE_RETURN_IF_ERROR(checkMissingNames(config, checkpoint, wanted));
  REE_RETURN_IF_ERROR(checkUnexpectedNames(config, checkpoint, expected));

  DTypeAgreement dtypes(config, where);
  for (const ExpectedTensor* tensor : wanted) {
    TensorInfo info;
    REE_RETURN_IF_ERROR(checkpoint.info(tensor->name, &info));
    REE_RETURN_IF_ERROR(checkShape(info, tensor->shape, where.c_str()));
    REE_RETURN_IF_ERROR(dtypes.check(info));
  }
  // Some tied checkpoints store the head anyway; it must at least fit.
  if (options.head && config.tie_word_embeddings && checkpoint.contains("lm_head.weight")) {
    TensorInfo info;
    REE_RETURN_IF_ERROR(checkpoint.info("lm_head.weight", &info));
    REE_RETURN_IF_ERROR(checkShape(info, {config.vocab_size, config.hidden_size}, where.c_str()));
    REE_RETURN_IF_ERROR(dtypes.check(info));
  }
  return Status::kSuccess;
}

}  // namespace ree::models
