// Partitioner: checked against brute force over every split (independent of the DP), plus
// overrides, memory budgets, errors and determinism.
#include <gtest/gtest.h>

#include <functional>
#include <random>

#include "ree/partitioner/partition.h"

namespace ree::partitioner {
namespace {

std::vector<Node> graph(const std::vector<int64_t>& layer_costs, int64_t embed, int64_t head) {
  std::vector<Node> g;
  g.push_back({"embedding", embed, embed, 0});
  for (size_t i = 0; i < layer_costs.size(); ++i) {
    g.push_back({"layer." + std::to_string(i), layer_costs[i], layer_costs[i], 10});
  }
  g.push_back({"head", head, head, 0});
  return g;
}

std::vector<int64_t> counts(const std::vector<Stage>& stages) {
  std::vector<int64_t> out;
  for (const Stage& s : stages)
    out.push_back(s.end_layer - s.first_layer);
  return out;
}

// Every composition of L into n positive parts, in lexicographically DEcreasing order.
void compositions(int64_t L, int n, std::vector<int64_t>& prefix,
                  const std::function<void(const std::vector<int64_t>&)>& visit) {
  if (n == 1) {
    prefix.push_back(L);
    visit(prefix);
    prefix.pop_back();
    return;
  }
  for (int64_t first = L - (n - 1); first >= 1; --first) {
    prefix.push_back(first);
    compositions(L - first, n - 1, prefix, visit);
    prefix.pop_back();
  }
}

TEST(Partition, MatchesBruteForceOnRandomGraphs) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 400; ++trial) {
    int64_t L = 1 + rng() % 10;
    int n = 1 + static_cast<int>(rng() % L);
    std::vector<int64_t> costs(L);
    for (auto& c : costs)
      c = 1 + rng() % 5;  // small values: many ties
    std::vector<Node> g = graph(costs, rng() % 6, rng() % 6);
    Options options;
    options.n = n;
    if (trial % 3 == 0) {
      options.memory_budget_bytes = 8 + rng() % 12;
      options.kv_tokens = rng() % 2;
    }
    // Brute force: the first composition (lexicographically largest) reaching the minimum.
    int64_t best = -1;
    std::vector<int64_t> best_split;
    std::vector<int64_t> prefix;
    compositions(L, n, prefix, [&](const std::vector<int64_t>& split) {
      int64_t worst = 0, a = 0;
      for (int i = 0; i < n; ++i) {
        int64_t cost = 0, memory = 0;
        if (i == 0) cost += g.front().cost, memory += g.front().parameter_bytes;
        for (int64_t l = a; l < a + split[i]; ++l) {
          cost += g[l + 1].cost;
          memory += g[l + 1].parameter_bytes + g[l + 1].kv_bytes_per_token * options.kv_tokens;
        }
        if (i == n - 1) cost += g.back().cost, memory += g.back().parameter_bytes;
        if (options.memory_budget_bytes && memory > options.memory_budget_bytes) return;
        worst = std::max(worst, cost);
        a += split[i];
      }
      if (best < 0 || worst < best) {
        best = worst;
        best_split = split;
      }
    });
    std::vector<Stage> stages;
    Status status = partition(g, options, &stages);
    if (best < 0) {
      EXPECT_EQ(status, Status::kOutOfMemory) << "trial " << trial;
      continue;
    }
    ASSERT_EQ(status, Status::kSuccess) << lastErrorMessage();
    EXPECT_EQ(counts(stages), best_split) << "trial " << trial;
    EXPECT_TRUE(stages.front().embedding && stages.back().head);
  }
}

TEST(Partition, EarlierStagesTakeAsManyLayersAsTheOptimumAllows) {
  std::vector<Stage> stages;
  Options options;
  options.n = 4;
  ASSERT_EQ(partition(graph(std::vector<int64_t>(30, 10), 0, 0), options, &stages),
            Status::kSuccess);
  EXPECT_EQ(counts(stages), (std::vector<int64_t>{8, 8, 8, 6}));
  // A heavy head (lm_head) pulls layers away from the last stage.
  ASSERT_EQ(partition(graph(std::vector<int64_t>(32, 10), 5, 40), options, &stages),
            Status::kSuccess);
  EXPECT_EQ(counts(stages), (std::vector<int64_t>{9, 9, 9, 5}));
}

TEST(Partition, ExplicitSplitIsValidated) {
  std::vector<Stage> stages;
  Options options;
  options.n = 4;
  options.explicit_layers = {8, 8, 7, 9};
  ASSERT_EQ(partition(graph(std::vector<int64_t>(32, 1), 1, 1), options, &stages),
            Status::kSuccess);
  EXPECT_EQ(counts(stages), (std::vector<int64_t>{8, 8, 7, 9}));
  EXPECT_EQ(stages[3].first_layer, 23);
  options.explicit_layers = {8, 8, 8};
  EXPECT_EQ(partition(graph(std::vector<int64_t>(32, 1), 1, 1), options, &stages),
            Status::kInvalidArgument);
  EXPECT_NE(std::string(lastErrorMessage()).find("3 entries"), std::string::npos);
  options.explicit_layers = {8, 8, 8, 9};
  EXPECT_EQ(partition(graph(std::vector<int64_t>(32, 1), 1, 1), options, &stages),
            Status::kInvalidArgument);
  EXPECT_NE(std::string(lastErrorMessage()).find("sums to 33"), std::string::npos);
  std::vector<int64_t> parsed;
  EXPECT_EQ(parseLayerList("8,8,7,9", &parsed), Status::kSuccess);
  EXPECT_EQ(parsed, (std::vector<int64_t>{8, 8, 7, 9}));
  EXPECT_EQ(parseLayerList("8,x,7", &parsed), Status::kInvalidArgument);
  EXPECT_EQ(parseLayerList("8,0,7", &parsed), Status::kInvalidArgument);
}

TEST(Partition, ErrorsNameTheProblem) {
  std::vector<Stage> stages;
  Options options;
  options.n = 5;
  EXPECT_EQ(partition(graph({1, 1, 1}, 1, 1), options, &stages), Status::kInvalidArgument);
  EXPECT_NE(std::string(lastErrorMessage()).find("exceeds the model's 3 layers"),
            std::string::npos);
  options.n = 0;
  EXPECT_EQ(partition(graph({1, 1, 1}, 1, 1), options, &stages), Status::kInvalidArgument);
  options.n = 2;
  options.memory_budget_bytes = 1;
  EXPECT_EQ(partition(graph({5, 5, 5}, 1, 1), options, &stages), Status::kOutOfMemory);
  EXPECT_NE(std::string(lastErrorMessage()).find("does not fit"), std::string::npos);
}

TEST(Partition, IsDeterministic) {
  std::vector<int64_t> costs = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9};
  Options options;
  options.n = 4;
  std::vector<Stage> first, second;
  ASSERT_EQ(partition(graph(costs, 2, 7), options, &first), Status::kSuccess);
  ASSERT_EQ(partition(graph(costs, 2, 7), options, &second), Status::kSuccess);
  EXPECT_EQ(counts(first), counts(second));
  EXPECT_FALSE(describe(first).empty());
}

}  // namespace
}  // namespace ree::partitioner
