// Linear weights kept in GGUF blocks (docs/repops-spec/gguf-dequant.md, docs/gguf.md).
//
// A quantised weight is an ordinary Tensor used as a byte container: dtype F16 (never read as
// numbers), shape [N, row_bytes / 2], row n holding the K / B blocks of output feature n. A
// registry beside the tensors (keyed by the storage's address range) records its block type and
// K; an operation set that computes with blocks (the reproducible set under repops-1: its linear
// reads them through repops::{cpu,cuda}::quantLinear, with the bits of the dequantised fp32
// weights) looks a weight up there. The registry holds the tensor, so the address range cannot be
// reused by another tensor while it is registered; the owner (a QuantizedWeights, the model)
// unregisters on destruction. Row views (Tensor::rows) of a registered tensor are found too.
#pragma once

#include <cstdint>
#include <vector>

#include "ree/core/status.h"
#include "ree/kernels/quant_blocks.h"
#include "ree/runtime/tensor.h"

namespace ree {

class OperationSet;

struct QuantizedWeightInfo {
  repops::QuantType type = repops::QuantType::kQ4_0;
  int64_t k = 0;          // elements per row
  int64_t row_bytes = 0;  // K / B blocks of the type
};

// The bytes of a row of k elements of `type` (k a multiple of the block).
int64_t quantizedRowBytes(repops::QuantType type, int64_t k);

// True when `weight` is a registered quantised tensor or a view of whole rows of one; fills *out.
bool findQuantizedWeight(const Tensor& weight, QuantizedWeightInfo* out);

// Sum of the bytes of the registered tensors (tests: what a loaded model holds in blocks).
int64_t registeredQuantizedBytes();

// Whether `ops` computes linear layers from blocks (set by the operation sets that do), and
// models should keep GGUF weights in blocks for it.
bool keepsQuantizedWeights(const OperationSet& ops);
// Process-wide switch (default on). Off: models load every GGUF weight dequantised, as before
// blocks were kept (the same bits; tests compare the two).
void setKeepQuantizedWeights(bool enabled);
// The switch's state (the engine's stage planner counts kept weights by their blocks).
bool keepQuantizedWeightsEnabled();
void setKeepsQuantizedWeights(const OperationSet* ops, bool keeps);

// The registrations of one owner (a model): register() keeps the tensor alive and findable until
// release() or destruction.
class QuantizedWeights {
 public:
  QuantizedWeights() = default;
  ~QuantizedWeights() { release(); }
  QuantizedWeights(const QuantizedWeights&) = delete;
  QuantizedWeights& operator=(const QuantizedWeights&) = delete;

  // `blocks`: F16 [N, info.row_bytes / 2], dense. kInvalidArgument when the shape disagrees.
  Status add(const Tensor& blocks, const QuantizedWeightInfo& info);
  // Drops one registration (its tensor may then be freed when no view holds it).
  void remove(const Tensor& blocks);
  void release();

 private:
  std::vector<const void*> owned_;
};

}  // namespace ree
