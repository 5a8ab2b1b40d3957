// External tensor data (TensorProto.data_location = EXTERNAL): the side file is named relative to
// the model's directory; it must stay inside that directory (no absolute path, no "..", no symlink
// leading out), be a regular file, and hold the [offset, offset + length) range.
#pragma once

#include <cstdint>
#include <string>

#include "ree/core/status.h"

namespace ree::compiler {

struct ExternalDataRef {
  std::string location;
  uint64_t offset = 0;
  int64_t length = -1;  // -1: to the end of the file
};

// Resolves `ref.location` inside `base_dir` to a canonical path; `tensor` names the tensor in
// errors.
Status resolveExternalPath(const std::string& base_dir, const std::string& location,
                           const std::string& tensor, std::string* canonical);

// Reads exactly `expected_bytes` at ref.offset of the resolved file into `out`.
Status readExternalData(const std::string& canonical, const ExternalDataRef& ref,
                        uint64_t expected_bytes, const std::string& tensor, void* out);

}  // namespace ree::compiler
