// Dequantization of GGUF tensor data to fp32, exactly as docs/repops-spec/gguf-dequant.md
// defines it: integer codes and fp16 scales go to fp32 exactly, then each element is the stated
// fp32 operations in the stated order (no fused multiply-add), so the result is one fixed bit
// pattern per input, whatever the machine or thread count.
#pragma once

#include <cstdint>

#include "ree/kernels/quant_blocks.h"
#include "ree/models/gguf.h"

namespace ree::models {

// True for the types REE dequantizes: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K,
// Q5_K, Q6_K.
bool isDequantizableGgmlType(GgmlType type);

// The kernels' block type of a quantised GGUF type (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K,
// Q6_K); false for the float types and the unsupported ones.
bool ggmlQuantType(GgmlType type, repops::QuantType* out);

// "F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K", for messages.
const char* dequantizableGgmlTypeNames();

// Writes the `elements` values held by `data` (elements / block_elems blocks of `type`, which
// must be dequantizable; `elements` a multiple of its block) to `out`. Blocks are independent and
// split over the CPU threads.
void dequantizeGgml(GgmlType type, const unsigned char* data, int64_t elements, float* out);

}  // namespace ree::models
