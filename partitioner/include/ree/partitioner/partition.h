// The pipeline partitioner: a pure, deterministic function from a model graph's per-node costs,
// the number of stages n and a per-device memory budget to n contiguous stages.
//
// Graph: node 0 is the embedding, nodes 1..L the layers, node L+1 the head (final norm + lm_head).
// Stage 0 always holds the embedding and stage n-1 the head; every stage holds >= 1 layer.
//
// Rule (docs/partitioner.md): minimise the largest stage cost, where a stage's cost is the sum of
// its nodes' `cost` (embedding and head included); among the partitions that reach that minimum,
// take the one whose layer counts, read from stage 0 on, are lexicographically largest (each stage
// takes as many layers as the optimum allows, so the last stage, which also runs the head and
// samples, is the lightest). Stages whose parameters plus KV cache exceed the memory budget are
// not allowed. An explicit split (e.g. 8,8,7,9) bypasses the search but is validated the same way.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ree/core/status.h"

namespace ree::partitioner {

struct Node {
  std::string name;
  int64_t cost = 0;             // balance weight, e.g. bytes read per decode step
  int64_t parameter_bytes = 0;  // memory the node's weights take on its stage
  int64_t kv_bytes_per_token = 0;
};

struct Stage {
  int64_t first_layer = 0;  // layers [first_layer, end_layer)
  int64_t end_layer = 0;
  bool embedding = false;
  bool head = false;
  int64_t cost = 0;
  int64_t parameter_bytes = 0;
  int64_t kv_bytes = 0;  // KV cache for `kv_tokens` tokens
};

struct Options {
  int n = 1;
  // Per-device memory budget in bytes for parameters + KV cache; 0 = unlimited.
  int64_t memory_budget_bytes = 0;
  // Tokens of KV cache each stage must hold (e.g. max_batch * max_context).
  int64_t kv_tokens = 0;
  // Explicit layers per stage (--partition-layers); empty = search.
  std::vector<int64_t> explicit_layers;
};

// Fills `stages` (n entries). kInvalidArgument: n < 1, n > layers, explicit split of the wrong
// length/sum or with an empty stage, malformed graph. kOutOfMemory: no split fits the budget (the
// message names the smallest stage need found).
Status partition(const std::vector<Node>& graph, const Options& options,
                 std::vector<Stage>* stages);

// Parses "8,8,7,9" (--partition-layers); the error names the flag.
Status parseLayerList(const std::string& text, std::vector<int64_t>* layers);

// One line per stage: "stage 0: layers 0-7 (8) + embedding, 3.2 GiB params, 1.0 GiB KV".
std::string describe(const std::vector<Stage>& stages);

}  // namespace ree::partitioner
