// Compile-time passes over the imported graph, in one walk in topological order:
//  - every node's operator is supported (else a one-line error naming the node and operator);
//  - constant folding: a node whose inputs are all constants runs once now (on the CPU, with the
//    reproducible RepOps) and its outputs become constants; Shape of a value with static dims too;
//  - shape inference with static and symbolic dims: element types, ranks and dims propagate;
//    conflicts between known dims (broadcast, matrix product, concat, declared outputs) are
//    errors naming the node.
#pragma once

#include "graph.h"
#include "ree/runtime/operation_set.h"

namespace ree::compiler {

struct PassStats {
  int folded_nodes = 0;
  int remaining_nodes = 0;
  int fused_rms_norms = 0;
  int fused_attentions = 0;
};

// Folds constants (removing folded nodes from graph->nodes) and infers value types in place;
// with `fuse`, then fuses the patterns of graph_fusion.h.
// `cpu_ops` is the reproducible CPU operation set used to evaluate folded nodes.
Status runGraphPasses(Graph* graph, OperationSet* cpu_ops, bool fuse, PassStats* stats);

}  // namespace ree::compiler
