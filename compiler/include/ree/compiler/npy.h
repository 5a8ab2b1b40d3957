// NumPy .npy files as graph tensors (the CLI's --run inputs and outputs). Reads format versions
// 1.0-3.0, C order, little-endian float32/float64/int64/int32/bool (float64 is rounded to float32
// and int32 widened, as the compiler's element types are); writes version 1.0.
#pragma once

#include <string>

#include "ree/compiler/compile.h"

namespace ree {

// Parses the bytes of an .npy file; `what` names it in errors.
Status parseNpy(const std::string& bytes, const std::string& what, GraphTensor* out);
Status readNpyFile(const std::string& path, GraphTensor* out);
// The .npy bytes of a CPU tensor.
std::string formatNpy(const GraphTensor& tensor);
Status writeNpyFile(const std::string& path, const GraphTensor& tensor);

}  // namespace ree
