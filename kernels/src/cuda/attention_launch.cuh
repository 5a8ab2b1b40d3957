// The kernel launches of one CUDA attention call: the split-KV chunk kernel and its merge (decode-
// like sequences; chunks per block by occupancy, head_dim 128 instantiated on its own), then the
// prefill tiles, tiled (attention_prefill_tiled.cuh) or through the chunk kernel's flash mode.
// Host code only: which kernel or block runs a chunk never changes its bits. Internal: included by
// attention.cu only (after the kernels); not a header of its own.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <tuple>

#include "attention_chunk_kernel.cuh"
#include "attention_common.cuh"
#include "attention_merge.cuh"
#include "attention_prefill_tiled.cuh"
#include "chained_launch.cuh"
#include "ree/core/cuda_check.h"
#include "shared_memory.cuh"

namespace ree {
namespace repops {
namespace cuda {
namespace {

using namespace attention_detail;  // NOLINT(google-build-using-namespace): one TU

// Chunks per split block: the shortest run whose blocks all fit on the GPU at once (one wave: the
// most parallelism without a tail wave); when even runs of 8 do not fit, a run of
// kSplitManyWavesRun. Longer runs share a block's setup (Q tile, work description) among more
// chunks. Never changes the bits.
int chooseChunksPerBlock(const SplitWork& work, long long resident_blocks) {
  for (int i = 0; i < kSplitRunChoices; ++i) {
    if (work.blocks[i] <= resident_blocks) return 1 << i;
  }
  return kSplitManyWavesRun;
}

// Blocks of `kernel` (threads, shared bytes) resident on the whole current device at once.
// Cached per (kernel, bytes, device): the split path asks once per attention call, i.e. once per
// layer and step.
template <typename Kernel>
Status residentBlocks(Kernel kernel, int threads, size_t bytes, long long* blocks) {
  int device = 0;
  REE_CUDA_CHECK(cudaGetDevice(&device));
  static std::mutex mutex;
  static std::map<std::tuple<const void*, size_t, int>, long long> cache;
  const auto key = std::make_tuple(reinterpret_cast<const void*>(kernel), bytes, device);
  std::lock_guard<std::mutex> lock(mutex);
  auto found = cache.find(key);
  if (found == cache.end()) {
    int sm_count = 0, per_sm = 0;
    REE_CUDA_CHECK(cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, device));
    REE_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, bytes));
    found = cache.emplace(key, static_cast<long long>(std::max(per_sm, 1)) * sm_count).first;
  }
  *blocks = found->second;
  return Status::kSuccess;
}

template <typename T, int kRows, int kHeadDim>
Status launchSplit(KernelParams p, const SplitSeq* split_seqs, int n_split_seqs,
                   const SplitWork& work, size_t bytes, cudaStream_t stream) {
  auto kernel = attentionChunkKernel<T, false, kRows, kHeadDim>;
  REE_RETURN_IF_ERROR(allowFullSharedMemory(kernel));
  long long resident = 0;
  REE_RETURN_IF_ERROR(residentBlocks(kernel, kSplitThreads, bytes, &resident));
  p.split_chunks_per_block = chooseChunksPerBlock(work, resident);
  const int split_blocks =
      p.n_kv_heads * ((work.max_chunks + p.split_chunks_per_block - 1) / p.split_chunks_per_block);
  launchChained(kernel, dim3(split_blocks, n_split_seqs), kSplitThreads, bytes, stream, p,
                static_cast<const WorkItem*>(nullptr), split_seqs);
  REE_CUDA_CHECK_LAUNCH();
  return Status::kSuccess;
}

// Decode models almost all have head_dim 128; that case gets its own instantiation.
template <typename T, int kRows>
Status launchSplitHeadDim(const KernelParams& p, const SplitSeq* split_seqs, int n_split_seqs,
                          const SplitWork& work, size_t bytes, cudaStream_t stream) {
  if (p.head_dim == 128) {
    return launchSplit<T, kRows, 128>(p, split_seqs, n_split_seqs, work, bytes, stream);
  }
  return launchSplit<T, kRows, 0>(p, split_seqs, n_split_seqs, work, bytes, stream);
}

// The merge kernel: head_dim 128 with constant strides; otherwise one or two d's per thread.
Status launchMerge(const KernelParams& p, const SplitSeq* split_seqs, int n_split_seqs,
                   int merge_blocks, cudaStream_t stream) {
  const dim3 grid(merge_blocks, n_split_seqs);
  if (p.head_dim == 128) {
    launchChained(attentionMergeKernel<128, 1>, grid, kMergeThreads, 0, stream, p, split_seqs);
  } else if (p.head_dim <= kMergeThreads) {
    launchChained(attentionMergeKernel<0, 1>, grid, kMergeThreads, 0, stream, p, split_seqs);
  } else {
    launchChained(attentionMergeKernel<0, kMergeMaxD>, grid, kMergeThreads, 0, stream, p,
                  split_seqs);
  }
  REE_CUDA_CHECK_LAUNCH();
  return Status::kSuccess;
}

template <typename T, int kR, int kHeadDim>
Status launchTiled(const KernelParams& p, const WorkItem* flash_items, int n_flash,
                   cudaStream_t stream) {
  auto kernel = attentionTiledPrefillKernel<T, kR, kHeadDim>;
  const size_t bytes = tiledLayout(p.head_dim, p.rows_cap, p.kv_stride, sizeof(T)).bytes;
  REE_RETURN_IF_ERROR(allowFullSharedMemory(kernel));
  launchChained(kernel, n_flash, kTiledThreads, bytes, stream, p, flash_items);
  REE_CUDA_CHECK_LAUNCH();
  return Status::kSuccess;
}

// The tiled prefill kernel with kR rows per thread; head_dim 128 has its own instantiation.
template <typename T, int kR>
Status launchTiledHeadDim(const KernelParams& p, const WorkItem* flash_items, int n_flash,
                          cudaStream_t stream) {
  constexpr int kFixedHeadDim = kR >= 4 ? 128 : 0;  // 2 rows per thread: head_dim > 128 only
  if (kFixedHeadDim > 0 && p.head_dim == kFixedHeadDim) {
    return launchTiled<T, kR, kFixedHeadDim>(p, flash_items, n_flash, stream);
  }
  return launchTiled<T, kR, 0>(p, flash_items, n_flash, stream);
}

template <typename T>
Status launchTiledRows(const KernelParams& p, int rows_per_thread, const WorkItem* flash_items,
                       int n_flash, cudaStream_t stream) {
  switch (rows_per_thread) {
    case 8:
      return launchTiledHeadDim<T, 8>(p, flash_items, n_flash, stream);
    case 4:
      return launchTiledHeadDim<T, 4>(p, flash_items, n_flash, stream);
    default:
      return launchTiledHeadDim<T, 2>(p, flash_items, n_flash, stream);
  }
}

template <typename T>
Status launchChunkKernels(const KernelParams& base, const SplitSeq* split_seqs, int n_split_seqs,
                          const SplitWork& split_work, int split_rows_cap, int merge_blocks,
                          const WorkItem* flash_items, int n_flash, int flash_rows_cap,
                          int flash_tiled_rows, cudaStream_t stream) {
  if (n_split_seqs > 0) {
    KernelParams p = base;
    p.rows_cap = split_rows_cap;
    const size_t bytes = smemLayout(p.head_dim, p.rows_cap, p.kv_stride, sizeof(T), false).bytes;
    if (split_rows_cap % kRowGroup != 0) {  // every sequence has <= kSmallRowGroup rows
      REE_RETURN_IF_ERROR((launchSplitHeadDim<T, kSmallRowGroup>(p, split_seqs, n_split_seqs,
                                                                 split_work, bytes, stream)));
    } else {
      REE_RETURN_IF_ERROR((launchSplitHeadDim<T, kRowGroup>(p, split_seqs, n_split_seqs, split_work,
                                                            bytes, stream)));
    }
    REE_RETURN_IF_ERROR(launchMerge(p, split_seqs, n_split_seqs, merge_blocks, stream));
  }
  if (n_flash > 0 && flash_tiled_rows > 0) {
    KernelParams p = base;
    p.rows_cap = flash_rows_cap;
    REE_RETURN_IF_ERROR(launchTiledRows<T>(p, flash_tiled_rows, flash_items, n_flash, stream));
  } else if (n_flash > 0) {
    KernelParams p = base;
    p.rows_cap = flash_rows_cap;
    const size_t bytes = smemLayout(p.head_dim, p.rows_cap, p.kv_stride, sizeof(T), true).bytes;
    REE_RETURN_IF_ERROR((allowFullSharedMemory(attentionChunkKernel<T, true, kRowGroup, 0>)));
    launchChained(attentionChunkKernel<T, true, kRowGroup, 0>, n_flash, kFlashThreads, bytes,
                  stream, p, flash_items, static_cast<const SplitSeq*>(nullptr));
    REE_CUDA_CHECK_LAUNCH();
  }
  return Status::kSuccess;
}

}  // namespace
}  // namespace cuda
}  // namespace repops
}  // namespace ree
