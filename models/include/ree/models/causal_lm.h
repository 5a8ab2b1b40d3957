// A decoder-only causal language model (Llama family, Mistral, Qwen2/3, GPT-2) written once
// against the runtime's OperationSet, so the same code runs the default, deterministic and
// reproducible operation sets on CPU and CUDA.
//
// What differs between architectures comes from the architecture table (architecture.h); the
// partitioner's cost model of the same graph is model_graph_costs.h.
//
// The forward pass is split at the pipeline's cut points: embed() (first stage), runLayers() over
// the layers this instance holds, and logits() (last stage). A stage instance loads only the
// tensors of its layer range (and the embedding / head when it owns them).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ree/models/checkpoint.h"
#include "ree/models/model_config.h"
#include "ree/models/model_graph_costs.h"  // modelGraphCosts, once declared here
#include "ree/runtime/operation_set.h"

namespace ree::models {

struct LayerRange {
  int64_t begin = 0;
  int64_t end = -1;  // exclusive; -1 = all layers
  bool embedding = true;
  bool head = true;
};

struct LoadOptions {
  // Convert every weight to this dtype while loading (RNE for narrowing); default: keep the
  // checkpoint's dtype.
  std::optional<::ree::DType> weight_dtype;
};

class CausalLM {
 public:
  static Status load(const ModelConfig& config, const Checkpoint& checkpoint, OperationSet& ops,
                     const LayerRange& range, std::unique_ptr<CausalLM>* out,
                     const LoadOptions& options = LoadOptions());
  ~CausalLM();

  const ModelConfig& config() const;
  OperationSet& ops() const;
  int64_t firstLayer() const;
  int64_t endLayer() const;
  ::ree::DType weightDType() const;
  ::ree::DType activationDType() const;

  // The KV cache of this stage's layers: a pool of `num_blocks` blocks of `block_size` positions
  // each (runtime/operation_set.h LayerKvCache), for sequences of up to `max_context` tokens.
  // Fails (kUnsupported, before allocating) when the model has a sliding attention window shorter
  // than max_context: see checkContextAgainstSlidingWindow.
  Status allocateCache(int num_blocks, int block_size, int max_context);
  void releaseCache();
  int cacheBlocks() const;
  int cacheBlockSize() const;
  // Bytes of one cache block over this stage's layers (K and V), 0 without layers; false when
  // that overflows 64 bits.
  static bool cacheBlockBytes(const ModelConfig& config, ::ree::DType kv_dtype, int64_t layers,
                              int block_size, int64_t* bytes);

  // hidden [tokens, hidden_size] = token (+ position, GPT-2) embeddings. Needs the embedding.
  Status embed(const std::vector<int32_t>& ids, const StepBatch& batch, Tensor* hidden);
  // The same from batch.tokens() ids in the operation set's memory that the device produced in
  // [0, vocab_size) (OperationSet::embeddingOfDeviceIds), when embedsDeviceIds().
  Status embedDeviceIds(const int32_t* ids, const StepBatch& batch, Tensor* hidden);
  bool embedsDeviceIds() const;
  // Called after each layer with its model-wide index and the activations it produced (on the
  // stage's device; the operation set's work may still be in flight).
  using LayerObserver = std::function<Status(int64_t layer, const Tensor& hidden)>;
  // Runs this instance's layers over hidden, in place, appending to the KV cache.
  Status runLayers(Tensor& hidden, const StepBatch& batch, const LayerObserver& observer = {});
  // Step graphs: runLayers records the layers of steps of up to 256 tokens as CUDA graphs, one set
  // per step shape (made at the second step of that shape, recorded there or at the third,
  // replayed after): the same kernels on the same buffers, so the same bits, with one launch a
  // step (the operation set binds the step's metadata on the device: OperationSet::bindStep) or
  // a few dozen (rope and attention, which then read the host's metadata, run eagerly between the
  // graphs). Only where the operation set records graphs (OperationSet::capturesGraphs: CUDA) and
  // finds them worth it (graphsPayAt); never with a LayerObserver. Off by default.
  void setStepGraphs(bool enabled);
  // Steps whose layers ran from recorded graphs so far.
  int64_t graphReplayedSteps() const;
  // logits [rows.size(), vocab] (fp32) of the given token rows of hidden. Needs the head.
  Status logits(const Tensor& hidden, const std::vector<int32_t>& rows, Tensor* out);

 private:
  struct Impl;
  explicit CausalLM(std::unique_ptr<Impl> impl);
  Status checkBlockTables(const StepBatch& batch) const;
  Status addPositionEmbeddings(const StepBatch& batch, Tensor* hidden);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ree::models
