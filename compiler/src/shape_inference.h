// Symbolic shape inference of one node (static numbers, named symbols or unknown dims).
#pragma once

#include <vector>

#include "graph.h"

namespace ree::compiler {

// Fills the outputs' ValueType from the inputs' (unknown where the operator's output shape
// depends on values that are not constant). Fails naming the node on conflicting known dims.
Status inferNodeTypes(const Graph& graph, const Node& node, std::vector<ValueType>* outputs);

}  // namespace ree::compiler
