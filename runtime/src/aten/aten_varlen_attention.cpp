// FlashAttention varlen attention over the slot cache for the `default` set (see
// aten_varlen_attention.h).
#if defined(REE_WITH_TORCH)

#include "aten_varlen_attention.h"

#include <algorithm>
#include <limits>

namespace ree {
namespace aten_ops {

bool buildVarlenLayout(const StepBatch& batch, int64_t slots, int64_t max_len, VarlenLayout* out) {
  if (slots * max_len > std::numeric_limits<int32_t>::max()) return false;
  std::vector<int32_t> rows, cu_q = {0}, starts, used;
  int64_t max_q = 0, max_k = 0;
  for (int s = 0; s < batch.batch(); ++s) {
    const int32_t count = batch.query_offsets[s + 1] - batch.query_offsets[s];
    if (count == 0) continue;
    const int32_t start = batch.cache_slots[s] * static_cast<int32_t>(max_len);
    const int32_t total = batch.cached_lens[s] + count;
    for (int32_t i = batch.cached_lens[s]; i < total; ++i)
      rows.push_back(start + i);
    cu_q.push_back(cu_q.back() + count);
    starts.push_back(start);
    used.push_back(total);
    max_q = std::max<int64_t>(max_q, count);
    max_k = std::max<int64_t>(max_k, total);
  }
  // The end of the last sequence's rows; FlashAttention reads only the starts and seqused_k.
  starts.push_back(static_cast<int32_t>(slots * max_len));
  out->tokens = static_cast<int64_t>(rows.size());
  out->sequences = static_cast<int64_t>(used.size());
  out->max_q = max_q;
  out->max_k = max_k;
  out->packed = std::move(rows);
  out->packed.insert(out->packed.end(), cu_q.begin(), cu_q.end());
  out->packed.insert(out->packed.end(), starts.begin(), starts.end());
  out->packed.insert(out->packed.end(), used.begin(), used.end());
  return true;
}

bool varlenAttentionApplies(const at::Tensor& q, const at::Tensor& k_cache) {
  const int64_t d = q.size(-1);
  const bool half = q.scalar_type() == at::kBFloat16 || q.scalar_type() == at::kHalf;
  return q.is_cuda() && half && d % 8 == 0 && d <= 256 && k_cache.is_contiguous();
}

const at::Tensor& VarlenRows::get(const at::Tensor& packed, const VarlenLayout& layout) {
  if (!packed_.defined() || !packed_.is_same(packed)) {
    rows_ = packed.narrow(0, 0, layout.tokens).to(at::kLong);
    packed_ = packed;
  }
  return rows_;
}

void varlenAttention(const at::Tensor& q, const at::Tensor& k_new, const at::Tensor& v_new,
                     at::Tensor& k_cache, at::Tensor& v_cache, const VarlenLayout& layout,
                     const at::Tensor& packed, const at::Tensor& rows, double scale,
                     at::Tensor& out) {
  const int64_t n = layout.sequences;
  const int64_t kv_heads = k_cache.size(2);
  const int64_t d = k_cache.size(3);
  at::Tensor cu_q = packed.narrow(0, layout.tokens, n + 1);
  at::Tensor cu_k = packed.narrow(0, layout.tokens + n + 1, n + 1);
  at::Tensor used_k = packed.narrow(0, layout.tokens + 2 * (n + 1), n);
  at::Tensor k_rows = k_cache.view({-1, kv_heads, d});
  at::Tensor v_rows = v_cache.view({-1, kv_heads, d});
  k_rows.index_copy_(0, rows, k_new);
  v_rows.index_copy_(0, rows, v_new);
  auto result = at::_flash_attention_forward(
      q, k_rows, v_rows, cu_q, cu_k, layout.max_q, layout.max_k, /*dropout_p=*/0.0,
      /*is_causal=*/true, /*return_debug_mask=*/false, scale, /*window_size_left=*/std::nullopt,
      /*window_size_right=*/std::nullopt, used_k, /*alibi_slopes=*/std::nullopt);
  out.copy_(std::get<0>(result));
}

}  // namespace aten_ops
}  // namespace ree

#endif  // REE_WITH_TORCH
