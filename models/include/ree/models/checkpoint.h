// A Hugging Face model directory's weights: one model.safetensors, or shards listed by
// model.safetensors.index.json ({"metadata": {...}, "weight_map": {tensor: shard file}}).
//
// Shards are mapped lazily: open() reads the index (and checks that every shard it names exists),
// and a shard is mapped and validated the first time one of its tensors is asked for. A pipeline
// stage that asks only for its layers therefore maps only the shards holding them. Views stay
// valid while the Checkpoint lives. Thread-safe: views and infos may be requested concurrently.
//
// Also here: the tensors each architecture expects from its config (names, shapes, pipeline
// stage), and validateCheckpoint(), which checks a checkpoint against them.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ree/core/status.h"
#include "ree/models/model_config.h"
#include "ree/models/safetensors.h"

namespace ree::models {

class Checkpoint {
 public:
  // `path`: a model directory (model.safetensors preferred over the index, as transformers does),
  // or a single .safetensors file.
  static Status open(const std::string& path, std::unique_ptr<Checkpoint>* out);

  // A checkpoint without files: every tensor `config` expects (expectedTensors, prefix "model."
  // or "transformer.", lm_head when untied), in config.dtype (default BF16), with pseudo-random
  // values that depend only on (seed, tensor name, element index): norms are 1, biases 0, other
  // weights uniform in +-1/sqrt(fan-in). For benchmarks of model shapes (e.g. Qwen2.5-72B) that
  // nothing has to download; a stage generates only the tensors it asks for. Views stay valid
  // until releaseSyntheticData().
  static Status synthetic(const ModelConfig& config, uint64_t seed,
                          std::unique_ptr<Checkpoint>* out);
  bool isSynthetic() const { return synthetic_; }
  uint64_t syntheticSeed() const { return seed_; }
  // Frees the generated values (after the model has copied them); later views regenerate them.
  void releaseSyntheticData() const;

  Checkpoint(const Checkpoint&) = delete;
  Checkpoint& operator=(const Checkpoint&) = delete;

  const std::string& path() const { return path_; }
  bool sharded() const { return sharded_; }

  // All tensor names, sorted (for a sharded checkpoint: the index's weight_map keys).
  const std::vector<std::string>& tensorNames() const { return names_; }
  bool contains(const std::string& name) const { return shard_of_.count(name) != 0; }

  // Shard file names (relative to the directory), sorted; one entry when not sharded.
  const std::vector<std::string>& shardFiles() const { return shard_files_; }
  // The shard file holding `name`; kInvalidArgument if the checkpoint has no such tensor.
  Status shardOf(const std::string& name, std::string* file) const;

  // Header information of `name` (maps its shard if needed), any dtype.
  Status info(const std::string& name, TensorInfo* out) const;
  // Bytes of `name` (maps its shard if needed); F32/F16/BF16 only, as SafetensorsFile::view.
  Status view(const std::string& name, TensorView* out) const;

  // Number of shards mapped so far.
  size_t mappedShardCount() const;

 private:
  Checkpoint() = default;
  Status shardFile(size_t shard, const SafetensorsFile** out) const;
  Status lookup(const std::string& name, const SafetensorsFile** file) const;

  std::string path_;
  std::string directory_;
  bool sharded_ = false;
  std::vector<std::string> names_;
  std::vector<std::string> shard_files_;
  std::map<std::string, size_t> shard_of_;  // tensor name -> index in shard_files_
  mutable std::mutex mutex_;
  mutable std::vector<std::unique_ptr<SafetensorsFile>> shards_;  // mapped on demand
  // Synthetic checkpoints: the tensors' headers, and the values generated so far.
  bool synthetic_ = false;
  uint64_t seed_ = 0;
  std::map<std::string, TensorInfo> synthetic_infos_;
  mutable std::map<std::string, std::vector<uint8_t>> synthetic_data_;
};

// Where a tensor is used, for the pipeline partitioner: before the layers (embeddings), in layer
// `layer`, or after them (final norm, lm_head). Tied embeddings are one tensor used by both ends.
enum class TensorStage { kEmbedding, kLayer, kHead };

struct ExpectedTensor {
  std::string name;
  std::vector<int64_t> shape;
  TensorStage stage = TensorStage::kLayer;
  int64_t layer = -1;  // for kLayer
};

// The tensors a checkpoint of `config` must hold, in a fixed order (embeddings, layer 0..L-1,
// head). `prefix` is the base-model prefix: "model." for the Llama family; "transformer." for
// GPT-2 as transformers saves it, "" for the original openai-community/gpt2 files. lm_head.weight
// is listed only when the embeddings are not tied.
std::vector<ExpectedTensor> expectedTensors(const ModelConfig& config, const std::string& prefix);

// The prefix `checkpoint` uses for `config`'s architecture (GPT-2: "transformer." or "").
std::string tensorNamePrefix(const ModelConfig& config, const Checkpoint& checkpoint);

struct ValidateOptions {
  // Check only the tensors of layers [first_layer, end_layer) (end_layer < 0: all), plus the
  // embedding/head tensors when asked: what one pipeline stage loads. Only the shards holding
  // those tensors are mapped.
  int64_t first_layer = 0;
  int64_t end_layer = -1;
  bool embedding = true;
  bool head = true;
  // Tensors the config does not explain are an error when the whole model is checked (they
  // usually mean a config that does not match the weights), except buffers transformers keeps in
  // some checkpoints: *.rotary_emb.inv_freq, GPT-2's attn.bias / attn.masked_bias, and
  // lm_head.weight when the embeddings are tied (checked to have the embeddings' shape).
  bool allow_unexpected = false;
};

// Checks that every expected tensor exists with the expected shape and that all of them have the
// config's dtype (or, when config.json names none, one common F32/F16/BF16 dtype). Reports the
// first problem by tensor name: kIoError (missing), kMismatch (shape/dtype), kUnsupported.
Status validateCheckpoint(const ModelConfig& config, const Checkpoint& checkpoint,
                          const ValidateOptions& options = ValidateOptions());

}  // namespace ree::models
