// CUDA attention (docs/repops-spec/attention.md). Same operations as kernels/src/cpu/attention.cpp,
// organised for the GPU:
//   * decode-like sequences (few new rows per KV head): split-KV. One block per (sequence, KV head,
//     run of 1-8 consecutive chunks) computes the chunk states of all the rows of that KV group
//     (the G query heads share every K/V read) and stores them; a merge kernel then folds the
//     chunks of each row left to right.
//   * prefill-like sequences: one block per (sequence, KV head, tile of rows) loops over the
//     chunks in order and merges each chunk state into a running state kept in shared memory
//     (flash style): the tiled prefill kernel (attention_prefill_tiled.cuh, register-tiled like a
//     GEMM) when head_dim % 8 == 0, else the chunk kernel (attention_chunk_kernel.cuh) in its flash
//     mode (also selectable for benchmarks, attention_variant.h).
// Every path computes each chunk state with the spec's operations in the spec's order and merges
// with the same functions, so a query gets the same bits in any path. All arithmetic is fp32
// FFMA/FADD/FMUL on CUDA cores plus crExp; no tensor cores (not IEEE).
//
// This file holds the host side of a call: the plan (which sequences take which path), the
// upload of its tables, and the entry points attention and appendKv. The rest is in pieces
// included here (one translation unit): attention_common.cuh (what the kernels share: work
// descriptions, K/V staging, Q tile), attention_chunk_kernel.cuh (split-KV chunk states, flash
// fallback), attention_merge.cuh (split-KV merge), attention_prefill_tiled.cuh (tiled prefill),
// attention_kv_append.cuh (appendKv kernel), attention_launch.cuh (the launches of a call) and
// attention_tables.cuh (pinned uploads, table cache).
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <tuple>
#include <utility>
#include <vector>

#include "attention_common.cuh"
#include "attention_prefill_tiled.cuh"
#include "attention_variant.h"
#include "chained_launch.cuh"
#include "common/dtype_dispatch.h"
#include "common/storage_element.h"
#include "ree/core/cuda_check.h"
#include "ree/kernels/attention.h"
#include "shared_memory.cuh"

// clang-format off
#include "attention_chunk_kernel.cuh"
#include "attention_merge.cuh"
#include "attention_kv_append.cuh"
#include "attention_launch.cuh"
#include "attention_tables.cuh"
// clang-format on

namespace ree {
namespace repops {
namespace cuda {
namespace {

using namespace attention_detail;  // NOLINT(google-build-using-namespace): one TU

int roundUp(int x, int m) {
  return (x + m - 1) / m * m;
}

// ---- One attention call on the host: plan, upload, launch ---------------------------------------

// Whether a block of `rows_cap` rows fits the device's opt-in shared memory.
struct SmemFit {
  int head_dim;
  int kv_stride;
  int kv_bytes;
  int smem_optin;
  bool operator()(int rows_cap, bool flash) const {
    return smemLayout(head_dim, rows_cap, kv_stride, kv_bytes, flash).bytes <=
           static_cast<size_t>(smem_optin);
  }
  // The tiled prefill kernel with kR rows per thread.
  bool tiled(int rows_per_thread) const {
    return tiledLayout(head_dim, tiledRows(rows_per_thread), kv_stride, kv_bytes).bytes <=
           static_cast<size_t>(smem_optin);
  }
};

std::atomic<int> g_prefill_kernel{static_cast<int>(PrefillKernel::kTiled)};

// The work of one call: one entry per split-path (decode-like) sequence, one item per flash tile.
struct AttentionPlan {
  std::vector<SplitSeq> split_seqs;
  std::vector<WorkItem> flash_items;
  long long states = 0;  // split-path chunk states in the workspace
  SplitWork split_work;
  int merge_blocks = 0;  // grid x of the merge kernel: the maximum
  int split_max_rows = 0;
  int split_rows_cap = 0;
  int flash_rows_cap = 0;
  int flash_tiled_rows = 0;  // > 0: the tiled prefill kernel with this many rows per thread
};

// Rows per thread of the tiled prefill kernel (a tile has 16 times as many): the most whose block
// fits (8, 4, 2), fewer while half a tile still holds the longest flash sequence's rows; 0 when
// the tiled kernel does not apply (head_dim not a multiple of 8, switched off, nothing fits).
int chooseTiledRows(const SmemFit& fits, int max_rows) {
  const int kernel = g_prefill_kernel.load(std::memory_order_relaxed);
  if (fits.head_dim % kTiledGroupD != 0 || kernel == static_cast<int>(PrefillKernel::kChunk)) {
    return 0;
  }
  int rows_per_thread = kernel == static_cast<int>(PrefillKernel::kTiledRows64) ? 4 : 8;
  while (rows_per_thread > 2 && !fits.tiled(rows_per_thread))
    rows_per_thread /= 2;
  if (!fits.tiled(rows_per_thread)) return 0;
  while (rows_per_thread > 2 && tiledRows(rows_per_thread / 2) >= max_rows)
    rows_per_thread /= 2;
  return rows_per_thread;
}

// The flash path's rows per tile: 64 (32 past head_dim 128), halved until a block fits.
Status chooseFlashRowsCap(const SmemFit& fits, DType kv_dtype, int* rows_cap) {
  int cap = fits.head_dim <= 128 ? 64 : 32;
  while (cap > kRowGroup && !fits(cap, true))
    cap /= 2;
  if (!fits(cap, true)) {
    return REE_FAIL(Status::kUnsupported,
                    "attention: head_dim %d with %s cache needs more shared memory than the "
                    "device's %d bytes",
                    fits.head_dim, dtypeName(kv_dtype), fits.smem_optin);
  }
  *rows_cap = cap;
  return Status::kSuccess;
}

// Adds sequence s (n_new new tokens, `rows` rows per KV head) to the split path.
Status addSplitSeq(const AttentionArgs& args, int s, int rows, int n_chunks, AttentionPlan* plan) {
  plan->split_max_rows = std::max(plan->split_max_rows, rows);
  SplitSeq ss{};
  ss.seq = s;
  ss.token_begin = args.query_offsets[s];
  ss.cached = args.cached_lens[s];
  ss.rows = rows;
  ss.n_chunks = n_chunks;
  ss.state_base = plan->states;
  plan->split_seqs.push_back(ss);
  const long long blocks = static_cast<long long>(args.n_kv_heads) * n_chunks;
  if (blocks > INT32_MAX || plan->split_seqs.size() > 65535) {
    return REE_FAIL(Status::kInvalidArgument,
                    "attention: sequence %d needs %lld split-KV blocks, or the batch has more "
                    "than 65535 decode-like sequences: beyond one CUDA grid",
                    s, blocks);
  }
  for (int i = 0; i < kSplitRunChoices; ++i) {
    plan->split_work.blocks[i] +=
        static_cast<long long>(args.n_kv_heads) * ((n_chunks + (1 << i) - 1) >> i);
  }
  plan->split_work.max_chunks = std::max(plan->split_work.max_chunks, n_chunks);
  plan->merge_blocks = std::max(plan->merge_blocks, args.n_kv_heads * rows);
  plan->states += static_cast<long long>(args.n_kv_heads) * rows * n_chunks;
  return Status::kSuccess;
}

// Sequences with few rows per KV head whose block fits take the split path, the others flash
// tiles of flash_rows_cap rows.
Status planAttention(const AttentionArgs& args, const SmemFit& fits, AttentionPlan* plan) {
  const int group = args.n_heads / args.n_kv_heads;
  int flash_max_rows = 0;
  for (int s = 0; s < args.batch; ++s) {
    const int rows = (args.query_offsets[s + 1] - args.query_offsets[s]) * group;
    if (rows > kSplitMaxRows) flash_max_rows = std::max(flash_max_rows, rows);
  }
  plan->flash_tiled_rows = chooseTiledRows(fits, flash_max_rows);
  if (plan->flash_tiled_rows > 0) {
    plan->flash_rows_cap = tiledRows(plan->flash_tiled_rows);
  } else {
    REE_RETURN_IF_ERROR(chooseFlashRowsCap(fits, args.cache.dtype, &plan->flash_rows_cap));
  }
  for (int s = 0; s < args.batch; ++s) {
    const int n_new = args.query_offsets[s + 1] - args.query_offsets[s];
    if (n_new == 0) continue;
    const int rows = n_new * group;
    const int cached = args.cached_lens[s];
    const int n_chunks = static_cast<int>(attn::chunkCount(cached + n_new - 1));
    if (rows <= kSplitMaxRows && fits(roundUp(rows, kRowGroup), false)) {
      REE_RETURN_IF_ERROR(addSplitSeq(args, s, rows, n_chunks, plan));
      continue;
    }
    for (int h = 0; h < args.n_kv_heads; ++h) {
      for (int r0 = 0; r0 < rows; r0 += plan->flash_rows_cap) {
        const int count = std::min(plan->flash_rows_cap, rows - r0);
        plan->flash_items.push_back(
            WorkItem{s, h, r0, count, 0, 0, args.query_offsets[s], cached, 0});
      }
    }
  }
  // kSmallRowGroup rows per thread when every split sequence has that few (decode with G <= 4).
  plan->split_rows_cap = roundUp(
      plan->split_max_rows, plan->split_max_rows <= kSmallRowGroup ? kSmallRowGroup : kRowGroup);
  // Longest tiles first: better tail balance (the order never changes the bits).
  std::stable_sort(plan->flash_items.begin(), plan->flash_items.end(),
                   [&](const WorkItem& x, const WorkItem& y) {
                     return x.cached + (x.row_begin + x.row_count - 1) / group >
                            y.cached + (y.row_begin + y.row_count - 1) / group;
                   });
  return Status::kSuccess;
}

size_t align256(size_t x) {
  return (x + 255) & ~size_t{255};
}

// The device copies of the block table (always explicit) and the work descriptions, one upload.
struct DeviceTables {
  const int32_t* block_table = nullptr;
  const SplitSeq* split_seqs = nullptr;
  const WorkItem* flash_items = nullptr;
};

Status uploadTables(const AttentionArgs& args, const AttentionPlan& plan, cudaStream_t stream,
                    DeviceTables* out) {
  const size_t table_count = static_cast<size_t>(args.batch) * args.cache.max_blocks_per_seq;
  std::vector<int32_t> table(table_count);
  for (size_t i = 0; i < table_count; ++i) {
    table[i] = args.cache.block_table ? args.cache.block_table[i] : static_cast<int32_t>(i);
  }
  const size_t split_off = align256(table.size() * sizeof(int32_t));
  const size_t flash_off = align256(split_off + plan.split_seqs.size() * sizeof(SplitSeq));
  const size_t upload_bytes = align256(flash_off + plan.flash_items.size() * sizeof(WorkItem));
  std::vector<unsigned char> staging(upload_bytes, 0);
  std::memcpy(staging.data(), table.data(), table.size() * sizeof(int32_t));
  if (!plan.split_seqs.empty()) {
    std::memcpy(staging.data() + split_off, plan.split_seqs.data(),
                plan.split_seqs.size() * sizeof(SplitSeq));
  }
  if (!plan.flash_items.empty()) {
    std::memcpy(staging.data() + flash_off, plan.flash_items.data(),
                plan.flash_items.size() * sizeof(WorkItem));
  }
  const unsigned char* tables = nullptr;
  REE_RETURN_IF_ERROR(
      cachedTables(TableKind::kAttention, staging.data(), upload_bytes, stream, &tables));
  out->block_table = reinterpret_cast<const int32_t*>(tables);
  out->split_seqs = reinterpret_cast<const SplitSeq*>(tables + split_off);
  out->flash_items = reinterpret_cast<const WorkItem*>(tables + flash_off);
  return Status::kSuccess;
}

// The split path's workspace, a separate per-call buffer: states maxima, sums, accumulators.
struct Workspace {
  size_t sum_off = 0, acc_off = 0, bytes = 0;
  Workspace(long long states, int head_dim) {
    sum_off = align256(states * sizeof(float));
    acc_off = align256(sum_off + states * sizeof(float));
    bytes = align256(acc_off + states * head_dim * sizeof(float));
  }
};

KernelParams chunkKernelParams(const AttentionArgs& args, const SmemFit& fits,
                               const int32_t* block_table, unsigned char* workspace,
                               const Workspace& layout) {
  const PagedKvCache& cache = args.cache;
  KernelParams p{};
  p.q = args.q;
  p.q_dtype = args.q_dtype;
  p.out = args.out;
  p.out_dtype = args.out_dtype;
  p.k = cache.k;
  p.v = cache.v;
  p.block_table = block_table;
  p.max_blocks_per_seq = cache.max_blocks_per_seq;
  p.block_size = cache.block_size;
  p.n_heads = args.n_heads;
  p.n_kv_heads = args.n_kv_heads;
  p.group = args.n_heads / args.n_kv_heads;
  p.head_dim = args.head_dim;
  p.scale = args.scale == 0.0f ? attn::defaultScale(args.head_dim) : args.scale;
  p.kv_stride = fits.kv_stride;
  p.split_chunks_per_block = 1;  // chosen by the launcher (launchSplit)
  p.vec16 = (args.head_dim * fits.kv_bytes) % 16 == 0 &&
            reinterpret_cast<uintptr_t>(cache.k) % 16 == 0 &&
            reinterpret_cast<uintptr_t>(cache.v) % 16 == 0;
  p.ws_max = reinterpret_cast<float*>(workspace);
  p.ws_sum = reinterpret_cast<float*>(workspace + layout.sum_off);
  p.ws_acc = reinterpret_cast<float*>(workspace + layout.acc_off);
  return p;
}

}  // namespace

void setPrefillKernelForBenchmark(PrefillKernel kernel) {
  g_prefill_kernel.store(static_cast<int>(kernel), std::memory_order_relaxed);
}

Status attention(const AttentionArgs& args, cudaStream_t stream) {
  REE_RETURN_IF_ERROR(validateAttentionArgs(args));
#if !REE_ATTENTION_HAVE_CRMATH
  return REE_FAIL(Status::kUnsupported, "attention: built without crmath.h (crExp/crRsqrt)");
#else
  if (args.batch == 0 || args.query_offsets[args.batch] == 0) return Status::kSuccess;
  int device = 0, smem_optin = 0;
  REE_CUDA_CHECK(cudaGetDevice(&device));
  REE_CUDA_CHECK(
      cudaDeviceGetAttribute(&smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  const SmemFit fits{args.head_dim, kvStrideElements(args.head_dim, args.cache.dtype),
                     dtypeSize(args.cache.dtype), smem_optin};
  AttentionPlan plan;
  REE_RETURN_IF_ERROR(planAttention(args, fits, &plan));
  DeviceTables tables;
  REE_RETURN_IF_ERROR(uploadTables(args, plan, stream, &tables));
  const Workspace layout(plan.states, args.head_dim);
  unsigned char* workspace = nullptr;
  if (plan.states > 0) {
    REE_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&workspace), layout.bytes, stream));
  }
  const KernelParams p = chunkKernelParams(args, fits, tables.block_table, workspace, layout);
  const Status status = dispatchStorageType(args.cache.dtype, "attention", [&](auto kv_tag) {
    return launchChunkKernels<decltype(kv_tag)>(
        p, tables.split_seqs, static_cast<int>(plan.split_seqs.size()), plan.split_work,
        plan.split_rows_cap, plan.merge_blocks, tables.flash_items,
        static_cast<int>(plan.flash_items.size()), plan.flash_rows_cap, plan.flash_tiled_rows,
        stream);
  });
  cudaError_t free_status = workspace ? cudaFreeAsync(workspace, stream) : cudaSuccess;
  REE_RETURN_IF_ERROR(status);
  REE_CUDA_CHECK(free_status);
  return Status::kSuccess;
#endif
}

Status appendKv(const KvAppendArgs& args, cudaStream_t stream) {
  REE_RETURN_IF_ERROR(validateKvAppendArgs(args));
  if (args.batch == 0 || args.query_offsets[args.batch] == 0) return Status::kSuccess;
  const int tokens = args.query_offsets[args.batch];
  std::vector<long long> dst(tokens);
  for (int s = 0; s < args.batch; ++s) {
    for (int token = args.query_offsets[s]; token < args.query_offsets[s + 1]; ++token) {
      const int64_t pos = args.cached_lens[s] + (token - args.query_offsets[s]);
      const int64_t block =
          kvBlockOf(args.block_table, args.max_blocks_per_seq, s, pos, args.block_size);
      dst[token] = block * args.block_size + pos % args.block_size;
    }
  }
  const unsigned char* slots = nullptr;
  Status status =
      cachedTables(TableKind::kKvSlots, dst.data(), dst.size() * sizeof(long long), stream, &slots);
  const auto* dst_dev = reinterpret_cast<const long long*>(slots);
  if (status == Status::kSuccess) {
    const int row_elems = args.n_kv_heads * args.head_dim;
    status = dispatchStorageType(args.new_dtype, "appendKv", [&](auto new_tag) {
      return launchAppend<decltype(new_tag)>(args, dst_dev, tokens, row_elems, stream);
    });
  }
  return status;
}

}  // namespace cuda
}  // namespace repops
}  // namespace ree
