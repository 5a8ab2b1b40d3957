// CUDA repops-2 linear (docs/repops-spec/linear-int.md) on int8 tensor cores.
//
// 1. Quantisation (one kernel per operand, a warp per (row, 128-block)): the block's exponent
//    from the warp's max of |bits|, the integers RNE(v * 2^(S - e)) (int_linear.h), split into
//    int8 digit planes: x into 4 (d0 * 2^21 + d1 * 2^14 + d2 * 2^7 + d3), w into 3 (e0 * 2^14 +
//    e1 * 2^7 + e2). Planes are [digit][rows padded to the tile][K padded to 128], zero outside
//    the matrix, so the GEMM needs no bounds checks on loads and padding adds exact zeros.
// 2. GEMM: a 64 x 64 output tile per block of 8 warps (2 x 4, each 32 x 16), one 128-wide K-block
//    per step (its int8 planes and its 128 exponents), double-buffered in shared memory through
//    cp.async (fragments read with ldmatrix). Each warp multiplies the nine kept digit pairs
//    (i + j <= 3) with mma.sync m16n8k32 s8 x s8 -> s32 into four int32 accumulators per output,
//    one per shift class i + j (2^21, 2^14, 2^7, 2^0); the sums are exact (|class sum| < 2^22),
//    so the order of the mma instructions does not matter. At the end of each
//    K-block the classes are combined exactly in int64 and added to the output's binary64
//    accumulator (int_linear.h), in increasing block order, by the thread that owns the output.
//    Then the fp32 rounding, bias, NaN canonicalisation, accumulate and output rounding of repops-1
//    (linear.h).
// 3. For m <= 4 (decode) a GEMV replaces the GEMM: it reads w in its stored dtype and quantises it
//    on the fly (int_linear_gemv.cuh), so w is read once and never written as planes.
// The bits are the CPU reference's: same integers, same binary64 sequence, same finishing steps.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "common/storage_element.h"
#include "ree/core/cuda_check.h"
#include "ree/kernels/int_linear.h"
#include "shared_memory.cuh"

namespace ree::repops::cuda {
namespace {

using int_linear::kBlock;

constexpr int kTileM = 64;
constexpr int kTileN = 64;
constexpr int kThreads = 256;           // 8 warps: 2 along M x 4 along N
constexpr int kWarpM = 32;              // per warp: 2 m16 tiles
constexpr int kWarpN = 16;              // per warp: 2 n8 tiles
constexpr int kRowBytes = kBlock + 16;  // shared row pitch: 144 bytes, no bank conflicts below
constexpr int kPlanes = int_linear::kXSlices + int_linear::kWSlices;
constexpr int kPlaneBytes = kPlanes * kTileM * kRowBytes;  // kTileM == kTileN
// Each stage also holds the K-block's exponents: 64 of x's rows, then 64 of w's.
constexpr int kStageBytes = kPlaneBytes + (kTileM + kTileN) * 4;
constexpr int kStages = 2;
constexpr int kSharedBytes = kStages * kStageBytes;  // 130048: one block per SM
static_assert(kTileM == kTileN, "one row count per staged plane");

struct GemmArgs {
  const int8_t* x_planes;      // [4][m_padded][k_padded]
  const int8_t* w_planes;      // [3][n_padded][k_padded]
  const int32_t* x_exponents;  // [m_padded][blocks]
  const int32_t* w_exponents;  // [n_padded][blocks]
  int64_t m_padded, n_padded, k_padded;
  int blocks;
  int m, n;
  const void* bias;
  DType bias_dtype;
  void* y;
  int64_t y_stride;
  int y_is_bf16;
  int accumulate;
};

// ---- quantisation

// Planes of `rows` rows (the matrix's; rows_padded with zeros beyond), one warp per (row, block):
// lane l owns positions 4l .. 4l + 3 of the block.
template <typename T, int kSlices>
__global__ void quantizeKernel(const T* __restrict__ src, int64_t stride, int64_t rows,
                               int64_t rows_padded, int64_t k, int blocks, int shift,
                               int8_t* __restrict__ planes, int64_t k_padded,
                               int32_t* __restrict__ exponents) {
  const int lane = threadIdx.x & 31;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x >> 5);
  const int64_t plane_elements = rows_padded * k_padded;
  for (int64_t item = static_cast<int64_t>(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5);
       item < rows_padded * blocks; item += warps) {
    const int64_t row = item / blocks;
    const int b = static_cast<int>(item - row * blocks);
    const int64_t k0 = static_cast<int64_t>(b) * kBlock + lane * 4;
    float values[4];
    uint32_t max_bits = 0;
    for (int j = 0; j < 4; ++j) {
      values[j] = (row < rows && k0 + j < k) ? loadFloat(src[row * stride + k0 + j]) : 0.0f;
      max_bits = max(max_bits, floatBits(values[j]) & 0x7fffffffu);
    }
    max_bits = __reduce_max_sync(0xffffffffu, max_bits);
    const int exponent = int_linear::blockExponentOfMaxBits(max_bits);
    if (lane == 0) exponents[row * blocks + b] = exponent;
    uint32_t packed[kSlices] = {};
    for (int j = 0; j < 4; ++j) {
      int32_t q = int_linear::quantize(values[j], exponent, shift);
      int8_t digits[kSlices];
      if constexpr (kSlices == int_linear::kXSlices) {
        int_linear::splitX(q, digits);
      } else {
        int_linear::splitW(q, digits);
      }
      for (int s = 0; s < kSlices; ++s)
        packed[s] |= static_cast<uint32_t>(static_cast<uint8_t>(digits[s])) << (8 * j);
    }
    for (int s = 0; s < kSlices; ++s) {
      *reinterpret_cast<uint32_t*>(planes + s * plane_elements + row * k_padded + k0) = packed[s];
    }
  }
}

// ---- GEMM

__device__ __forceinline__ void mmaS8(int32_t (&c)[4], const uint32_t (&a)[4],
                                      const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// Copies K-block b of the tile's 4 x planes (rows m0..) and 3 w planes (rows n0..) into `stage`:
// 7 x 64 rows x 128 bytes in 16-byte cp.async pieces.
__device__ __forceinline__ void loadStage(const GemmArgs& a, int64_t m0, int64_t n0, int b,
                                          int8_t* stage) {
  constexpr int kPiecesPerRow = kBlock / 16;
  constexpr int kPiecesPerPlane = kTileM * kPiecesPerRow;
  for (int piece = threadIdx.x; piece < kPlanes * kPiecesPerPlane; piece += kThreads) {
    const int plane = piece / kPiecesPerPlane;
    const int row = (piece % kPiecesPerPlane) / kPiecesPerRow;
    const int col = (piece % kPiecesPerRow) * 16;
    const int8_t* src;
    if (plane < int_linear::kXSlices) {
      src = a.x_planes + plane * a.m_padded * a.k_padded + (m0 + row) * a.k_padded;
    } else {
      src = a.w_planes + (plane - int_linear::kXSlices) * a.n_padded * a.k_padded +
            (n0 + row) * a.k_padded;
    }
    cpAsync16(stage + (plane * kTileM + row) * kRowBytes + col,
              src + static_cast<int64_t>(b) * kBlock + col, 16);
  }
  int32_t* exponents = reinterpret_cast<int32_t*>(stage + kPlaneBytes);
  if (threadIdx.x < kTileM + kTileN) {
    const int t = threadIdx.x;
    const int32_t* src = t < kTileM ? a.x_exponents + (m0 + t) * a.blocks + b
                                    : a.w_exponents + (n0 + t - kTileM) * a.blocks + b;
    unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(exponents + t));
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(address), "l"(src));
  }
  cpAsyncCommit();
}

// Four 8 x 16-byte matrices from shared memory (ldmatrix .x4 of b16 pairs): lane l gives the
// row address of matrix l / 8; register q of lane l receives bytes 4 (l % 4) .. 4 (l % 4) + 3 of
// row l / 4 of matrix q, which is the int8 fragment layout of mma m16n8k32 (A: a0..a3 = rows
// 0-7 / 8-15 x bytes 0-15 / 16-31; B: b0, b1 = bytes 0-15 / 16-31 of rows n).
__device__ __forceinline__ void loadMatrices(const int8_t* row_address, uint32_t (&r)[4]) {
  unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(row_address));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}

struct Accumulators {
  int32_t cls[4][2][2][4];  // [shift class 21, 14, 7, 0][m16 tile][n8 tile][c register]
  double acc[2][2][4];
};

// The nine kept digit-pair products (i + j <= 3) of one K-block for this warp's 32 x 16 outputs:
// the w fragments of the three planes stay in registers while x's four planes come in turn.
__device__ __forceinline__ void multiplyStage(const int8_t* stage, int warp_m, int warp_n,
                                              Accumulators& r) {
  constexpr int kX = int_linear::kXSlices, kW = int_linear::kWSlices;
  const int lane = threadIdx.x & 31, matrix = lane >> 3, matrix_row = lane & 7;
  // This lane's row address inside each fragment load (see loadMatrices).
  const int a_row = warp_m * kWarpM + (matrix & 1) * 8 + matrix_row;
  const int a_col = (matrix >> 1) * 16;
  const int b_row = warp_n * kWarpN + (matrix >> 1) * 8 + matrix_row;
  const int b_col = (matrix & 1) * 16;
#pragma unroll
  for (int k = 0; k < kBlock; k += 32) {
    uint32_t b[kW][4];  // b[j] = {nt0 b0, nt0 b1, nt1 b0, nt1 b1}
#pragma unroll
    for (int j = 0; j < kW; ++j) {
      const int8_t* plane = stage + (kX + j) * kTileM * kRowBytes;
      loadMatrices(plane + b_row * kRowBytes + k + b_col, b[j]);
    }
#pragma unroll
    for (int i = 0; i < kX; ++i) {
      uint32_t a[2][4];
      const int8_t* plane = stage + i * kTileM * kRowBytes;
#pragma unroll
      for (int mt = 0; mt < 2; ++mt)
        loadMatrices(plane + (a_row + mt * 16) * kRowBytes + k + a_col, a[mt]);
#pragma unroll
      for (int j = 0; j < kW; ++j) {
        if (i + j > int_linear::kKeptPairSum) continue;
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) {
#pragma unroll
          for (int nt = 0; nt < 2; ++nt) {
            const uint32_t e[2] = {b[j][nt * 2], b[j][nt * 2 + 1]};
            mmaS8(r.cls[i + j][mt][nt], a[mt], e);
          }
        }
      }
    }
  }
}

// End of K-block b: each output's exact block product joins its binary64 sum (block order).
__device__ __forceinline__ void addBlockProducts(const int8_t* stage, int warp_m, int warp_n,
                                                 Accumulators& r) {
  const int lane = threadIdx.x & 31, group = lane >> 2, quad = lane & 3;
  const int32_t* exponents = reinterpret_cast<const int32_t*>(stage + kPlaneBytes);
  int x_exp[2][2], w_exp[2][2];
#pragma unroll
  for (int mt = 0; mt < 2; ++mt) {
#pragma unroll
    for (int half = 0; half < 2; ++half)
      x_exp[mt][half] = exponents[warp_m * kWarpM + mt * 16 + group + half * 8];
  }
#pragma unroll
  for (int nt = 0; nt < 2; ++nt) {
#pragma unroll
    for (int j = 0; j < 2; ++j)
      w_exp[nt][j] = exponents[kTileM + warp_n * kWarpN + nt * 8 + quad * 2 + j];
  }
#pragma unroll
  for (int mt = 0; mt < 2; ++mt) {
#pragma unroll
    for (int nt = 0; nt < 2; ++nt) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int64_t product = int_linear::combineShiftClasses(
            r.cls[0][mt][nt][i], r.cls[1][mt][nt][i], r.cls[2][mt][nt][i], r.cls[3][mt][nt][i]);
        const double scale = int_linear::blockScale(x_exp[mt][i >> 1], w_exp[nt][i & 1]);
        r.acc[mt][nt][i] = int_linear::addBlock(r.acc[mt][nt][i], product, scale);
#pragma unroll
        for (int c = 0; c < 4; ++c)
          r.cls[c][mt][nt][i] = 0;
      }
    }
  }
}

// The finishing steps of linear.md (3-5) for one output.
__device__ __forceinline__ void storeOutput(const GemmArgs& a, int row, int col, double acc) {
  const bool has_bias = a.bias != nullptr;
  const float bias = has_bias ? loadStorageElement(a.bias, a.bias_dtype, col) : 0.0f;
  const float value = detail::linearFinish(int_linear::roundDot(acc), has_bias, bias);
  detail::linearStore(a.y, a.y_is_bf16, static_cast<int64_t>(row) * a.y_stride + col, value,
                      a.accumulate);
}

__global__ void __launch_bounds__(kThreads, 1) intGemmKernel(GemmArgs a) {
  extern __shared__ __align__(16) int8_t shared[];
  const int warp = threadIdx.x >> 5, warp_m = warp >> 2, warp_n = warp & 3;
  const int64_t m0 = static_cast<int64_t>(blockIdx.y) * kTileM;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * kTileN;
  Accumulators r;
#pragma unroll
  for (int mt = 0; mt < 2; ++mt) {
#pragma unroll
    for (int nt = 0; nt < 2; ++nt) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        r.acc[mt][nt][i] = 0.0;
#pragma unroll
        for (int c = 0; c < 4; ++c)
          r.cls[c][mt][nt][i] = 0;
      }
    }
  }
  loadStage(a, m0, n0, 0, shared);
  for (int b = 0; b < a.blocks; ++b) {
    if (b + 1 < a.blocks) {
      loadStage(a, m0, n0, b + 1, shared + ((b + 1) % kStages) * kStageBytes);
      cpAsyncWait<1>();
    } else {
      cpAsyncWait<0>();
    }
    __syncthreads();
    multiplyStage(shared + (b % kStages) * kStageBytes, warp_m, warp_n, r);
    addBlockProducts(shared + (b % kStages) * kStageBytes, warp_m, warp_n, r);
    __syncthreads();  // the next iteration's copies overwrite this stage
  }
  const int lane = threadIdx.x & 31, group = lane >> 2, quad = lane & 3;
#pragma unroll
  for (int mt = 0; mt < 2; ++mt) {
#pragma unroll
    for (int nt = 0; nt < 2; ++nt) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int64_t row = m0 + warp_m * kWarpM + mt * 16 + group + (i >> 1) * 8;
        const int64_t col = n0 + warp_n * kWarpN + nt * 8 + quad * 2 + (i & 1);
        if (row < a.m && col < a.n) {
          storeOutput(a, static_cast<int>(row), static_cast<int>(col), r.acc[mt][nt][i]);
        }
      }
    }
  }
}

}  // namespace
}  // namespace ree::repops::cuda

#include "int_linear_gemv.cuh"

namespace ree::repops::cuda {
namespace {

// ---- host side

int64_t roundUp(int64_t value, int64_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

template <int kSlices>
Status launchQuantize(const void* src, DType dtype, int64_t stride, int64_t rows,
                      int64_t rows_padded, int64_t k, int blocks, int shift, int8_t* planes,
                      int64_t k_padded, int32_t* exponents, cudaStream_t stream) {
  constexpr int kWarpsPerBlock = 4;
  const int64_t items = rows_padded * blocks;
  const int grid = static_cast<int>(
      std::min<int64_t>((items + kWarpsPerBlock - 1) / kWarpsPerBlock, int64_t{1} << 20));
  auto launch = [&](auto tag) {
    using T = decltype(tag);
    quantizeKernel<T, kSlices><<<grid, kWarpsPerBlock * 32, 0, stream>>>(
        static_cast<const T*>(src), stride, rows, rows_padded, k, blocks, shift, planes, k_padded,
        exponents);
  };
  switch (dtype) {
    case DType::kF32:
      launch(float{});
      break;
    case DType::kBF16:
      launch(bf16_t{});
      break;
    default:
      launch(f16_t{});
      break;
  }
  REE_CUDA_CHECK_LAUNCH();
  return Status::kSuccess;
}

// Shapes of the padded planes and the scratch layout of one call. The GEMV (m <= kGemvMaxRows)
// reads w directly: x is not padded to a tile and w gets no planes.
struct Layout {
  bool gemv;
  int64_t m_padded, n_padded, k_padded;
  int blocks;
  int64_t x_planes, w_planes, x_exponents, w_exponents, bytes;  // byte offsets, total
};

Layout layoutOf(const LinearArgs& args) {
  Layout l;
  l.gemv = args.m <= kGemvMaxRows;
  l.m_padded = l.gemv ? args.m : roundUp(args.m, kTileM);
  l.n_padded = l.gemv ? 0 : roundUp(args.n, kTileN);
  l.blocks = static_cast<int>((args.k + kBlock - 1) / kBlock);
  l.k_padded = static_cast<int64_t>(l.blocks) * kBlock;
  l.x_planes = 0;
  l.w_planes = l.x_planes + roundUp(int_linear::kXSlices * l.m_padded * l.k_padded, 256);
  l.x_exponents = l.w_planes + roundUp(int_linear::kWSlices * l.n_padded * l.k_padded, 256);
  l.w_exponents = l.x_exponents + roundUp(4 * l.m_padded * l.blocks, 256);
  l.bytes = l.w_exponents + roundUp(4 * l.n_padded * l.blocks, 256);
  return l;
}

// Enqueues the quantisation kernels and (unless quantize_only) the GEMM or GEMV on `scratch`.
Status enqueue(const LinearArgs& args, const Layout& l, int8_t* scratch, bool quantize_only,
               cudaStream_t stream) {
  const int64_t x_stride = args.xStride(), w_stride = args.wStride();
  int8_t* x_planes = scratch + l.x_planes;
  int8_t* w_planes = scratch + l.w_planes;
  int32_t* x_exponents = reinterpret_cast<int32_t*>(scratch + l.x_exponents);
  int32_t* w_exponents = reinterpret_cast<int32_t*>(scratch + l.w_exponents);
  REE_RETURN_IF_ERROR(launchQuantize<int_linear::kXSlices>(
      args.x, args.x_dtype, x_stride, args.m, l.m_padded, args.k, l.blocks, int_linear::kXShift,
      x_planes, l.k_padded, x_exponents, stream));
  if (!l.gemv) {
    REE_RETURN_IF_ERROR(launchQuantize<int_linear::kWSlices>(
        args.w, args.w_dtype, w_stride, args.n, l.n_padded, args.k, l.blocks, int_linear::kWShift,
        w_planes, l.k_padded, w_exponents, stream));
  }
  if (quantize_only) return Status::kSuccess;
  GemmArgs g{};
  g.x_planes = x_planes;
  g.w_planes = w_planes;
  g.x_exponents = x_exponents;
  g.w_exponents = w_exponents;
  g.m_padded = l.m_padded;
  g.n_padded = l.n_padded;
  g.k_padded = l.k_padded;
  g.blocks = l.blocks;
  g.m = static_cast<int>(args.m);
  g.n = static_cast<int>(args.n);
  g.bias = args.bias;
  g.bias_dtype = args.bias_dtype;
  g.y = args.y;
  g.y_stride = args.yStride();
  g.y_is_bf16 = args.y_dtype == DType::kBF16;
  g.accumulate = args.accumulate;
  if (l.gemv) return launchGemv(g, args, stream);
  REE_RETURN_IF_ERROR(allowFullSharedMemory(intGemmKernel));
  dim3 grid(static_cast<unsigned>(l.n_padded / kTileN), static_cast<unsigned>(l.m_padded / kTileM));
  intGemmKernel<<<grid, kThreads, kSharedBytes, stream>>>(g);
  REE_CUDA_CHECK_LAUNCH();
  return Status::kSuccess;
}

Status run(const LinearArgs& args, bool quantize_only, cudaStream_t stream) {
  REE_RETURN_IF_ERROR(validateIntLinearArgs(args));
  if (args.m == 0) return Status::kSuccess;
  const Layout l = layoutOf(args);
  if (l.m_padded / kTileM > 65535) {
    return REE_FAIL(Status::kUnsupported,
                    "int linear (cuda): m=%lld exceeds the %d rows one launch covers",
                    static_cast<long long>(args.m), 65535 * kTileM);
  }
  void* scratch = nullptr;
  REE_CUDA_CHECK_MSG(cudaMallocAsync(&scratch, static_cast<size_t>(l.bytes), stream),
                     "int linear (cuda): scratch of %lld bytes for m=%lld n=%lld k=%lld",
                     static_cast<long long>(l.bytes), static_cast<long long>(args.m),
                     static_cast<long long>(args.n), static_cast<long long>(args.k));
  Status status = enqueue(args, l, static_cast<int8_t*>(scratch), quantize_only, stream);
  cudaError_t freed = cudaFreeAsync(scratch, stream);
  REE_RETURN_IF_ERROR(status);
  REE_CUDA_CHECK(freed);
  return Status::kSuccess;
}

}  // namespace

Status intLinear(const LinearArgs& args, cudaStream_t stream) {
  return run(args, /*quantize_only=*/false, stream);
}

Status intLinearQuantizeOnly(const LinearArgs& args, cudaStream_t stream) {
  return run(args, /*quantize_only=*/true, stream);
}

}  // namespace ree::repops::cuda
