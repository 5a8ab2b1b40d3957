// The reproducible set's linear and embedding over quantised weights (quantized_weight.h):
// repops::{cpu,cuda}::quantLinear / quantEmbedding, with the bits of the dequantised fp32 weights
// (repops-1). Private to the runtime; reproducible_ops.cpp calls them when a weight is registered.
#pragma once

#include <cstdint>
#include <vector>

#include "ree/core/status.h"
#include "ree/runtime/quantized_weight.h"
#include "ree/runtime/tensor.h"

namespace ree {

// out = linear(x, weight) (+ bias), or out += it with `accumulate`; fp32 or bf16 x and out, fp32
// bias. `stream` is used on a GPU.
Status quantizedLinear(Device device, cudaStream_t stream, const Tensor& x, const Tensor& weight,
                       const QuantizedWeightInfo& info, const Tensor* bias, Tensor& out,
                       bool accumulate);

// out[t, :] = the fp32 values of table row ids[t]; out is fp32. device_ids: a device copy of ids
// (GPU only).
Status quantizedEmbedding(Device device, cudaStream_t stream, const std::vector<int32_t>& ids,
                          const int32_t* device_ids, const Tensor& table,
                          const QuantizedWeightInfo& info, Tensor& out);

}  // namespace ree
