// CUDA implementation of the row-wise RepOps (rowops.h); bitwise equal to the CPU version.
//
// RMSNorm, LayerNorm, softmax and log-softmax run in the row-resident kernel (rowops_resident.cuh:
// each row read from DRAM once into shared memory), and so do sum, mean, var, max and min (not in
// its cluster shape: a whole row's cp.async copies in flight at once; var's second pass reads the
// shared copy), except that max and min of many 16-byte-loadable rows stream through
// rowops_select_stream.cuh (a warp per row, no shared memory, ordered integer keys). rowKernel
// serves casts, and the norms and log-softmax when there are many rows too long for one block's
// shared memory (and GPUs without clusters); reduceKernel serves argmax, and the reductions whose
// rows fit no resident shape but the cluster's.
//
// rowKernel / reduceKernel layout: blocks of 8 warps. A row is served by a group of 1, 2, 4 or 8
// warps (chosen from the row length), so a block holds 8, 4, 2 or 1 rows. Canonical reductions
// (reduce.h) are computed in tiles of 32 chunks of 128 elements: a warp stages a 32-chunk x
// 32-element sub-tile in shared memory with coalesced (16-byte where aligned) loads, then lane c
// runs chunk c's sequential chain over it; four sub-tiles complete the 32 chunk partials of a tile.
// The group leader merges the partials left to right, exactly as ChunkMerge does. Max/min/argmax
// use order-free selections (rowmath::maxCombine etc.), so they are reduced with any tree.
// Element-wise output passes re-read the row (it is still in L1/L2) with 16-byte loads.
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <type_traits>
#include <utility>

#include "chained_launch.cuh"
#include "common/dtype_dispatch.h"
#include "common/rowops_args.h"
#include "grid.cuh"
#include "ree/core/cuda_check.h"
#include "ree/kernels/rowops.h"
#include "shared_memory.cuh"

namespace ree {
namespace repops {
namespace cuda {
namespace {

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kTileChunks = 32;             // chunks per tile (one per lane)
constexpr int kSubTile = 32;                // elements per chunk staged at a time
constexpr int kStageStride = kSubTile + 1;  // padding: lane c reads row c conflict-free
constexpr int kStageFloats = kTileChunks * kStageStride;

// kRowSum, kRowVar, kRowMax and kRowMin are statistics only (sum or mean; variance; maximum;
// minimum), run by the row-resident kernel alone: they write one value per row to RowArgs::y in
// RowArgs::out_dtype.
enum RowKernelOp : int {
  kRms = 0,
  kLayer = 1,
  kSoftmax = 2,
  kLogSoftmax = 3,
  kCast = 4,
  kRowSum = 5,
  kRowVar = 6,
  kRowMax = 7,
  kRowMin = 8
};
enum ReduceKind : int {
  kRedSum = 0,
  kRedMean = 1,
  kRedMax = 2,
  kRedMin = 3,
  kRedVar = 4,
  kRedArgmax = 5
};

struct Shared {
  float stage[kWarps][kStageFloats];
  float partials[kThreads];
  int32_t indices[kThreads];
  float broadcast[kWarps];
};

// Which row and which part of its group this thread is.
struct GroupCtx {
  int warps_per_row;
  int group;  // row slot within the block
  int warp;   // warp index within the group
  int lane;
  int thread;   // index within the group
  int threads;  // threads per group
  int64_t row;
  bool active;
};

__device__ GroupCtx makeCtx(int warps_per_row, int64_t rows) {
  GroupCtx c;
  c.warps_per_row = warps_per_row;
  int warp_id = threadIdx.x / 32;
  c.group = warp_id / warps_per_row;
  c.warp = warp_id % warps_per_row;
  c.lane = threadIdx.x % 32;
  c.thread = c.warp * 32 + c.lane;
  c.threads = warps_per_row * 32;
  c.row = static_cast<int64_t>(blockIdx.x) * (kWarps / warps_per_row) + c.group;
  c.active = c.row < rows;
  return c;
}

template <typename T>
constexpr int vecWidth() {
  return 16 / static_cast<int>(sizeof(T));
}

// V consecutive elements starting at p (16-byte aligned), widened to float.
template <typename T>
__device__ void loadVec(const T* p, float* out) {
  constexpr int V = vecWidth<T>();
  alignas(16) T v[V];
  // A plain load, not __ldg: y may alias x (in-place), so the non-coherent path is avoided.
  *reinterpret_cast<uint4*>(v) = *reinterpret_cast<const uint4*>(p);
#pragma unroll
  for (int j = 0; j < V; ++j)
    out[j] = loadFloat(v[j]);
}

template <typename T, int V>
struct alignas(sizeof(T) * V) Pack {
  T v[V];
};

// kCanonicalNaN: arithmetic outputs (rowmath::storeOut); casts keep the NaN's sign (storeAs).
template <typename T, int V, bool kCanonicalNaN>
__device__ void storeVec(T* p, const float* values) {
  Pack<T, V> pack;
#pragma unroll
  for (int j = 0; j < V; ++j) {
    pack.v[j] = kCanonicalNaN ? rowmath::storeOut<T>(values[j]) : storeAs<T>(values[j]);
  }
  *reinterpret_cast<Pack<T, V>*>(p) = pack;
}

// Stages term(x) of one sub-tile (kTileChunks chunks x kSubTile elements from tile_base) in a
// warp's `stage` with 16-byte loads: load `it` of a lane reads chunk it * V + lane / (kSubTile / V)
// of the tile at position (lane % (kSubTile / V)) * V. kBatchLoads: when the whole sub-tile lies
// inside the row (all but a row's ragged end), all of a lane's loads are issued before its first
// store, so that a warp keeps kTileChunks / V loads in flight (the compiler overlaps three or four
// across the per-load range checks; it needs the registers of __launch_bounds__(kThreads, 4) to
// keep eight). The values and where they are stored are the same either way.
template <bool kBatchLoads, typename InT, typename Term>
__device__ __forceinline__ void stageSubTileVec(float* stage, const InT* xr, int64_t tile_base,
                                                int n, int lane, Term term) {
  constexpr int V = vecWidth<InT>();
  constexpr int kLoads = kTileChunks / V;
  constexpr int kLanesPerSegment = kSubTile / V;
  const int first_chunk = lane / kLanesPerSegment;
  const int pos = (lane % kLanesPerSegment) * V;
  const int64_t first = tile_base + static_cast<int64_t>(first_chunk) * kReduceChunk + pos;
  constexpr int64_t kLoadStep = static_cast<int64_t>(V) * kReduceChunk;  // V chunks per load
  float* out = stage + first_chunk * kStageStride + pos;
  if (kBatchLoads &&
      tile_base + static_cast<int64_t>(kTileChunks - 1) * kReduceChunk + kSubTile <= n) {
    float v[kLoads][V];
#pragma unroll
    for (int it = 0; it < kLoads; ++it)
      loadVec(xr + first + it * kLoadStep, v[it]);
#pragma unroll
    for (int it = 0; it < kLoads; ++it) {
#pragma unroll
      for (int j = 0; j < V; ++j)
        out[it * V * kStageStride + j] = term(v[it][j]);
    }
    return;
  }
#pragma unroll
  for (int it = 0; it < kLoads; ++it) {
    const int64_t e = first + it * kLoadStep;
    if (e < n) {  // n % V == 0: a vector is wholly inside or outside the row
      float v[V];
      loadVec(xr + e, v);
#pragma unroll
      for (int j = 0; j < V; ++j)
        out[it * V * kStageStride + j] = term(v[j]);
    }
  }
}

// The canonical reduction (reduce.h) of term(x[k]) over one row: kDot chains fma(t, t, p), else
// p + t. Returns the merged total to every thread of the group. All threads of the block must
// call it (it synchronises the block); inactive groups contribute nothing. kBatchLoads: see
// stageSubTileVec.
template <typename InT, bool kVec, bool kDot, bool kBatchLoads = false, typename Term>
__device__ float canonicalRowReduce(const GroupCtx& c, Shared& sh, const InT* xr, int n,
                                    Term term) {
  const int nchunks = (n + kReduceChunk - 1) / kReduceChunk;
  const int tiles = (nchunks + kTileChunks - 1) / kTileChunks;
  const int rounds = (tiles + c.warps_per_row - 1) / c.warps_per_row;
  float* stage = sh.stage[threadIdx.x / 32];
  float total = 0.0f;
  int merged = 0;
  for (int r = 0; r < rounds; ++r) {
    const int tile = r * c.warps_per_row + c.warp;
    float partial = 0.0f;
    if (c.active && tile < tiles) {  // warp-uniform
      const int chunk = tile * kTileChunks + c.lane;
      for (int k0 = 0; k0 < kReduceChunk; k0 += kSubTile) {
        const int64_t tile_base = static_cast<int64_t>(tile) * kTileChunks * kReduceChunk + k0;
        if constexpr (kVec) {
          stageSubTileVec<kBatchLoads>(stage, xr, tile_base, n, c.lane, term);
        } else {
          for (int chunk_in_tile = 0; chunk_in_tile < kTileChunks; ++chunk_in_tile) {
            const int64_t e =
                tile_base + static_cast<int64_t>(chunk_in_tile) * kReduceChunk + c.lane;
            if (e < n) stage[chunk_in_tile * kStageStride + c.lane] = term(loadFloat(xr[e]));
          }
        }
        __syncwarp();
        const int64_t first = static_cast<int64_t>(chunk) * kReduceChunk + k0;
        const float* mine = stage + c.lane * kStageStride;
        if (first + kSubTile <= n) {
#pragma unroll
          for (int j = 0; j < kSubTile; ++j) {
            partial = kDot ? fmaF32(mine[j], mine[j], partial) : partial + mine[j];
          }
        } else {
          const int count = first < n ? static_cast<int>(n - first) : 0;
          for (int j = 0; j < count; ++j) {
            partial = kDot ? fmaF32(mine[j], mine[j], partial) : partial + mine[j];
          }
        }
        __syncwarp();
      }
    }
    sh.partials[threadIdx.x] = partial;
    __syncthreads();
    if (c.active && c.thread == 0) {
      const int round_first_chunk = r * c.warps_per_row * kTileChunks;
      int count = nchunks - round_first_chunk;
      if (count > c.warps_per_row * kTileChunks) count = c.warps_per_row * kTileChunks;
      const float* group_partials = sh.partials + c.group * c.threads;
      for (int j = 0; j < count; ++j) {
        total = merged == 0 ? group_partials[j] : total + group_partials[j];
        ++merged;
      }
    }
    __syncthreads();
  }
  if (c.thread == 0) sh.broadcast[c.group] = total;
  __syncthreads();
  const float result = sh.broadcast[c.group];
  __syncthreads();
  return result;
}

// Calls visit(v, e) for the thread's vectors of the row in order (e = thread * V, then every
// threads * V elements; v: the V values from e, widened). Four loads are issued before the four
// visits, so that a thread keeps four 16-byte loads in flight rather than one; n % V == 0.
template <typename InT, typename Visit>
__device__ __forceinline__ void forEachRowVector(const GroupCtx& c, const InT* xr, int n,
                                                 Visit visit) {
  constexpr int V = vecWidth<InT>();
  constexpr int kBatch = 4;
  const int64_t step = static_cast<int64_t>(c.threads) * V;
  int64_t e = static_cast<int64_t>(c.thread) * V;
  for (; e + (kBatch - 1) * step < n; e += kBatch * step) {
    float v[kBatch][V];
#pragma unroll
    for (int b = 0; b < kBatch; ++b)
      loadVec(xr + e + b * step, v[b]);
#pragma unroll
    for (int b = 0; b < kBatch; ++b)
      visit(v[b], e + b * step);
  }
  for (; e < n; e += step) {
    float v[V];
    loadVec(xr + e, v);
    visit(v, e);
  }
}

// Order-free max (or min) of the row, returned to every thread of the group.
template <typename InT, bool kVec, bool kMax>
__device__ float selectRowReduce(const GroupCtx& c, Shared& sh, const InT* xr, int n) {
  auto combine = [](float a, float b) {
    return kMax ? rowmath::maxCombine(a, b) : rowmath::minCombine(a, b);
  };
  bool have = false;
  float best = 0.0f;
  if (c.active) {
    if constexpr (kVec) {
      forEachRowVector(c, xr, n, [&](const float* v, int64_t) {
#pragma unroll
        for (int j = 0; j < vecWidth<InT>(); ++j) {
          best = have ? combine(best, v[j]) : v[j];
          have = true;
        }
      });
    } else {
      for (int64_t e = c.thread; e < n; e += c.threads) {
        float v = loadFloat(xr[e]);
        best = have ? combine(best, v) : v;
        have = true;
      }
    }
  }
  // Threads that saw nothing take the row's first element, a neutral choice for a selection.
  if (c.active && !have) best = loadFloat(xr[0]);
  for (int offset = 16; offset > 0; offset /= 2) {
    best = combine(best, __shfl_xor_sync(0xffffffffu, best, offset));
  }
  if (c.lane == 0) sh.partials[threadIdx.x] = best;
  __syncthreads();
  if (c.thread == 0) {
    float value = sh.partials[threadIdx.x];
    for (int w = 1; w < c.warps_per_row; ++w)
      value = combine(value, sh.partials[threadIdx.x + 32 * w]);
    sh.broadcast[c.group] = value;
  }
  __syncthreads();
  const float result = sh.broadcast[c.group];
  __syncthreads();
  return result;
}

// Argmax of the row (rowmath::argmaxBetter), returned to the group's thread 0.
template <typename InT, bool kVec>
__device__ int32_t argmaxRow(const GroupCtx& c, Shared& sh, const InT* xr, int n) {
  float best = 0.0f;
  int32_t best_index = -1;
  auto consider = [&](float v, int32_t k) {
    if (best_index < 0 || rowmath::argmaxBetter(v, k, best, best_index)) {
      best = v;
      best_index = k;
    }
  };
  if (c.active) {
    if constexpr (kVec) {
      forEachRowVector(c, xr, n, [&](const float* v, int64_t e) {
#pragma unroll
        for (int j = 0; j < vecWidth<InT>(); ++j)
          consider(v[j], static_cast<int32_t>(e + j));
      });
    } else {
      for (int64_t e = c.thread; e < n; e += c.threads) {
        consider(loadFloat(xr[e]), static_cast<int32_t>(e));
      }
    }
  }
  for (int offset = 16; offset > 0; offset /= 2) {
    float other = __shfl_xor_sync(0xffffffffu, best, offset);
    int32_t other_index = __shfl_xor_sync(0xffffffffu, best_index, offset);
    if (other_index >= 0) consider(other, other_index);
  }
  if (c.lane == 0) {
    sh.partials[threadIdx.x] = best;
    sh.indices[threadIdx.x] = best_index;
  }
  __syncthreads();
  int32_t result = best_index;
  if (c.thread == 0) {
    for (int w = 1; w < c.warps_per_row; ++w) {
      int32_t other_index = sh.indices[threadIdx.x + 32 * w];
      if (other_index >= 0) consider(sh.partials[threadIdx.x + 32 * w], other_index);
    }
    result = best_index;
  }
  __syncthreads();
  return result;
}

struct RowArgs {
  const void* x;
  int64_t x_stride;
  void* y;
  int64_t y_stride;
  int64_t rows;
  int n;
  int warps_per_row;
  float eps;
  bool cast_before_weight;
  const void* weight;
  DType weight_dtype;
  const void* bias;
  DType bias_dtype;
  DType out_dtype;  // kRowSum, kRowVar, kRowMax, kRowMin: the type of the per-row values at y
  bool mean;        // kRowSum: divide the sum by the row length
};

// The output element of row-op kOp for input v at column k, given the row statistics.
template <int kOp, typename InT>
__device__ __forceinline__ float rowOutput(const RowArgs& a, float v, int64_t k, float s0, float s1,
                                           float s2) {
  if constexpr (kOp == kRms) {
    float scaled = v * s0;
    if (a.cast_before_weight) scaled = loadFloat(storeAs<InT>(scaled));
    return a.weight ? scaled * rowmath::loadAt(a.weight, a.weight_dtype, k) : scaled;
  } else if constexpr (kOp == kLayer) {
    const bool has_w = a.weight != nullptr, has_b = a.bias != nullptr;
    return rowmath::layerNormValue(v, s0, s1, has_w,
                                   has_w ? rowmath::loadAt(a.weight, a.weight_dtype, k) : 0.0f,
                                   has_b, has_b ? rowmath::loadAt(a.bias, a.bias_dtype, k) : 0.0f);
  } else if constexpr (kOp == kSoftmax) {
    return rowmath::softmaxExp(v, s0) / s1;
  } else if constexpr (kOp == kLogSoftmax) {
    return rowmath::logSoftmaxValue(v, s0, s2);
  } else {
    (void)a, (void)k, (void)s0, (void)s1, (void)s2;
    return v;
  }
}

// One kernel for the row-normalising family and casts: kOp selects the statistics; the output
// pass applies the per-element formula of rowmath.
template <int kOp, typename InT, typename OutT, bool kVec>
__global__ void __launch_bounds__(kThreads) rowKernel(RowArgs a) {
  waitForPredecessor();
  allowSuccessorLaunch();
  __shared__ Shared sh;
  const GroupCtx c = makeCtx(a.warps_per_row, a.rows);
  const InT* xr = static_cast<const InT*>(a.x) + (c.active ? c.row * a.x_stride : 0);
  OutT* yr = static_cast<OutT*>(a.y) + (c.active ? c.row * a.y_stride : 0);
  const int n = a.n;

  float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f;  // per-op statistics
  if constexpr (kOp == kRms) {
    float ss = canonicalRowReduce<InT, kVec, true>(c, sh, xr, n, [](float v) { return v; });
    s0 = rowmath::inverseRms(ss, n, a.eps);
  } else if constexpr (kOp == kLayer) {
    float sum = canonicalRowReduce<InT, kVec, false>(c, sh, xr, n, [](float v) { return v; });
    const float mean = rowmath::divideByCount(sum, n);
    float ssd =
        canonicalRowReduce<InT, kVec, true>(c, sh, xr, n, [mean](float v) { return v - mean; });
    s0 = mean;
    s1 = rowmath::inverseRms(ssd, n, a.eps);
  } else if constexpr (kOp == kSoftmax || kOp == kLogSoftmax) {
    const float m = selectRowReduce<InT, kVec, true>(c, sh, xr, n);
    float s = canonicalRowReduce<InT, kVec, false>(
        c, sh, xr, n, [m](float v) { return rowmath::softmaxExp(v, m); });
    s0 = m;
    s1 = s;
    if constexpr (kOp == kLogSoftmax) s2 = crLog(s);
  }
  if (!c.active) return;

  auto compute = [&](float v, int64_t k) -> float {
    return rowOutput<kOp, InT>(a, v, k, s0, s1, s2);
  };

  if constexpr (kVec) {
    constexpr int V = vecWidth<InT>();
    for (int64_t e = static_cast<int64_t>(c.thread) * V; e < n; e += c.threads * V) {
      float v[V];
      loadVec(xr + e, v);
#pragma unroll
      for (int j = 0; j < V; ++j) {
        v[j] = compute(v[j], e + j);
      }
      storeVec<OutT, V, kOp != kCast>(yr + e, v);
    }
  } else {
    for (int64_t e = c.thread; e < n; e += c.threads) {
      const float value = compute(loadFloat(xr[e]), e);
      yr[e] = kOp == kCast ? storeAs<OutT>(value) : rowmath::storeOut<OutT>(value);
    }
  }
}

struct ReduceArgs {
  const void* x;
  int64_t x_stride;
  void* out;
  DType out_dtype;
  int64_t rows;
  int n;
  int warps_per_row;
  int kind;
};

// The arguments every reduction kernel reads (warps_per_row and kind stay 0 for the kernels that
// do not use them).
ReduceArgs reduceArgsOf(RowsIn x, void* out, DType out_dtype, int64_t rows, int64_t cols) {
  ReduceArgs args{};
  args.x = x.data;
  args.x_stride = x.row_stride;
  args.out = out;
  args.out_dtype = out_dtype;
  args.rows = rows;
  args.n = static_cast<int>(cols);
  return args;
}

// At least 4 blocks per SM (<= 64 registers): room for the batched loads of stageSubTileVec and
// forEachRowVector. The static shared memory allows 6 blocks; 4 hold a 4096-row reduction on an
// H100 in one wave.
template <typename InT, bool kVec>
__global__ void __launch_bounds__(kThreads, 4) reduceKernel(ReduceArgs a) {
  __shared__ Shared sh;
  const GroupCtx c = makeCtx(a.warps_per_row, a.rows);
  const InT* xr = static_cast<const InT*>(a.x) + (c.active ? c.row * a.x_stride : 0);
  const int n = a.n;
  auto identity = [](float v) { return v; };
  float value = 0.0f;
  switch (a.kind) {  // uniform over the grid
    case kRedSum:
      value = canonicalRowReduce<InT, kVec, false, true>(c, sh, xr, n, identity);
      break;
    case kRedMean:
      value = rowmath::divideByCount(
          canonicalRowReduce<InT, kVec, false, true>(c, sh, xr, n, identity), n);
      break;
    case kRedMax:
      value = selectRowReduce<InT, kVec, true>(c, sh, xr, n);
      break;
    case kRedMin:
      value = selectRowReduce<InT, kVec, false>(c, sh, xr, n);
      break;
    case kRedVar: {
      const float mean = rowmath::divideByCount(
          canonicalRowReduce<InT, kVec, false, true>(c, sh, xr, n, identity), n);
      value = rowmath::divideByCount(canonicalRowReduce<InT, kVec, true, true>(
                                         c, sh, xr, n, [mean](float v) { return v - mean; }),
                                     n);
      break;
    }
    case kRedArgmax: {
      int32_t index = argmaxRow<InT, kVec>(c, sh, xr, n);
      if (c.active && c.thread == 0) static_cast<int32_t*>(a.out)[c.row] = index;
      return;
    }
  }
  if (c.active && c.thread == 0) rowmath::storeAt(a.out, a.out_dtype, c.row, value);
}

// ---- launch helpers ---------------------------------------------------------------------------

int warpsPerRow(int64_t cols) {
  const int64_t chunks = (cols + kReduceChunk - 1) / kReduceChunk;
  const int64_t tiles = (chunks + kTileChunks - 1) / kTileChunks;
  int warps = 1;
  while (warps < kWarps && warps < tiles)
    warps *= 2;
  return warps;
}

bool aligned(const void* p, int bytes) {
  return reinterpret_cast<uintptr_t>(p) % bytes == 0;
}

// 16-byte loads of x (and V-element stores of y) are legal for every row.
template <typename InT>
bool vecLoadsOk(const void* x, int64_t x_stride, int64_t rows, int64_t cols) {
  constexpr int V = vecWidth<InT>();
  return aligned(x, 16) && cols % V == 0 && (rows <= 1 || x_stride % V == 0);
}

template <typename InT, typename OutT>
bool vecStoresOk(const void* y, int64_t y_stride, int64_t rows) {
  constexpr int V = vecWidth<InT>();
  return aligned(y, static_cast<int>(sizeof(OutT)) * V) && (rows <= 1 || y_stride % V == 0);
}

unsigned gridFor(int64_t rows, int warps_per_row) {
  return divUp(rows, kWarps / warps_per_row);
}

#include "rowops_resident.cuh"
#include "rowops_select_stream.cuh"

template <int kOp>
Status launchRowKernel(RowsIn x, RowsOut y, int64_t rows, int64_t cols, RowArgs args,
                       cudaStream_t stream) {
  args.x = x.data;
  args.x_stride = x.row_stride;
  args.y = y.data;
  args.y_stride = y.row_stride;
  args.rows = rows;
  args.n = static_cast<int>(cols);
  args.warps_per_row = warpsPerRow(cols);
  const unsigned grid = gridFor(rows, args.warps_per_row);
  if constexpr (kOp != kCast) {
    bool ok = false;
    ResidentPlan plan;
    REE_RETURN_IF_ERROR(planResident(kOp, x, y, rows, cols, args, &ok, &plan));
    if (ok) {
      return dispatchStorageType(x.dtype, "rowops", [&](auto in_tag) {
        return dispatchStorageType(y.dtype, "rowops", [&](auto out_tag) {
          return launchResident<kOp, decltype(in_tag), decltype(out_tag)>(plan, stream);
        });
      });
    }
  }
  REE_RETURN_IF_ERROR(dispatchStorageType(x.dtype, "rowops", [&](auto in_tag) {
    using InT = decltype(in_tag);
    return dispatchStorageType(y.dtype, "rowops", [&](auto out_tag) {
      using OutT = decltype(out_tag);
      const bool vec = vecLoadsOk<InT>(x.data, x.row_stride, rows, cols) &&
                       vecStoresOk<InT, OutT>(y.data, y.row_stride, rows);
      if (vec) {
        launchChained(rowKernel<kOp, InT, OutT, true>, grid, kThreads, 0, stream, args);
      } else {
        launchChained(rowKernel<kOp, InT, OutT, false>, grid, kThreads, 0, stream, args);
      }
    });
  }));
  REE_CUDA_CHECK_LAUNCH();
  return Status::kSuccess;
}

// Sum, mean, var, max and min in the row-resident kernel, when it has a plan other than a cluster
// (the cluster shape serves few long rows, which reduceKernel spreads over eight warps a row).
// *done = false: the caller launches reduceKernel instead.
Status launchResidentReduce(int kind, RowsIn x, void* out, DType out_dtype, int64_t rows,
                            int64_t cols, cudaStream_t stream, bool* done) {
  *done = false;
  int op = kRowSum;
  switch (kind) {
    case kRedSum:
    case kRedMean:
      break;
    case kRedVar:
      op = kRowVar;
      break;
    case kRedMax:
      op = kRowMax;
      break;
    case kRedMin:
      op = kRowMin;
      break;
    default:
      return Status::kSuccess;  // argmax
  }
  RowArgs args{};
  args.x = x.data;
  args.x_stride = x.row_stride;
  args.y = out;
  args.y_stride = 1;
  args.rows = rows;
  args.n = static_cast<int>(cols);
  args.out_dtype = out_dtype;
  args.mean = kind == kRedMean;
  bool ok = false;
  ResidentPlan plan;
  REE_RETURN_IF_ERROR(
      planResident(op, x, RowsOut{out, out_dtype, 1}, rows, cols, args, &ok, &plan));
  if (!ok || plan.cluster) return Status::kSuccess;
  *done = true;
  return dispatchStorageType(x.dtype, "rowops", [&](auto in_tag) {
    using InT = decltype(in_tag);
    switch (op) {
      case kRowVar:
        return launchResident<kRowVar, InT, float>(plan, stream);
      case kRowMax:
        return launchResident<kRowMax, InT, float>(plan, stream);
      case kRowMin:
        return launchResident<kRowMin, InT, float>(plan, stream);
      default:
        return launchResident<kRowSum, InT, float>(plan, stream);
    }
  });
}

Status launchReduce(int kind, RowsIn x, void* out, DType out_dtype, int64_t rows, int64_t cols,
                    cudaStream_t stream) {
  bool done = false;
  REE_RETURN_IF_ERROR(launchSelectStream(kind, x, out, out_dtype, rows, cols, stream, &done));
  if (done) return Status::kSuccess;
  REE_RETURN_IF_ERROR(launchResidentReduce(kind, x, out, out_dtype, rows, cols, stream, &done));
  if (done) return Status::kSuccess;
  ReduceArgs args = reduceArgsOf(x, out, out_dtype, rows, cols);
  args.warps_per_row = warpsPerRow(cols);
  args.kind = kind;
  const unsigned grid = gridFor(rows, args.warps_per_row);
  REE_RETURN_IF_ERROR(dispatchStorageType(x.dtype, "rowops", [&](auto in_tag) {
    using InT = decltype(in_tag);
    if (vecLoadsOk<InT>(x.data, x.row_stride, rows, cols)) {
      reduceKernel<InT, true><<<grid, kThreads, 0, stream>>>(args);
    } else {
      reduceKernel<InT, false><<<grid, kThreads, 0, stream>>>(args);
    }
  }));
  REE_CUDA_CHECK_LAUNCH();
  return Status::kSuccess;
}

}  // namespace

Status rmsNorm(RowsIn x, VecIn weight, RowsOut y, int64_t rows, int64_t cols, float eps,
               RmsNormVariant variant, cudaStream_t stream) {
  const char* op = "cuda::rmsNorm";
  REE_RETURN_IF_ERROR(validateRmsNormArgs(op, x, weight, y, rows, cols, eps, variant));
  if (rows == 0) return Status::kSuccess;
  RowArgs args{};
  args.eps = eps;
  args.cast_before_weight = variant == RmsNormVariant::kCastBeforeWeight;
  args.weight = weight.data;
  args.weight_dtype = weight.dtype;
  return launchRowKernel<kRms>(x, y, rows, cols, args, stream);
}

Status layerNorm(RowsIn x, VecIn weight, VecIn bias, RowsOut y, int64_t rows, int64_t cols,
                 float eps, cudaStream_t stream) {
  const char* op = "cuda::layerNorm";
  REE_RETURN_IF_ERROR(validateLayerNormArgs(op, x, weight, bias, y, rows, cols, eps));
  if (rows == 0) return Status::kSuccess;
  RowArgs args{};
  args.eps = eps;
  args.weight = weight.data;
  args.weight_dtype = weight.dtype;
  args.bias = bias.data;
  args.bias_dtype = bias.dtype;
  return launchRowKernel<kLayer>(x, y, rows, cols, args, stream);
}

Status softmax(RowsIn x, RowsOut y, int64_t rows, int64_t cols, cudaStream_t stream) {
  REE_RETURN_IF_ERROR(validateRowsInOut("cuda::softmax", x, y, rows, cols));
  if (rows == 0) return Status::kSuccess;
  return launchRowKernel<kSoftmax>(x, y, rows, cols, RowArgs{}, stream);
}

Status logSoftmax(RowsIn x, RowsOut y, int64_t rows, int64_t cols, cudaStream_t stream) {
  REE_RETURN_IF_ERROR(validateRowsInOut("cuda::logSoftmax", x, y, rows, cols));
  if (rows == 0) return Status::kSuccess;
  return launchRowKernel<kLogSoftmax>(x, y, rows, cols, RowArgs{}, stream);
}

Status cast(RowsIn x, RowsOut y, int64_t rows, int64_t cols, cudaStream_t stream) {
  REE_RETURN_IF_ERROR(validateRowsInOut("cuda::cast", x, y, rows, cols));
  if (rows == 0) return Status::kSuccess;
  return launchRowKernel<kCast>(x, y, rows, cols, RowArgs{}, stream);
}

Status reduceRows(ReduceOp op, RowsIn x, void* out, DType out_dtype, int64_t rows, int64_t cols,
                  cudaStream_t stream) {
  const char* name = "cuda::reduceRows";
  REE_RETURN_IF_ERROR(validateReduceRowsArgs(name, op, x, out, out_dtype, rows, cols));
  if (rows == 0) return Status::kSuccess;
  return launchReduce(static_cast<int>(op), x, out, out_dtype, rows, cols, stream);
}

Status argmaxRows(RowsIn x, int32_t* out, int64_t rows, int64_t cols, cudaStream_t stream) {
  const char* name = "cuda::argmaxRows";
  REE_RETURN_IF_ERROR(validateArgmaxRowsArgs(name, x, out, rows, cols));
  if (rows == 0) return Status::kSuccess;
  return launchReduce(kRedArgmax, x, out, DType::kF32, rows, cols, stream);
}

}  // namespace cuda
}  // namespace repops
}  // namespace ree
