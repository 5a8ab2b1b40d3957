// CUDA argmax and sampling (docs/repops-spec/sampling.md). The candidate order is a sort of
// unique 64-bit keys (so any correct sort gives one permutation); weights, canonical prefix sums
// and comparisons are the CPU's operations, spread over threads without changing any of them.
#include <cub/cub.cuh>

#include <climits>
#include <cmath>
#include <cstdint>

#include "common/sampling_args.h"
#include "pinned_upload.cuh"
#include "ree/core/cuda_check.h"
#include "ree/kernels/sampling.h"

namespace ree::repops::cuda {
namespace {

constexpr int kArgmaxThreads = 1024;
constexpr int kRowThreads = 512;
// 16-byte loads per thread kept in flight by the argmax scan: a block reads a row of 128k
// logits in four rounds of loads instead of one dependent load per element and thread (the
// scan was bound by memory latency: about 200 us per row on an H100).
constexpr int kArgmaxUnroll = 8;

struct Best {
  float value;
  int64_t index;
};

__device__ __forceinline__ void considerLogit(float value, int64_t index, Best& best) {
  if (argmaxBetter(value, index, best.value, best.index)) best = Best{value, index};
}

__device__ __forceinline__ void considerFour(float4 v, int64_t first, Best& best) {
  considerLogit(v.x, first, best);
  considerLogit(v.y, first + 1, best);
  considerLogit(v.z, first + 2, best);
  considerLogit(v.w, first + 3, best);
}

// This thread's best of the row: 16-byte loads, kArgmaxUnroll of them in flight, where the row
// starts on 16 bytes; single elements for the rest.
template <int kThreads>
__device__ Best threadArgmax(const float* row, int64_t vocab) {
  Best best{row[0], 0};
  int64_t scalar_from = 0;
  if ((reinterpret_cast<uintptr_t>(row) & 15) == 0) {
    const float4* quads = reinterpret_cast<const float4*>(row);
    const int64_t count = vocab / 4;
    int64_t i = threadIdx.x;
    for (; i + (kArgmaxUnroll - 1) * kThreads < count; i += kArgmaxUnroll * kThreads) {
      float4 v[kArgmaxUnroll];
#pragma unroll
      for (int u = 0; u < kArgmaxUnroll; ++u)
        v[u] = __ldg(quads + i + u * kThreads);
#pragma unroll
      for (int u = 0; u < kArgmaxUnroll; ++u)
        considerFour(v[u], 4 * (i + u * kThreads), best);
    }
    for (; i < count; i += kThreads)
      considerFour(__ldg(quads + i), 4 * i, best);
    scalar_from = 4 * count;
  }
  for (int64_t i = scalar_from + threadIdx.x; i < vocab; i += kThreads)
    considerLogit(row[i], i, best);
  return best;
}

// Block-wide argmax of one row; every thread returns the winner. The selection is a total order
// (argmaxBetter), so the result does not depend on how the row is split or scanned.
template <int kThreads>
__device__ Best blockArgmax(const float* row, int64_t vocab) {
  __shared__ float values[kThreads];
  __shared__ int64_t indices[kThreads];
  const Best best = threadArgmax<kThreads>(row, vocab);
  values[threadIdx.x] = best.value;
  indices[threadIdx.x] = best.index;
  __syncthreads();
  for (int width = kThreads / 2; width > 0; width /= 2) {
    if (threadIdx.x < width) {
      const int other = threadIdx.x + width;
      if (argmaxBetter(values[other], indices[other], values[threadIdx.x], indices[threadIdx.x])) {
        values[threadIdx.x] = values[other];
        indices[threadIdx.x] = indices[other];
      }
    }
    __syncthreads();
  }
  Best result{values[0], indices[0]};
  __syncthreads();
  return result;
}

__global__ void __launch_bounds__(kArgmaxThreads)
    argmaxKernel(const float* logits, int64_t vocab, int32_t* out) {
  const float* row = logits + blockIdx.x * vocab;
  Best best = blockArgmax<kArgmaxThreads>(row, vocab);
  if (threadIdx.x == 0) out[blockIdx.x] = static_cast<int32_t>(best.index);
}

__global__ void sortKeysKernel(const float* logits, int64_t batch, int64_t vocab, uint64_t* keys,
                               int* offsets) {
  const int64_t total = batch * vocab;
  for (int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; k < total;
       k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t index = k % vocab;
    keys[k] = samplingSortKey(logits[k], static_cast<uint32_t>(index));
    if (index == 0) offsets[k / vocab] = static_cast<int>(k);
  }
  if (blockIdx.x == 0 && threadIdx.x == 0) offsets[batch] = static_cast<int>(total);
}

// Lowest j in [0, count) with predicate(prefix_j), where prefix_j is CanonicalPrefix's value:
// chunk c's threads recompute the chunk's running partial from the chunk base (the merge of the
// partials of chunks 0..c-1, `bases[c]`), exactly as the sequential CanonicalPrefix does.
template <typename Predicate>
__device__ int64_t firstPrefixWhere(const float* weights, const float* bases, int64_t count,
                                    Predicate predicate, unsigned long long* shared_first) {
  if (threadIdx.x == 0) *shared_first = ULLONG_MAX;
  __syncthreads();
  const int64_t chunks = (count + kReduceChunk - 1) / kReduceChunk;
  for (int64_t c = threadIdx.x; c < chunks; c += blockDim.x) {
    const int64_t begin = c * kReduceChunk;
    const int64_t end = begin + kReduceChunk < count ? begin + kReduceChunk : count;
    float partial = 0.0f;
    for (int64_t j = begin; j < end; ++j) {
      partial = partial + weights[j];
      const float prefix = c == 0 ? partial : bases[c] + partial;
      if (predicate(prefix)) {
        atomicMin(shared_first, static_cast<unsigned long long>(j));
        break;
      }
    }
  }
  __syncthreads();
  const unsigned long long first = *shared_first;
  __syncthreads();
  return first == ULLONG_MAX ? -1 : static_cast<int64_t>(first);
}

// Fills bases[c] (merge of chunk partials 0..c-1) for the first `count` weights and returns the
// canonical sum of all of them (to every thread).
__device__ float chunkBases(const float* weights, int64_t count, float* partials, float* bases,
                            float* shared_total) {
  const int64_t chunks = (count + kReduceChunk - 1) / kReduceChunk;
  for (int64_t c = threadIdx.x; c < chunks; c += blockDim.x) {
    const int64_t begin = c * kReduceChunk;
    const int64_t end = begin + kReduceChunk < count ? begin + kReduceChunk : count;
    float partial = 0.0f;
    for (int64_t j = begin; j < end; ++j)
      partial = partial + weights[j];
    partials[c] = partial;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    ChunkMerge merge;
    for (int64_t c = 0; c < chunks; ++c) {
      bases[c] = merge.total;
      merge.add(partials[c]);
    }
    *shared_total = merge.total;
  }
  __syncthreads();
  const float total = *shared_total;
  __syncthreads();
  return total;
}

// One block per row: argmax shortcut, weights of the kept candidates, top-p cutoff, inverse CDF.
__global__ void sampleRowKernel(const float* logits, int64_t vocab, const SamplingParams* params,
                                const uint64_t* sorted_keys, float* weights_all,
                                float* partials_all, float* bases_all, int32_t* out) {
  __shared__ unsigned long long shared_first;
  __shared__ float shared_total;
  const int64_t b = blockIdx.x;
  const float* row = logits + b * vocab;
  const SamplingParams p = params[b];
  const Best best = blockArgmax<kRowThreads>(row, vocab);
  if (!isfinite(best.value) || p.temperature == 0.0f || p.top_k == 1) {
    if (threadIdx.x == 0) out[b] = static_cast<int32_t>(best.index);
    return;
  }
  const uint64_t* keys = sorted_keys + b * vocab;
  float* weights = weights_all + b * vocab;
  const int64_t chunk_stride = (vocab + kReduceChunk - 1) / kReduceChunk;
  float* partials = partials_all + b * chunk_stride;
  float* bases = bases_all + b * chunk_stride;
  const int64_t kept = (p.top_k <= 0 || p.top_k >= vocab) ? vocab : p.top_k;
  for (int64_t j = threadIdx.x; j < kept; j += blockDim.x) {
    weights[j] = samplingWeight(row[static_cast<uint32_t>(keys[j])], best.value, p.temperature);
  }
  __syncthreads();

  int64_t nucleus = kept;
  float total = chunkBases(weights, kept, partials, bases, &shared_total);
  if (p.top_p < 1.0f) {
    const float threshold = p.top_p * total;
    int64_t first = firstPrefixWhere(
        weights, bases, kept, [threshold](float prefix) { return prefix >= threshold; },
        &shared_first);
    if (first >= 0) nucleus = first + 1;
    if (nucleus < kept) total = chunkBases(weights, nucleus, partials, bases, &shared_total);
  }
  const float target = samplingUniform(p.seed, p.sequence, p.step) * total;
  int64_t chosen = firstPrefixWhere(
      weights, bases, nucleus, [target](float prefix) { return prefix > target; }, &shared_first);
  if (chosen < 0) chosen = nucleus - 1;
  if (threadIdx.x == 0) out[b] = static_cast<int32_t>(static_cast<uint32_t>(keys[chosen]));
}

// Stream-ordered scratch memory released on every exit path.
struct Scratch {
  cudaStream_t stream;
  void* pointers[8] = {};
  int used = 0;
  explicit Scratch(cudaStream_t s) : stream(s) {}
  template <typename T>
  cudaError_t get(T** out, size_t bytes) {
    void* p = nullptr;
    cudaError_t err = cudaMallocAsync(&p, bytes > 0 ? bytes : 1, stream);
    if (err == cudaSuccess) pointers[used++] = p;
    *out = static_cast<T*>(p);
    return err;
  }
  ~Scratch() {
    for (int i = 0; i < used; ++i)
      cudaFreeAsync(pointers[i], stream);
  }
};

}  // namespace

Status argmax(const float* logits, int64_t batch, int64_t vocab, int32_t* out,
              cudaStream_t stream) {
  REE_RETURN_IF_ERROR(validateLogitsArgs("argmax", logits, batch, vocab, out));
  REE_CHECK_ARG(batch <= INT32_MAX, "argmax: batch=%lld exceeds 2^31 - 1 (CUDA grid)",
                static_cast<long long>(batch));
  if (batch == 0) return Status::kSuccess;
  argmaxKernel<<<static_cast<unsigned>(batch), kArgmaxThreads, 0, stream>>>(logits, vocab, out);
  REE_CUDA_CHECK_LAUNCH();
  return Status::kSuccess;
}

Status sample(const float* logits, int64_t batch, int64_t vocab, const SamplingParams* params,
              int32_t* out, cudaStream_t stream) {
  REE_RETURN_IF_ERROR(validateSampleArgs(logits, batch, vocab, params, out));
  if (batch == 0) return Status::kSuccess;
  REE_CHECK_ARG(batch * vocab <= INT32_MAX, "sample: batch * vocab = %lld exceeds 2^31 - 1",
                static_cast<long long>(batch * vocab));
  const int64_t total = batch * vocab;
  const int64_t chunk_stride = (vocab + kReduceChunk - 1) / kReduceChunk;
  Scratch scratch(stream);
  SamplingParams* device_params = nullptr;
  uint64_t* keys = nullptr;
  uint64_t* sorted = nullptr;
  int* offsets = nullptr;
  float* weights = nullptr;
  float* partials = nullptr;
  float* bases = nullptr;
  REE_CUDA_CHECK(scratch.get(&device_params, sizeof(SamplingParams) * batch));
  REE_CUDA_CHECK(scratch.get(&keys, sizeof(uint64_t) * total));
  REE_CUDA_CHECK(scratch.get(&sorted, sizeof(uint64_t) * total));
  REE_CUDA_CHECK(scratch.get(&offsets, sizeof(int) * (batch + 1)));
  REE_CUDA_CHECK(scratch.get(&weights, sizeof(float) * total));
  REE_CUDA_CHECK(scratch.get(&partials, sizeof(float) * batch * chunk_stride));
  REE_CUDA_CHECK(scratch.get(&bases, sizeof(float) * batch * chunk_stride));
  // Through pinned memory: a copy from the caller's pageable array would make the host wait for
  // everything queued on the stream (the forward pass whose logits these are).
  REE_RETURN_IF_ERROR(uploadPinned(device_params, params, sizeof(SamplingParams) * batch, stream));

  int64_t blocks = (total + 255) / 256;
  sortKeysKernel<<<static_cast<unsigned>(blocks < 65536 ? blocks : 65536), 256, 0, stream>>>(
      logits, batch, vocab, keys, offsets);
  REE_CUDA_CHECK_LAUNCH();

  size_t temp_bytes = 0;
  REE_CUDA_CHECK(cub::DeviceSegmentedRadixSort::SortKeys(
      nullptr, temp_bytes, keys, sorted, static_cast<int>(total), static_cast<int>(batch), offsets,
      offsets + 1, 0, 64, stream));
  void* temp = nullptr;
  REE_CUDA_CHECK(scratch.get(&temp, temp_bytes));
  REE_CUDA_CHECK(cub::DeviceSegmentedRadixSort::SortKeys(
      temp, temp_bytes, keys, sorted, static_cast<int>(total), static_cast<int>(batch), offsets,
      offsets + 1, 0, 64, stream));

  sampleRowKernel<<<static_cast<unsigned>(batch), kRowThreads, 0, stream>>>(
      logits, vocab, device_params, sorted, weights, partials, bases, out);
  REE_CUDA_CHECK_LAUNCH();
  return Status::kSuccess;
}

}  // namespace ree::repops::cuda
