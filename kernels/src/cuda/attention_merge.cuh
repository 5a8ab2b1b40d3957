// The split-KV merge kernel of CUDA attention (docs/repops-spec/attention.md): after the chunk
// kernel has stored each chunk's state (attention_chunk_kernel.cuh), one block per row folds them
// left to right with the spec's merge and stores the output. Launched by attention_launch.cuh.
// Internal: included by attention.cu only (after attention_common.cuh); not a header of its own.
#pragma once

#include <cuda_runtime.h>

#include "attention_common.cuh"
#include "chained_launch.cuh"
#include "common/storage_element.h"
#include "ree/kernels/attention.h"

namespace ree {
namespace repops {
namespace cuda {
namespace {

using namespace attention_detail;  // NOLINT(google-build-using-namespace): one TU

constexpr int kMergeMaxD = (kAttentionMaxHeadDim + kMergeThreads - 1) / kMergeThreads;
constexpr int kMergeTile = 32;  // chunk states per load tile of a merge thread (registers per d)
static_assert(kMergeThreads % (2 * kMergeTile) == 0, "factor tiles hold whole pairs of load tiles");

// Loads the accumulators of chunks j0 .. j0 + kMergeTile - 1 (those < n) for this thread's d's.
// kHeadDim > 0 makes the chunk stride a constant, so the addresses are immediate offsets.
template <int kHeadDim, int kD>
__device__ __forceinline__ void loadMergeTile(const float* acc_row, int head_dim, int j0, int n,
                                              float (&v)[kMergeTile][kD]) {
  const int stride = kHeadDim > 0 ? kHeadDim : head_dim;
  const float* src = acc_row + static_cast<long long>(j0) * stride;
#pragma unroll
  for (int i = 0; i < kMergeTile; ++i) {
#pragma unroll
    for (int k = 0; k < kD; ++k) {
      const int d = static_cast<int>(threadIdx.x) + k * kMergeThreads;
      v[i][k] = (j0 + i < n && d < head_dim) ? src[i * stride + k * kMergeThreads] : 0.0f;
    }
  }
}

// Folds chunks j0 .. j0 + kMergeTile - 1 (those < n) into the running state, in chunk order.
// factors[j - tile] = (running factor, chunk factor, chunk sum * chunk factor) of chunk j.
template <int kD>
__device__ __forceinline__ void foldMergeTile(const float4* factors, int tile, int j0, int n,
                                              const float (&v)[kMergeTile][kD], float& sum,
                                              float (&acc)[kD]) {
  auto step = [&](int i) {
    const float4 f = factors[j0 + i - tile];
    sum = sum * f.x + f.z;  // mergeValue: two rounded products (f.z is l_j * b), one rounded sum
#pragma unroll
    for (int k = 0; k < kD; ++k)
      acc[k] = attn::mergeValue(acc[k], f.x, v[i][k], f.y);
  };
  if (j0 + kMergeTile <= n) {
#pragma unroll
    for (int i = 0; i < kMergeTile; ++i)
      step(i);
  } else {
#pragma unroll
    for (int i = 0; i < kMergeTile; ++i) {
      if (j0 + i < n) step(i);
    }
  }
}

// Merges the chunk states of one row left to right (split path); one thread per d (two for
// head_dim > 128). The running maxima are a prefix maximum (exact, so computed as a parallel
// scan), and the factors a = crExp(M_{j-1} - M_j) and b = crExp(m_j - M_j) of a tile of
// kMergeThreads chunks are computed in parallel, a chunk per thread; then each thread folds its
// d's. Chunk 0 takes a = +0 and b = 1 against a running state of -0: (-0 * +0) + x * 1 = x for
// every x (also -0, inf and NaN), which is the spec's "chunk 0 initialises", without a branch per
// chunk. A thread's accumulator loads are issued a tile of kMergeTile chunks ahead of its fold
// (the first tile before the scan), so the states arrive in about one memory latency per tile
// while the fold, a dependent chain, runs. (The previous fold, with a branch and 64-bit index
// arithmetic per chunk and one round trip per 8 chunks, made a batch-1 decode call 3 us slower on
// an H100: docs/benchmarks-history.md.)
//
// The work description is read before waitForPredecessor() (uploaded by a copy, never written by
// a kernel); the chunk states only after it.
template <int kHeadDim, int kD>
__global__ void __launch_bounds__(kMergeThreads)
    attentionMergeKernel(KernelParams p, const SplitSeq* __restrict__ split_seqs) {
  __shared__ float4 factors[kMergeThreads];
  __shared__ float prefix_max[kMergeThreads];
  __shared__ float warp_max[kMergeThreads / 32];
  const SplitSeq ss = split_seqs[blockIdx.y];
  const int local = static_cast<int>(blockIdx.x);
  if (local >= p.n_kv_heads * ss.rows) return;  // uniform over the block
  const int kv_head = local / ss.rows;
  const int row = local - kv_head * ss.rows;
  const long long state_row =
      ss.state_base + (static_cast<long long>(kv_head) * ss.rows + row) * ss.n_chunks;
  const int n = static_cast<int>(attn::chunkCount(ss.cached + row / p.group));
  const long long token = ss.token_begin + row / p.group;
  const int head = kv_head * p.group + row % p.group;
  const int head_dim = kHeadDim > 0 ? kHeadDim : p.head_dim;
  const float* acc_row = p.ws_acc + state_row * head_dim + threadIdx.x;
  waitForPredecessor();
  allowSuccessorLaunch();
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  float acc[kD];
#pragma unroll
  for (int k = 0; k < kD; ++k)
    acc[k] = -0.0f;
  float sum = -0.0f;
  float carry = -__int_as_float(0x7f800000);  // M of the chunk before this factor tile
  float tile_a[kMergeTile][kD], tile_b[kMergeTile][kD];
  loadMergeTile<kHeadDim, kD>(acc_row, head_dim, 0, n, tile_a);
  for (int tile = 0; tile < n; tile += kMergeThreads) {
    const int j = tile + static_cast<int>(threadIdx.x);
    const float m = j < n ? p.ws_max[state_row + j] : -__int_as_float(0x7f800000);
    const float l = j < n ? p.ws_sum[state_row + j] : 0.0f;
    float running = m;
#pragma unroll
    for (int offset = 1; offset < 32; offset *= 2) {
      const float other = __shfl_up_sync(0xffffffffu, running, offset);
      if (lane >= offset) running = attn::maxStep(running, other);
    }
    if (lane == 31) warp_max[warp] = running;
    __syncthreads();
    for (int w = 0; w < warp; ++w)
      running = attn::maxStep(running, warp_max[w]);
    running = attn::maxStep(running, carry);
    prefix_max[threadIdx.x] = running;
    __syncthreads();
    if (j < n) {
      float4 f;
      if (j == 0) {
        f = make_float4(0.0f, 1.0f, l, 0.0f);
      } else {
        const float before = threadIdx.x == 0 ? carry : prefix_max[threadIdx.x - 1];
        const float scores[2] = {before, m};
        float ab[2];
        attn::chunkWeights(scores, running, ab);  // = rescaleFactor(before / m, running)
        f = make_float4(ab[0], ab[1], l * ab[1], 0.0f);
      }
      factors[threadIdx.x] = f;
    }
    const int tile_end = min(tile + kMergeThreads, n);
    carry = prefix_max[tile_end - tile - 1];
    __syncthreads();
    // Load tiles alternate between tile_a and tile_b (a factor tile holds an even number of them,
    // so each factor tile starts in tile_a).
    for (int j0 = tile; j0 < tile_end; j0 += 2 * kMergeTile) {
      if (j0 + kMergeTile < n)
        loadMergeTile<kHeadDim, kD>(acc_row, head_dim, j0 + kMergeTile, n, tile_b);
      foldMergeTile<kD>(factors, tile, j0, n, tile_a, sum, acc);
      if (j0 + kMergeTile < n) {
        if (j0 + 2 * kMergeTile < n) {
          loadMergeTile<kHeadDim, kD>(acc_row, head_dim, j0 + 2 * kMergeTile, n, tile_a);
        }
        foldMergeTile<kD>(factors, tile, j0 + kMergeTile, n, tile_b, sum, acc);
      }
    }
    __syncthreads();  // the next factor tile overwrites the shared arrays
  }
#pragma unroll
  for (int k = 0; k < kD; ++k) {
    const int d = static_cast<int>(threadIdx.x) + k * kMergeThreads;
    if (d < head_dim) {
      storeStorageElement(p.out, p.out_dtype, (token * p.n_heads + head) * head_dim + d,
                          attn::finalOutput(acc[k], sum));
    }
  }
}

}  // namespace
}  // namespace cuda
}  // namespace repops
}  // namespace ree
