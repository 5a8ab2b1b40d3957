// The largest tensor a model may make while it is compiled (folding) or run: a hostile graph
// (ConstantOfShape, Expand, Range of a huge shape) is refused before anything is allocated.
// CompileOptions::max_tensor_bytes sets it for the calling thread while compileBytes or
// CompiledModel::run runs.
#pragma once

#include <cstdint>
#include <vector>

#include "ree/compiler/compile.h"

namespace ree::compiler {

class ScopedTensorByteLimit {
 public:
  explicit ScopedTensorByteLimit(uint64_t bytes);
  ~ScopedTensorByteLimit();

 private:
  uint64_t previous_;
};

// kInvalidArgument when a tensor of `type` and `shape` would exceed the limit (or has a negative
// dim).
Status checkTensorBytes(ElementType type, const std::vector<int64_t>& shape);

}  // namespace ree::compiler
