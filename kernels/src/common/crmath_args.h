// Argument checks of the batch correctly rounded math (math_ops.h), shared by the CPU and CUDA
// entry points.
#pragma once

#include <cstdint>

#include "ree/core/status.h"
#include "ree/kernels/math_ops.h"

namespace ree::repops {

// n >= 0; for n > 0 a known op and both pointers (host or device: only their presence is checked).
Status validateUnaryMathArgs(UnaryMathOp op, const float* in, const float* out, int64_t n);

}  // namespace ree::repops
