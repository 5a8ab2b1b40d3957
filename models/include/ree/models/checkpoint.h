// A model's weights, whatever their format: a WeightSource (weight_source.h) chosen by open() —
// safetensors today (safetensors_source.h: one model.safetensors, or shards listed by
// model.safetensors.index.json, mapped lazily) — or generated (synthetic()). Views stay valid while
// the Checkpoint lives. Thread-safe: views and infos may be requested concurrently.
//
// On top of the format, the load rules (docs/checkpoints.md, "Loading rules and limits"):
//  - view() refuses a tensor holding NaN or +-Inf, naming it and the first bad index (checked once
//    per tensor, when first viewed), unless CheckpointOptions::allow_non_finite_weights;
//  - validateCheckpoint() refuses tensors the config does not expect (unless
//    CheckpointOptions::allow_extra_tensors) and reports every missing one.
//
// Also here: the tensors each architecture expects from its config (names, shapes, pipeline
// stage), and validateCheckpoint(), which checks a checkpoint against them.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "ree/core/status.h"
#include "ree/models/model_config.h"
#include "ree/models/safetensors.h"
#include "ree/models/weight_source.h"

namespace ree::models {

class SyntheticSource;
class GgufSource;

// How strictly a checkpoint is loaded. The defaults are strict; each relaxation is a user's
// explicit choice (launcher flags --allow-extra-tensors, --allow-non-finite-weights) and belongs
// in the receipt.
struct CheckpointOptions {
  // Tensors the config does not expect (other than known buffers such as rotary inv_freq and
  // GPT-2's attn.bias) are an error in validateCheckpoint(); true ignores them.
  bool allow_extra_tensors = false;
  // view() refuses weights holding NaN or +-Inf; true hands them out unchecked (research only).
  bool allow_non_finite_weights = false;
};

class Checkpoint {
 public:
  // `path`: a model directory (model.safetensors preferred over the index, as transformers does),
  // or a single .safetensors file.
  static Status open(const std::string& path, std::unique_ptr<Checkpoint>* out,
                     const CheckpointOptions& options = CheckpointOptions());

  // A checkpoint without files: every tensor `config` expects (expectedTensors, prefix "model."
  // or "transformer.", lm_head when untied), in config.dtype (default BF16), with pseudo-random
  // values that depend only on (seed, tensor name, element index): norms are 1, biases 0, other
  // weights uniform in +-1/sqrt(fan-in). For benchmarks of model shapes (e.g. Qwen2.5-72B) that
  // nothing has to download; a stage generates only the tensors it asks for. Views stay valid
  // until releaseSyntheticData(). The values are finite by construction and not scanned.
  static Status synthetic(const ModelConfig& config, uint64_t seed,
                          std::unique_ptr<Checkpoint>* out);
  bool isSynthetic() const { return synthetic_ != nullptr; }
  uint64_t syntheticSeed() const;
  // Frees the generated values, and a GGUF file's dequantized ones (after the model has copied
  // them); later views regenerate them.
  void releaseSyntheticData() const;

  ~Checkpoint();
  Checkpoint(const Checkpoint&) = delete;
  Checkpoint& operator=(const Checkpoint&) = delete;

  const CheckpointOptions& options() const { return options_; }
  // The format reader underneath (for identity and tools); never null.
  const WeightSource& source() const { return *source_; }

  const std::string& path() const { return source_->path(); }
  bool sharded() const { return sharded_; }

  // All tensor names, sorted (for a sharded checkpoint: the index's weight_map keys).
  const std::vector<std::string>& tensorNames() const { return source_->tensorNames(); }
  bool contains(const std::string& name) const { return source_->contains(name); }

  // Shard file names (relative to the directory), sorted; one entry when not sharded.
  const std::vector<std::string>& shardFiles() const { return source_->files(); }
  // The shard file holding `name`; kInvalidArgument if the checkpoint has no such tensor.
  Status shardOf(const std::string& name, std::string* file) const {
    return source_->fileOf(name, file);
  }

  // Header information of `name` (maps its shard if needed), any dtype.
  Status info(const std::string& name, TensorInfo* out) const;
  // Bytes of `name` (maps its shard if needed); F32/F16/BF16 only, and finite unless
  // options().allow_non_finite_weights (the first view of each tensor reads it whole to check).
  Status view(const std::string& name, TensorView* out) const;
  // The stored bytes of `name`, any dtype, unchecked (for hashing the weights' identity).
  Status bytes(const std::string& name, TensorView* out) const;

  // Number of shards mapped so far.
  size_t mappedShardCount() const { return source_->mappedFileCount(); }

 private:
  Checkpoint() = default;

  std::unique_ptr<WeightSource> source_;
  const SyntheticSource* synthetic_ = nullptr;  // source_, when synthetic
  const GgufSource* gguf_ = nullptr;            // source_, when a GGUF file
  bool sharded_ = false;
  CheckpointOptions options_;
  mutable std::mutex mutex_;
  mutable std::set<std::string> checked_finite_;  // tensors whose values were found finite
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
};

// Checks the checkpoint's tensor names against the whole config, whatever the range: a tensor
// the config does not explain is an error (kMismatch, naming the first few and the count; it
// usually means a config that does not match the weights, e.g. fewer layers) unless
// checkpoint.options().allow_extra_tensors. Buffers transformers keeps in some checkpoints are
// ignored: *.rotary_emb.inv_freq, GPT-2's attn.bias / attn.masked_bias, and lm_head.weight when the
// embeddings are tied (checked to have the embeddings' shape when the head is checked). Then, for
// the range's tensors: every one exists (kIoError naming the first few missing and the count),
// has the expected shape and the config's dtype (or, when config.json names none, one common
// F32/F16/BF16 dtype) (kMismatch / kUnsupported, first problem by tensor name).
Status validateCheckpoint(const ModelConfig& config, const Checkpoint& checkpoint,
                          const ValidateOptions& options = ValidateOptions());

}  // namespace ree::models
