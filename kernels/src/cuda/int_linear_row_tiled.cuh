// repops-3 linear for a batch of decode rows (9 to a few hundred rows of x) and 16-bit w: the
// skinny kernel's integers (int_linear_row_skinny.cuh: one mma.sync m16n8k32 per kept digit pair,
// w's unsigned digits u = Wi + B made on the fly from the stored weights, the digit-sum
// correction) with x's digits staged in shared memory and shared by the block's warps. Included
// by int_linear_row.cu; not a header of its own.
//
// Why a kernel of its own: the skinny kernel gives a block 16 rows of w and lets each warp load
// x's digits for its chunks from global memory, so at 64 rows of x every block reads 4 bytes x 64
// rows of x per element of K against 2 bytes x 16 rows of w: eight times the weight stream, from
// L2, on the critical path of every chunk. Here a block owns 64 rows of w (4 warps of 16) and up
// to 64 rows of x (blockIdx.y takes the next 64), and the x digits of 128 elements of K at a time
// are copied into shared memory (cp.async, two stages) once for the 4 warps. Each warp keeps the
// next stage's w in registers (raw 16-byte loads) while it multiplies the current one.
//
// Few tiles of w (a 4096-wide projection is 64 tiles) cannot fill the GPU, so K is split among
// the blocks of a thread-block cluster (sm_90): each keeps its class sums in its own shared
// memory, and each adds up a share of the tile's outputs from all of them (distributed shared
// memory loads). The sums are exact integers, so neither the split nor the order of the
// additions changes a bit.
//
// Tried on an H100 and not kept (docs/benchmarks-history.md): wgmma m64nNk32 (sm_90a) with w's
// digits in registers (natural k order, two 8-byte loads per row and chunk) and x's as core
// matrices in shared memory: the same bits, but 0.216 ms against this kernel's 0.143 at 64 x 4096
// x 14336 (the kernel is bound by latency at two blocks per SM, not by the tensor cores); x in
// that core-matrix layout under mma.sync (2-way bank conflicts: 10-30% slower); w staged in
// shared memory by cp.async instead of registers (168 registers instead of 255, but no third
// block per SM fits the shared memory, and every shape got slower). Splitting K four ways at 64
// rows of x measured slower while the cluster's sums met through distributed shared memory
// atomics into its first block; with the loads of finishTiledBlock it pays (tiledSplits).
#pragma once

#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <tuple>

#include "chained_launch.cuh"
#include "shared_memory.cuh"

namespace ree::repops::cuda {
namespace {

constexpr int kTiledWarps = 4;                            // each owns 16 rows of w
constexpr int kTiledTileN = 16 * kTiledWarps;             // w rows per block
constexpr int kTiledBlockRows = 64;                       // x rows per block (grid.y: the rest)
constexpr int kTiledMaxRows = 256;                        // kAuto's limit (beyond: class GEMMs)
constexpr int kTiledStageChunks = 4;                      // K chunks per shared-memory stage
constexpr int kTiledStageK = kTiledStageChunks * kChunk;  // 128 elements of K
// Bytes per x row in a stage: its four digit rows, then 32 bytes so that the 8-byte fragment
// loads of a half-warp (4 rows x 32 bytes) fall on distinct banks.
constexpr int kTiledRowStride = 4 * kTiledStageK + 32;
// int32 per x row of the class totals: 68 puts a warp's 32 stores of one register (rows 2q,
// columns g: 8q + g mod 32) on distinct banks.
constexpr int kTiledTotalsStride = kTiledTileN + 4;
constexpr int kTiledMaxSplit = 4;  // blocks per cluster (K split)

struct TiledArgs {
  RowOutputArgs out;            // out.m: every row of x
  const int32_t* x_digit_sums;  // [m][4]
  const void* w;
  int64_t w_stride, k;
  const int8_t* x_planes;  // [m][4][k_padded]
  int64_t k_padded;
  int chunks;            // k_padded / kChunk
  int stages;            // chunks / kTiledStageChunks, rounded up
  int stages_per_split;  // a block's share of the stages
  int splits;            // blocks per cluster along K (1 without clusters)
  int w_constant;        // LinearArgs::w_is_constant: w may be read before the previous kernel
};

// Shared memory of a block with kGroups groups of 8 x rows: two stages of x digits; after the
// main loop the class totals [4][8 kGroups][kTiledTotalsStride] int32 reuse them.
template <int kGroups>
constexpr int tiledStageBytes() {
  return 8 * kGroups * kTiledRowStride;
}

template <int kGroups>
constexpr int tiledSharedBytes() {
  constexpr int stages = 2 * tiledStageBytes<kGroups>();
  constexpr int totals = 4 * kClasses * 8 * kGroups * kTiledTotalsStride;
  return stages > totals ? stages : totals;
}

// True when the tiled kernel can serve w: 16-bit elements whose rows start on 16 bytes and hold
// whole 16-byte pieces (k a multiple of 8, as in every model), and K within the skinny limit (no
// int32 wrap in the raw sums).
bool tiledKernelApplies(DType w_dtype, const void* w, int64_t w_stride, int64_t k) {
  return (w_dtype == DType::kBF16 || w_dtype == DType::kF16) && k % 8 == 0 && w_stride % 8 == 0 &&
         (reinterpret_cast<uintptr_t>(w) & 15) == 0 && k <= kSkinnyMaxK;
}

__device__ __forceinline__ void copyAsync16(void* shared, const void* global, bool valid) {
  const uint32_t to = static_cast<uint32_t>(__cvta_generic_to_shared(shared));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(to), "l"(global),
               "r"(valid ? 16 : 0)
               : "memory");
}

__device__ __forceinline__ void commitAsync() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}

template <int kPending>
__device__ __forceinline__ void waitAsync() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

// This thread's share of copying x's digits into a stage buffer, fixed for the whole block: a
// stage is 8 kGroups rows x 4 digits x 8 pieces of 16 bytes, and thread t copies piece t % 8 of
// digit (t / 8) % 4 of rows t / 32, t / 32 + 4, ... (kTiledWarps rows apart). Only the stage's
// offset changes from stage to stage, so the loop carries no index arithmetic.
template <int kGroups>
struct XStageCopy {
  static constexpr int kRowStep = kTiledWarps;  // a row is 32 pieces: one warp copies it
  static constexpr int kCopies = 8 * kGroups / kRowStep;
  const int8_t* from;  // stage 0's piece of the thread's first row
  int64_t from_row_step;
  int to;           // byte offset of that piece in a stage buffer
  int piece_k;      // k of the piece inside a stage
  int live_copies;  // copies whose row is below m (the rest become zeros)
};

template <int kGroups>
__device__ __forceinline__ XStageCopy<kGroups> xStageCopy(const TiledArgs& s, int row0) {
  using Copy = XStageCopy<kGroups>;
  const int piece = threadIdx.x & 7, digit = (threadIdx.x >> 3) & 3, row = threadIdx.x >> 5;
  Copy c;
  c.piece_k = 16 * piece;
  c.from = s.x_planes + (static_cast<int64_t>(row0 + row) * 4 + digit) * s.k_padded + c.piece_k;
  c.from_row_step = Copy::kRowStep * 4 * s.k_padded;
  c.to = row * kTiledRowStride + digit * kTiledStageK + c.piece_k;
  const int rows_left = s.out.m - row0 - row;  // rows row, row + kRowStep, ... below m
  c.live_copies =
      rows_left <= 0 ? 0 : min(Copy::kCopies, (rows_left + Copy::kRowStep - 1) / Copy::kRowStep);
  return c;
}

// Copies the x digits of `stage` (128 elements of K) into `buffer`; rows at or beyond m and
// elements at or beyond k_padded become zeros.
template <int kGroups>
__device__ __forceinline__ void loadXStage(const TiledArgs& s, const XStageCopy<kGroups>& c,
                                           int stage, int8_t* buffer) {
  const int64_t k0 = static_cast<int64_t>(stage) * kTiledStageK;
  const bool k_live = k0 + c.piece_k < s.k_padded;
  // A copy that is not valid reads nothing (source size 0), so its address is never used.
  const int8_t* from = c.from + k0;
#pragma unroll
  for (int i = 0; i < XStageCopy<kGroups>::kCopies; ++i) {
    copyAsync16(buffer + c.to + i * XStageCopy<kGroups>::kRowStep * kTiledRowStride, from,
                k_live && i < c.live_copies);
    from += c.from_row_step;
  }
  commitAsync();
}

// Eight 16-bit w elements at k0 as raw bits (zeros at or beyond k: k is a multiple of 8).
__device__ __forceinline__ uint4 loadWEight(const uint16_t* row, int64_t k0, int64_t k) {
  if (row == nullptr || k0 >= k) return make_uint4(0, 0, 0, 0);
  return __ldg(reinterpret_cast<const uint4*>(row + k0));
}

// This lane's w of one stage (rows g and g + 8 of the warp's tile, chunks 0..3).
__device__ __forceinline__ void loadWStage(const TiledArgs& s, const uint16_t* const (&rows)[2],
                                           int stage, int q, uint4 (&w)[kTiledStageChunks][2]) {
#pragma unroll
  for (int c = 0; c < kTiledStageChunks; ++c) {
    const int64_t k0 = (static_cast<int64_t>(stage) * kTiledStageChunks + c) * kChunk + 8 * q;
#pragma unroll
    for (int r = 0; r < 2; ++r)
      w[c][r] = loadWEight(rows[r], k0, s.k);
  }
}

// The nine kept digit pairs of chunk c of the staged x, for every group of 8 x rows: one
// mma.sync per pair and group; lane (g, q) reads the 8 bytes of row g at elements 8 q .. 8 q + 7.
template <int kGroups>
__device__ __forceinline__ void multiplyStagedChunk(const int8_t* buffer, int c, int lane,
                                                    const uint32_t (&a)[3][4],
                                                    int32_t (&acc)[kClasses][kGroups][4]) {
  const int g = lane >> 2, q = lane & 3;
#pragma unroll
  for (int group = 0; group < kGroups; ++group) {
    const int8_t* x = buffer + (group * 8 + g) * kTiledRowStride + c * kChunk + 8 * q;
#pragma unroll
    for (int i = 0; i < int_linear::kXSlices; ++i) {
      const uint2 b = *reinterpret_cast<const uint2*>(x + i * kTiledStageK);
#pragma unroll
      for (int j = 0; j < int_linear::kWSlices; ++j) {
        if (i + j <= int_linear::kKeptPairSum) mmaU8S8(acc[i + j][group], a[j], b);
      }
    }
  }
}

// The block's stages [begin, end): x through the two shared-memory buffers, w one stage ahead in
// registers (w holds stage `begin` on entry). The row factors are made here, so that only the
// chosen form's stay live.
template <bool kBf16, bool kOneFma, int kGroups>
__device__ __forceinline__ void tiledStages(const TiledArgs& s, const uint16_t* const (&rows)[2],
                                            const int (&exponents)[2],
                                            const XStageCopy<kGroups>& copy, int begin, int end,
                                            int8_t* shared, uint4 (&w)[kTiledStageChunks][2],
                                            int32_t (&acc)[kClasses][kGroups][4]) {
  constexpr int kBufferBytes = tiledStageBytes<kGroups>();
  const int lane = threadIdx.x & 31, q = lane & 3;
  float f1[2], f2[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    wScale(exponents[r], f1[r], f2[r]);
    if (kOneFma) f1[r] *= f2[r];
  }
  // Two stages per iteration: w's registers then alternate between two sets instead of being
  // moved at the loop's end, where each move waited for its load (5-9% faster on an H100).
#pragma unroll 2
  for (int stage = begin; stage < end; ++stage) {
    const int8_t* buffer = shared + ((stage - begin) & 1) * kBufferBytes;
    const bool more = stage + 1 < end;
    if (more) {
      loadXStage<kGroups>(s, copy, stage + 1, shared + ((stage + 1 - begin) & 1) * kBufferBytes);
      waitAsync<1>();
    } else {
      waitAsync<0>();
    }
    __syncthreads();  // this stage's x is in shared memory for every warp
#pragma unroll
    for (int c = 0; c < kTiledStageChunks; ++c) {
      uint32_t a[3][4];
      fragmentsOf16Bit<kBf16, kOneFma>(w[c], f1, f2, a);
      if (more) {
        const int64_t k0 = (static_cast<int64_t>(stage + 1) * kTiledStageChunks + c) * kChunk;
#pragma unroll
        for (int r = 0; r < 2; ++r)
          w[c][r] = loadWEight(rows[r], k0 + 8 * q, s.k);
      }
      // Chunks past k_padded hold zeros on both sides: skipping them only saves time (the
      // condition is the same for the whole block).
      if (stage * kTiledStageChunks + c < s.chunks) {
        multiplyStagedChunk<kGroups>(buffer, c, lane, a, acc);
      }
    }
    __syncthreads();  // every warp is done with this buffer before it is refilled
  }
}

// Thread-block clusters exist on sm_90 and later; before that every cluster is one block
// (splits == 1).
__device__ __forceinline__ void syncCluster() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cooperative_groups::this_cluster().sync();
#else
  __syncthreads();
#endif
}

// `local`'s address in the shared memory of block `rank` of the cluster.
__device__ __forceinline__ const int32_t* inBlockOfCluster(const int32_t* local, int rank) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  return cooperative_groups::this_cluster().map_shared_rank(const_cast<int32_t*>(local), rank);
#else
  return local;
#endif
}

__device__ __forceinline__ int rankInCluster() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  return static_cast<int>(cooperative_groups::this_cluster().block_rank());
#else
  return 0;
#endif
}

// The block's class sums meet those of the other blocks of its cluster (the K splits of one
// tile), and the outputs are written. Every block stores its sums in its own shared memory (the
// stage buffers are free: every warp has left the main loop); then each block of the cluster
// adds up a 1 / splits share of the tile's outputs from all of them, four columns per 16-byte
// distributed-shared-memory load, and writes those outputs. The sums are exact integers (a
// partial sum is bounded as the whole one is), so neither the split nor the order changes a bit.
template <int kGroups>
__device__ __forceinline__ void finishTiledBlock(const TiledArgs& s, int64_t n0, int row0,
                                                 const int32_t (&acc)[kClasses][kGroups][4],
                                                 int8_t* shared) {
  constexpr int kRows = 8 * kGroups;
  constexpr int kClassStride = kRows * kTiledTotalsStride;
  constexpr int kQuads = kRows * kTiledTileN / 4;  // four output columns each
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, q = lane & 3;
  int32_t* totals = reinterpret_cast<int32_t*>(shared);
  __syncthreads();  // the stage buffers are free
#pragma unroll
  for (int c = 0; c < kClasses; ++c) {
#pragma unroll
    for (int group = 0; group < kGroups; ++group) {
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int row = group * 8 + 2 * q + (r & 1), col = warp * 16 + g + 8 * (r >> 1);
        totals[c * kClassStride + row * kTiledTotalsStride + col] = acc[c][group][r];
      }
    }
  }
  syncCluster();  // every block's sums are in its shared memory
  const int rank = rankInCluster();
  for (int quad = rank * blockDim.x + threadIdx.x; quad < kQuads; quad += s.splits * blockDim.x) {
    const int row = quad / (kTiledTileN / 4), col = 4 * (quad % (kTiledTileN / 4));
    if (row0 + row >= s.out.m) continue;  // padding rows
    int4 sums[kClasses] = {};
    for (int block = 0; block < s.splits; ++block) {
      const int32_t* from = inBlockOfCluster(totals, block) + row * kTiledTotalsStride + col;
#pragma unroll
      for (int c = 0; c < kClasses; ++c) {
        const int4 part = *reinterpret_cast<const int4*>(from + c * kClassStride);
        sums[c].x += part.x;
        sums[c].y += part.y;
        sums[c].z += part.z;
        sums[c].w += part.w;
      }
    }
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      if (n0 + col + e >= s.out.n) break;
      const int32_t raw[kClasses] = {(&sums[0].x)[e], (&sums[1].x)[e], (&sums[2].x)[e],
                                     (&sums[3].x)[e]};
      storeRawClassSums(s.out, s.x_digit_sums, raw, row0 + row, static_cast<int>(n0 + col + e));
    }
  }
  if (s.splits > 1) syncCluster();  // no block leaves while another reads its shared memory
}

// Block (blockIdx.x / splits, blockIdx.y): w rows of one tile, x rows of one 64-row chunk, and
// the K stages of split blockIdx.x % splits. Launched chained: with a constant w the first
// stage's w is loaded before waiting for the previous kernel (which writes x's digits).
template <bool kBf16, int kGroups>
__global__ void __launch_bounds__(kTiledWarps * 32) tiledKernel(TiledArgs s) {
  extern __shared__ __align__(16) int8_t tiled_shared[];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, q = lane & 3;
  const int split = static_cast<int>(blockIdx.x) % s.splits;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x / s.splits) * kTiledTileN;
  const int row0 = static_cast<int>(blockIdx.y) * kTiledBlockRows;
  const int begin = split * s.stages_per_split;
  const int end = min(s.stages, begin + s.stages_per_split);
  const uint16_t* rows[2];
  int64_t row_of[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    row_of[r] = n0 + warp * 16 + g + 8 * r;
    rows[r] =
        row_of[r] < s.out.n ? static_cast<const uint16_t*>(s.w) + row_of[r] * s.w_stride : nullptr;
  }
  uint4 w[kTiledStageChunks][2];
  if (s.w_constant && begin < end) loadWStage(s, rows, begin, q, w);
  waitForPredecessor();
  allowSuccessorLaunch();
  if (!s.w_constant && begin < end) loadWStage(s, rows, begin, q, w);
  const XStageCopy<kGroups> copy = xStageCopy<kGroups>(s, row0);
  if (begin < end) loadXStage<kGroups>(s, copy, begin, tiled_shared);
  int exponents[2];  // after the wait: a pre-pass kernel may have written them
#pragma unroll
  for (int r = 0; r < 2; ++r)
    exponents[r] = rows[r] != nullptr ? s.out.w_exponents[row_of[r]] : 0;
  // One form per block (the barrier is uniform).
  const bool one_fma = __syncthreads_and(oneFmaScales(exponents[0]) && oneFmaScales(exponents[1]));
  int32_t acc[kClasses][kGroups][4] = {};
  if (one_fma) {
    tiledStages<kBf16, true, kGroups>(s, rows, exponents, copy, begin, end, tiled_shared, w, acc);
  } else {
    tiledStages<kBf16, false, kGroups>(s, rows, exponents, copy, begin, end, tiled_shared, w, acc);
  }
  finishTiledBlock<kGroups>(s, n0, row0, acc, tiled_shared);
}

// Groups of 8 x rows per block (1, 2, 4, 8): the fewest that hold min(m, 64) rows.
int tiledGroups(int64_t m) {
  return m <= 8 ? 1 : m <= 16 ? 2 : m <= 32 ? 4 : 8;
}

// SMs of the current device and whether it runs thread-block clusters (sm_90 and later).
struct TiledDevice {
  int sms = 0;
  bool clusters = false;
};

TiledDevice tiledDevice() {
  int device = 0, sms = 0, major = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) {
    (void)cudaGetLastError();
    return {};
  }
  return {sms, major >= 9};
}

// Clusters of `splits` blocks of `kernel` (with `shared_bytes` of dynamic shared memory) that
// the current device runs at once: cudaOccupancyMaxActiveClusters, which knows that a cluster
// lives inside one GPC. Cached per device, kernel and split; 0 when unknown.
template <typename Kernel>
int clustersAtOnce(Kernel kernel, int splits, int shared_bytes) {
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  static std::mutex mutex;
  static std::map<std::tuple<int, const void*, int>, int> known;
  std::lock_guard<std::mutex> lock(mutex);
  const auto key = std::make_tuple(device, reinterpret_cast<const void*>(kernel), splits);
  const auto found = known.find(key);
  if (found != known.end()) return found->second;
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(static_cast<unsigned>(splits));
  config.blockDim = dim3(kTiledWarps * 32);
  config.dynamicSmemBytes = static_cast<size_t>(shared_bytes);
  cudaLaunchAttribute cluster;
  cluster.id = cudaLaunchAttributeClusterDimension;
  cluster.val.clusterDim.x = static_cast<unsigned>(splits);
  cluster.val.clusterDim.y = 1;
  cluster.val.clusterDim.z = 1;
  config.attrs = &cluster;
  config.numAttrs = 1;
  int clusters = 0;
  if (cudaOccupancyMaxActiveClusters(&clusters, kernel, &config) != cudaSuccess) {
    (void)cudaGetLastError();
    clusters = 0;
  }
  known.emplace(key, clusters);
  return clusters;
}

// Blocks per cluster (K splits, up to kTiledMaxSplit).
//
// A block is bound by latency, so blocks sharing an SM run about as fast as one alone: a grid of
// `clusters` (tiles of w times 64-row chunks of x) takes ceil(clusters / clusters at once) waves
// of stages / splits, and the fewest splits (at least four stages each) that minimise that win.
// Clusters at once counts whole clusters inside a GPC: at 64 rows of x an H100 runs 62 clusters
// of four, so a 4096-row projection (64 tiles) splits three ways (one wave) rather than four (two
// waves, the second of two clusters); 6144 rows split two ways; 14336 rows and more do not split.
// Measured on an H100 (docs/benchmarks-history.md).
template <typename ClustersAtOnce>
int tiledSplits(int64_t clusters, int stages, const TiledDevice& device,
                ClustersAtOnce clusters_at_once) {
  if (!device.clusters) return 1;
  auto waves_of_stages = [&](int splits) {
    const int64_t at_once = clusters_at_once(splits);
    if (at_once <= 0) return INT64_MAX;
    return (clusters + at_once - 1) / at_once * ((stages + splits - 1) / splits);
  };
  int best = 1;
  for (int splits = 2; splits <= kTiledMaxSplit && stages >= 4 * splits; ++splits) {
    if (waves_of_stages(splits) < waves_of_stages(best)) best = splits;
  }
  return best;
}

// The tiled kernel with kGroups groups of 8 x rows per block over `tiles` tiles of w times
// 64-row chunks of x; chooses the K split and fills in the split fields of s.
template <bool kBf16, int kGroups>
Status launchTiledTyped(TiledArgs s, int64_t tiles, int64_t row_chunks, cudaStream_t stream) {
  auto* kernel = tiledKernel<kBf16, kGroups>;
  constexpr int kShared = tiledSharedBytes<kGroups>();
  if (kShared > 48 * 1024) {
    const Status allowed = allowFullSharedMemory(kernel);  // once per device
    if (allowed != Status::kSuccess) return allowed;
  }
  s.splits = tiledSplits(tiles * row_chunks, s.stages, tiledDevice(),
                         [&](int splits) { return clustersAtOnce(kernel, splits, kShared); });
  s.stages_per_split = (s.stages + s.splits - 1) / s.splits;
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(static_cast<unsigned>(tiles * s.splits), static_cast<unsigned>(row_chunks));
  config.blockDim = dim3(kTiledWarps * 32);
  config.dynamicSmemBytes = kShared;
  config.stream = stream;
  cudaLaunchAttribute attributes[2];
  attributes[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attributes[0].val.programmaticStreamSerializationAllowed = 1;
  attributes[1].id = cudaLaunchAttributeClusterDimension;
  attributes[1].val.clusterDim.x = static_cast<unsigned>(s.splits);
  attributes[1].val.clusterDim.y = 1;
  attributes[1].val.clusterDim.z = 1;
  config.attrs = attributes;
  config.numAttrs = s.splits > 1 ? 2 : 1;
  (void)cudaLaunchKernelEx(&config, kernel, s);
  REE_CUDA_CHECK_LAUNCH();
  return Status::kSuccess;
}

template <bool kBf16>
Status launchTiledGroups(const TiledArgs& s, int groups, int64_t tiles, int64_t row_chunks,
                         cudaStream_t stream) {
  switch (groups) {
    case 1:
      return launchTiledTyped<kBf16, 1>(s, tiles, row_chunks, stream);
    case 2:
      return launchTiledTyped<kBf16, 2>(s, tiles, row_chunks, stream);
    case 4:
      return launchTiledTyped<kBf16, 4>(s, tiles, row_chunks, stream);
    default:
      return launchTiledTyped<kBf16, 8>(s, tiles, row_chunks, stream);
  }
}

// The tiled kernel over every row of x (s.out.m); fills in the stage and split fields of s.
Status launchTiled(TiledArgs s, DType w_dtype, cudaStream_t stream) {
  const int groups = tiledGroups(s.out.m);
  const int64_t tiles = (s.out.n + kTiledTileN - 1) / kTiledTileN;
  const int64_t row_chunks = (s.out.m + kTiledBlockRows - 1) / kTiledBlockRows;
  s.stages = (s.chunks + kTiledStageChunks - 1) / kTiledStageChunks;
  return w_dtype == DType::kBF16 ? launchTiledGroups<true>(s, groups, tiles, row_chunks, stream)
                                 : launchTiledGroups<false>(s, groups, tiles, row_chunks, stream);
}

}  // namespace
}  // namespace ree::repops::cuda
