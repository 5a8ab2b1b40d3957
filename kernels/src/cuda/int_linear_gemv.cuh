// repops-2 linear for few rows of x (decode): a GEMV that reads w once, in its stored dtype, and
// quantises it on the fly. Included by int_linear.cu (its GemmArgs, storeOutput and the x planes
// of its quantisation kernel); not a header of its own.
//
// One warp per output n walks the K-blocks in increasing order. For each block, lane l loads
// w[n, 128 b + 4 l .. + 3], the warp's max of |bits| gives the block exponent, and each lane turns
// its four values into w's three base-128 digits (int_linear.h: the same quantize and split as the
// quantisation kernel). x's four digit planes come from the quantisation kernel. The nine kept
// digit pairs are __dp4a products (four int8 pairs each) into four int32 shift classes, summed over
// the warp with __reduce_add_sync: exact integers, so the block product P is the GEMM's, and each
// output's binary64 sum visits the blocks in the same order. The bits are the GEMM's and the CPU's.
#pragma once

namespace ree::repops::cuda {
namespace {

// intLinear uses the GEMV for m <= this: on an H100 it took 0.056 ms at m = 1 and 0.177 ms at
// m = 8 (4096 x 4096, bf16), against 0.15 ms for the GEMM at any m <= 64.
constexpr int kGemvMaxRows = 4;
constexpr int kGemvWarps = 4;   // outputs per thread block
constexpr int kGemvUnroll = 4;  // K-blocks of w loaded ahead (bytes in flight per warp)

struct GemvArgs {
  GemmArgs out;  // x planes (m_padded = m), exponents, bias, y, m, n, blocks
  const void* w;
  int64_t w_stride;
  int64_t k;
};

// This lane's four values of block b of w's row (zeros beyond K) and their largest |bits|.
template <typename T>
__device__ __forceinline__ uint32_t loadWQuad(const T* row, int64_t k, int b, int lane,
                                              float (&values)[4]) {
  const int64_t k0 = static_cast<int64_t>(b) * kBlock + lane * 4;
  uint32_t max_bits = 0;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    values[j] = k0 + j < k ? loadFloat(row[k0 + j]) : 0.0f;
    max_bits = max(max_bits, floatBits(values[j]) & 0x7fffffffu);
  }
  return max_bits;
}

// The block's exponent and this lane's three digit words (digit j of its four values, packed).
__device__ __forceinline__ int quantizeWQuad(const float (&values)[4], uint32_t lane_max_bits,
                                             uint32_t (&digits)[int_linear::kWSlices]) {
  const int exponent =
      int_linear::blockExponentOfMaxBits(__reduce_max_sync(0xffffffffu, lane_max_bits));
#pragma unroll
  for (int s = 0; s < int_linear::kWSlices; ++s)
    digits[s] = 0;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    int8_t d[int_linear::kWSlices];
    int_linear::splitW(int_linear::quantize(values[j], exponent, int_linear::kWShift), d);
#pragma unroll
    for (int s = 0; s < int_linear::kWSlices; ++s)
      digits[s] |= static_cast<uint32_t>(static_cast<uint8_t>(d[s])) << (8 * j);
  }
  return exponent;
}

// The exact block product of x row m with this warp's w digits (every lane gets it).
__device__ __forceinline__ int64_t gemvBlockProduct(const GemmArgs& a, int m, int b, int lane,
                                                    const uint32_t (&w)[int_linear::kWSlices]) {
  const int64_t plane = a.m_padded * a.k_padded;
  const int8_t* x = a.x_planes + m * a.k_padded + static_cast<int64_t>(b) * kBlock + lane * 4;
  int32_t cls[4] = {0, 0, 0, 0};
#pragma unroll
  for (int i = 0; i < int_linear::kXSlices; ++i) {
    const int d = *reinterpret_cast<const int*>(x + i * plane);
#pragma unroll
    for (int j = 0; j < int_linear::kWSlices; ++j) {
      if (i + j <= int_linear::kKeptPairSum) {
        cls[i + j] = __dp4a(d, static_cast<int>(w[j]), cls[i + j]);
      }
    }
  }
#pragma unroll
  for (int c = 0; c < 4; ++c)
    cls[c] = __reduce_add_sync(0xffffffffu, cls[c]);
  return int_linear::combineShiftClasses(cls[0], cls[1], cls[2], cls[3]);
}

template <typename T>
__global__ void __launch_bounds__(kGemvWarps * 32) intGemvKernel(GemvArgs g) {
  const GemmArgs& a = g.out;
  const int lane = threadIdx.x & 31;
  const int64_t n = static_cast<int64_t>(blockIdx.x) * kGemvWarps + (threadIdx.x >> 5);
  if (n >= a.n) return;  // the whole warp leaves together
  const T* row = static_cast<const T*>(g.w) + n * g.w_stride;
  double acc[kGemvMaxRows];
#pragma unroll
  for (int m = 0; m < kGemvMaxRows; ++m)
    acc[m] = 0.0;
  for (int b0 = 0; b0 < a.blocks; b0 += kGemvUnroll) {
    float values[kGemvUnroll][4];
    uint32_t max_bits[kGemvUnroll];
#pragma unroll
    for (int u = 0; u < kGemvUnroll; ++u)
      max_bits[u] = b0 + u < a.blocks ? loadWQuad(row, g.k, b0 + u, lane, values[u]) : 0u;
#pragma unroll
    for (int u = 0; u < kGemvUnroll; ++u) {
      const int b = b0 + u;
      if (b >= a.blocks) break;
      uint32_t digits[int_linear::kWSlices];
      const int w_exponent = quantizeWQuad(values[u], max_bits[u], digits);
#pragma unroll
      for (int m = 0; m < kGemvMaxRows; ++m) {
        if (m >= a.m) break;
        const int64_t product = gemvBlockProduct(a, m, b, lane, digits);
        const double scale = int_linear::blockScale(a.x_exponents[m * a.blocks + b], w_exponent);
        acc[m] = int_linear::addBlock(acc[m], product, scale);
      }
    }
  }
  if (lane != 0) return;
#pragma unroll
  for (int m = 0; m < kGemvMaxRows; ++m) {
    if (m >= a.m) break;
    storeOutput(a, m, static_cast<int>(n), acc[m]);
  }
}

Status launchGemv(const GemmArgs& out, const LinearArgs& args, cudaStream_t stream) {
  GemvArgs g{out, args.w, args.wStride(), args.k};
  const unsigned grid = static_cast<unsigned>((args.n + kGemvWarps - 1) / kGemvWarps);
  switch (args.w_dtype) {
    case DType::kF32:
      intGemvKernel<float><<<grid, kGemvWarps * 32, 0, stream>>>(g);
      break;
    case DType::kBF16:
      intGemvKernel<bf16_t><<<grid, kGemvWarps * 32, 0, stream>>>(g);
      break;
    default:
      intGemvKernel<f16_t><<<grid, kGemvWarps * 32, 0, stream>>>(g);
      break;
  }
  REE_CUDA_CHECK_LAUNCH();
  return Status::kSuccess;
}

}  // namespace
}  // namespace ree::repops::cuda
