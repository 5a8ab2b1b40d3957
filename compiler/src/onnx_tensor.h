// TensorProto -> GraphTensor (initializers, Constant nodes, attribute tensors).
#pragma once

#include <string>
#include <vector>

#include "graph.h"
#include "onnx/onnx.pb.h"

namespace ree::compiler {

struct TensorImportContext {
  std::string base_dir;                                // for external data; empty refuses it
  uint64_t max_external_bytes = 0;                     // all external tensors together
  uint64_t external_bytes_read = 0;                    // running total
  std::vector<std::string>* external_files = nullptr;  // canonical paths seen (deduplicated)
};

// `what` names the tensor in errors ("initializer 'w'", "node 'n' (Constant) value").
Status tensorFromProto(const onnx::TensorProto& proto, const std::string& what,
                       TensorImportContext* context, GraphTensor* out);

// ElementType of an ONNX TensorProto.DataType; kUnsupported naming `what` otherwise.
Status elementTypeFromOnnx(int data_type, const std::string& what, ElementType* out);

}  // namespace ree::compiler
