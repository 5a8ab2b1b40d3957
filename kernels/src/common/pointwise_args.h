// Argument checks of the embedding gather and the elementwise operators (pointwise.h), shared by
// the CPU and CUDA entry points. Each checks the dtype, the activation, the shape and, when there
// is work (n, count, rows and cols > 0), the pointers; the caller then returns early on no work.
#pragma once

#include <cstdint>

#include "ree/core/status.h"
#include "ree/kernels/pointwise.h"

namespace ree::repops {

Status validateEmbeddingArgs(DType dtype, const void* table, int64_t vocab, int64_t dim,
                             const int32_t* ids, int64_t count, const void* out);

// Every id in [0, vocab), checked on the host before anything is written; names the first bad one.
Status validateEmbeddingIds(const int32_t* ids, int64_t count, int64_t vocab);

// add / mul: `name` is the operator's name in the message.
Status validateBinaryArgs(const char* name, DType dtype, const void* a, const void* b,
                          const void* out, int64_t n);

Status validateActivationArgs(Activation activation, DType dtype, const void* x, const void* out,
                              int64_t n);

Status validateGatedArgs(Activation activation, DType dtype, const void* gate, int64_t gate_stride,
                         const void* up, int64_t up_stride, const void* out, int64_t out_stride,
                         int64_t rows, int64_t cols);

}  // namespace ree::repops
