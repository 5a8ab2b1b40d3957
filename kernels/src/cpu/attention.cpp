// CPU attention (docs/repops-spec/attention.md): the readable reference of the chunked order. One
// query row at a time: chunk states in position order, merged left to right. Threads split the
// independent (token, head) rows, never a reduction.
#include "ree/kernels/attention.h"

#include <cmath>
#include <limits>
#include <vector>

#include "common/dtype_dispatch.h"
#include "common/storage_element.h"
#include "ree/core/parallel.h"
#include "vector_math.h"

namespace ree {
namespace repops {
namespace {

// One query row: q (head_dim floats) at absolute position t of sequence seq, KV head kv_head.
template <typename KV>
REE_VECTOR_MATH_INLINE inline void attendRow(const AttentionArgs& args, float scale, int seq,
                                             int kv_head, int64_t position, const float* q,
                                             float* out_row, std::vector<float>& scores,
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
  cpu::parallelForVectorMath(
      rows, 4, [&](int64_t row_begin, int64_t row_end) REE_VECTOR_MATH_INLINE {
        std::vector<float> q(head_dim), out_row(head_dim), scores(kAttentionChunk), acc(head_dim);
        for (int64_t row = row_begin; row < row_end; ++row) {
          const int64_t token = row / args.n_heads;
          const int head = static_cast<int>(row % args.n_heads);
          const int seq = token_seq[token];
          const int64_t position = args.cached_lens[seq] + (token - args.query_offsets[seq]);
          for (int d = 0; d < head_dim; ++d)
            q[d] = loadStorageElement(args.q, args.q_dtype, row * head_dim + d);
          attendRow<KV>(args, scale, seq, head / group, position, q.data(), out_row.data(), scores,
                        acc);
          for (int d = 0; d < head_dim; ++d) {
            storeStorageElement(args.out, args.out_dtype, row * head_dim + d, out_row[d]);
          }
        }
      });
}

}  // namespace

namespace cpu {

Status attention(const AttentionArgs& args) {
  REE_RETURN_IF_ERROR(validateAttentionArgs(args));
#if !REE_ATTENTION_HAVE_CRMATH
  return REE_FAIL(Status::kUnsupported, "attention: built without crmath.h (crExp/crRsqrt)");
#else
  if (args.batch == 0 || args.query_offsets[args.batch] == 0) return Status::kSuccess;
  const float scale = args.scale == 0.0f ? attn::defaultScale(args.head_dim) : args.scale;
  return dispatchStorageType(args.cache.dtype, "attention",
                             [&](auto kv_tag) { attentionRows<decltype(kv_tag)>(args, scale); });
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
        storeStorageElement(args.k_cache, args.cache_dtype, dst + e,
                            loadStorageElement(args.k_new, args.new_dtype, token * row_elems + e));
        storeStorageElement(args.v_cache, args.cache_dtype, dst + e,
                            loadStorageElement(args.v_new, args.new_dtype, token * row_elems + e));
      }
    }
  }
  return Status::kSuccess;
}

}  // namespace cpu
}  // namespace repops
}  // namespace ree
