#include "ree/partitioner/graph_partition.h"

#include <algorithm>
#include <limits>
#include <set>
#include <unordered_map>

namespace ree::partitioner {

namespace {

constexpr int64_t kInfinite = std::numeric_limits<int64_t>::max();

// Checks the graph: costs >= 0, every read value available or written earlier.
Status checkGraph(const std::vector<GraphNode>& nodes, const std::vector<int>& available) {
  std::set<int> known(available.begin(), available.end());
  for (size_t n = 0; n < nodes.size(); ++n) {
    REE_CHECK_ARG(nodes[n].cost >= 0, "graph partition: node %zu has a negative cost", n);
    for (int id : nodes[n].inputs) {
      REE_CHECK_ARG(id < 0 || known.count(id) != 0,
                    "graph partition: node %zu reads value %d before any node writes it", n, id);
    }
    for (int id : nodes[n].outputs)
      if (id >= 0) known.insert(id);
  }
  return Status::kSuccess;
}

}  // namespace

std::vector<std::vector<int>> cutValues(const std::vector<GraphNode>& nodes,
                                        const std::vector<int>& available,
                                        const std::vector<int>& outputs) {
  const std::set<int> everywhere(available.begin(), available.end());
  const int64_t count = static_cast<int64_t>(nodes.size());
  std::unordered_map<int, int64_t> written_at, last_read;
  for (int64_t n = 0; n < count; ++n) {
    for (int id : nodes[n].outputs)
      if (id >= 0 && !everywhere.count(id)) written_at.emplace(id, n);
    for (int id : nodes[n].inputs)
      if (id >= 0) last_read[id] = n;
  }
  for (int id : outputs)
    last_read[id] = count;  // read by "the end"
  std::vector<std::vector<int>> cuts(static_cast<size_t>(count + 1));
  for (const auto& [id, at] : written_at) {
    auto read = last_read.find(id);
    if (read == last_read.end()) continue;
    // Crosses every cut c with at < c <= last read (c == count: a graph output).
    for (int64_t c = at + 1; c <= std::min(read->second, count); ++c)
      cuts[static_cast<size_t>(c)].push_back(id);
  }
  for (auto& values : cuts)
    std::sort(values.begin(), values.end());
  return cuts;
}

Status partitionGraph(const std::vector<GraphNode>& nodes, const std::vector<int>& available,
                      const std::vector<int>& outputs, const GraphPartitionOptions& options,
                      std::vector<GraphStage>* stages) {
  const int64_t count = static_cast<int64_t>(nodes.size());
  REE_CHECK_ARG(options.n >= 1 && options.n <= count,
                "graph partition: %d stage(s) for a graph of %lld node(s)", options.n,
                static_cast<long long>(count));
  REE_CHECK_ARG(options.max_cut_values >= 1, "graph partition: max_cut_values must be >= 1");
  REE_RETURN_IF_ERROR(checkGraph(nodes, available));
  const auto cuts = cutValues(nodes, available, outputs);
  std::vector<bool> allowed(static_cast<size_t>(count + 1), false);
  allowed[0] = allowed[count] = true;
  for (int64_t c = 1; c < count; ++c)
    allowed[c] = static_cast<int>(cuts[c].size()) <= options.max_cut_values;
  std::vector<int64_t> prefix(static_cast<size_t>(count + 1), 0);
  for (int64_t n = 0; n < count; ++n) {
    REE_CHECK_ARG(prefix[n] <= kInfinite - nodes[n].cost, "graph partition: costs overflow");
    prefix[n + 1] = prefix[n] + nodes[n].cost;
  }
  // best[k][i]: the smallest largest-stage cost splitting nodes [i, count) into k stages.
  const int n = options.n;
  std::vector<std::vector<int64_t>> best(n + 1, std::vector<int64_t>(count + 1, kInfinite));
  best[0][count] = 0;
  for (int k = 1; k <= n; ++k) {
    for (int64_t i = count - 1; i >= 0; --i) {
      if (!allowed[i]) continue;
      for (int64_t c = i + 1; c <= count; ++c) {
        if (!allowed[c] || best[k - 1][c] == kInfinite) continue;
        const int64_t worst = std::max(prefix[c] - prefix[i], best[k - 1][c]);
        best[k][i] = std::min(best[k][i], worst);
      }
    }
  }
  if (best[n][0] == kInfinite) {
    int most = 1;
    for (int k = 1; k <= n; ++k)
      if (best[k][0] != kInfinite) most = k;
    return REE_FAIL(Status::kInvalidArgument,
                    "graph partition: no %d stages with at most %d value(s) crossing each cut "
                    "(at most %d stage(s) possible)",
                    n, options.max_cut_values, most);
  }
  // Each stage as long as the optimum allows.
  stages->clear();
  int64_t begin = 0;
  for (int k = n; k >= 1; --k) {
    int64_t end = -1;
    for (int64_t c = count; c > begin; --c) {
      if (allowed[c] && best[k - 1][c] <= best[n][0] && prefix[c] - prefix[begin] <= best[n][0]) {
        end = c;
        break;
      }
    }
    GraphStage stage;
    stage.begin = begin;
    stage.end = end;
    stage.cost = prefix[end] - prefix[begin];
    stage.incoming = cuts[begin];
    if (k > 1) stage.outgoing = cuts[end];
    stages->push_back(stage);
    begin = end;
  }
  return Status::kSuccess;
}

std::string describeGraphStages(const std::vector<GraphStage>& stages) {
  std::string text;
  for (size_t s = 0; s < stages.size(); ++s) {
    const GraphStage& st = stages[s];
    text += "stage " + std::to_string(s) + ": nodes " + std::to_string(st.begin) + "-" +
            std::to_string(st.end - 1) + " (" + std::to_string(st.end - st.begin) + "), cost " +
            std::to_string(st.cost) + ", receives " + std::to_string(st.incoming.size()) +
            " value(s)\n";
  }
  return text;
}

}  // namespace ree::partitioner
