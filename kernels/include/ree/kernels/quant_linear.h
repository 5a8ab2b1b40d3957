// Linear layer over GGUF-quantised weights (repops-1, docs/repops-spec/linear.md): the weights
// stay in their blocks in memory and the kernels dequantise them as they read them. Every weight
// element is the fp32 value of docs/repops-spec/gguf-dequant.md (ree/kernels/quant_blocks.h) and
// enters repops-1's fma chain in linear.md's order, so Y has exactly the bits of dequantising W
// to fp32 and calling ree::repops::{cpu,cuda}::linear with an fp32 W. No new spec: the values are
// gguf-dequant.md's, the sum linear.md's.
#pragma once

#include <cstdint>

#include "ree/core/status.h"
#include "ree/kernels/linear.h"
#include "ree/kernels/quant_blocks.h"

namespace ree::repops {

struct QuantLinearArgs {
  // x, bias, y, m, n, k, accumulate and w_is_constant as in LinearArgs. `linear.w` points at the
  // weight rows as GGUF blocks: row n (K elements, K a multiple of the block) is K / B blocks of
  // `w_type` starting at byte n * w_row_bytes. linear.w_dtype and linear.w_row_stride are
  // ignored; a bias is fp32.
  LinearArgs linear;
  QuantType w_type = QuantType::kQ4_0;
  int64_t w_row_bytes = 0;  // bytes between rows; 0 = K / B * block bytes (dense)

  int64_t rowBytes() const { return linear.k / quantBlockElems(w_type) * quantBlockBytes(w_type); }
  int64_t wRowBytes() const { return w_row_bytes ? w_row_bytes : rowBytes(); }
};

// Checks the type, shapes (K a multiple of the block), strides and pointers; kInvalidArgument
// naming the argument.
Status validateQuantLinearArgs(const QuantLinearArgs& args);

// Embedding lookup in a table of GGUF block rows ([rows, k] elements, row_bytes apart):
// out[t, :] = the fp32 values of row ids[t] (gguf-dequant.md), exactly what a lookup in the
// dequantised table gives. ids are checked against `rows` on the host.
struct QuantEmbeddingArgs {
  const void* table = nullptr;
  QuantType type = QuantType::kQ8_0;
  int64_t rows = 0, k = 0, row_bytes = 0;  // row_bytes 0 = dense
  const int32_t* ids = nullptr;            // host ids (both entry points check them)
  int64_t count = 0;
  float* out = nullptr;  // [count, k], dense
};

Status validateQuantEmbeddingArgs(const QuantEmbeddingArgs& args);

namespace cpu {

Status quantEmbedding(const QuantEmbeddingArgs& args);

// Dequantises panels of weight rows into fp32 (quant_blocks.h) and runs cpu::linear on them: the
// bits are those of cpu::linear with the dequantised W, for any thread count.
Status quantLinear(const QuantLinearArgs& args);

}  // namespace cpu

namespace cuda {

// M <= 64: a GEMV that reads the blocks through shared memory and dequantises them in registers
// (16-byte aligned weight and x rows: lane = one output feature, warps splitting K; otherwise
// lane = one 128-wide chunk of a weight row; fma chains in k order, chunks merged in order).
// Larger M: slices of rows dequantised to an fp32 scratch buffer on the stream, then
// cuda::linear. Enqueued on `stream`; no synchronisation.
Status quantLinear(const QuantLinearArgs& args, cudaStream_t stream);

// device_ids: a device copy of args.ids (args.ids are the host ones, checked here).
Status quantEmbedding(const QuantEmbeddingArgs& args, const int32_t* device_ids,
                      cudaStream_t stream);

// For tests: kGemv forces the GEMV (any M), kGemm the dequantise-then-linear path.
Status quantLinearWithKernel(const QuantLinearArgs& args, LinearKernel kernel, cudaStream_t stream);

}  // namespace cuda
}  // namespace ree::repops
