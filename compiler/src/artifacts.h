// The artifacts directory of a compiled model (docs/compiler.md, "Artifacts"):
//   plan.json      the lowered graph: operation set, inputs/outputs with symbolic dims, every node
//                  that runs (operator, its lowering, input and output names, inferred dims), the
//                  constants' table and the external files
//   constants.bin  the bytes of every constant (initializers and folded values), 64-byte aligned,
//                  at the offsets plan.json lists
//   external/      the model's external data files: symlinks (colocate_tensors false) or copies
#pragma once

#include <string>
#include <vector>

#include "graph.h"
#include "ree/compiler/compile.h"

namespace ree::compiler {

struct ArtifactsInput {
  const Graph* graph = nullptr;
  const CompileOptions* options = nullptr;
  OperationSetKind operation_set = OperationSetKind::kReproducible;
  int folded_nodes = 0;
  std::vector<std::string> external_files;  // canonical paths
};

// Creates `dir` if needed and writes the artifacts into it.
Status writeArtifacts(const std::string& dir, const ArtifactsInput& input);

}  // namespace ree::compiler
