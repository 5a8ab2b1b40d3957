// What each node of the partitioner's graph holds in memory once loaded, for a GGUF model: its
// tensors' resident bytes. A weight the model keeps in its GGUF blocks (runtime/quantized_weight.h)
// takes its blocks' bytes; every other tensor takes its elements times the loaded dtype's bytes.
// Computed from the file's tensor table and the flags alone (no weights read), so that the plan
// stays a pure function of the model and the options.
#pragma once

#include <cstdint>
#include <vector>

#include "ree/core/status.h"
#include "ree/models/checkpoint.h"
#include "ree/models/engine.h"
#include "ree/models/model_config.h"

namespace ree::models {

// Whether a model loaded under `options` (with fp32 weights or not) keeps GGUF linear weights in
// blocks: the rule of CausalLM's loadMaybeQuantized (fp32 weights) and of the operation sets that
// compute from blocks (the reproducible set under repops-1, ReproducibleOps), under the
// process-wide switch.
bool keepsGgufBlocks(const EngineOptions& options, bool fp32_weights);

// For a GGUF checkpoint: node_bytes[i] for the graph's nodes (embedding, layers 0..L-1, head; the
// head of tied embeddings holds the embedding too, as the model's lm_head). False, untouched, when
// the checkpoint is not a GGUF file.
bool ggufResidentNodeBytes(const ModelConfig& config, const Checkpoint& checkpoint,
                           bool keep_blocks, int weight_bytes, std::vector<int64_t>* node_bytes);

}  // namespace ree::models
