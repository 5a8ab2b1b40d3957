// A step's metadata on the device for the default set on CUDA (OperationSet::bindStep): the
// positions, rope tables and FlashAttention varlen layout of the step, written into buffers at
// fixed addresses before the step's work, so that rope and attention, which read them there, can
// be recorded in a CUDA graph and replayed for later steps of the same shape.
#if defined(REE_WITH_TORCH)

#include <cstring>
#include <functional>

#include "aten_operation_set.h"

namespace ree {
namespace aten_ops {

int64_t flashKvLengthBucket(int64_t max_k, int64_t max_len) {
  int64_t bucket = 256;
  while (bucket < max_k)
    bucket *= 2;
  return std::max<int64_t>(std::min(bucket, max_len), max_k);
}

bool AtenOperationSet::boundRopeApplies(int64_t tokens, const RopeSpec& spec,
                                        at::ScalarType dtype) const {
  return bound_.active && bound_.has_rope && bound_.tokens == tokens && bound_.dtype == dtype &&
         bound_.spec.rotary_dim == spec.rotary_dim && bound_.spec.interleaved == spec.interleaved &&
         bound_.spec.theta == spec.theta && bound_.spec.llama3 == spec.llama3;
}

namespace {

// Mixes `value` into the running key (boost's hash_combine).
void mixKey(uint64_t* key, uint64_t value) {
  *key ^= std::hash<uint64_t>()(value) + 0x9e3779b97f4a7c15ULL + (*key << 6) + (*key >> 2);
}

}  // namespace

Status AtenOperationSet::bindStep(const StepBatch& batch, const RopeSpec* rope,
                                  const LayerKvCache& cache, uint64_t* shape_key) {
  bound_.active = false;
  const int64_t tokens = batch.tokens();
  REE_CHECK_ARG(tokens >= 1 && tokens <= kBoundTokens,
                "bindStep: %lld tokens (the bound buffers hold 1 to %lld)",
                static_cast<long long>(tokens), static_cast<long long>(kBoundTokens));
  if (!fusesOnCuda() || varlen_failed_ || cache.k.rank() != 4) {
    return OperationSet::bindStep(batch, rope, cache, shape_key);
  }
  aten_ops::VarlenLayout layout;
  const at::Tensor k_cache = view(cache.k);
  if (!aten_ops::varlenAttentionApplies(k_cache, k_cache) ||
      !aten_ops::buildVarlenLayout(batch, k_cache.size(0), k_cache.size(1), &layout) ||
      layout.tokens != tokens) {
    return OperationSet::bindStep(batch, rope, cache, shape_key);
  }
  layout.max_k = flashKvLengthBucket(layout.max_k, k_cache.size(1));
  return run("bindStep", [&] {
    const at::ScalarType dtype = scalarTypeOf(cache.k.dtype());
    const int64_t packed = static_cast<int64_t>(layout.packed.size());
    if (!bound_.metadata.defined()) {
      const at::TensorOptions options = at::TensorOptions().device(aten_device_);
      // Packed: rows (tokens), cu_seqlens_q and starts (sequences + 1 each), seqused_k.
      bound_.metadata = at::empty({kBoundTokens + 4 * kBoundTokens + 2}, options.dtype(at::kInt));
      bound_.rows = at::empty({kBoundTokens}, options.dtype(at::kLong));
    }
    // One upload of positions and layout, through pinned memory (no wait for the device).
    at::Tensor host =
        at::empty({kBoundTokens + packed}, at::TensorOptions().dtype(at::kInt).pinned_memory(true));
    std::memcpy(host.data_ptr<int32_t>(), batch.positions.data(), tokens * sizeof(int32_t));
    std::memcpy(host.data_ptr<int32_t>() + kBoundTokens, layout.packed.data(),
                packed * sizeof(int32_t));
    bound_.metadata.narrow(0, 0, kBoundTokens + packed).copy_(host, /*non_blocking=*/true);
    bound_.rows.narrow(0, 0, tokens).copy_(bound_.metadata.narrow(0, kBoundTokens, tokens));
    bound_.has_rope = rope != nullptr;
    if (rope != nullptr) {
      const bool same_tables =
          bound_.cos.defined() && bound_.dtype == dtype && bound_.cos.size(-1) == rope->rotary_dim;
      if (!same_tables) {
        const at::TensorOptions options = at::TensorOptions().device(aten_device_).dtype(dtype);
        bound_.cos = at::empty({kBoundTokens, 1, rope->rotary_dim}, options);
        bound_.sin_signed = at::empty({kBoundTokens, 1, rope->rotary_dim}, options);
      }
      RopeTables tables;
      computeRopeTables(bound_.metadata.narrow(0, 0, tokens), *rope, dtype, &tables);
      bound_.cos.narrow(0, 0, tokens).copy_(tables.cos_sin.first);
      bound_.sin_signed.narrow(0, 0, tokens).copy_(tables.sin_signed);
      bound_.spec = *rope;
    }
    bound_.dtype = dtype;
    bound_.layout = std::move(layout);
    bound_.tokens = tokens;
    bound_.active = true;
    // What a recorded step depends on besides the token count: the sequences, the longest query,
    // FlashAttention's KV length and whether rope reads the tables.
    uint64_t key = 0;
    for (int64_t value : {bound_.layout.sequences, bound_.layout.max_q, bound_.layout.max_k,
                          int64_t{bound_.has_rope}}) {
      mixKey(&key, static_cast<uint64_t>(value));
    }
    *shape_key = key;
  });
}

void AtenOperationSet::unbindStep() {
  bound_.active = false;
}

}  // namespace aten_ops
}  // namespace ree

#endif  // REE_WITH_TORCH
