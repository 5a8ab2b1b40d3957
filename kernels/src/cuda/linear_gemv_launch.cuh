// Launch shapes of the CUDA linear GEMV kernels (linear_gemv.cuh, linear_gemv4.cuh): the
// per-device facts, the warps and features per block that fit the grid in one wave with equal work
// per SM, and the choice between the two kernels by the rows of x. Host code only: none of it
// changes an output's bits. Internal: included by linear.cu only (after the kernels); not a header
// of its own.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <mutex>

#include "chained_launch.cuh"
#include "grid.cuh"
#include "linear_common.cuh"
#include "linear_gemv.cuh"
#include "linear_gemv4.cuh"
#include "ree/core/cuda_check.h"
#include "ree/kernels/reduce.h"
#include "shared_memory.cuh"

namespace ree::repops::cuda {
namespace {

// Per-device facts the launch shape depends on (looked up once per device).
struct GemvDevice {
  int sms = 0;
  int smem_per_sm = 0;
  int smem_optin = 0;
};

Status gemvDevice(GemvDevice* out) {
  int device = 0;
  REE_CUDA_CHECK(cudaGetDevice(&device));
  static std::mutex mutex;
  static GemvDevice cache[64];
  std::lock_guard<std::mutex> lock(mutex);
  GemvDevice* entry = device < 64 ? &cache[device] : nullptr;
  if (entry != nullptr && entry->sms > 0) {
    *out = *entry;
    return Status::kSuccess;
  }
  GemvDevice d;
  REE_CUDA_CHECK(cudaDeviceGetAttribute(&d.sms, cudaDevAttrMultiProcessorCount, device));
  REE_CUDA_CHECK(
      cudaDeviceGetAttribute(&d.smem_per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device));
  REE_CUDA_CHECK(
      cudaDeviceGetAttribute(&d.smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  if (entry != nullptr) *entry = d;
  *out = d;
  return Status::kSuccess;
}

// The most warps per block, from max_warps down to min_warps (halving), that still fits every
// tile on the GPU at once (one wave); when none does, two warps (short rounds, many blocks per
// SM). `shared_bytes(w)` is a block's shared memory with w warps.
template <typename SharedBytes>
Status chooseGemvWarps(const GemvDevice& dev, long long tiles, int max_warps, int min_warps,
                       SharedBytes shared_bytes, int* warps, int* bytes) {
  *warps = 2;
  for (int w = max_warps; w >= min_warps; w /= 2) {
    const int b = shared_bytes(w);
    if (b > dev.smem_optin) continue;
    const long long per_sm = dev.smem_per_sm / (b + 1024);  // + the per-block reservation
    if (per_sm >= 1 && tiles <= per_sm * dev.sms) {
      *warps = w;
      break;
    }
  }
  *bytes = shared_bytes(*warps);
  if (*bytes > dev.smem_optin) {
    return REE_FAIL(Status::kUnsupported,
                    "linear: the GEMV kernel needs %d bytes of shared memory per block; the device "
                    "allows %d",
                    *bytes, dev.smem_optin);
  }
  return Status::kSuccess;
}

// Warps and output features per block of the one-feature-per-lane GEMV. Every SM streams the
// weight rows of the blocks it holds, so a launch lasts about as long as its busiest SM takes:
// with T tiles of F features spread over S SMs, ceil(T / S) * F weight rows. With F = 32 some LLM
// shapes leave SMs idle for a third of the launch (N = 6144: 192 tiles, 60 SMs with two and 72
// with one; N = 14336: 448 tiles, four or three per SM). A smaller F that evens the SMs out costs
// only idle lanes, which a bandwidth-bound kernel can afford. Among the tilings whose blocks all
// fit on the GPU at once (one wave), the first in the order (most warps, most features) is kept
// unless a later one puts at least 2% fewer rows on the busiest SM. When none fits in one wave:
// 32 features and two warps (short rounds, many blocks per SM), as for the four-feature kernel.
struct GemvTiling {
  int warps = 2;
  int features = kGemvRowsPerBlock;
  int bytes = 0;
};

template <typename SharedBytes>
Status chooseGemvTiling(const GemvDevice& dev, int n, long long row_blocks, int min_features,
                        bool cap_blocks_per_sm, SharedBytes shared_bytes, GemvTiling* out) {
  GemvTiling best;
  long long best_rows = -1;
  for (int w = kGemvMaxWarps; w >= 2; w /= 2) {
    const int b = shared_bytes(w);
    if (b > dev.smem_optin) continue;
    const long long per_sm =
        std::min<long long>(dev.smem_per_sm / (b + 1024), 2048 / (32 * w));  // + reservation
    for (int f = kGemvRowsPerBlock; f >= min_features; --f) {
      const long long tiles = static_cast<long long>(divUp(n, f)) * row_blocks;
      if (tiles > per_sm * dev.sms) continue;
      const long long rows = static_cast<long long>(divUp(tiles, dev.sms)) * f;
      if (best_rows < 0 || rows * 50 < best_rows * 49) {
        best_rows = rows;
        best.warps = w;
        best.features = f;
      }
    }
  }
  best.bytes = shared_bytes(best.warps);
  if (best.bytes > dev.smem_optin) {
    return REE_FAIL(Status::kUnsupported,
                    "linear: the GEMV kernel needs %d bytes of shared memory per block; the device "
                    "allows %d",
                    best.bytes, dev.smem_optin);
  }
  // Blocks per SM capped at the even share ceil(T / S) by asking for more shared memory than the
  // kernel uses: where more blocks fit, the hardware may give some SMs more blocks than others
  // (N = 6144 with bf16 x: 256 blocks, three fit per SM), and the launch lasts as long as its
  // busiest SM. H100, one row of x, side by side: 4096 x 14336 48.4 -> 44.0 us, 4096 x 6144
  // 21.4 -> 19.3 us (constant weights), no shape slower (docs/benchmarks-history.md).
  if (cap_blocks_per_sm && best_rows >= 0) {
    const long long tiles = static_cast<long long>(divUp(n, best.features)) * row_blocks;
    const long long share = static_cast<long long>(divUp(tiles, dev.sms));
    // Rounded down to 128 bytes so that the allocation granularity cannot push a block past the
    // share; + 1 KiB: the per-block reservation.
    const long long padded = (dev.smem_per_sm / share - 1024) / 128 * 128;
    if (padded > best.bytes && padded <= dev.smem_optin &&
        dev.smem_per_sm / (padded + 1024) == share) {
      best.bytes = static_cast<int>(padded);
    }
  }
  *out = best;
  return Status::kSuccess;
}

template <typename TW, typename TX, int kMaxRows>
Status launchGemv(const DeviceArgs& a, cudaStream_t stream) {
  using L = GemvLayout<TW, TX, kMaxRows>;
  auto kernel = gemvKernel<TW, TX, kMaxRows>;
  GemvDevice dev;
  REE_RETURN_IF_ERROR(gemvDevice(&dev));
  REE_RETURN_IF_ERROR(allowFullSharedMemory(kernel));
  // Balanced tiles for one row of x only: with two to four rows the kernel is also bound by its
  // fmas, and idle lanes cost more than the balance gains (H100: 4096 x 6144, four rows of x,
  // 33.5 us with 32 features per block against 36.1 us with 24).
  const int min_features = kMaxRows == 1 ? 8 : kGemvRowsPerBlock;
  GemvTiling tiling;
  REE_RETURN_IF_ERROR(chooseGemvTiling(dev, a.n, divUp(a.m, kMaxRows), min_features,
                                       /*cap_blocks_per_sm=*/kMaxRows == 1, L::sharedBytes,
                                       &tiling));
  const int warps = tiling.warps, bytes = tiling.bytes;
  GemvShape g;
  g.warps = warps;
  g.features = tiling.features;
  g.n_chunks = static_cast<int>(divUp(a.k, kReduceChunk));
  g.rounds = static_cast<int>(divUp(g.n_chunks, warps));
  dim3 grid(divUp(a.n, g.features), divUp(a.m, kMaxRows));
  launchChained(kernel, grid, warps * 32, bytes, stream, a, g);
  REE_CUDA_CHECK_LAUNCH();
  return Status::kSuccess;
}

template <typename TW, typename TX, int kRows>
Status launchGemv4(const DeviceArgs& a, cudaStream_t stream) {
  using L = Gemv4Layout<TW, TX, kRows>;
  auto kernel = gemv4Kernel<TW, TX, kRows>;
  GemvDevice dev;
  REE_RETURN_IF_ERROR(gemvDevice(&dev));
  REE_RETURN_IF_ERROR(allowFullSharedMemory(kernel));
  const long long tiles = static_cast<long long>(divUp(a.n, kGemv4Features)) * divUp(a.m, kRows);
  int warps = 0, bytes = 0;
  REE_RETURN_IF_ERROR(
      chooseGemvWarps(dev, tiles, kGemv4MaxWarps, 1, L::sharedBytes, &warps, &bytes));
  Gemv4Shape s;
  s.warps = warps;
  s.n_chunks = static_cast<int>(divUp(a.k, kReduceChunk));
  s.rounds = static_cast<int>(divUp(s.n_chunks, warps * kGemv4Groups));
  dim3 grid(divUp(a.n, kGemv4Features), divUp(a.m, kRows));
  launchChained(kernel, grid, warps * 32, bytes, stream, a, s);
  REE_CUDA_CHECK_LAUNCH();
  return Status::kSuccess;
}

template <typename TW, typename TX>
Status dispatchGemv(const DeviceArgs& a, cudaStream_t stream) {
  // Up to four rows of x the one-feature-per-lane kernel is the faster one (measured on H100,
  // docs/benchmarks-history.md); from five rows on, the four-features-per-lane kernel.
  if (a.m <= 1) return launchGemv<TW, TX, 1>(a, stream);
  if (a.m <= 2) return launchGemv<TW, TX, 2>(a, stream);
  if (a.m <= 4) return launchGemv<TW, TX, 4>(a, stream);
  if (a.m <= 8) return launchGemv4<TW, TX, 8>(a, stream);
  return launchGemv4<TW, TX, 16>(a, stream);  // M > 16: several row blocks (grid.y)
}

}  // namespace
}  // namespace ree::repops::cuda
