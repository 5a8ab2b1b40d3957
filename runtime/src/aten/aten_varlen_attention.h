// The `default` set's attention on CUDA: every sequence of a step in ONE FlashAttention varlen
// call that reads the slot cache in place. The cache [slots, max_len, kv_heads, d] is viewed as
// rows [slots * max_len, kv_heads, d]; sequence s starts at row slot_s * max_len and uses its first
// cached_s + new_s rows (FlashAttention's `seqused_k`), so nothing is gathered or repeated (GQA
// is native), and a step of mixed prefills and decodes costs one launch instead of a dozen ATen
// ops per sequence. The causal mask is FlashAttention's bottom-right one: query i of a sequence
// with c cached tokens sees rows <= c + i, as the other paths do.
// Internal header of the ATen sets (LibTorch types).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "ree/runtime/operation_set.h"

namespace ree {
namespace aten_ops {

// The host side of one step's call, built from the StepBatch; sequences with no new token are
// left out. Packed as one int32 vector so that a step uploads it once for all its layers.
struct VarlenLayout {
  // [rows of the new tokens (tokens) | cu_seqlens_q (n + 1) | cache start rows (n + 1) |
  //  seqused_k (n)], n = sequences with new tokens.
  std::vector<int32_t> packed;
  int64_t tokens = 0;
  int64_t sequences = 0;
  int64_t max_q = 0;
  int64_t max_k = 0;
};

// False when a cache row index does not fit int32 (FlashAttention's index type).
bool buildVarlenLayout(const StepBatch& batch, int64_t slots, int64_t max_len, VarlenLayout* out);

// Whether FlashAttention can take these operands (dtype, head size); the caller falls back
// otherwise.
bool varlenAttentionApplies(const at::Tensor& q, const at::Tensor& k_cache);

// The cache rows of the new tokens as int64 (index_copy_'s index type), converted from an upload
// of layout.packed once for all the layers that reuse that upload.
class VarlenRows {
 public:
  const at::Tensor& get(const at::Tensor& packed, const VarlenLayout& layout);

 private:
  at::Tensor packed_;  // the upload rows_ came from, held so that identity means the same upload
  at::Tensor rows_;
};

// Appends k_new/v_new to the cache rows and writes the attention of every query into `out`
// [tokens, heads, d]. `packed` is layout.packed on the device, `rows` its VarlenRows.
void varlenAttention(const at::Tensor& q, const at::Tensor& k_new, const at::Tensor& v_new,
                     at::Tensor& k_cache, at::Tensor& v_cache, const VarlenLayout& layout,
                     const at::Tensor& packed, const at::Tensor& rows, double scale,
                     at::Tensor& out);

}  // namespace aten_ops
}  // namespace ree
