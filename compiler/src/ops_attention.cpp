// ReeCausalAttention (domain "ree"): what graph_fusion.cpp makes of transformers' eager attention,
// softmax(Q K^T * scale + mask) V with Q [B, H, S, D], K and V [B, Hk, S, D] (Hk divides H).
// When the mask is causal (0 where key <= query, at most -1e30 or -inf after) and the scale is
// crRsqrt(D), it is OperationSet::attention over a KV cache holding the S keys of each sequence
// (attention.md), the very call REE's native models make, so the compiled model gives their bits.
// Otherwise (a padding mask, another scale) it asks the executor to run the original nodes.
#include <cstring>

#include "device_ops.h"
#include "ops.h"
#include "ree/kernels/crmath.h"
#include "tensor_util.h"

namespace ree::compiler {

namespace {

// Whether the mask, broadcast to [B, H, S, S], is 0 on and below the diagonal and <= -1e30 above.
Status isCausalMask(const GraphTensor& mask_in, const Shape& full, bool* causal) {
  *causal = false;
  if (mask_in.type != ElementType::kFloat32 || mask_in.shape.size() != 4) return Status::kSuccess;
  Shape shape;
  Status status = broadcastShapes(mask_in.shape, full, "mask", &shape);
  if (status != Status::kSuccess || shape != full) return Status::kSuccess;
  GraphTensor host;
  REE_RETURN_IF_ERROR(moveTo(mask_in, Device::cpu(), &host));
  const float* m = host.as<float>();
  const Shape& ms = host.shape;
  const int64_t s = full[2];
  for (int64_t b = 0; b < ms[0]; ++b)
    for (int64_t h = 0; h < ms[1]; ++h)
      for (int64_t i = 0; i < ms[2]; ++i)
        for (int64_t j = 0; j < ms[3]; ++j) {
          // A broadcast dim of 1 stands for every index along it: the row must hold for all.
          const int64_t row_lo = ms[2] == 1 ? 0 : i, row_hi = ms[2] == 1 ? s - 1 : i;
          const int64_t col_lo = ms[3] == 1 ? 0 : j, col_hi = ms[3] == 1 ? s - 1 : j;
          const float v = m[((b * ms[1] + h) * ms[2] + i) * ms[3] + j];
          const bool keep_all = col_hi <= row_lo, mask_all = col_lo > row_hi;
          const bool ok = (keep_all && v == 0.0f) || (mask_all && v <= -1e30f);
          if (!ok) return Status::kSuccess;
        }
  *causal = true;
  return Status::kSuccess;
}

// [B, X, S, D] -> [B * S, X, D] (an exact transpose).
Status tokensFirst(const GraphTensor& in, GraphTensor* out) {
  GraphTensor t;
  REE_RETURN_IF_ERROR(transposeTensor(in, {0, 2, 1, 3}, &t));
  *out = reshapedView(t, {in.shape[0] * in.shape[2], in.shape[1], in.shape[3]});
  return Status::kSuccess;
}

Status runNativeAttention(OpContext& c, const GraphTensor& q, const GraphTensor& k,
                          const GraphTensor& v) {
  const int64_t batch = q.shape[0], heads = q.shape[1], seq = q.shape[2], dim = q.shape[3];
  const int64_t kv_heads = k.shape[1];
  GraphTensor q3, k3, v3, out, cache_k, cache_v;
  REE_RETURN_IF_ERROR(tokensFirst(q, &q3));
  REE_RETURN_IF_ERROR(tokensFirst(k, &k3));
  REE_RETURN_IF_ERROR(tokensFirst(v, &v3));
  REE_RETURN_IF_ERROR(
      emptyOn(c.device, ElementType::kFloat32, {batch, seq, kv_heads, dim}, &cache_k));
  REE_RETURN_IF_ERROR(
      emptyOn(c.device, ElementType::kFloat32, {batch, seq, kv_heads, dim}, &cache_v));
  REE_RETURN_IF_ERROR(emptyOn(c.device, ElementType::kFloat32, {batch * seq, heads, dim}, &out));
  LayerKvCache cache{floatView(cache_k), floatView(cache_v)};
  StepBatch step;
  for (int64_t b = 0; b <= batch; ++b)
    step.query_offsets.push_back(static_cast<int32_t>(b * seq));
  step.cached_lens.assign(static_cast<size_t>(batch), 0);
  for (int64_t b = 0; b < batch; ++b)
    step.block_tables.push_back(static_cast<int32_t>(b));
  step.blocks_per_seq = 1;
  REE_RETURN_IF_ERROR(step.finalize());
  Tensor out_view = floatView(out);
  REE_RETURN_IF_ERROR(
      c.ops->attention(floatView(q3), floatView(k3), floatView(v3), cache, step, out_view));
  return transposeTensor(reshapedView(out, {batch, seq, heads, dim}), {0, 2, 1, 3}, &c.outputs[0]);
}

Status runCausalAttention(OpContext& c) {
  const GraphTensor *q, *k, *v, *mask, *scale;
  REE_RETURN_IF_ERROR(c.floatInput(0, &q));
  REE_RETURN_IF_ERROR(c.floatInput(1, &k));
  REE_RETURN_IF_ERROR(c.floatInput(2, &v));
  REE_RETURN_IF_ERROR(c.floatInput(3, &mask));
  REE_RETURN_IF_ERROR(c.floatInput(4, &scale));
  bool native = q->shape.size() == 4 && k->shape.size() == 4 && k->shape == v->shape &&
                k->shape[0] == q->shape[0] && k->shape[2] == q->shape[2] &&
                k->shape[3] == q->shape[3] && k->shape[1] >= 1 && q->shape[1] % k->shape[1] == 0 &&
                q->shape[2] >= 1 && q->shape[2] <= INT32_MAX / std::max<int64_t>(q->shape[0], 1) &&
                q->shape[3] >= 1 && q->shape[3] <= 256 && scale->numel() == 1;
  if (native) {
    GraphTensor host_scale;
    REE_RETURN_IF_ERROR(moveTo(*scale, Device::cpu(), &host_scale));
    const float expected = crRsqrt(static_cast<float>(q->shape[3]));
    native = std::memcmp(host_scale.as<float>(), &expected, sizeof(float)) == 0;
  }
  if (native) {
    const Shape full = {q->shape[0], q->shape[1], q->shape[2], q->shape[2]};
    REE_RETURN_IF_ERROR(isCausalMask(*mask, full, &native));
  }
  if (!native) {
    REE_CHECK_ARG(!c.node.fallback.empty(),
                  "%s: the inputs are not a causal attention with scale 1/sqrt(head_dim)",
                  c.node.label().c_str());
    c.use_fallback = true;
    return Status::kSuccess;
  }
  return runNativeAttention(c, *q, *k, *v);
}

}  // namespace

void registerAttentionOps(std::vector<OpDef>* table) {
  table->push_back({kCausalAttentionOp, runCausalAttention,
                    "OperationSet::attention (causal mask, scale 1/sqrt(head_dim)); otherwise "
                    "the fused nodes as they were"});
}

}  // namespace ree::compiler
