// Checks of the values a checkpoint holds, as opposed to its layout: REE refuses to run on weights
// that are NaN or infinite (they would produce output, and receipts, from a broken model).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ree/core/status.h"
#include "ree/models/weight_source.h"

namespace ree::models {

// Flat index (row-major) of the first NaN or +-Inf element of `view`, or -1 when every element is
// finite (and for dtypes other than F32/F16/BF16). Reads every element once, chunks in parallel
// (ree::parallelFor); the result does not depend on the thread count.
int64_t firstNonFiniteIndex(const TensorView& view);

// The coordinates of flat index `flat` in `shape` (row-major).
std::vector<int64_t> unflattenIndex(int64_t flat, const std::vector<int64_t>& shape);

// kIoError naming `where` (the checkpoint), the tensor, the first bad value and its flat and
// multi-dimensional index, when `view` holds a NaN or an infinity; kSuccess otherwise.
Status checkFiniteWeights(const TensorView& view, const std::string& name,
                          const std::string& where);

}  // namespace ree::models
