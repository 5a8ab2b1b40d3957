// Attention of the ATen sets: the KV cache append, then transformers' sdpa_attention_forward per
// sequence, or one FlashAttention varlen call for the whole step (aten_varlen_attention.h).
#if defined(REE_WITH_TORCH)

#include <cmath>
#include <limits>

#include "aten_varlen_attention.h"
#include "ree/core/log.h"

#include "aten_operation_set.h"

namespace ree {
namespace aten_ops {

// ---- attention ----------------------------------------------------------------------------------

Status AtenOperationSet::attention(const Tensor& q, const Tensor& k_new, const Tensor& v_new,
                                   LayerKvCache& cache, const StepBatch& batch, Tensor& out) {
  REE_RETURN_IF_ERROR(checkTensor("attention", "q", q));
  REE_RETURN_IF_ERROR(checkTensor("attention", "k_new", k_new));
  REE_RETURN_IF_ERROR(checkTensor("attention", "v_new", v_new));
  REE_RETURN_IF_ERROR(checkTensor("attention", "cache.k", cache.k));
  REE_RETURN_IF_ERROR(checkTensor("attention", "cache.v", cache.v));
  REE_RETURN_IF_ERROR(checkTensor("attention", "out", out));
  REE_CHECK_ARG(q.rank() == 3, "attention: q must be [tokens, heads, head_dim], got %s",
                q.describe().c_str());
  REE_CHECK_ARG(cache.k.rank() == 4 && cache.v.shape() == cache.k.shape(),
                "attention: cache k %s and v %s must both be [slots, max_len, kv_heads, head_dim]",
                cache.k.describe().c_str(), cache.v.describe().c_str());
  const int64_t tokens = q.dim(0);
  const int64_t heads = q.dim(1);
  const int64_t head_dim = q.dim(2);
  const int64_t kv_heads = cache.k.dim(2);
  const int64_t slots = cache.k.dim(0);
  const int64_t max_len = cache.k.dim(1);
  REE_CHECK_ARG(cache.k.dim(3) == head_dim && kv_heads > 0 && heads % kv_heads == 0,
                "attention: cache %s does not fit q %s (head_dim must match and heads must be a "
                "multiple of kv_heads)",
                cache.k.describe().c_str(), q.describe().c_str());
  const std::vector<int64_t> kv_shape = {tokens, kv_heads, head_dim};
  REE_CHECK_ARG(k_new.shape() == kv_shape && v_new.shape() == kv_shape,
                "attention: k_new %s and v_new %s must be %s", k_new.describe().c_str(),
                v_new.describe().c_str(), shapeString(kv_shape).c_str());
  REE_CHECK_ARG(out.shape() == q.shape(), "attention: out %s must have the shape of q %s",
                out.describe().c_str(), q.describe().c_str());
  REE_CHECK_ARG(k_new.dtype() == q.dtype() && v_new.dtype() == q.dtype() &&
                    cache.k.dtype() == q.dtype() && cache.v.dtype() == q.dtype() &&
                    out.dtype() == q.dtype(),
                "attention: q, k_new, v_new, cache and out must share one dtype (q %s, k_new %s, "
                "v_new %s, cache.k %s, cache.v %s, out %s)",
                dtypeName(q.dtype()), dtypeName(k_new.dtype()), dtypeName(v_new.dtype()),
                dtypeName(cache.k.dtype()), dtypeName(cache.v.dtype()), dtypeName(out.dtype()));
  const int sequences = batch.batch();
  REE_CHECK_ARG(static_cast<int>(batch.query_offsets.size()) == sequences + 1 &&
                    static_cast<int>(batch.cache_slots.size()) == sequences &&
                    batch.query_offsets[0] == 0 && batch.tokens() == tokens,
                "attention: batch has %zu query offsets, %zu slots and %d tokens for %d sequences "
                "and q %s (expected batch + 1 offsets from 0 to %lld)",
                batch.query_offsets.size(), batch.cache_slots.size(), batch.tokens(), sequences,
                q.describe().c_str(), static_cast<long long>(tokens));
  std::set<int32_t> used_slots;
  for (int s = 0; s < sequences; ++s) {
    const int32_t begin = batch.query_offsets[s];
    const int32_t count = batch.query_offsets[s + 1] - begin;
    const int32_t slot = batch.cache_slots[s];
    const int32_t cached = batch.cached_lens[s];
    REE_CHECK_ARG(count >= 0, "attention: query_offsets decrease at sequence %d (%d -> %d)", s,
                  begin, batch.query_offsets[s + 1]);
    REE_CHECK_ARG(slot >= 0 && slot < slots,
                  "attention: sequence %d uses cache slot %d, outside the cache's %lld slots", s,
                  slot, static_cast<long long>(slots));
    REE_CHECK_ARG(used_slots.insert(slot).second,
                  "attention: cache slot %d is used by two sequences of the batch", slot);
    REE_CHECK_ARG(cached >= 0 && static_cast<int64_t>(cached) + count <= max_len,
                  "attention: sequence %d has %d cached + %d new tokens, more than the cache's "
                  "max_len %lld",
                  s, cached, count, static_cast<long long>(max_len));
  }
  if (tokens == 0) return Status::kSuccess;
  return run("attention", [&] {
    at::Tensor q_all = view(q);
    at::Tensor k_all = view(k_new);
    at::Tensor v_all = view(v_new);
    at::Tensor k_cache = view(cache.k);
    at::Tensor v_cache = view(cache.v);
    at::Tensor out_all = view(out);
    const int64_t group = heads / kv_heads;
    // transformers passes scaling = head_dim ** -0.5 (a Python double).
    const double scale = std::pow(static_cast<double>(head_dim), -0.5);
    if (tryVarlenAttention(q_all, k_all, v_all, k_cache, v_cache, batch, scale, out_all)) return;
    for (int s = 0; s < sequences; ++s) {
      const int64_t begin = batch.query_offsets[s];
      const int64_t count = batch.query_offsets[s + 1] - begin;
      if (count == 0) continue;
      const int64_t cached = batch.cached_lens[s];
      const int64_t total = cached + count;
      at::Tensor k_slot = k_cache[batch.cache_slots[s]];  // [max_len, kv_heads, head_dim]
      at::Tensor v_slot = v_cache[batch.cache_slots[s]];
      k_slot.narrow(0, cached, count).copy_(k_all.narrow(0, begin, count));
      v_slot.narrow(0, cached, count).copy_(v_all.narrow(0, begin, count));
      // [1, heads, count, head_dim] queries over [1, heads, total, head_dim] keys and values.
      at::Tensor query = q_all.narrow(0, begin, count).transpose(0, 1).unsqueeze(0);
      auto expandKv = [&](const at::Tensor& slot_tensor) {
        at::Tensor kv = slot_tensor.narrow(0, 0, total).transpose(0, 1);  // [kv, total, d]
        if (group > 1) {
          // transformers' repeat_kv: kv head j serves query heads j*group .. j*group+group-1.
          kv = kv.unsqueeze(1)
                   .expand({kv_heads, group, total, head_dim})
                   .reshape({heads, total, head_dim});
        }
        return kv.unsqueeze(0);
      };
      at::Tensor key = expandKv(k_slot);
      at::Tensor value = expandKv(v_slot);
      // Causal, aligned to the end: query i (position cached + i) sees positions <= cached + i.
      // Without cached tokens that is SDPA's is_causal; a single query sees everything.
      std::optional<at::Tensor> mask;
      bool is_causal = false;
      if (cached == 0) {
        is_causal = count > 1;
      } else if (count > 1) {
        at::TensorOptions index_options = at::TensorOptions().dtype(at::kLong).device(aten_device_);
        at::Tensor key_positions = at::arange(total, index_options).unsqueeze(0);
        at::Tensor query_positions = at::arange(cached, total, index_options).unsqueeze(1);
        at::Tensor visible = key_positions <= query_positions;  // [count, total]
        if (kind_ == OperationSetKind::kDeterministic) {
          // The math kernel adds its mask to the scores; the public SDPA entry point converts a
          // boolean mask the same way before calling it: 0 where visible, -inf elsewhere.
          mask = at::zeros({count, total}, query.options())
                     .masked_fill_(visible.logical_not(), -std::numeric_limits<double>::infinity());
        } else {
          mask = visible;  // SDPA's boolean convention: true = attend
        }
      }
      at::Tensor result;
      if (kind_ == OperationSetKind::kDeterministic) {
        // The math backend: plain matmul + softmax in fp32, no fused flash/memory-efficient
        // kernels (whose tiling depends on the GPU).
        result = std::get<0>(at::_scaled_dot_product_attention_math(
            query, key, value, mask, 0.0, is_causal, std::nullopt, scale));
      } else {
        result = at::scaled_dot_product_attention(query, key, value, mask, 0.0, is_causal, scale);
      }
      out_all.narrow(0, begin, count).copy_(result[0].transpose(0, 1));
    }
  });
}

bool AtenOperationSet::tryVarlenAttention(const at::Tensor& q, const at::Tensor& k_new,
                                          const at::Tensor& v_new, at::Tensor& k_cache,
                                          at::Tensor& v_cache, const StepBatch& batch, double scale,
                                          at::Tensor& out) {
  if (kind_ != OperationSetKind::kDefault || varlen_failed_ ||
      !aten_ops::varlenAttentionApplies(q, k_cache)) {
    return false;
  }
  try {
    if (bound_.active && bound_.tokens == q.size(0)) {
      // The bound step (bindStep): its layout was built from this step's batch.
      const int64_t packed_size = static_cast<int64_t>(bound_.layout.packed.size());
      aten_ops::varlenAttention(q, k_new, v_new, k_cache, v_cache, bound_.layout,
                                bound_.metadata.narrow(0, kBoundTokens, packed_size),
                                bound_.rows.narrow(0, 0, bound_.layout.tokens), scale, out);
      return true;
    }
    aten_ops::VarlenLayout layout;
    if (!aten_ops::buildVarlenLayout(batch, k_cache.size(0), k_cache.size(1), &layout)) {
      return false;
    }
    layout.max_k = flashKvLengthBucket(layout.max_k, k_cache.size(1));
    const at::Tensor& packed = varlen_upload_.get(layout.packed);
    aten_ops::varlenAttention(q, k_new, v_new, k_cache, v_cache, layout, packed,
                              varlen_rows_.get(packed, layout), scale, out);
    return true;
  } catch (const c10::Error& e) {
    // A LibTorch built without FlashAttention, or a GPU it does not support: the per-sequence
    // path computes the same attention. Its appends to the cache are idempotent, so redoing
    // them there is harmless.
    varlen_failed_ = true;
    logMessage(LogLevel::kWarning,
               "default set on %s: FlashAttention varlen unavailable (%s); attention runs per "
               "sequence",
               device_.str().c_str(), e.what_without_backtrace());
    return false;
  }
}

}  // namespace aten_ops
}  // namespace ree

#endif  // REE_WITH_TORCH
