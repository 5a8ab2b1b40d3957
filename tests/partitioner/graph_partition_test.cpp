// The graph partitioner (ree/partitioner/graph_partition.h): the values crossing each cut, the
// min-max rule with the largest-first tie break, allowed cuts, and refusals.
#include "ree/partitioner/graph_partition.h"

#include <gtest/gtest.h>

namespace ree::partitioner {
namespace {

// A chain: node i reads value i and writes value i + 1 (value 0 is the graph input).
std::vector<GraphNode> chain(const std::vector<int64_t>& costs) {
  std::vector<GraphNode> nodes;
  for (size_t i = 0; i < costs.size(); ++i)
    nodes.push_back({costs[i], {static_cast<int>(i)}, {static_cast<int>(i + 1)}});
  return nodes;
}

TEST(GraphPartition, ChainCarriesOneValuePerCut) {
  const auto nodes = chain({1, 1, 1, 1});
  const auto cuts = cutValues(nodes, {0}, {4});
  ASSERT_EQ(cuts.size(), 5u);
  EXPECT_TRUE(cuts[0].empty());
  EXPECT_EQ(cuts[2], std::vector<int>{2});
  EXPECT_EQ(cuts[4], std::vector<int>{4});  // the graph output, at the end
}

TEST(GraphPartition, MinimisesTheLargestStageThenTakesTheLongestFirst) {
  std::vector<GraphStage> stages;
  ASSERT_EQ(partitionGraph(chain({3, 1, 1, 1, 3, 1}), {0}, {6}, {3, 4}, &stages), Status::kSuccess);
  ASSERT_EQ(stages.size(), 3u);
  // The best largest stage is 4: [0, 2) = 4, then [2, 4) = 2 ([2, 5) would be 5), [4, 6) = 4.
  EXPECT_EQ(stages[0].begin, 0);
  EXPECT_EQ(stages[0].end, 2);
  EXPECT_EQ(stages[1].end, 4);
  EXPECT_EQ(stages[2].end, 6);
  EXPECT_EQ(stages[0].cost, 4);
  EXPECT_EQ(stages[2].cost, 4);
  EXPECT_EQ(stages[1].incoming, std::vector<int>{2});
  EXPECT_EQ(stages[1].outgoing, std::vector<int>{4});
  EXPECT_TRUE(stages[2].outgoing.empty());
  // Pure: the same answer again.
  std::vector<GraphStage> again;
  ASSERT_EQ(partitionGraph(chain({3, 1, 1, 1, 3, 1}), {0}, {6}, {3, 4}, &again), Status::kSuccess);
  for (size_t s = 0; s < stages.size(); ++s)
    EXPECT_EQ(again[s].end, stages[s].end);
}

TEST(GraphPartition, CutsOnlyWhereFewValuesCross) {
  // Node 0 writes 1 and 2; node 1 reads 1 writes 3; node 2 reads 2 and 3 writes 4; node 3 reads 4.
  std::vector<GraphNode> nodes = {{1, {0}, {1, 2}}, {1, {1}, {3}}, {1, {2, 3}, {4}}, {1, {4}, {5}}};
  const auto cuts = cutValues(nodes, {0}, {5});
  EXPECT_EQ(cuts[1], (std::vector<int>{1, 2}));
  EXPECT_EQ(cuts[2], (std::vector<int>{2, 3}));
  EXPECT_EQ(cuts[3], std::vector<int>{4});
  std::vector<GraphStage> stages;
  ASSERT_EQ(partitionGraph(nodes, {0}, {5}, {2, 1}, &stages), Status::kSuccess);
  EXPECT_EQ(stages[0].end, 3);  // the only cut with one value
  EXPECT_EQ(partitionGraph(nodes, {0}, {5}, {3, 1}, &stages), Status::kInvalidArgument);
  EXPECT_NE(std::string(lastErrorMessage()).find("at most 2 stage(s)"), std::string::npos)
      << lastErrorMessage();
  ASSERT_EQ(partitionGraph(nodes, {0}, {5}, {4, 2}, &stages), Status::kSuccess);
  EXPECT_EQ(stages[1].incoming, (std::vector<int>{1, 2}));
}

TEST(GraphPartition, EarlyGraphOutputsAreCarriedToTheEnd) {
  std::vector<GraphNode> nodes = {{1, {0}, {1}}, {1, {1}, {2}}, {1, {2}, {3}}};
  std::vector<GraphStage> stages;
  ASSERT_EQ(partitionGraph(nodes, {0}, {1, 3}, {3, 2}, &stages), Status::kSuccess);
  EXPECT_EQ(stages[1].outgoing, (std::vector<int>{1, 2}));
  EXPECT_EQ(stages[2].incoming, (std::vector<int>{1, 2}));
}

TEST(GraphPartition, RefusesBadGraphsAndCounts) {
  std::vector<GraphStage> stages;
  EXPECT_EQ(partitionGraph(chain({1, 1}), {0}, {2}, {3, 4}, &stages), Status::kInvalidArgument);
  EXPECT_EQ(partitionGraph(chain({1, 1}), {0}, {2}, {0, 4}, &stages), Status::kInvalidArgument);
  EXPECT_EQ(partitionGraph(chain({1, 1}), {0}, {2}, {1, 0}, &stages), Status::kInvalidArgument);
  EXPECT_EQ(partitionGraph(chain({1, -1}), {0}, {2}, {1, 4}, &stages), Status::kInvalidArgument);
  EXPECT_EQ(partitionGraph(chain({1, 1}), {}, {2}, {1, 4}, &stages), Status::kInvalidArgument);
  EXPECT_NE(std::string(lastErrorMessage()).find("node 0 reads value 0"), std::string::npos);
}

}  // namespace
}  // namespace ree::partitioner
