// appendKv on CUDA: the kernel that writes new tokens' K/V rows into the paged cache (converted to
// the cache dtype) and its launch. The cache rows are worked out on the host (attention.cu).
// Internal: included by attention.cu only; not a header of its own.
#pragma once

#include <cuda_runtime.h>

#include "attention_common.cuh"
#include "chained_launch.cuh"
#include "common/dtype_dispatch.h"
#include "ree/core/cuda_check.h"
#include "ree/kernels/attention.h"

namespace ree {
namespace repops {
namespace cuda {
namespace {

using namespace attention_detail;  // NOLINT(google-build-using-namespace): one TU

// Writes one token's K/V rows; dst_slot[token] is the cache row (block * block_size + offset).
template <typename TIn, typename TCache>
__global__ void appendKvKernel(const TIn* __restrict__ k_new, const TIn* __restrict__ v_new,
                               TCache* k_cache, TCache* v_cache,
                               const long long* __restrict__ dst_slot, int row_elems) {
  waitForPredecessor();
  allowSuccessorLaunch();
  const long long token = blockIdx.x;
  const long long dst = dst_slot[token] * row_elems;
  for (int e = threadIdx.x; e < row_elems; e += blockDim.x) {
    k_cache[dst + e] = storeAs<TCache>(loadFloat(k_new[token * row_elems + e]));
    v_cache[dst + e] = storeAs<TCache>(loadFloat(v_new[token * row_elems + e]));
  }
}

template <typename TIn>
Status launchAppend(const KvAppendArgs& a, const long long* dst, int tokens, int row_elems,
                    cudaStream_t stream) {
  const int threads = row_elems < 256 ? ((row_elems + 31) / 32) * 32 : 256;
  const auto* k_new = static_cast<const TIn*>(a.k_new);
  const auto* v_new = static_cast<const TIn*>(a.v_new);
  REE_RETURN_IF_ERROR(dispatchStorageType(a.cache_dtype, "appendKv", [&](auto cache_tag) {
    using TCache = decltype(cache_tag);
    launchChained(appendKvKernel<TIn, TCache>, tokens, threads, 0, stream, k_new, v_new,
                  static_cast<TCache*>(a.k_cache), static_cast<TCache*>(a.v_cache), dst, row_elems);
  }));
  REE_CUDA_CHECK_LAUNCH();
  return Status::kSuccess;
}

}  // namespace
}  // namespace cuda
}  // namespace repops
}  // namespace ree
