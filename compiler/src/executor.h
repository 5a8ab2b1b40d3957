// Runs a compiled graph: the values of one run in a table by value id, nodes in topological order,
// each value released after its last use.
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "graph.h"
#include "ree/runtime/operation_set.h"

namespace ree::compiler {

class Executor {
 public:
  Executor(Graph graph, std::unique_ptr<OperationSet> ops, uint64_t max_tensor_bytes);
  const Graph& graph() const { return graph_; }
  OperationSet* ops() const { return ops_.get(); }
  Status run(const std::vector<GraphTensor>& inputs, std::vector<GraphTensor>* outputs);
  // Runs nodes [begin, end) on the inputs, the constants and `incoming` (values by id); returns
  // the values `outgoing` names, or the graph outputs when `outgoing` is null.
  Status runRange(const std::vector<GraphTensor>& inputs, size_t begin, size_t end,
                  const std::vector<int>& incoming_ids, const std::vector<GraphTensor>& incoming,
                  const std::vector<int>* outgoing, std::vector<GraphTensor>* result);

 private:
  Status checkInputs(const std::vector<GraphTensor>& inputs) const;
  // Float constants copied to the operation set's GPU once (nothing on the CPU).
  Status uploadConstants();
  Status runNodeAt(size_t n, std::vector<GraphTensor>& values);
  // Runs `node` (or, when a fused node asks for it, its fallback nodes) on `values`.
  Status runOne(const Node& node, std::vector<GraphTensor>& values);

  Graph graph_;
  std::unique_ptr<OperationSet> ops_;
  uint64_t max_tensor_bytes_;
  std::vector<int> last_use_;
  std::map<int, GraphTensor>
      device_constants_;  // per value: the index of the last node reading it (-1: none)
};

}  // namespace ree::compiler
