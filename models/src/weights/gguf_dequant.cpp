// GGUF dequantization at load (ree/models/gguf_dequant.h). The block types' arithmetic is
// ree/kernels/quant_blocks.h, the one source that the quantised linear kernels also use, so a
// weight dequantised here and one read from its blocks by a kernel are the same fp32 value
// (docs/repops-spec/gguf-dequant.md).
#include "ree/models/gguf_dequant.h"

#include <cstring>

#include "ree/core/parallel.h"
#include "ree/kernels/numeric.h"
#include "ree/kernels/quant_blocks.h"

namespace ree::models {
namespace {

// The block type of ree/kernels/quant_blocks.h (the one arithmetic source, shared with the
// quantised linear kernels), or false for the float and unsupported types.
bool quantTypeOf(GgmlType type, repops::QuantType* out) {
  switch (type) {
    case GgmlType::kQ8_0:
      *out = repops::QuantType::kQ8_0;
      return true;
    case GgmlType::kQ4_0:
      *out = repops::QuantType::kQ4_0;
      return true;
    case GgmlType::kQ4_1:
      *out = repops::QuantType::kQ4_1;
      return true;
    case GgmlType::kQ5_0:
      *out = repops::QuantType::kQ5_0;
      return true;
    case GgmlType::kQ5_1:
      *out = repops::QuantType::kQ5_1;
      return true;
    case GgmlType::kQ4_K:
      *out = repops::QuantType::kQ4_K;
      return true;
    case GgmlType::kQ5_K:
      *out = repops::QuantType::kQ5_K;
      return true;
    case GgmlType::kQ6_K:
      *out = repops::QuantType::kQ6_K;
      return true;
    default:
      return false;
  }
}

// F32, F16, BF16: element-wise, exact.
void dequantizeFloat(GgmlType type, const unsigned char* data, int64_t begin, int64_t end,
                     float* out) {
  for (int64_t i = begin; i < end; ++i) {
    if (type == GgmlType::kF32) {
      std::memcpy(&out[i], data + 4 * i, 4);
    } else {
      const auto bits = static_cast<uint16_t>(data[2 * i] | (data[2 * i + 1] << 8));
      out[i] = type == GgmlType::kF16 ? toFloat(f16_t{bits}) : toFloat(bf16_t{bits});
    }
  }
}

}  // namespace

bool isDequantizableGgmlType(GgmlType type) {
  repops::QuantType quant;
  return type == GgmlType::kF32 || type == GgmlType::kF16 || type == GgmlType::kBF16 ||
         quantTypeOf(type, &quant);
}

bool ggmlQuantType(GgmlType type, repops::QuantType* out) {
  return quantTypeOf(type, out);
}

const char* dequantizableGgmlTypeNames() {
  return "F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K";
}

void dequantizeGgml(GgmlType type, const unsigned char* data, int64_t elements, float* out) {
  repops::QuantType quant;
  if (!quantTypeOf(type, &quant)) {
    parallelFor(elements, 1 << 16,
                [&](int64_t begin, int64_t end) { dequantizeFloat(type, data, begin, end, out); });
    return;
  }
  const int64_t block_elems = repops::quantBlockElems(quant);
  const int64_t block_bytes = repops::quantBlockBytes(quant);
  const int64_t blocks = elements / block_elems;
  parallelFor(blocks, 1024, [&](int64_t begin, int64_t end) {
    repops::dequantizeBlocks(quant, data + begin * block_bytes, (end - begin) * block_elems,
                             out + begin * block_elems);
  });
}

}  // namespace ree::models
