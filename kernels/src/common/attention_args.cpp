// validateAttentionArgs and validateKvAppendArgs (attention.h): the checks of an attention or
// KV-append call, shared by the CPU and CUDA entry points.
#include <cmath>

#include "common/dtype_dispatch.h"
#include "ree/kernels/attention.h"

namespace ree::repops {
namespace {

// Shared checks of the sequence metadata and the cache geometry.
Status validateSequences(int batch, const int32_t* query_offsets, const int32_t* cached_lens,
                         int num_blocks, int block_size, const int32_t* block_table,
                         int max_blocks_per_seq) {
  REE_CHECK_ARG(batch >= 0, "attention: batch must be >= 0 (got %d)", batch);
  if (batch == 0) return Status::kSuccess;
  REE_CHECK_ARG(query_offsets != nullptr, "attention: query_offsets (host, batch+1) is null");
  REE_CHECK_ARG(cached_lens != nullptr, "attention: cached_lens (host, batch) is null");
  REE_CHECK_ARG(query_offsets[0] == 0, "attention: query_offsets[0] must be 0 (got %d)",
                query_offsets[0]);
  REE_CHECK_ARG(block_size >= 1, "attention: cache block_size must be >= 1 (got %d)", block_size);
  REE_CHECK_ARG(max_blocks_per_seq >= 1,
                "attention: cache max_blocks_per_seq must be >= 1 (got %d)", max_blocks_per_seq);
  REE_CHECK_ARG(num_blocks >= 1, "attention: cache num_blocks must be >= 1 (got %d)", num_blocks);
  const int64_t capacity = static_cast<int64_t>(block_size) * max_blocks_per_seq;
  for (int s = 0; s < batch; ++s) {
    REE_CHECK_ARG(
        query_offsets[s + 1] >= query_offsets[s],
        "attention: query_offsets must be non-decreasing (offsets[%d]=%d > offsets[%d]=%d)", s,
        query_offsets[s], s + 1, query_offsets[s + 1]);
    REE_CHECK_ARG(cached_lens[s] >= 0, "attention: cached_lens[%d] = %d is negative", s,
                  cached_lens[s]);
    const int64_t total =
        static_cast<int64_t>(cached_lens[s]) + query_offsets[s + 1] - query_offsets[s];
    REE_CHECK_ARG(total <= capacity,
                  "attention: sequence %d needs %lld positions but the cache holds "
                  "block_size * max_blocks_per_seq = %lld",
                  s, static_cast<long long>(total), static_cast<long long>(capacity));
    const int64_t blocks_used = (total + block_size - 1) / block_size;
    for (int64_t j = 0; j < blocks_used; ++j) {
      const int64_t block =
          kvBlockOf(block_table, max_blocks_per_seq, s, j * block_size, block_size);
      REE_CHECK_ARG(
          block >= 0 && block < num_blocks,
          "attention: block %lld of sequence %d maps to physical block %lld, outside "
          "[0, num_blocks=%d)%s",
          static_cast<long long>(j), s, static_cast<long long>(block), num_blocks,
          block_table ? "" : " (no block_table: sequence s uses blocks s*max_blocks_per_seq+j)");
    }
  }
  return Status::kSuccess;
}

}  // namespace

Status validateAttentionArgs(const AttentionArgs& args) {
  REE_CHECK_ARG(args.n_heads >= 1, "attention: n_heads must be >= 1 (got %d)", args.n_heads);
  REE_CHECK_ARG(args.n_kv_heads >= 1, "attention: n_kv_heads must be >= 1 (got %d)",
                args.n_kv_heads);
  REE_CHECK_ARG(args.n_heads % args.n_kv_heads == 0,
                "attention: n_kv_heads (%d) must divide n_heads (%d) for grouped-query attention",
                args.n_kv_heads, args.n_heads);
  REE_CHECK_ARG(args.head_dim >= 1 && args.head_dim <= kAttentionMaxHeadDim,
                "attention: head_dim must be in [1, %d] (got %d)", kAttentionMaxHeadDim,
                args.head_dim);
  REE_CHECK_ARG(isStorageType(args.q_dtype), "attention: q_dtype is not f32/bf16/f16");
  REE_CHECK_ARG(isStorageType(args.out_dtype), "attention: out_dtype is not f32/bf16/f16");
  REE_CHECK_ARG(isStorageType(args.cache.dtype), "attention: cache dtype is not f32/bf16/f16");
  REE_CHECK_ARG(args.scale == 0.0f || std::isfinite(args.scale),
                "attention: scale must be finite (or 0 for the default 1/sqrt(head_dim))");
  REE_RETURN_IF_ERROR(validateSequences(args.batch, args.query_offsets, args.cached_lens,
                                        args.cache.num_blocks, args.cache.block_size,
                                        args.cache.block_table, args.cache.max_blocks_per_seq));
  if (args.batch > 0 && args.query_offsets[args.batch] > 0) {
    REE_CHECK_ARG(args.q != nullptr, "attention: q is null");
    REE_CHECK_ARG(args.out != nullptr, "attention: out is null");
    REE_CHECK_ARG(args.cache.k != nullptr, "attention: cache.k is null");
    REE_CHECK_ARG(args.cache.v != nullptr, "attention: cache.v is null");
    REE_CHECK_ARG(args.out != args.q, "attention: out must not alias q");
  }
  return Status::kSuccess;
}

Status validateKvAppendArgs(const KvAppendArgs& args) {
  REE_CHECK_ARG(args.n_kv_heads >= 1, "appendKv: n_kv_heads must be >= 1 (got %d)",
                args.n_kv_heads);
  REE_CHECK_ARG(args.head_dim >= 1 && args.head_dim <= kAttentionMaxHeadDim,
                "appendKv: head_dim must be in [1, %d] (got %d)", kAttentionMaxHeadDim,
                args.head_dim);
  REE_CHECK_ARG(isStorageType(args.new_dtype), "appendKv: new_dtype is not f32/bf16/f16");
  REE_CHECK_ARG(isStorageType(args.cache_dtype), "appendKv: cache_dtype is not f32/bf16/f16");
  REE_RETURN_IF_ERROR(validateSequences(args.batch, args.query_offsets, args.cached_lens,
                                        args.num_blocks, args.block_size, args.block_table,
                                        args.max_blocks_per_seq));
  if (args.batch > 0 && args.query_offsets[args.batch] > 0) {
    REE_CHECK_ARG(args.k_new != nullptr && args.v_new != nullptr, "appendKv: k_new/v_new is null");
    REE_CHECK_ARG(args.k_cache != nullptr && args.v_cache != nullptr,
                  "appendKv: k_cache/v_cache is null");
  }
  return Status::kSuccess;
}

}  // namespace ree::repops
