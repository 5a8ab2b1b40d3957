// The CUDA linear GEMM for many rows of x (prefill, docs/repops-spec/linear.md): a 128x128 output
// tile per block, 8x8 outputs per thread, k tiles of 16 staged in shared memory as fp32, one fma
// chain per output in k order with the 128-wide chunk totals in shared memory; and its launch.
// Internal: included by linear.cu only (after linear_common.cuh); not a header of its own.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "grid.cuh"
#include "linear_common.cuh"
#include "ree/core/cuda_check.h"
#include "ree/kernels/reduce.h"
#include "shared_memory.cuh"

namespace ree::repops::cuda {
namespace {

// ==== GEMM =======================================================================================
// Prefill shapes are bound by FFMA issue, so the kernel is organised around keeping four warps
// per SM sub-partition busy: 8 x 8 outputs per thread in registers (the running chunk's fma
// chains), and the per-output totals of the finished chunks in shared memory, not in registers.
// With both in registers a thread needed ~205 registers and an SM held one block (two warps per
// sub-partition, too few to hide the shared-memory loads of the inner loop); the totals are touched
// once per 128-wide chunk (16 float4 loads and stores per thread for 8192 fmas), so keeping them in
// shared memory costs little and lets two blocks share an SM.
constexpr int kTileM = 128;
constexpr int kTileN = 128;
constexpr int kTileK = 16;  // divides kReduceChunk: chunk boundaries fall on tile boundaries
constexpr int kGemmThreads = 256;
static_assert(kReduceChunk % kTileK == 0, "k tiles must not straddle chunks");

struct GemmShared {
  float x_tile[2][kTileK][kTileM];  // fp32 staging, double-buffered
  float w_tile[2][kTileK][kTileN];
  float4 totals[16][kGemmThreads];  // thread t's 64 chunk totals: totals[q][t], q = 0..15
};
constexpr int kGemmSharedBytes = static_cast<int>(sizeof(GemmShared));

// 8 consecutive k of one row as loaded from global memory, converted to fp32 only when the tile
// is written to shared memory. Converting right after the load made every thread wait for its
// loads at the top of each tile (ncu: long-scoreboard stalls), where the raw words can wait in
// registers while the tile before is computed.
template <typename T>
struct Raw8 {  // 16-bit types: 8 elements in 16 bytes
  uint4 words;
};
template <>
struct Raw8<float> {
  float4 lo, hi;
};

// Positions past k hold `pad`: x pads with -0 and w with +0, so a padded step computes
// fma(-0, +0, p) = -0 + p = p exactly, for every p including -0 (a +0 product would turn a -0
// partial into +0). Rows past the matrix load +0 (never stored).
template <typename T>
__device__ __forceinline__ void gemmLoadRaw8(const T* row, bool row_valid, int k, int k_total,
                                             bool vector_ok, bool pad_negative, Raw8<T>& out) {
  if (row_valid && vector_ok && k + 8 <= k_total) {
    out.words = __ldg(reinterpret_cast<const uint4*>(row + k));
    return;
  }
  const uint32_t pad = pad_negative ? 0x8000u : 0u;  // -0 / +0 in bf16 and in f16
  uint32_t h[8];
#pragma unroll
  for (int e = 0; e < 8; ++e)
    h[e] = !row_valid ? 0u : (k + e < k_total) ? row[k + e].bits : pad;
  out.words =
      make_uint4(h[0] | h[1] << 16, h[2] | h[3] << 16, h[4] | h[5] << 16, h[6] | h[7] << 16);
}
__device__ __forceinline__ void gemmLoadRaw8(const float* row, bool row_valid, int k, int k_total,
                                             bool vector_ok, bool pad_negative, Raw8<float>& out) {
  if (row_valid && vector_ok && k + 8 <= k_total) {
    out.lo = __ldg(reinterpret_cast<const float4*>(row + k));
    out.hi = __ldg(reinterpret_cast<const float4*>(row + k + 4));
    return;
  }
  const float pad = pad_negative ? -0.0f : 0.0f;
  float v[8];
#pragma unroll
  for (int e = 0; e < 8; ++e)
    v[e] = !row_valid ? 0.0f : (k + e < k_total) ? row[k + e] : pad;
  out.lo = make_float4(v[0], v[1], v[2], v[3]);
  out.hi = make_float4(v[4], v[5], v[6], v[7]);
}

template <typename T>
__device__ __forceinline__ void gemmUnpack8(const Raw8<T>& raw, float out[8]) {
  unpack8(raw.words, static_cast<const T*>(nullptr), out);
}
__device__ __forceinline__ void gemmUnpack8(const Raw8<float>& raw, float out[8]) {
  out[0] = raw.lo.x, out[1] = raw.lo.y, out[2] = raw.lo.z, out[3] = raw.lo.w;
  out[4] = raw.hi.x, out[5] = raw.hi.y, out[6] = raw.hi.z, out[7] = raw.hi.w;
}

template <typename TW, typename TX>
__global__ void __launch_bounds__(kGemmThreads, 2)
    gemmKernel(DeviceArgs a, int x_vector_ok, int w_vector_ok) {
  extern __shared__ __align__(16) unsigned char gemm_shared_bytes[];
  GemmShared& shared = *reinterpret_cast<GemmShared*>(gemm_shared_bytes);

  const int tid = threadIdx.x;
  const int tx = tid % 16;  // n fragment: tx*4 + {0..3} and 64 + tx*4 + {0..3}
  const int ty = tid / 16;  // m fragment: ty*4 + {0..3} and 64 + ty*4 + {0..3}
  const int n0 = blockIdx.x * kTileN;
  const int m0 = blockIdx.y * kTileM;

  // Staging role: one row of the tile (x row or w row) and one half of the 16 k.
  const int load_row = tid % 128;
  const int load_k = (tid / 128) * 8;
  const bool x_row_valid = m0 + load_row < a.m;
  const bool w_row_valid = n0 + load_row < a.n;
  const TX* x_row = static_cast<const TX*>(a.x) +
                    static_cast<int64_t>(x_row_valid ? m0 + load_row : 0) * a.x_stride;
  const TW* w_row = static_cast<const TW*>(a.w) +
                    static_cast<int64_t>(w_row_valid ? n0 + load_row : 0) * a.w_stride;

  Raw8<TX> x_raw;
  Raw8<TW> w_raw;
  auto loadTile = [&](int k0) {
    gemmLoadRaw8(x_row, x_row_valid, k0 + load_k, a.k, x_vector_ok != 0, true, x_raw);
    gemmLoadRaw8(w_row, w_row_valid, k0 + load_k, a.k, w_vector_ok != 0, false, w_raw);
  };
  auto storeTile = [&](int buffer) {
    float x_stage[8], w_stage[8];
    gemmUnpack8(x_raw, x_stage);
    gemmUnpack8(w_raw, w_stage);
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      shared.x_tile[buffer][load_k + e][load_row] = x_stage[e];
      shared.w_tile[buffer][load_k + e][load_row] = w_stage[e];
    }
  };

  float partial[8][8];
#pragma unroll
  for (int i = 0; i < 8; ++i) {
#pragma unroll
    for (int j = 0; j < 8; ++j)
      partial[i][j] = 0.0f;
  }

  const int tiles = (a.k + kTileK - 1) / kTileK;
  loadTile(0);
  storeTile(0);
  __syncthreads();
  bool first_chunk = true;
  for (int tile = 0; tile < tiles; ++tile) {
    const int buffer = tile & 1;
    if (tile + 1 < tiles) loadTile((tile + 1) * kTileK);
#pragma unroll
    for (int kk = 0; kk < kTileK; ++kk) {
      float4 a_lo = *reinterpret_cast<const float4*>(&shared.x_tile[buffer][kk][ty * 4]);
      float4 a_hi = *reinterpret_cast<const float4*>(&shared.x_tile[buffer][kk][64 + ty * 4]);
      float4 b_lo = *reinterpret_cast<const float4*>(&shared.w_tile[buffer][kk][tx * 4]);
      float4 b_hi = *reinterpret_cast<const float4*>(&shared.w_tile[buffer][kk][64 + tx * 4]);
      const float xa[8] = {a_lo.x, a_lo.y, a_lo.z, a_lo.w, a_hi.x, a_hi.y, a_hi.z, a_hi.w};
      const float wb[8] = {b_lo.x, b_lo.y, b_lo.z, b_lo.w, b_hi.x, b_hi.y, b_hi.z, b_hi.w};
#pragma unroll
      for (int i = 0; i < 8; ++i) {
#pragma unroll
        for (int j = 0; j < 8; ++j)
          partial[i][j] = fmaF32(xa[i], wb[j], partial[i][j]);
      }
    }
    const int k_end = (tile + 1) * kTileK;
    // End of a chunk that is not the last: total = total + partial, in chunk order. The first
    // chunk stores its partial as the total (-0 + p == p for every p, including -0 and NaN).
    if (k_end % kReduceChunk == 0 && k_end < a.k) {
#pragma unroll
      for (int q = 0; q < 16; ++q) {
        float* p = &partial[q / 2][(q % 2) * 4];
        float4 t;
        if (first_chunk) {
          t = make_float4(p[0], p[1], p[2], p[3]);
        } else {
          t = shared.totals[q][tid];
          t.x = t.x + p[0], t.y = t.y + p[1], t.z = t.z + p[2], t.w = t.w + p[3];
        }
        shared.totals[q][tid] = t;
        p[0] = p[1] = p[2] = p[3] = 0.0f;
      }
      first_chunk = false;
    }
    if (tile + 1 < tiles) storeTile(buffer ^ 1);
    __syncthreads();
  }

  // The last chunk's partial joins the total as the output's dot.
#pragma unroll
  for (int q = 0; q < 16; ++q) {
    float* p = &partial[q / 2][(q % 2) * 4];
    if (!first_chunk) {
      float4 t = shared.totals[q][tid];
      p[0] = t.x + p[0], p[1] = t.y + p[1], p[2] = t.z + p[2], p[3] = t.w + p[3];
    }
  }
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    int row = m0 + (i < 4 ? ty * 4 + i : 64 + ty * 4 + (i - 4));
    if (row >= a.m) continue;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      int col = n0 + (j < 4 ? tx * 4 + j : 64 + tx * 4 + (j - 4));
      if (col < a.n) storeOutput(a, row, col, partial[i][j]);
    }
  }
}

bool aligned16(const void* pointer, int64_t stride, int element_size) {
  return (reinterpret_cast<uintptr_t>(pointer) % 16 == 0) && (stride * element_size) % 16 == 0;
}

template <typename TW, typename TX>
Status launchGemm(const DeviceArgs& a, cudaStream_t stream) {
  auto kernel = gemmKernel<TW, TX>;
  REE_RETURN_IF_ERROR(allowFullSharedMemory(kernel));
  int x_vector_ok = aligned16(a.x, a.x_stride, sizeof(TX)) ? 1 : 0;
  int w_vector_ok = aligned16(a.w, a.w_stride, sizeof(TW)) ? 1 : 0;
  dim3 grid(divUp(a.n, kTileN), divUp(a.m, kTileM));
  kernel<<<grid, kGemmThreads, kGemmSharedBytes, stream>>>(a, x_vector_ok, w_vector_ok);
  REE_CUDA_CHECK_LAUNCH();
  return Status::kSuccess;
}

}  // namespace
}  // namespace ree::repops::cuda
