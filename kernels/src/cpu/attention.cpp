// CPU attention (docs/repops-spec/attention.md): the readable reference of the chunked order. One
// query row at a time: chunk states in position order, merged left to right. Threads split the
// independent (token, head) rows, never a reduction.
#include "ree/kernels/attention.h"

#include <cmath>
#include <limits>
#include <vector>

#include "ree/core/parallel.h"

namespace ree {
namespace repops {
namespace {

bool isStorageType(DType dtype) {
  return dtype == DType::kF32 || dtype == DType::kBF16 || dtype == DType::kF16;
}

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

template <typename T>
float loadAt(const void* base, int64_t index) {
  return loadFloat(static_cast<const T*>(base)[index]);
}

float loadAny(const void* base, DType dtype, int64_t index) {
  switch (dtype) {
    case DType::kF32:
      return loadAt<float>(base, index);
    case DType::kBF16:
      return loadAt<bf16_t>(base, index);
    case DType::kF16:
      return loadAt<f16_t>(base, index);
  }
  return 0.0f;
}

void storeAny(void* base, DType dtype, int64_t index, float value) {
  switch (dtype) {
    case DType::kF32:
      static_cast<float*>(base)[index] = value;
      break;
    case DType::kBF16:
      static_cast<bf16_t*>(base)[index] = toBF16(value);
      break;
    case DType::kF16:
      static_cast<f16_t*>(base)[index] = toF16(value);
      break;
  }
}

// One query row: q (head_dim floats) at absolute position t of sequence seq, KV head kv_head.
template <typename KV>
void attendRow(const AttentionArgs& args, float scale, int seq, int kv_head, int64_t position,
               const float* q, float* out_row, std::vector<float>& scores,
               std::vector<float>& chunk_acc) {
  const int head_dim = args.head_dim;
  const PagedKvCache& cache = args.cache;
  const KV* k_cache = static_cast<const KV*>(cache.k);
  const KV* v_cache = static_cast<const KV*>(cache.v);
  auto row_of = [&](int64_t pos) {
    const int64_t block =
        kvBlockOf(cache.block_table, cache.max_blocks_per_seq, seq, pos, cache.block_size);
    const int64_t slot = block * cache.block_size + pos % cache.block_size;
    return (slot * args.n_kv_heads + kv_head) * head_dim;
  };

  float running_max = 0.0f, running_sum = 0.0f;
  float* running_acc = out_row;  // accumulated in place, divided at the end
  const int64_t n_positions = position + 1;
  for (int64_t begin = 0; begin < n_positions; begin += kAttentionChunk) {
    const int count = static_cast<int>(n_positions - begin < kAttentionChunk ? n_positions - begin
                                                                             : kAttentionChunk);
    // Scores and the chunk maximum.
    float chunk_max = -std::numeric_limits<float>::infinity();
    for (int i = 0; i < count; ++i) {
      const KV* k = k_cache + row_of(begin + i);
      float dot = canonicalDot(
          head_dim, [&](int d) { return q[d]; }, [&](int d) { return loadFloat(k[d]); });
      scores[i] = attn::scaledScore(dot, scale);
      chunk_max = attn::maxStep(chunk_max, scores[i]);
    }
    chunk_max = attn::canonicalMax(chunk_max);
    for (int i = 0; i < count; ++i)
      scores[i] = attn::chunkWeight(scores[i], chunk_max);
    const float chunk_sum = canonicalSum(count, [&](int i) { return scores[i]; });
    // acc[d]: one fma chain per d over the chunk's positions in order, from +0.
    for (int d = 0; d < head_dim; ++d)
      chunk_acc[d] = 0.0f;
    for (int i = 0; i < count; ++i) {
      const KV* v = v_cache + row_of(begin + i);
      const float weight = scores[i];
      for (int d = 0; d < head_dim; ++d) {
        chunk_acc[d] = fmaF32(weight, loadFloat(v[d]), chunk_acc[d]);
      }
    }
    if (begin == 0) {
      running_max = chunk_max;
      running_sum = chunk_sum;
      for (int d = 0; d < head_dim; ++d)
        running_acc[d] = chunk_acc[d];
    } else {
      const float new_max = attn::maxStep(running_max, chunk_max);
      const float running_factor = attn::rescaleFactor(running_max, new_max);
      const float chunk_factor = attn::rescaleFactor(chunk_max, new_max);
      running_sum = attn::mergeValue(running_sum, running_factor, chunk_sum, chunk_factor);
      for (int d = 0; d < head_dim; ++d) {
        running_acc[d] =
            attn::mergeValue(running_acc[d], running_factor, chunk_acc[d], chunk_factor);
      }
      running_max = new_max;
    }
  }
  for (int d = 0; d < head_dim; ++d)
    out_row[d] = attn::finalOutput(running_acc[d], running_sum);
}

template <typename KV>
void attentionRows(const AttentionArgs& args, float scale) {
  const int64_t total_tokens = args.query_offsets[args.batch];
  const int group = args.n_heads / args.n_kv_heads;
  const int head_dim = args.head_dim;
  // Token -> sequence map, so rows can be split freely across threads.
  std::vector<int> token_seq(static_cast<size_t>(total_tokens));
  for (int s = 0; s < args.batch; ++s) {
    for (int64_t i = args.query_offsets[s]; i < args.query_offsets[s + 1]; ++i)
      token_seq[i] = s;
  }
  const int64_t rows = total_tokens * args.n_heads;
  parallelFor(rows, 4, [&](int64_t row_begin, int64_t row_end) {
    std::vector<float> q(head_dim), out_row(head_dim), scores(kAttentionChunk), acc(head_dim);
    for (int64_t row = row_begin; row < row_end; ++row) {
      const int64_t token = row / args.n_heads;
      const int head = static_cast<int>(row % args.n_heads);
      const int seq = token_seq[token];
      const int64_t position = args.cached_lens[seq] + (token - args.query_offsets[seq]);
      for (int d = 0; d < head_dim; ++d)
        q[d] = loadAny(args.q, args.q_dtype, row * head_dim + d);
      attendRow<KV>(args, scale, seq, head / group, position, q.data(), out_row.data(), scores,
                    acc);
      for (int d = 0; d < head_dim; ++d) {
        storeAny(args.out, args.out_dtype, row * head_dim + d, out_row[d]);
      }
    }
  });
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

namespace cpu {

Status attention(const AttentionArgs& args) {
  REE_RETURN_IF_ERROR(validateAttentionArgs(args));
#if !REE_ATTENTION_HAVE_CRMATH
  return REE_FAIL(Status::kUnsupported, "attention: built without crmath.h (crExp/crRsqrt)");
#else
  if (args.batch == 0 || args.query_offsets[args.batch] == 0) return Status::kSuccess;
  const float scale = args.scale == 0.0f ? attn::defaultScale(args.head_dim) : args.scale;
  switch (args.cache.dtype) {
    case DType::kF32:
      attentionRows<float>(args, scale);
      break;
    case DType::kBF16:
      attentionRows<bf16_t>(args, scale);
      break;
    case DType::kF16:
      attentionRows<f16_t>(args, scale);
      break;
  }
  return Status::kSuccess;
#endif
}

Status appendKv(const KvAppendArgs& args) {
  REE_RETURN_IF_ERROR(validateKvAppendArgs(args));
  const int64_t row_elems = static_cast<int64_t>(args.n_kv_heads) * args.head_dim;
  for (int s = 0; s < args.batch; ++s) {
    for (int64_t token = args.query_offsets[s]; token < args.query_offsets[s + 1]; ++token) {
      const int64_t pos = args.cached_lens[s] + (token - args.query_offsets[s]);
      const int64_t block =
          kvBlockOf(args.block_table, args.max_blocks_per_seq, s, pos, args.block_size);
      const int64_t dst = (block * args.block_size + pos % args.block_size) * row_elems;
      for (int64_t e = 0; e < row_elems; ++e) {
        storeAny(args.k_cache, args.cache_dtype, dst + e,
                 loadAny(args.k_new, args.new_dtype, token * row_elems + e));
        storeAny(args.v_cache, args.cache_dtype, dst + e,
                 loadAny(args.v_new, args.new_dtype, token * row_elems + e));
      }
    }
  }
  return Status::kSuccess;
}

}  // namespace cpu
}  // namespace repops
}  // namespace ree
