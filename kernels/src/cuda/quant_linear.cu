// CUDA linear over GGUF-quantised weights (quant_linear.h), repops-1's bits.
//
// GEMV (M <= 64), weight rows and x rows 16-byte aligned (every 8B-shaped GGUF layer): one lane
// per output feature, quant_linear_lanes.cuh. Each lane dequantises its row's blocks once for up
// to 8 rows of x, which every lane reads at the same shared-memory address; the warps of a block
// split K and their chunk partials are merged in chunk order.
//
// GEMV, other alignments (the window kernel below): a block owns 16 weight rows (two per warp)
// and walks K in windows of 4096 (32 chunks of 128). For each window the block stages the x rows
// of its row block in shared memory as fp32 (each 128-wide chunk padded to 132 floats, so that
// the lanes' float4 reads fall in distinct banks); each warp copies the window's bytes of one
// weight row (32 chunks of blocks, contiguous in memory) into its own shared buffer with
// coalesced cp.async (or bytes when unaligned), double-buffered: the next row's copy is in flight
// while the current one is computed. Lane c then owns chunk c of the window: it dequantises its
// blocks 32 elements at a time into registers (quant_blocks.h, the one source of gguf-dequant.md's
// values) and runs the chunk's fma chain from +0 in k order for every row of x (linear.md, step
// 2). The 32 chunk partials go to shared memory and lane r adds them to row r's running total in
// chunk order, window after window: linear.md's merge. So every output is exactly repops-1's
// chain over the dequantised weights, whichever kernel runs.
//
// M > 64: slices of weight rows are dequantised to an fp32 scratch buffer (the same functions)
// and cuda::linear runs on them (its GEMM for these shapes): the same values, the same bits.
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <type_traits>

#include "chained_launch.cuh"
#include "grid.cuh"
#include "quant_linear_lanes.cuh"
#include "ree/core/cuda_check.h"
#include "ree/kernels/quant_linear.h"
#include "ree/kernels/reduce.h"
#include "shared_memory.cuh"

namespace ree::repops::cuda {
namespace {

constexpr int kWarps = 8;
constexpr int kRowsPerWarp = 2;
constexpr int kRowsPerBlock = kWarps * kRowsPerWarp;
constexpr int kWindowChunks = 32;  // one chunk per lane
constexpr int kWindowK = kWindowChunks * kReduceChunk;
constexpr int kXChunkFloats = kReduceChunk + 4;  // +4: lanes' float4 reads in distinct banks
constexpr int kXRowFloats = kWindowChunks * kXChunkFloats;
constexpr int kGemvMaxRows = 64;  // kAuto: the GEMV up to this M (linear.cu's crossover)

// The lane GEMV's operands (quant_lanes::Args) and whether w's rows are 16-byte aligned.
struct QuantDeviceArgs : quant_lanes::Args {
  int w_aligned;  // w and w_row_bytes 16-byte aligned: cp.async copies
};

// The operands of both GEMV kernels from the caller's arguments.
quant_lanes::Args deviceArgs(const QuantLinearArgs& args) {
  const LinearArgs& l = args.linear;
  quant_lanes::Args a;
  a.x = l.x;
  a.w = static_cast<const unsigned char*>(l.w);
  a.bias = static_cast<const float*>(l.bias);
  a.y = l.y;
  a.x_stride = l.xStride();
  a.w_row_bytes = args.wRowBytes();
  a.y_stride = l.yStride();
  a.m = static_cast<int>(l.m);
  a.n = static_cast<int>(l.n);
  a.k = static_cast<int>(l.k);
  a.y_is_bf16 = l.y_dtype == DType::kBF16 ? 1 : 0;
  a.accumulate = l.accumulate ? 1 : 0;
  a.w_is_constant = l.w_is_constant ? 1 : 0;
  a.ring = quant_lanes::kMaxRing;  // the lane GEMV's launcher chooses
  return a;
}

template <QuantType kType>
struct QuantLayout {
  static constexpr int kBlockElems = quantBlockElems(kType);
  static constexpr int kBlockBytes = quantBlockBytes(kType);
  static constexpr int kWindowBytes = kWindowK / kBlockElems * kBlockBytes;
  static_assert(kWindowBytes % 16 == 0, "windows start 16-byte aligned in an aligned row");
};

template <QuantType kType, int kRows>
struct GemvShared {
  static constexpr int kXBytes = kRows * kXRowFloats * 4;
  static constexpr int kWBytes = kWarps * 2 * QuantLayout<kType>::kWindowBytes;
  static constexpr int kMergeBytes = kWarps * kRows * kWindowChunks * 4;
  static constexpr int kBytes = kXBytes + kWBytes + kMergeBytes;
  static_assert(kBytes <= 227 * 1024, "fits an H100's shared memory per block");
};

// Copies `bytes` of the weight row at `src` (a window) to the warp's shared buffer: 16-byte
// cp.async pieces when aligned, else one byte per lane and step (then visible after __syncwarp).
__device__ __forceinline__ void copyWindow(unsigned char* dst, const unsigned char* src, int bytes,
                                           bool aligned, int lane) {
  if (aligned) {
    for (int piece = lane; piece * 16 < bytes; piece += 32) {
      const int n = min(16, bytes - piece * 16);
      cpAsync16(dst + piece * 16, src + piece * 16, n);
    }
  } else {
    for (int i = lane; i < bytes; i += 32)
      dst[i] = src[i];
  }
}

// The chunk partials of lane `chunk` (chunk c of a window of one weight row held at `wb`) for
// kRows rows of x: each an fma chain from +0 over the chunk's `valid` k, in order.
// fma chains of kRows rows of x over the n (32 or 64) dequantised weights w, in order.
template <int kRows, int kCount>
__device__ __forceinline__ void chainSegment(const float* x, const float (&w)[kCount],
                                             float (&partial)[kRows]) {
#pragma unroll
  for (int j = 0; j < kCount; j += 4) {
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const float4 v = *reinterpret_cast<const float4*>(x + r * kXRowFloats + j);
      partial[r] = fmaF32(v.x, w[j], partial[r]);
      partial[r] = fmaF32(v.y, w[j + 1], partial[r]);
      partial[r] = fmaF32(v.z, w[j + 2], partial[r]);
      partial[r] = fmaF32(v.w, w[j + 3], partial[r]);
    }
  }
}

// The chunk partials of lane `chunk` (chunk c of a window of one weight row held at `wb`) for
// kRows rows of x: each an fma chain from +0 over the chunk's `valid` k, in order. The K types'
// chunks are half a super-block (valid = 128 always), dequantised 64 elements at a time (two
// sub-blocks share their code bytes).
template <QuantType kType, int kRows>
__device__ __forceinline__ void chunkPartials(const unsigned char* wb, const float* xs, int chunk,
                                              int valid, float (&partial)[kRows]) {
  using L = QuantLayout<kType>;
#pragma unroll
  for (int r = 0; r < kRows; ++r)
    partial[r] = 0.0f;
  const float* x = xs + chunk * kXChunkFloats;
  if constexpr (L::kBlockElems == 256) {
    const unsigned char* block = wb + (chunk / 2) * L::kBlockBytes;
#pragma unroll 1
    for (int p = 0; p < 2; ++p) {
      float w[64];
      dequantizeSub64<kType>(block, (chunk % 2) * 2 + p, w);
      chainSegment<kRows>(x + 64 * p, w, partial);
    }
  } else {
    for (int s = 0; s < valid / 32; ++s) {
      float w[32];
      dequantizeSub32<kType>(wb + (chunk * 4 + s) * L::kBlockBytes, 0, w);
      chainSegment<kRows>(x + 32 * s, w, partial);
    }
  }
}

// Window `window` of the kRows x rows from m0, as fp32, into xs (chunk-padded); zeros past K or
// M. Each thread loads 8 elements at once before storing them: one load at a time left every
// thread waiting for L2 once per element (the GEMV spent most of its time here).
template <typename TX, int kRows>
__device__ __forceinline__ void stageX(const QuantDeviceArgs& a, int m0, int rows, int window,
                                       float* xs) {
  constexpr int kThreads = kWarps * 32;
  constexpr int kPerThread = kRows * kWindowK / kThreads;
  constexpr int kBatch = 8;
  static_assert(kPerThread % kBatch == 0, "whole batches");
  const TX* x = static_cast<const TX*>(a.x);
  for (int first = 0; first < kPerThread; first += kBatch) {
    float v[kBatch];
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      const int i = threadIdx.x + (first + j) * kThreads;
      const int r = i / kWindowK, k = window * kWindowK + i % kWindowK;
      v[j] =
          r < rows && k < a.k ? loadFloat(x[static_cast<int64_t>(m0 + r) * a.x_stride + k]) : 0.0f;
    }
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      const int i = threadIdx.x + (first + j) * kThreads;
      const int r = i / kWindowK, kk = i % kWindowK;
      xs[r * kXRowFloats + (kk / kReduceChunk) * kXChunkFloats + kk % kReduceChunk] = v[j];
    }
  }
}

template <QuantType kType, typename TX, int kRows>
__global__ void __launch_bounds__(kWarps * 32, 2) quantGemvKernel(QuantDeviceArgs a) {
  using L = QuantLayout<kType>;
  using S = GemvShared<kType, kRows>;
  extern __shared__ __align__(16) unsigned char shared[];
  float* xs = reinterpret_cast<float*>(shared);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  unsigned char* wbuf = shared + S::kXBytes + warp * 2 * L::kWindowBytes;
  float* merge =
      reinterpret_cast<float*>(shared + S::kXBytes + S::kWBytes) + warp * kRows * kWindowChunks;
  // Blocks of one weight slice and different row blocks of x are consecutive, so that the later
  // ones read the slice from L2.
  const int row_blocks = (a.m + kRows - 1) / kRows;
  const int n_block = blockIdx.x / row_blocks;
  const int m0 = (blockIdx.x % row_blocks) * kRows;
  const int rows = min(kRows, a.m - m0);
  const int64_t row_bytes = static_cast<int64_t>(a.k / L::kBlockElems) * L::kBlockBytes;
  const int windows = (a.k + kWindowK - 1) / kWindowK;
  const int items = windows * kRowsPerWarp;  // item t: window t / kRowsPerWarp, slot t % ...
  auto rowOf = [&](int slot) { return n_block * kRowsPerBlock + slot * kWarps + warp; };
  auto issue = [&](int t) {
    const int window = t / kRowsPerWarp, row = rowOf(t % kRowsPerWarp);
    if (row < a.n) {
      const int64_t start = static_cast<int64_t>(window) * L::kWindowBytes;
      const int64_t left = row_bytes - start;
      const int bytes = left < L::kWindowBytes ? static_cast<int>(left) : L::kWindowBytes;
      copyWindow(wbuf + (t & 1) * L::kWindowBytes, a.w + row * a.w_row_bytes + start, bytes,
                 a.w_aligned != 0, lane);
    }
    cpAsyncCommit();
  };

  float totals[kRowsPerWarp];  // lane r < rows: output (m0 + r, rowOf(slot))
#pragma unroll
  for (int i = 0; i < kRowsPerWarp; ++i)
    totals[i] = -0.0f;  // -0 + p == p for every p: the first merge is total = p_0

  // Chained launch (chained_launch.cuh): constant weights are not written by earlier kernels, so
  // the first row's copy starts before waiting for the predecessor; x, bias and y only after.
  if (a.w_is_constant) issue(0);
  waitForPredecessor();
  allowSuccessorLaunch();
  if (!a.w_is_constant) issue(0);
  for (int t = 0; t < items; ++t) {
    const int window = t / kRowsPerWarp, slot = t % kRowsPerWarp;
    if (slot == 0) {
      __syncthreads();  // every warp is done with the previous window's x
      stageX<TX, kRows>(a, m0, rows, window, xs);
      __syncthreads();
    }
    if (t + 1 < items) {
      issue(t + 1);
    } else {
      cpAsyncCommit();
    }
    cpAsyncWait<1>();
    __syncwarp();                      // item t's bytes visible to every lane of the warp
    if (rowOf(slot) >= a.n) continue;  // warp-uniform; no block barrier until the next window
    const int window_chunks =
        min(kWindowChunks, (a.k - window * kWindowK + kReduceChunk - 1) / kReduceChunk);
    const int valid = min(kReduceChunk, a.k - window * kWindowK - lane * kReduceChunk);
    if (lane < window_chunks) {
      float partial[kRows];
      chunkPartials<kType, kRows>(wbuf + (t & 1) * L::kWindowBytes, xs, lane, valid, partial);
#pragma unroll
      for (int r = 0; r < kRows; ++r)
        merge[r * kWindowChunks + lane] = partial[r];
    }
    __syncwarp();
    if (lane < rows) {
#pragma unroll
      for (int i = 0; i < kRowsPerWarp; ++i) {
        if (i == slot) {
          for (int c = 0; c < window_chunks; ++c)
            totals[i] = totals[i] + merge[lane * kWindowChunks + c];
        }
      }
    }
    __syncwarp();  // the merge buffer and this item's weight buffer are free again
  }
  cpAsyncWait<0>();

  if (lane < rows) {
#pragma unroll
    for (int i = 0; i < kRowsPerWarp; ++i) {
      const int row = rowOf(i);
      if (row < a.n) {
        const bool has_bias = a.bias != nullptr;
        const float value =
            detail::linearFinish(totals[i], has_bias, has_bias ? a.bias[row] : 0.0f);
        detail::linearStore(a.y, a.y_is_bf16 != 0,
                            static_cast<int64_t>(m0 + lane) * a.y_stride + row, value,
                            a.accumulate != 0);
      }
    }
  }
}

template <QuantType kType, typename TX, int kRows>
Status launchGemv(const QuantDeviceArgs& a, cudaStream_t stream) {
  auto kernel = quantGemvKernel<kType, TX, kRows>;
  REE_RETURN_IF_ERROR(allowFullSharedMemory(kernel));
  const long long blocks = static_cast<long long>(divUp(a.n, kRowsPerBlock)) * divUp(a.m, kRows);
  REE_CHECK_ARG(blocks <= INT32_MAX, "quant linear: %lld GEMV blocks (n=%d, m=%d) exceed the grid",
                blocks, a.n, a.m);
  dim3 grid(static_cast<unsigned>(blocks));
  launchChained(kernel, grid, kWarps * 32, GemvShared<kType, kRows>::kBytes, stream, a);
  REE_CUDA_CHECK_LAUNCH();
  return Status::kSuccess;
}

template <QuantType kType, typename TX>
Status dispatchRows(const QuantDeviceArgs& a, cudaStream_t stream) {
  if (a.m <= 1) return launchGemv<kType, TX, 1>(a, stream);
  return launchGemv<kType, TX, 8>(a, stream);  // row blocks of 8: 212 KB of shared memory at most
}

// ---- GEMV, one lane per output feature (quant_linear_lanes.cuh): aligned rows ----
struct LaneShape {
  int warps, ring;  // warps per block; stages per warp ring (ring - 1 in flight while one is read)
};

// Resident blocks per SM of `kernel` with `shape`, cached in `cache` (-1: not yet asked; the input
// of a heuristic only: the launch itself checks the device's shared memory).
template <typename Kernel>
Status blocksPerSm(Kernel kernel, LaneShape shape, int bytes, std::atomic<int>& cache,
                   int* per_sm) {
  *per_sm = cache.load(std::memory_order_relaxed);
  if (*per_sm >= 0) return Status::kSuccess;
  REE_CUDA_CHECK(
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(per_sm, kernel, shape.warps * 32, bytes));
  cache.store(*per_sm, std::memory_order_relaxed);
  return Status::kSuccess;
}

// At M = 1 the warps on an SM, not the bytes in flight, bound the GEMV. Grids of about one block
// per SM or fewer: 16 warps (8 for more than two rows of x) split K, fewer when half of them
// already cover every stage or their rings of 2 do not fit; rings of 3 where those fit too (Q4_0
// at M = 1: 16 warps, rings of 2; Q8_0: 8 warps, rings of 2, where rings of 3 would fit only 4).
// Larger grids: the shape with the most warps resident per SM (ties: the earlier): Q8_0's 8.5 KB
// weight stages fit one 4-warp block with rings of 3, five 2-warp blocks with rings of 2. The
// bits depend on neither.
template <QuantType kType, typename TX, int kRows>
Status chooseLaneShape(long long blocks, int sms, int optin, int stages, LaneShape* shape) {
  using S = quant_lanes::Shared<kType, TX, kRows>;
  auto kernel = quant_lanes::laneGemvKernel<kType, TX, kRows>;
  if (blocks < 2ll * sms) {
    int warps = quant_lanes::maxWarps(kRows);
    while (warps > quant_lanes::kMinWarps && (warps / 2 >= stages || S::bytes(warps, 2) > optin))
      warps /= 2;
    *shape = {warps, S::bytes(warps, 3) <= optin ? 3 : 2};
    return Status::kSuccess;
  }
  constexpr LaneShape kCandidates[4] = {{4, 3}, {4, 2}, {2, 3}, {2, 2}};
  static std::atomic<int> cache[4] = {-1, -1, -1, -1};  // per kernel (this instantiation)
  *shape = {quant_lanes::kMinWarps, 2};
  int best = 0;
  for (int i = 0; i < 4; ++i) {
    const LaneShape c = kCandidates[i];
    if (S::bytes(c.warps, c.ring) > optin || (c.warps > 2 && c.warps / 2 >= stages)) continue;
    int per_sm = 0;
    REE_RETURN_IF_ERROR(blocksPerSm(kernel, c, S::bytes(c.warps, c.ring), cache[i], &per_sm));
    if (per_sm * c.warps > best) best = per_sm * c.warps, *shape = c;
  }
  return Status::kSuccess;
}

template <QuantType kType, typename TX, int kRows>
Status launchLaneGemv(quant_lanes::Args a, cudaStream_t stream) {
  using S = quant_lanes::Shared<kType, TX, kRows>;
  auto kernel = quant_lanes::laneGemvKernel<kType, TX, kRows>;
  REE_RETURN_IF_ERROR(allowFullSharedMemory(kernel));
  int device = 0, optin = 0, sms = 0;
  REE_CUDA_CHECK(cudaGetDevice(&device));
  REE_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  REE_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const long long blocks =
      static_cast<long long>(divUp(a.n, quant_lanes::kFeatures)) * divUp(a.m, kRows);
  REE_CHECK_ARG(blocks <= INT32_MAX, "quant linear: %lld GEMV blocks (n=%d, m=%d) exceed the grid",
                blocks, a.n, a.m);
  const int stages = static_cast<int>(divUp(a.k, quant_lanes::kStageK));
  LaneShape shape;
  REE_RETURN_IF_ERROR((chooseLaneShape<kType, TX, kRows>(blocks, sms, optin, stages, &shape)));
  const int bytes = S::bytes(shape.warps, shape.ring);
  REE_CHECK_ARG(bytes <= optin,
                "quant linear: the GEMV needs %d bytes of shared memory, the device allows %d",
                bytes, optin);
  a.ring = shape.ring;
  launchChained(kernel, dim3(static_cast<unsigned>(blocks)), dim3(shape.warps * 32), bytes, stream,
                a);
  REE_CUDA_CHECK_LAUNCH();
  return Status::kSuccess;
}

template <QuantType kType, typename TX>
Status dispatchLaneRows(const quant_lanes::Args& a, cudaStream_t stream) {
  if (a.m <= 1) return launchLaneGemv<kType, TX, 1>(a, stream);
  if (a.m <= 2) return launchLaneGemv<kType, TX, 2>(a, stream);
  if (a.m <= 4) return launchLaneGemv<kType, TX, 4>(a, stream);
  return launchLaneGemv<kType, TX, 8>(a, stream);  // row blocks of 8 (M up to 64: 8 of them)
}

// The lane GEMV reads whole 16-byte pieces of weight and x rows, and addresses 32 weight rows
// from the first with 32-bit offsets.
bool laneGemvFits(const QuantLinearArgs& args) {
  const LinearArgs& l = args.linear;
  const int64_t x_row_bytes = l.xStride() * dtypeSize(l.x_dtype);
  return reinterpret_cast<uintptr_t>(l.w) % 16 == 0 && args.wRowBytes() % 16 == 0 &&
         args.wRowBytes() <= (int64_t{1} << 26) && args.rowBytes() % 16 == 0 &&
         reinterpret_cast<uintptr_t>(l.x) % 16 == 0 && x_row_bytes % 16 == 0;
}

template <QuantType kType>
Status dispatchLaneGemv(const QuantLinearArgs& args, cudaStream_t stream) {
  const quant_lanes::Args a = deviceArgs(args);
  if (args.linear.x_dtype == DType::kBF16) return dispatchLaneRows<kType, bf16_t>(a, stream);
  return dispatchLaneRows<kType, float>(a, stream);
}

// ---- M > 64: dequantise slices of rows to fp32, then cuda::linear ----
// Thread i writes the 32 elements of group i (row i / (K / 32), elements 32 (i % (K / 32)) ...).
template <QuantType kType>
__global__ void dequantRowsKernel(const unsigned char* w, int64_t w_row_bytes, int k,
                                  int64_t groups, float* out) {
  using L = QuantLayout<kType>;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= groups) return;
  const int per_row = k / 32;
  const int64_t row = i / per_row;
  const int e = static_cast<int>(i % per_row) * 32;
  float values[32];
  dequantizeSub32<kType>(w + row * w_row_bytes + (e / L::kBlockElems) * L::kBlockBytes,
                         (e % L::kBlockElems) / 32, values);
  float* dst = out + row * k + e;
#pragma unroll
  for (int j = 0; j < 32; ++j)
    dst[j] = values[j];
}

constexpr int64_t kScratchBytes = 256ll << 20;  // fp32 rows per slice

template <QuantType kType>
Status dequantThenLinear(const QuantLinearArgs& args, cudaStream_t stream) {
  const LinearArgs& a = args.linear;
  int64_t slice_rows = std::max<int64_t>(128, kScratchBytes / (4 * a.k) / 128 * 128);
  slice_rows = std::min(slice_rows, a.n);
  float* scratch = nullptr;
  REE_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&scratch),
                                 static_cast<size_t>(slice_rows * a.k) * 4, stream));
  Status status = Status::kSuccess;
  for (int64_t n0 = 0; n0 < a.n && status == Status::kSuccess; n0 += slice_rows) {
    const int64_t rows = std::min(slice_rows, a.n - n0);
    const int64_t groups = rows * (a.k / 32);
    dequantRowsKernel<kType><<<divUp(groups, 256), 256, 0, stream>>>(
        static_cast<const unsigned char*>(a.w) + n0 * args.wRowBytes(), args.wRowBytes(),
        static_cast<int>(a.k), groups, scratch);
    if (cudaPeekAtLastError() != cudaSuccess) {
      status = REE_FAIL(Status::kCudaError, "quant linear: dequantisation launch failed: %s",
                        cudaGetErrorString(cudaGetLastError()));
      break;
    }
    LinearArgs slice = a;
    slice.w = scratch;
    slice.w_dtype = DType::kF32;
    slice.w_row_stride = 0;
    slice.w_is_constant = false;  // the scratch is written by the kernel just before
    slice.n = rows;
    slice.bias = a.bias ? static_cast<const float*>(a.bias) + n0 : nullptr;
    slice.y = static_cast<char*>(a.y) + n0 * dtypeSize(a.y_dtype);
    slice.y_row_stride = a.yStride();
    status = linear(slice, stream);
  }
  REE_CUDA_CHECK(cudaFreeAsync(scratch, stream));
  return status;
}

// Thread i: the 32 elements of group i % (K / 32) of token i / (K / 32).
template <QuantType kType>
__global__ void quantEmbeddingKernel(const unsigned char* table, int64_t row_bytes, int k,
                                     const int32_t* ids, int64_t groups, float* out) {
  using L = QuantLayout<kType>;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= groups) return;
  const int per_row = k / 32;
  const int64_t token = i / per_row;
  const int e = static_cast<int>(i % per_row) * 32;
  float values[32];
  dequantizeSub32<kType>(table + ids[token] * row_bytes + (e / L::kBlockElems) * L::kBlockBytes,
                         (e % L::kBlockElems) / 32, values);
  float* dst = out + token * k + e;
#pragma unroll
  for (int j = 0; j < 32; ++j)
    dst[j] = values[j];
}

template <QuantType kType>
Status launchQuantEmbedding(const QuantEmbeddingArgs& args, const int32_t* device_ids,
                            cudaStream_t stream) {
  const int64_t row_bytes =
      args.row_bytes ? args.row_bytes
                     : args.k / QuantLayout<kType>::kBlockElems * QuantLayout<kType>::kBlockBytes;
  const int64_t groups = args.count * (args.k / 32);
  quantEmbeddingKernel<kType><<<divUp(groups, 256), 256, 0, stream>>>(
      static_cast<const unsigned char*>(args.table), row_bytes, static_cast<int>(args.k),
      device_ids, groups, args.out);
  REE_CUDA_CHECK_LAUNCH();
  return Status::kSuccess;
}

// Calls f(std::integral_constant<QuantType, type>) for the run-time type.
template <typename F>
Status dispatchQuantType(QuantType type, F&& f) {
  switch (type) {
    case QuantType::kQ8_0:
      return f(std::integral_constant<QuantType, QuantType::kQ8_0>());
    case QuantType::kQ4_0:
      return f(std::integral_constant<QuantType, QuantType::kQ4_0>());
    case QuantType::kQ4_1:
      return f(std::integral_constant<QuantType, QuantType::kQ4_1>());
    case QuantType::kQ5_0:
      return f(std::integral_constant<QuantType, QuantType::kQ5_0>());
    case QuantType::kQ5_1:
      return f(std::integral_constant<QuantType, QuantType::kQ5_1>());
    case QuantType::kQ4_K:
      return f(std::integral_constant<QuantType, QuantType::kQ4_K>());
    case QuantType::kQ5_K:
      return f(std::integral_constant<QuantType, QuantType::kQ5_K>());
    case QuantType::kQ6_K:
      return f(std::integral_constant<QuantType, QuantType::kQ6_K>());
  }
  return REE_FAIL(Status::kInvalidArgument, "quant linear: unknown block type %d",
                  static_cast<int>(type));
}

template <QuantType kType>
Status dispatchKernel(const QuantLinearArgs& args, LinearKernel kernel, cudaStream_t stream) {
  const LinearArgs& l = args.linear;
  if (kernel == LinearKernel::kGemm || (kernel == LinearKernel::kAuto && l.m > kGemvMaxRows)) {
    return dequantThenLinear<kType>(args, stream);
  }
  if (laneGemvFits(args)) return dispatchLaneGemv<kType>(args, stream);
  QuantDeviceArgs a;
  static_cast<quant_lanes::Args&>(a) = deviceArgs(args);
  a.w_aligned = reinterpret_cast<uintptr_t>(l.w) % 16 == 0 && a.w_row_bytes % 16 == 0 ? 1 : 0;
  if (l.x_dtype == DType::kBF16) return dispatchRows<kType, bf16_t>(a, stream);
  return dispatchRows<kType, float>(a, stream);
}

}  // namespace

Status quantLinearWithKernel(const QuantLinearArgs& args, LinearKernel kernel,
                             cudaStream_t stream) {
  REE_RETURN_IF_ERROR(validateQuantLinearArgs(args));
  REE_CHECK_ARG(kernel == LinearKernel::kAuto || kernel == LinearKernel::kGemv ||
                    kernel == LinearKernel::kGemm,
                "quant linear: unknown kernel %d", static_cast<int>(kernel));
  if (args.linear.m == 0) return Status::kSuccess;
  return dispatchQuantType(args.w_type, [&](auto type) {
    return dispatchKernel<decltype(type)::value>(args, kernel, stream);
  });
}

Status quantLinear(const QuantLinearArgs& args, cudaStream_t stream) {
  return quantLinearWithKernel(args, LinearKernel::kAuto, stream);
}

Status quantEmbedding(const QuantEmbeddingArgs& args, const int32_t* device_ids,
                      cudaStream_t stream) {
  REE_RETURN_IF_ERROR(validateQuantEmbeddingArgs(args));
  if (args.count == 0) return Status::kSuccess;
  REE_CHECK_ARG(device_ids != nullptr, "quant embedding: device_ids is null");
  return dispatchQuantType(args.type, [&](auto type) {
    return launchQuantEmbedding<decltype(type)::value>(args, device_ids, stream);
  });
}

}  // namespace ree::repops::cuda
