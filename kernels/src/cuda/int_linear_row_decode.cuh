// repops-3 linear for at most 8 rows of x and bf16 w (the decode step of a bf16 model): the same
// integers as the skinny kernel (int_linear_row_skinny.cuh: one mma.sync m16n8k32 per kept digit
// pair, w's unsigned digits u = Wi + B made on the fly, the digit-sum correction), organised to
// keep the weight stream at the DRAM's pace. Included by int_linear_row.cu; not a header of its
// own.
//
// Why a kernel of its own: at one row of x the skinny kernel converted each chunk of w to fp32 in
// registers as it arrived and kept two chunks in flight, so an H100 read w at about 1.1 TB/s
// (37% of a copy). Here each lane keeps the raw 16-byte loads of kDecodeDepth chunks in flight
// (the ring is the registers; slot d is refilled as soon as its chunk has been turned into
// digits), x's digits are loaded as each chunk starts (L1 hits once a block of the SM has read
// them; loading them a chunk ahead cost registers and measured slower), and u comes from ONE fma:
// fma(W, 2^(20 - e), 1.5 * 2^23 + B) rounds the exact W * 2^(20 - e) + 1.5 * 2^23 + B once, which
// is RNE(W * 2^(20 - e)) + 1.5 * 2^23 + B exactly as the two multiplications and the addition did
// (the product is exact inside the fma, so no underflow case remains). 2^(20 - e) is a normal
// float for e >= -107; a block whose tiles hold a row with a smaller exponent takes the
// two-factor form. Tuned by stand-alone variants on an H100 (docs/benchmarks-history.md).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "chained_launch.cuh"

namespace ree::repops::cuda {
namespace {

constexpr int kDecodeMaxRows = 8;  // one mma column group
constexpr int kDecodeWarps = 8;    // warp w takes the chunks w, w + 8, ... of the block's K
constexpr int kDecodeDepth = 3;    // chunks of w in flight per lane (16 bytes x 2 rows each)
// Blocks per SM the registers are budgeted for (80 registers, a few spilled values reloaded from
// L1): measured faster than 2 blocks without spills on the H100.
constexpr int kDecodeMinBlocks = 3;

// True when the decode kernel runs a skinny call: few rows, bf16 w whose rows start on 16 bytes
// and hold whole 16-byte pieces (k a multiple of 8, as in every model).
bool decodeKernelApplies(DType w_dtype, const void* w, int64_t w_stride, int64_t k, int64_t rows) {
  return rows <= kDecodeMaxRows && w_dtype == DType::kBF16 && k % 8 == 0 && w_stride % 8 == 0 &&
         (reinterpret_cast<uintptr_t>(w) & 15) == 0 && k <= kSkinnyMaxK;
}

__device__ __forceinline__ uint4 loadStreaming(const void* p) {
  uint4 r;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
               : "l"(p));
  return r;
}

// Eight bf16 of one w row at k0 .. k0 + 7 as raw bits. k is a multiple of 8, so a lane's eight
// elements lie wholly below k or wholly at or beyond it; the latter (only in the last chunk) load
// the row's last eight instead, whose digits then meet x's zero padding: they add nothing.
__device__ __forceinline__ uint4 loadEightBf16(const uint16_t* row, int k0, int last_k0) {
  return loadStreaming(row + min(k0, last_k0));
}

// True when 2^(20 - e) is a normal float (e >= -107), so one fma makes u; a non-finite row's
// factors are 0 (wScale) either way.
__device__ __forceinline__ bool oneFmaScales(int exponent) {
  float s1, s2;
  wScale(exponent, s1, s2);
  return s1 * s2 <= 3.4e38f;
}

struct DecodeLane {
  const uint16_t* rows[2];  // w rows g and g + 8 of the tile (clamped to row n - 1)
  const int8_t* x;          // x row g's digit planes at this warp's first chunk, lane offset
  bool x_live;              // row g < m (padding rows are zeros: not loaded)
  int chunks;               // this warp's chunks: warp, warp + kDecodeWarps, ...
  int first_k;              // k of the lane's first element in the warp's first chunk
  int last_k0;              // k - 8: where the row's last eight elements start
  int k_padded;             // (32-bit: k <= kSkinnyMaxK)
};

__device__ __forceinline__ void loadWChunk(const DecodeLane& d, int i, uint4 (&w)[2]) {
  const int k0 = d.first_k + i * kDecodeWarps * kChunk;
  w[0] = loadEightBf16(d.rows[0], k0, d.last_k0);
  w[1] = loadEightBf16(d.rows[1], k0, d.last_k0);
}

__device__ __forceinline__ void loadXChunk(const DecodeLane& d, int i, uint2 (&x)[4]) {
  const int offset = i * kDecodeWarps * kChunk;
#pragma unroll
  for (int p = 0; p < 4; ++p) {
    x[p] = d.x_live ? __ldg(reinterpret_cast<const uint2*>(d.x + p * d.k_padded + offset))
                    : make_uint2(0, 0);
  }
}

template <bool kBf16>
__device__ __forceinline__ float wordLow(uint32_t word) {
  return kBf16 ? __uint_as_float(word << 16) : halfBitsToFloat(word & 0xffffu);
}

template <bool kBf16>
__device__ __forceinline__ float wordHigh(uint32_t word) {
  return kBf16 ? __uint_as_float(word & 0xffff0000u) : halfBitsToFloat(word >> 16);
}

// The A fragments of the three w digits of one chunk from raw 16-bit elements, bf16 or fp16
// (register r: tile row g + 8 (r & 1), elements 4 (r >> 1) .. + 3 of the lane's eight, as
// wFragments). kOneFma: f = (scale, unused), u from one fma (above); else f = (s1, s2) of wScale
// per row. Shared with the tiled kernel (int_linear_row_tiled.cuh).
template <bool kBf16, bool kOneFma>
__device__ __forceinline__ void fragmentsOf16Bit(const uint4 (&w)[2], const float (&f1)[2],
                                                 const float (&f2)[2], uint32_t (&a)[3][4]) {
  constexpr float kMagic = 13639744.0f;  // 1.5 * 2^23 + 64 * (2^14 + 2^7 + 1)
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const int row = r & 1;
    const uint32_t lo = (r >> 1) ? w[row].z : w[row].x, hi = (r >> 1) ? w[row].w : w[row].y;
    const float v[4] = {wordLow<kBf16>(lo), wordHigh<kBf16>(lo), wordLow<kBf16>(hi),
                        wordHigh<kBf16>(hi)};
    uint32_t bits[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      bits[e] = kOneFma ? __float_as_uint(__fmaf_rn(v[e], f1[row], kMagic))
                        : unsignedDigitBits(v[e], f1[row], f2[row]);
    }
    packDigits(bits, a[0][r], a[1][r], a[2][r]);
  }
}

// The nine kept digit pairs of one chunk (as multiplyChunk, for one group of 8 x rows).
__device__ __forceinline__ void decodeMultiply(const uint32_t (&a)[3][4], const uint2 (&b)[4],
                                               int32_t (&acc)[kClasses][1][4]) {
#pragma unroll
  for (int i = 0; i < int_linear::kXSlices; ++i) {
#pragma unroll
    for (int j = 0; j < int_linear::kWSlices; ++j) {
      if (i + j <= int_linear::kKeptPairSum) mmaU8S8(acc[i + j][0], a[j], b[i]);
    }
  }
}

// The warp's chunks through the register ring; w's first kDecodeDepth chunks are already loaded.
// The row factors are made here, so that only the chosen form's stay live.
template <bool kOneFma>
__device__ __forceinline__ void decodeChunks(const DecodeLane& d, const int (&exponents)[2],
                                             uint4 (&w)[kDecodeDepth][2],
                                             int32_t (&acc)[kClasses][1][4]) {
  float f1[2], f2[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    wScale(exponents[r], f1[r], f2[r]);
    if (kOneFma) f1[r] *= f2[r];
  }
  for (int base = 0; base < d.chunks; base += kDecodeDepth) {
#pragma unroll
    for (int slot = 0; slot < kDecodeDepth; ++slot) {
      const int i = base + slot;
      if (i < d.chunks) {
        uint2 b[4];
        loadXChunk(d, i, b);
        uint32_t a[3][4];
        fragmentsOf16Bit</*kBf16=*/true, kOneFma>(w[slot], f1, f2, a);
        if (i + kDecodeDepth < d.chunks) loadWChunk(d, i + kDecodeDepth, w[slot]);
        decodeMultiply(a, b, acc);
      }
    }
  }
}

// Block = one tile of 16 w rows; its 8 warps split K. Launched chained like the skinny kernel.
__global__ void __launch_bounds__(kDecodeWarps * 32, kDecodeMinBlocks) decodeKernel(SkinnyArgs s) {
  __shared__ int32_t totals[kClasses][8][kSkinnyTotalsStride];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, q = lane & 3;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * kSkinnyTileN;
  DecodeLane d;
  int64_t rows[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    rows[r] = min(n0 + g + 8 * r, static_cast<int64_t>(s.out.n) - 1);
    d.rows[r] = static_cast<const uint16_t*>(s.w) + rows[r] * s.w_stride;
  }
  d.first_k = warp * kChunk + 8 * q;
  d.last_k0 = static_cast<int>(s.k) - 8;
  d.k_padded = static_cast<int>(s.k_padded);
  d.chunks = (s.chunks - warp + kDecodeWarps - 1) / kDecodeWarps;
  d.x_live = g < s.out.m;
  d.x = s.x_planes + static_cast<int64_t>(g) * 4 * s.k_padded + warp * kChunk + 8 * q;
  uint4 w[kDecodeDepth][2];
  if (s.w_constant) {
#pragma unroll
    for (int i = 0; i < kDecodeDepth; ++i)
      if (i < d.chunks) loadWChunk(d, i, w[i]);
  }
  waitForPredecessor();
  allowSuccessorLaunch();
  if (!s.w_constant) {
#pragma unroll
    for (int i = 0; i < kDecodeDepth; ++i)
      if (i < d.chunks) loadWChunk(d, i, w[i]);
  }
  for (int i = threadIdx.x; i < kClasses * 8 * kSkinnyTotalsStride; i += blockDim.x)
    (&totals[0][0][0])[i] = 0;
  int exponents[2];  // after the wait: a pre-pass kernel may have written them
#pragma unroll
  for (int r = 0; r < 2; ++r)
    exponents[r] = n0 + g + 8 * r < s.out.n ? s.out.w_exponents[rows[r]] : 0;
  // One form per block; the barrier also orders the zeroed totals before the atomics.
  const bool one_fma = __syncthreads_and(oneFmaScales(exponents[0]) && oneFmaScales(exponents[1]));
  int32_t acc[kClasses][1][4] = {};
  if (one_fma) {
    decodeChunks<true>(d, exponents, w, acc);
  } else {
    decodeChunks<false>(d, exponents, w, acc);
  }
  finishSkinnyBlock<1>(s, n0, lane, acc, totals);
}

Status launchDecode(const SkinnyArgs& s, cudaStream_t stream) {
  const unsigned grid = static_cast<unsigned>((s.out.n + kSkinnyTileN - 1) / kSkinnyTileN);
  launchChained(decodeKernel, grid, kDecodeWarps * 32, 0, stream, s);
  REE_CUDA_CHECK_LAUNCH();
  return Status::kSuccess;
}

}  // namespace
}  // namespace ree::repops::cuda
