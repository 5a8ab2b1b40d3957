// The partitioner's cost model of a causal LM: the model graph as the partitioner sees it
// (embedding, layers 0..L-1, head), each node with its parameter bytes, FLOPs per token and KV
// cache bytes per token, computed from the config alone (no weights needed).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ree/models/model_config.h"

namespace ree::models {

// Per-node costs for the partitioner: parameter bytes, FLOPs per token, KV bytes per token.
struct NodeCost {
  std::string name;  // "embedding", "layer.N", "head"
  int64_t parameter_bytes = 0;
  int64_t flops_per_token = 0;
  int64_t kv_bytes_per_token = 0;
};

// Embedding, layers 0..L-1, head (final norm + lm_head), with costs computed from the config
// (weights of `weight_bytes` bytes per parameter). `config` must be within model_limits.h (as
// every parsed config is), so that no product overflows.
std::vector<NodeCost> modelGraphCosts(const ModelConfig& config, int weight_bytes);

}  // namespace ree::models
