// The graph partitioner: a pure, deterministic function from a topologically ordered graph (each
// node's cost and the values it reads and writes) and a stage count n to n contiguous node ranges
// for a pipeline, cut only where few values cross (docs/partitioner.md, "Graphs").
//
// Values: ids >= 0. `available` values (graph inputs, constants) are present on every stage and
// never cross. A cut before node c carries the values written by nodes < c that are read by nodes
// >= c or are graph outputs (`outputs`): the last stage returns every graph output, so one made
// early is carried to the end.
//
// Rule: a cut is allowed where at most `max_cut_values` values cross. Among the partitions into n
// non-empty stages at allowed cuts, minimise the largest stage cost (the sum of its nodes' cost);
// among those, take the one whose stage sizes, read from stage 0 on, are lexicographically largest
// (each stage takes as many nodes as the optimum allows), as the layer partitioner does.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ree/core/status.h"

namespace ree::partitioner {

struct GraphNode {
  int64_t cost = 0;          // >= 0
  std::vector<int> inputs;   // value ids read (-1: an omitted input, ignored)
  std::vector<int> outputs;  // value ids written (-1 ignored)
};

struct GraphPartitionOptions {
  int n = 1;
  int max_cut_values = 4;  // >= 1
};

struct GraphStage {
  int64_t begin = 0;  // nodes [begin, end)
  int64_t end = 0;
  int64_t cost = 0;
  std::vector<int> incoming;  // values received from the previous stage, ascending ids
  std::vector<int> outgoing;  // values sent to the next stage (none for the last stage)
};

// The values that cross the cut before each node index 0..nodes.size() (none at 0; at the end,
// the graph outputs written by nodes), each list ascending.
std::vector<std::vector<int>> cutValues(const std::vector<GraphNode>& nodes,
                                        const std::vector<int>& available,
                                        const std::vector<int>& outputs);

// Fills `stages` (n entries). kInvalidArgument: n < 1, n > nodes, max_cut_values < 1, a negative
// cost, a node reading a value that is neither available nor written before it, or no allowed
// cuts enough for n stages (the message names the largest n possible with that limit).
Status partitionGraph(const std::vector<GraphNode>& nodes, const std::vector<int>& available,
                      const std::vector<int>& outputs, const GraphPartitionOptions& options,
                      std::vector<GraphStage>* stages);

// One line per stage: "stage 0: nodes 0-41 (42), cost 1234, receives 3 value(s)".
std::string describeGraphStages(const std::vector<GraphStage>& stages);

}  // namespace ree::partitioner
