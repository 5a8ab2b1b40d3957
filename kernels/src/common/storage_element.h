// One element of a buffer whose storage type is known only at run time (host and device): the
// exact widening to fp32 and the round-to-nearest-even narrowing, as the typed kernels do them.
// For paths that touch few elements per call (attention's Q tile and output, a CPU weight panel);
// the dtype is validated beforehand, so anything not f32 or bf16 is f16.
#pragma once

#include <cstdint>

#include "ree/kernels/numeric.h"

namespace ree::repops {

REE_HD float loadStorageElement(const void* base, DType dtype, int64_t index) {
  switch (dtype) {
    case DType::kF32:
      return static_cast<const float*>(base)[index];
    case DType::kBF16:
      return toFloat(static_cast<const bf16_t*>(base)[index]);
    default:
      return toFloat(static_cast<const f16_t*>(base)[index]);
  }
}

// Rounds `value` to `dtype` (a NaN keeps its bits as toBF16/toF16 give them) and stores it.
REE_HD void storeStorageElement(void* base, DType dtype, int64_t index, float value) {
  switch (dtype) {
    case DType::kF32:
      static_cast<float*>(base)[index] = value;
      break;
    case DType::kBF16:
      static_cast<bf16_t*>(base)[index] = toBF16(value);
      break;
    default:
      static_cast<f16_t*>(base)[index] = toF16(value);
      break;
  }
}

}  // namespace ree::repops
