#include "ree/partitioner/partition.h"

#include <cinttypes>
#include <cstdio>
#include <limits>
#include <sstream>

namespace ree::partitioner {
namespace {

constexpr int64_t kInfinity = std::numeric_limits<int64_t>::max();

// Stage made of layers [a, b) plus the embedding (a == 0) and the head (b == L).
Stage makeStage(const std::vector<Node>& graph, int64_t layers, int64_t a, int64_t b,
                int64_t kv_tokens) {
  Stage s;
  s.first_layer = a;
  s.end_layer = b;
  s.embedding = a == 0;
  s.head = b == layers;
  auto add = [&](const Node& node) {
    s.cost += node.cost;
    s.parameter_bytes += node.parameter_bytes;
    s.kv_bytes += node.kv_bytes_per_token * kv_tokens;
  };
  if (s.embedding) add(graph.front());
  for (int64_t l = a; l < b; ++l)
    add(graph[static_cast<size_t>(l + 1)]);
  if (s.head) add(graph.back());
  return s;
}

bool fits(const Stage& s, int64_t budget) {
  return budget == 0 || s.parameter_bytes + s.kv_bytes <= budget;
}

}  // namespace

Status partition(const std::vector<Node>& graph, const Options& options,
                 std::vector<Stage>* stages) {
  REE_CHECK_ARG(stages != nullptr, "partition: stages is null");
  REE_CHECK_ARG(graph.size() >= 3,
                "partition: the graph needs an embedding, >= 1 layer and a head");
  const int64_t layers = static_cast<int64_t>(graph.size()) - 2;
  const int n = options.n;
  REE_CHECK_ARG(n >= 1, "--n-partitions must be >= 1 (got %d)", n);
  REE_CHECK_ARG(n <= layers, "--n-partitions %d exceeds the model's %" PRId64 " layers", n, layers);
  REE_CHECK_ARG(options.memory_budget_bytes >= 0 && options.kv_tokens >= 0,
                "partition: negative memory budget or KV tokens");
  for (const Node& node : graph) {
    REE_CHECK_ARG(node.cost >= 0 && node.parameter_bytes >= 0 && node.kv_bytes_per_token >= 0,
                  "partition: node %s has a negative cost", node.name.c_str());
  }
  stages->clear();

  if (!options.explicit_layers.empty()) {
    REE_CHECK_ARG(static_cast<int>(options.explicit_layers.size()) == n,
                  "--partition-layers has %zu entries for --n-partitions %d",
                  options.explicit_layers.size(), n);
    int64_t sum = 0;
    for (size_t i = 0; i < options.explicit_layers.size(); ++i) {
      REE_CHECK_ARG(options.explicit_layers[i] >= 1,
                    "--partition-layers: stage %zu gets %" PRId64 " layers (each needs >= 1)", i,
                    options.explicit_layers[i]);
      sum += options.explicit_layers[i];
    }
    REE_CHECK_ARG(sum == layers,
                  "--partition-layers sums to %" PRId64 ", the model has %" PRId64 " layers", sum,
                  layers);
    int64_t a = 0;
    for (int i = 0; i < n; ++i) {
      Stage s = makeStage(graph, layers, a, a + options.explicit_layers[i], options.kv_tokens);
      if (!fits(s, options.memory_budget_bytes)) {
        return REE_FAIL(Status::kOutOfMemory,
                        "--partition-layers: stage %d needs %" PRId64
                        " bytes, more than the "
                        "budget of %" PRId64,
                        i, s.parameter_bytes + s.kv_bytes, options.memory_budget_bytes);
      }
      stages->push_back(s);
      a += options.explicit_layers[i];
    }
    return Status::kSuccess;
  }

  // best[k][b]: the smallest possible largest cost when stages k..n-1 cover layers [b, L).
  // Filled backwards; the choice below walks forwards taking the longest first stage that keeps
  // the optimum, which gives the lexicographically largest layer counts among optimal splits.
  std::vector<std::vector<int64_t>> best(n + 1, std::vector<int64_t>(layers + 1, kInfinity));
  best[n][layers] = 0;
  for (int k = n - 1; k >= 0; --k) {
    for (int64_t b = 0; b < layers; ++b) {
      int64_t remaining_stages = n - 1 - k;
      for (int64_t e = b + 1; e <= layers - remaining_stages; ++e) {
        if (best[k + 1][e] == kInfinity) continue;
        Stage s = makeStage(graph, layers, b, e, options.kv_tokens);
        if (!fits(s, options.memory_budget_bytes)) continue;
        int64_t worst = std::max(s.cost, best[k + 1][e]);
        if (worst < best[k][b]) best[k][b] = worst;
      }
    }
  }
  if (best[0][0] == kInfinity) {
    int64_t largest_layer = 0;
    for (int64_t l = 0; l < layers; ++l) {
      Stage s = makeStage(graph, layers, l, l + 1, options.kv_tokens);
      largest_layer = std::max(largest_layer, s.parameter_bytes + s.kv_bytes);
    }
    return REE_FAIL(Status::kOutOfMemory,
                    "the model does not fit %d stage(s) of %" PRId64
                    " bytes each (parameters + "
                    "KV cache for %" PRId64 " tokens; one layer alone needs up to %" PRId64 ")",
                    n, options.memory_budget_bytes, options.kv_tokens, largest_layer);
  }
  const int64_t target = best[0][0];
  int64_t b = 0;
  for (int k = 0; k < n; ++k) {
    int64_t remaining_stages = n - 1 - k;
    for (int64_t e = layers - remaining_stages; e > b; --e) {
      if (best[k + 1][e] == kInfinity || best[k + 1][e] > target) continue;
      Stage s = makeStage(graph, layers, b, e, options.kv_tokens);
      if (!fits(s, options.memory_budget_bytes) || s.cost > target) continue;
      stages->push_back(s);
      b = e;
      break;
    }
  }
  if (static_cast<int>(stages->size()) != n) {
    return REE_FAIL(Status::kInternal, "partition: reconstruction found %zu of %d stages",
                    stages->size(), n);
  }
  return Status::kSuccess;
}

Status parseLayerList(const std::string& text, std::vector<int64_t>* layers) {
  REE_CHECK_ARG(layers != nullptr, "parseLayerList: layers is null");
  layers->clear();
  std::stringstream stream(text);
  std::string item;
  while (std::getline(stream, item, ',')) {
    char* end = nullptr;
    long long value = std::strtoll(item.c_str(), &end, 10);
    if (item.empty() || end == nullptr || *end != '\0' || value < 1) {
      return REE_FAIL(Status::kInvalidArgument,
                      "--partition-layers: '%s' is not a positive layer count (expected e.g. "
                      "8,8,7,9)",
                      item.c_str());
    }
    layers->push_back(value);
  }
  REE_CHECK_ARG(!layers->empty(), "--partition-layers is empty");
  return Status::kSuccess;
}

std::string describe(const std::vector<Stage>& stages) {
  std::ostringstream os;
  char line[256];
  for (size_t i = 0; i < stages.size(); ++i) {
    const Stage& s = stages[i];
    std::snprintf(line, sizeof(line),
                  "stage %zu: layers %" PRId64 "-%" PRId64 " (%" PRId64
                  ")%s%s, %.2f GiB params, "
                  "%.2f GiB KV\n",
                  i, s.first_layer, s.end_layer - 1, s.end_layer - s.first_layer,
                  s.embedding ? " + embedding" : "", s.head ? " + head" : "",
                  s.parameter_bytes / 1073741824.0, s.kv_bytes / 1073741824.0);
    os << line;
  }
  return os.str();
}

}  // namespace ree::partitioner
