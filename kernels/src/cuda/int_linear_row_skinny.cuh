// repops-3 linear for few rows of x (decode, m <= kSkinnyMaxRows): w is read once, in its stored
// dtype, and quantised on the fly with its row exponents (a pre-pass, or prepared); x comes as
// the digit planes of quantizeRowsKernel. Included by int_linear_row.cu; not a header of its own.
//
// A block owns 16 rows of w; its 8 warps take the 32-wide K chunks in turn. Each chunk is one
// mma.sync m16n8k32 per kept digit pair and 8 rows of x: A = 16 w rows x 32 k of one w digit, B =
// 32 k x 8 x rows of one x digit, C = four int32 shift-class sums. The products are exact, so
// any k order gives the same sums: lane (g, q) loads 8 consecutive w elements (one 16-byte load
// for 16-bit w) and puts them in the A fragment slots of k = 4q .. 4q + 3 and 16 + 4q .. + 3; it
// reads x's digits of the same 8 elements for B, so both sides agree on the permutation.
//
// Cheap w digits: with Wi = RNE(W * 2^(20 - e_w)) (|Wi| <= 2^20), u = Wi + B, B = 64 (2^14 + 2^7
// + 1), has the base-128 digits u_j = e_j + 64 (e_j the balanced digits of Wi: e1, e2 in
// [-64, 63], e0 in [-64, 64], so u_j in [0, 128]). One fp32 addition gives u: t = W * 2^(20 - e)
// is exact (or below 2^-126, where RNE gives 0 anyway), and t + (1.5 * 2^23 + B) lies in
// [2^23, 2^24), where the fp32 spacing is 1, so the sum is RNE(t) + 1.5 * 2^23 + B (the constant
// is even: ties go the same way) and its low 22 bits are u. Byte permutes then gather the 7-bit
// fields into the u8 A fragments. The mma gives sum d_i u_j = sum d_i e_j + 64 sum d_i, so each
// class subtracts 64 times x's digit sums over the row (computed once per x row). For k <=
// kSkinnyMaxK every raw sum (at most 3 * 65 * 128 per k) stays below 2^31: no int32 wrap.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "chained_launch.cuh"

namespace ree::repops::cuda {
namespace {

constexpr int kSkinnyMaxRows = 64;
constexpr int64_t kSkinnyMaxK = 65536;
constexpr int kSkinnyWarps = 8;
constexpr int kSkinnyTileN = 16;  // w rows per block (the mma's M)
constexpr int kSkinnyUnroll = 2;  // chunks per warp loaded before the first is used
constexpr int kChunk = 32;        // K per mma
constexpr int kClasses = 4;       // shift classes 21, 14, 7, 0 (digit-pair sum i + j = 0..3)
// int32 per x row of a block's class totals: 20 puts a warp's 32 atomics of one register (rows
// 2q, columns g: 8q + g mod 32) on distinct banks (16 put them on 8 banks: four-way conflicts).
constexpr int kSkinnyTotalsStride = kSkinnyTileN + 4;

struct SkinnyArgs {
  RowOutputArgs out;
  const void* w;
  int64_t w_stride, k;
  const int8_t* x_planes;       // [8 * groups][4 * k_padded]
  const int32_t* x_digit_sums;  // [8 * groups][4]
  int64_t k_padded;
  int chunks;      // k_padded / kChunk
  int w_constant;  // LinearArgs::w_is_constant: w may be read before the previous kernel ends
};

__device__ __forceinline__ void mmaU8S8(int32_t (&c)[4], const uint32_t (&a)[4], uint2 b) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b.x), "r"(b.y));
}

// 2^(20 - e) as two fp32 factors (each a normal power of two: 20 - e reaches 168), so that
// (W * s1) * s2 is exact whenever the result is at least 2^-126. A non-finite row gets 0 (its
// digits do not matter: its outputs are NaN through dotOf).
__device__ __forceinline__ void wScale(int exponent, float& s1, float& s2) {
  if (exponent == int_linear::kNonFiniteExponent) {
    s1 = s2 = 0.0f;
    return;
  }
  const int power = int_linear::kWShift - exponent;
  const int first = min(power, 100);
  s1 = __uint_as_float(static_cast<uint32_t>(first + 127) << 23);
  s2 = __uint_as_float(static_cast<uint32_t>(power - first + 127) << 23);
}

// The fp32 bits whose low 22 bits are u = RNE(W * 2^(20 - e)) + B (see the top of the file).
__device__ __forceinline__ uint32_t unsignedDigitBits(float w, float s1, float s2) {
  constexpr float kMagic = 13639744.0f;  // 1.5 * 2^23 + 64 * (2^14 + 2^7 + 1), even
  const float t = (w * s1) * s2;
  return __float_as_uint(t + kMagic);
}

// Four elements' u bits to three words of unsigned digits, byte e = element e: p0 = u0 (bits
// 14..21), p1 = u1 (bits 7..13), p2 = u2 (bits 0..6). The two halves of low01 (mid01) hold bits
// 0..15 (8..23) of elements 0 and 1; a shift left by 1 (2) moves u1 (u0) to the top byte of each
// half, where one byte permute gathers it: 13 integer operations per four elements.
__device__ __forceinline__ void packDigits(const uint32_t (&b)[4], uint32_t& p0, uint32_t& p1,
                                           uint32_t& p2) {
  const uint32_t low01 = __byte_perm(b[0], b[1], 0x5410);
  const uint32_t low23 = __byte_perm(b[2], b[3], 0x5410);
  const uint32_t mid01 = __byte_perm(b[0], b[1], 0x6521);
  const uint32_t mid23 = __byte_perm(b[2], b[3], 0x6521);
  p2 = __byte_perm(low01, low23, 0x6420) & 0x7f7f7f7fu;
  p1 = __byte_perm(low01 << 1, low23 << 1, 0x7531) & 0x7f7f7f7fu;
  p0 = __byte_perm(mid01 << 2, mid23 << 2, 0x7531);
}

// The A fragments of the three w digits for one chunk: register r holds tile row g + 8 (r & 1),
// elements 4 (r >> 1) .. + 3 of this lane's eight.
__device__ __forceinline__ void wFragments(const float (&v)[2][8], const float (&s1)[2],
                                           const float (&s2)[2], uint32_t (&a)[3][4]) {
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const int row = r & 1, first = 4 * (r >> 1);
    uint32_t bits[4];
#pragma unroll
    for (int e = 0; e < 4; ++e)
      bits[e] = unsignedDigitBits(v[row][first + e], s1[row], s2[row]);
    packDigits(bits, a[0][r], a[1][r], a[2][r]);
  }
}

// The nine kept digit pairs of one chunk for every group of 8 x rows.
template <int kGroups>
__device__ __forceinline__ void multiplyChunk(const SkinnyArgs& s, int chunk, int lane,
                                              const uint32_t (&a)[3][4],
                                              int32_t (&acc)[kClasses][kGroups][4]) {
  const int g = lane >> 2, q = lane & 3;
#pragma unroll
  for (int group = 0; group < kGroups; ++group) {
    const int8_t* x = s.x_planes + static_cast<int64_t>(group * 8 + g) * 4 * s.k_padded +
                      static_cast<int64_t>(chunk) * kChunk + 8 * q;
    const bool live = group * 8 + g < s.out.m;  // padding rows are zeros: not loaded
#pragma unroll
    for (int i = 0; i < int_linear::kXSlices; ++i) {
      const uint2 b = live ? *reinterpret_cast<const uint2*>(x + i * s.k_padded) : make_uint2(0, 0);
#pragma unroll
      for (int j = 0; j < int_linear::kWSlices; ++j) {
        if (i + j <= int_linear::kKeptPairSum) mmaU8S8(acc[i + j][group], a[j], b);
      }
    }
  }
}

// One output from the four raw unsigned class sums: the digit-sum corrections of x row `row`
// (sums of its digits over the whole K: the mma added 64 per digit of x), then storeRowOutput.
__device__ __forceinline__ void storeRawClassSums(const RowOutputArgs& out,
                                                  const int32_t* x_digit_sums,
                                                  const int32_t (&raw)[kClasses], int row,
                                                  int col) {
  const int32_t* sums = x_digit_sums + row * 4;
  const int32_t s0 = sums[0], s1 = sums[1], s2 = sums[2], s3 = sums[3];
  storeRowOutput(out, row, col, raw[0] - 64 * s0, raw[1] - 64 * (s0 + s1),
                 raw[2] - 64 * (s0 + s1 + s2), raw[3] - 64 * (s1 + s2 + s3));
}

// The same from raw[c * raw_stride], c = 0..3.
__device__ __forceinline__ void storeClassSums(const RowOutputArgs& out,
                                               const int32_t* x_digit_sums, const int32_t* raw,
                                               int raw_stride, int row, int col) {
  const int32_t sums[kClasses] = {raw[0], raw[raw_stride], raw[2 * raw_stride],
                                  raw[3 * raw_stride]};
  storeRawClassSums(out, x_digit_sums, sums, row, col);
}

// This lane's eight elements of rows g and g + 8 for chunks c0, c0 + kSkinnyWarps, ... (zeros
// beyond k and beyond n).
template <typename T, int kUnroll>
__device__ __forceinline__ void loadChunks(const SkinnyArgs& s, const T* const (&rows)[2], int c0,
                                           int q, float (&v)[kUnroll][2][8]) {
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const int64_t k0 = static_cast<int64_t>(c0 + u * kSkinnyWarps) * kChunk + 8 * q;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      if (rows[r] != nullptr && k0 < s.k) {
        loadEight(rows[r], k0, s.k, v[u][r]);
      } else {
#pragma unroll
        for (int j = 0; j < 8; ++j)
          v[u][r][j] = 0.0f;
      }
    }
  }
}

// The block's raw class sums, then its outputs.
template <int kGroups>
__device__ __forceinline__ void finishSkinnyBlock(
    const SkinnyArgs& s, int64_t n0, int lane, const int32_t (&acc)[kClasses][kGroups][4],
    int32_t (*totals)[8 * kGroups][kSkinnyTotalsStride]) {
  constexpr int kRows = 8 * kGroups;
  const int g = lane >> 2, q = lane & 3;
#pragma unroll
  for (int c = 0; c < kClasses; ++c) {
#pragma unroll
    for (int group = 0; group < kGroups; ++group) {
#pragma unroll
      for (int r = 0; r < 4; ++r)
        atomicAdd(&totals[c][group * 8 + 2 * q + (r & 1)][g + 8 * (r >> 1)], acc[c][group][r]);
    }
  }
  __syncthreads();
  for (int i = threadIdx.x; i < kRows * kSkinnyTileN; i += blockDim.x) {
    const int row = i / kSkinnyTileN, col = i % kSkinnyTileN;
    if (row < s.out.m && n0 + col < s.out.n) {
      storeClassSums(s.out, s.x_digit_sums, &totals[0][row][col], kRows * kSkinnyTotalsStride, row,
                     static_cast<int>(n0 + col));
    }
  }
}

// Launched chained (chained_launch.cuh): with a constant w the first chunks' loads are issued
// before waiting for the previous kernel (which writes x's planes); then the loop keeps the next
// chunks' loads in flight while the current ones are multiplied.
template <typename T, int kGroups>
__global__ void __launch_bounds__(kSkinnyWarps * 32) skinnyKernel(SkinnyArgs s) {
  constexpr int kRows = 8 * kGroups;
  constexpr int kUnroll = kGroups >= 8 ? 1 : kSkinnyUnroll;  // 64 rows: registers are full
  constexpr int kStep = kSkinnyWarps * kUnroll;
  __shared__ int32_t totals[kClasses][kRows][kSkinnyTotalsStride];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, q = lane & 3;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * kSkinnyTileN;
  const T* rows[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int64_t n = n0 + g + 8 * r;
    rows[r] = n < s.out.n ? static_cast<const T*>(s.w) + n * s.w_stride : nullptr;
  }
  float v[kUnroll][2][8];
  if (s.w_constant) loadChunks<T, kUnroll>(s, rows, warp, q, v);
  waitForPredecessor();
  allowSuccessorLaunch();
  if (!s.w_constant) loadChunks<T, kUnroll>(s, rows, warp, q, v);
  for (int i = threadIdx.x; i < kClasses * kRows * kSkinnyTotalsStride; i += blockDim.x)
    (&totals[0][0][0])[i] = 0;
  float s1[2], s2[2];
#pragma unroll
  for (int r = 0; r < 2; ++r)
    wScale(rows[r] != nullptr ? s.out.w_exponents[n0 + g + 8 * r] : 0, s1[r], s2[r]);
  int32_t acc[kClasses][kGroups][4] = {};
  for (int c0 = warp; c0 < s.chunks; c0 += kStep) {
    uint32_t a[kUnroll][3][4];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      wFragments(v[u], s1, s2, a[u]);
    if (c0 + kStep < s.chunks) loadChunks<T, kUnroll>(s, rows, c0 + kStep, q, v);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int chunk = c0 + u * kSkinnyWarps;
      if (chunk < s.chunks) multiplyChunk<kGroups>(s, chunk, lane, a[u], acc);
    }
  }
  __syncthreads();  // totals are zeroed
  finishSkinnyBlock<kGroups>(s, n0, lane, acc, totals);
}

// Groups of 8 x rows the skinny kernel is instantiated for (1, 2, 4, 8).
int skinnyGroups(int64_t m) {
  return m <= 8 ? 1 : m <= 16 ? 2 : m <= 32 ? 4 : 8;
}

template <typename T>
void launchSkinnyTyped(const SkinnyArgs& s, int groups, unsigned grid, cudaStream_t stream) {
  switch (groups) {
    case 1:
      launchChained(skinnyKernel<T, 1>, grid, kSkinnyWarps * 32, 0, stream, s);
      break;
    case 2:
      launchChained(skinnyKernel<T, 2>, grid, kSkinnyWarps * 32, 0, stream, s);
      break;
    case 4:
      launchChained(skinnyKernel<T, 4>, grid, kSkinnyWarps * 32, 0, stream, s);
      break;
    default:
      launchChained(skinnyKernel<T, 8>, grid, kSkinnyWarps * 32, 0, stream, s);
      break;
  }
}

Status launchSkinny(const SkinnyArgs& s, DType w_dtype, int groups, cudaStream_t stream) {
  const unsigned grid = static_cast<unsigned>((s.out.n + kSkinnyTileN - 1) / kSkinnyTileN);
  switch (w_dtype) {
    case DType::kF32:
      launchSkinnyTyped<float>(s, groups, grid, stream);
      break;
    case DType::kBF16:
      launchSkinnyTyped<bf16_t>(s, groups, grid, stream);
      break;
    default:
      launchSkinnyTyped<f16_t>(s, groups, grid, stream);
      break;
  }
  REE_CUDA_CHECK_LAUNCH();
  return Status::kSuccess;
}

}  // namespace
}  // namespace ree::repops::cuda
