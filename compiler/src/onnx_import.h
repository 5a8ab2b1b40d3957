// ONNX ModelProto -> Graph: the protobuf is parsed by the generated ONNX schema classes; tensors
// (initializers, Constant values) are converted to GraphTensors, external data read from side files
// inside the model's directory.
#pragma once

#include <string>
#include <vector>

#include "graph.h"

namespace ree::compiler {

struct ImportLimits {
  std::string base_dir;  // external data is resolved here; empty refuses external data
  uint64_t max_external_bytes = 0;
};

struct ImportResult {
  Graph graph;
  // Canonical paths of the external data files the model references (for the artifacts).
  std::vector<std::string> external_files;
};

Status importOnnx(const std::string& bytes, const ImportLimits& limits, ImportResult* out);

}  // namespace ree::compiler
