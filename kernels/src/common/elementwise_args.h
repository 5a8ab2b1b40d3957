// Argument checks of the element-wise RepOps (elementwise.h), shared by the CPU and CUDA entry
// points.
#pragma once

#include <cstdint>

#include "ree/core/status.h"
#include "ree/kernels/elementwise.h"

namespace ree::repops {

// n >= 0; for n > 0 every pointer present and the op known. `what` names the entry point.
Status validateElementwiseArgs(const char* what, int op, int op_count, const void* a, const void* b,
                               const void* c, const void* out, int64_t n);

}  // namespace ree::repops
