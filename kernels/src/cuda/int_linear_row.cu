// CUDA repops-3 linear (docs/repops-spec/linear-int-row.md, int_linear_row.h): one exponent per
// row of x and of w over the whole K, so each output's dot product is one exact integer P (four
// int32 shift-class sums over the whole K), rounded once.
//
// 1. Quantisation (int_linear_row_quantize.cuh): a block per row: the row exponent, then the int8
//    digit planes, zero-padded to k_padded (a multiple of 32) and to whole tiles of rows.
// 2. Prefill (more than kTiledMaxRows rows of x, or more than kSkinnyMaxRows when w is not 16-bit
//    or not aligned): w is quantised into planes too, and the four classes are four plain int8
//    GEMMs on cuBLASLt plus an epilogue kernel (int_linear_row_gemm.cuh).
// 3. Decode (few rows of x): mma.sync kernels read w once in its stored dtype and quantise it on
//    the fly with the row exponents, which come from a pre-pass over w or from
//    IntLinearRowDeviceWeights. At most 8 rows of x with bf16 w (a bf16 model's decode step): the
//    decode kernel (int_linear_row_decode.cuh), which keeps the weight stream in flight. Up to
//    kTiledMaxRows rows with 16-bit w (a batched decode step): the tiled kernel
//    (int_linear_row_tiled.cuh), which shares x's digits among the warps of a block through
//    shared memory. Otherwise, up to 64 rows: the skinny kernel (int_linear_row_skinny.cuh).
// The class sums are exact integers in every path, so the bits are the CPU reference's whatever
// the path, tiling, summation order or GPU.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <mutex>

#include "common/dtype_dispatch.h"
#include "ree/core/cuda_check.h"
#include "ree/core/log.h"
#include "ree/kernels/int_linear_row.h"

// clang-format off
#include "int_linear_row_quantize.cuh"
#include "int_linear_row_output.cuh"
#include "int_linear_row_skinny.cuh"
#include "int_linear_row_decode.cuh"
#include "int_linear_row_tiled.cuh"
#include "int_linear_row_gemm.cuh"
// clang-format on

namespace ree::repops {

namespace cuda {

struct IntLinearRowDeviceWeights::Impl {
  int32_t* exponents = nullptr;  // [n], device memory
};

IntLinearRowDeviceWeights::IntLinearRowDeviceWeights() : impl_(new Impl) {}
IntLinearRowDeviceWeights::~IntLinearRowDeviceWeights() {
  if (impl_->exponents) cudaFree(impl_->exponents);
}
int64_t IntLinearRowDeviceWeights::rows() const {
  return rows_;
}
int64_t IntLinearRowDeviceWeights::k() const {
  return k_;
}
int64_t IntLinearRowDeviceWeights::bytes() const {
  return rows_ * static_cast<int64_t>(sizeof(int32_t));
}

namespace {

int64_t roundUp(int64_t value, int64_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

bool skinnyKernelApplies(const LinearArgs& args) {
  return args.m <= kSkinnyMaxRows && args.k <= kSkinnyMaxK;
}

bool decodeKernelServes(const LinearArgs& args) {
  return decodeKernelApplies(args.w_dtype, args.w, args.wStride(), args.k, args.m);
}

bool tiledKernelServes(const LinearArgs& args) {
  constexpr int64_t kMaxGridRows = 65535LL * kTiledBlockRows;  // blockIdx.y takes 64 rows
  return tiledKernelApplies(args.w_dtype, args.w, args.wStride(), args.k) && args.m <= kMaxGridRows;
}

const char* rowKernelName(IntLinearRowKernel kernel) {
  switch (kernel) {
    case IntLinearRowKernel::kAuto:
      return "auto";
    case IntLinearRowKernel::kDecode:
      return "decode";
    case IntLinearRowKernel::kSkinny:
      return "skinny";
    case IntLinearRowKernel::kTiled:
      return "tiled";
    case IntLinearRowKernel::kGemm:
      return "gemm";
  }
  return "unknown";
}

// The kernel that serves args: `requested`, or kAuto's choice by M, dtypes and alignment.
Status chooseRowKernel(const LinearArgs& args, IntLinearRowKernel requested,
                       IntLinearRowKernel* chosen) {
  bool serves = true;
  switch (requested) {
    case IntLinearRowKernel::kAuto:
      *chosen = decodeKernelServes(args)                             ? IntLinearRowKernel::kDecode
                : tiledKernelServes(args) && args.m <= kTiledMaxRows ? IntLinearRowKernel::kTiled
                : skinnyKernelApplies(args)                          ? IntLinearRowKernel::kSkinny
                                                                     : IntLinearRowKernel::kGemm;
      return Status::kSuccess;
    case IntLinearRowKernel::kDecode:
      serves = decodeKernelServes(args);
      break;
    case IntLinearRowKernel::kSkinny:
      serves = skinnyKernelApplies(args);
      break;
    case IntLinearRowKernel::kTiled:
      serves = tiledKernelServes(args);
      break;
    case IntLinearRowKernel::kGemm:
      break;
    default:
      return REE_FAIL(Status::kInvalidArgument, "intLinearRow (cuda): unknown kernel %d",
                      static_cast<int>(requested));
  }
  if (!serves) {
    return REE_FAIL(Status::kUnsupported,
                    "intLinearRow (cuda): the %s kernel cannot serve m=%lld k=%lld w_dtype=%s "
                    "(int_linear_row.h lists what each kernel needs)",
                    rowKernelName(requested), static_cast<long long>(args.m),
                    static_cast<long long>(args.k), dtypeName(args.w_dtype));
  }
  *chosen = requested;
  return Status::kSuccess;
}

// Byte offsets of one call's scratch (cudaMallocAsync), each 256-byte aligned.
struct RowLayout {
  IntLinearRowKernel kernel;
  bool skinny;                 // the decode or the skinny kernel
  int groups;                  // skinny: groups of 8 x rows
  int64_t m_padded, n_padded;  // rows of the x and w planes (n_padded: GEMM path only)
  int64_t kp;                  // k_padded
  int64_t chunk_rows;          // GEMM path: x rows per class GEMM
  int64_t x_planes, w_planes, x_exponents, w_exponents, x_sums, classes, workspace, bytes;
};

RowLayout rowLayoutOf(const LinearArgs& args, IntLinearRowKernel kernel, bool have_w_exponents) {
  RowLayout l{};
  l.kernel = kernel;
  l.skinny = kernel == IntLinearRowKernel::kDecode || kernel == IntLinearRowKernel::kSkinny;
  l.kp = roundUp(args.k, kChunk);
  if (l.skinny) {
    l.groups = skinnyGroups(args.m);
    l.m_padded = 8 * l.groups;
  } else if (kernel == IntLinearRowKernel::kTiled) {
    l.m_padded = args.m;  // the kernel reads rows beyond m as zeros
  } else {
    l.m_padded = roundUp(args.m, kSkinnyMaxRows);  // whole chunks for enqueueSkinnyFallback
    l.n_padded = roundUp(args.n, kGemmRowPad);
    l.chunk_rows = gemmChunkRows(l.m_padded, l.n_padded);
  }
  int64_t at = 0;
  auto take = [&at](int64_t bytes) {
    const int64_t offset = at;
    at += roundUp(bytes, 256);
    return offset;
  };
  l.x_planes = take(l.m_padded * 4 * l.kp);
  l.w_planes = take(l.n_padded * 3 * l.kp);
  l.x_exponents = take(4 * l.m_padded);
  l.w_exponents = take(have_w_exponents ? 0 : 4 * roundUp(args.n, kGemmRowPad));  // + padding rows
  l.x_sums = take(4 * 4 * l.m_padded);
  l.classes = take(4 * 4 * l.chunk_rows * l.n_padded);
  const bool gemm = kernel == IntLinearRowKernel::kGemm;
  l.workspace = take(gemm ? static_cast<int64_t>(kLtWorkspaceBytes) : 0);
  l.bytes = at;
  return l;
}

RowOutputArgs outputArgsOf(const LinearArgs& args, const int32_t* x_exponents,
                           const int32_t* w_exponents) {
  RowOutputArgs out{};
  out.x_exponents = x_exponents;
  out.w_exponents = w_exponents;
  out.bias = args.bias;
  out.bias_dtype = args.bias_dtype;
  out.y = args.y;
  out.y_stride = args.yStride();
  out.m = static_cast<int>(args.m);
  out.n = static_cast<int>(args.n);
  out.y_is_bf16 = args.y_dtype == DType::kBF16;
  out.accumulate = args.accumulate;
  return out;
}

// The pointers of one call's scratch (layout l).
struct RowScratch {
  int8_t* x_planes;
  int8_t* w_planes;
  int32_t* x_exponents;
  int32_t* x_sums;
  int32_t* w_exponents;  // computed here (null when prepared)
  int32_t* classes;
  void* workspace;
};

RowScratch rowScratchOf(const RowLayout& l, int8_t* scratch, bool prepared) {
  auto at = [scratch](int64_t offset) { return scratch + offset; };
  return {at(l.x_planes),
          at(l.w_planes),
          reinterpret_cast<int32_t*>(at(l.x_exponents)),
          reinterpret_cast<int32_t*>(at(l.x_sums)),
          prepared ? nullptr : reinterpret_cast<int32_t*>(at(l.w_exponents)),
          reinterpret_cast<int32_t*>(at(l.classes)),
          at(l.workspace)};
}

// The skinny kernel on x rows [row0, row0 + rows), rows <= kSkinnyMaxRows (x's planes hold at
// least 8 * skinnyGroups(rows) rows from row0).
Status enqueueSkinnyRows(const LinearArgs& args, const RowLayout& l, const RowScratch& sc,
                         const int32_t* w_exponents, int64_t row0, int64_t rows, bool use_decode,
                         cudaStream_t stream) {
  SkinnyArgs s{};
  s.out = outputArgsOf(args, sc.x_exponents + row0, w_exponents);
  s.out.y = static_cast<char*>(args.y) + row0 * args.yStride() * (s.out.y_is_bf16 ? 2 : 4);
  s.out.m = static_cast<int>(rows);
  s.w = args.w;
  s.w_stride = args.wStride();
  s.k = args.k;
  s.x_planes = sc.x_planes + row0 * 4 * l.kp;
  s.x_digit_sums = sc.x_sums + row0 * 4;
  s.k_padded = l.kp;
  s.chunks = static_cast<int>(l.kp / kChunk);
  s.w_constant = args.w_is_constant;
  if (use_decode) return launchDecode(s, stream);
  return launchSkinny(s, args.w_dtype, skinnyGroups(rows), stream);
}

// The tiled kernel on every row of x.
Status enqueueTiled(const LinearArgs& args, const RowLayout& l, const RowScratch& sc,
                    const int32_t* w_exponents, cudaStream_t stream) {
  TiledArgs s{};
  s.out = outputArgsOf(args, sc.x_exponents, w_exponents);
  s.x_digit_sums = sc.x_sums;
  s.w = args.w;
  s.w_stride = args.wStride();
  s.k = args.k;
  s.x_planes = sc.x_planes;
  s.k_padded = l.kp;
  s.chunks = static_cast<int>(l.kp / kChunk);
  s.w_constant = args.w_is_constant;
  return launchTiled(s, args.w_dtype, stream);
}

// When cuBLASLt cannot run the class GEMMs (no int8 algorithm, no handle): the skinny kernel on
// 64-row chunks of x, the same integers and bits, slower. Said once per process.
Status enqueueSkinnyFallback(const LinearArgs& args, const RowLayout& l, const RowScratch& sc,
                             const int32_t* w_exponents, Status gemm_status, cudaStream_t stream) {
  if (args.k > kSkinnyMaxK) return gemm_status;
  static std::once_flag said;
  std::call_once(said, [] {
    logMessage(LogLevel::kWarning,
               "int linear row (cuda): cuBLASLt cannot run the int8 class GEMMs (%s); using the "
               "skinny kernel on 64-row chunks instead (same bits, slower)",
               lastErrorMessage());
  });
  for (int64_t row0 = 0; row0 < args.m; row0 += kSkinnyMaxRows) {
    const int64_t rows = std::min<int64_t>(kSkinnyMaxRows, args.m - row0);
    const bool use_decode = decodeKernelApplies(args.w_dtype, args.w, args.wStride(), args.k, rows);
    REE_RETURN_IF_ERROR(
        enqueueSkinnyRows(args, l, sc, w_exponents, row0, rows, use_decode, stream));
  }
  return Status::kSuccess;
}

// Enqueues the whole call on `scratch` (layout l); prepared_exponents: w's, or null.
Status enqueueRow(const LinearArgs& args, const RowLayout& l, const int32_t* prepared_exponents,
                  int8_t* scratch, cudaStream_t stream) {
  const RowScratch sc = rowScratchOf(l, scratch, prepared_exponents != nullptr);
  // The decode, skinny and tiled kernels never read x's padding rows (nor their sums): only the
  // GEMM path's are quantised (to zeros).
  const bool gemm = l.kernel == IntLinearRowKernel::kGemm;
  const int64_t x_rows = gemm ? l.m_padded : args.m;
  QuantizeRowsArgs xq{args.xStride(), args.m,      x_rows,         args.k,   l.kp,
                      nullptr,        sc.x_planes, sc.x_exponents, sc.x_sums};
  REE_RETURN_IF_ERROR(launchQuantizeRows<int_linear::kXSlices>(args.x, args.x_dtype, xq, stream));
  const int32_t* w_exponents = prepared_exponents ? prepared_exponents : sc.w_exponents;
  if (!gemm) {
    if (!prepared_exponents) {
      REE_RETURN_IF_ERROR(launchRowExponents(args.w, args.w_dtype, args.wStride(), args.n, args.k,
                                             sc.w_exponents, stream));
    }
    if (l.kernel == IntLinearRowKernel::kTiled) {
      return enqueueTiled(args, l, sc, w_exponents, stream);
    }
    return enqueueSkinnyRows(args, l, sc, w_exponents, 0, args.m,
                             l.kernel == IntLinearRowKernel::kDecode, stream);
  }
  // GEMM path: w's planes (and its exponents unless prepared) in one pass.
  QuantizeRowsArgs wq{args.wStride(),     args.n,      l.n_padded,     args.k, l.kp,
                      prepared_exponents, sc.w_planes, sc.w_exponents, nullptr};
  REE_RETURN_IF_ERROR(launchQuantizeRows<int_linear::kWSlices>(args.w, args.w_dtype, wq, stream));
  RowGemmArgs r{sc.x_planes, sc.w_planes, sc.classes, sc.workspace, l.n_padded, l.kp, l.chunk_rows};
  const Status ready = checkRowGemm(r, args.m);
  if (ready != Status::kSuccess) {
    return enqueueSkinnyFallback(args, l, sc, w_exponents, ready, stream);
  }
  return launchRowGemm(r, outputArgsOf(args, sc.x_exponents, w_exponents), stream);
}

Status runRow(const LinearArgs& args, const IntLinearRowDeviceWeights* prepared,
              const int32_t* prepared_exponents, IntLinearRowKernel requested,
              cudaStream_t stream) {
  REE_RETURN_IF_ERROR(validateIntLinearRowArgs(args));
  REE_CHECK_ARG(prepared == nullptr || (prepared->rows() == args.n && prepared->k() == args.k),
                "intLinearRow (cuda): prepared weights of [%lld, %lld] for a [%lld, %lld] w",
                static_cast<long long>(prepared ? prepared->rows() : 0),
                static_cast<long long>(prepared ? prepared->k() : 0),
                static_cast<long long>(args.n), static_cast<long long>(args.k));
  if (args.m == 0) return Status::kSuccess;
  IntLinearRowKernel kernel = IntLinearRowKernel::kAuto;
  REE_RETURN_IF_ERROR(chooseRowKernel(args, requested, &kernel));
  const RowLayout l = rowLayoutOf(args, kernel, prepared_exponents != nullptr);
  void* scratch = nullptr;
  REE_CUDA_CHECK_MSG(cudaMallocAsync(&scratch, static_cast<size_t>(l.bytes), stream),
                     "int linear row (cuda): scratch of %lld bytes for m=%lld n=%lld k=%lld",
                     static_cast<long long>(l.bytes), static_cast<long long>(args.m),
                     static_cast<long long>(args.n), static_cast<long long>(args.k));
  Status status = enqueueRow(args, l, prepared_exponents, static_cast<int8_t*>(scratch), stream);
  cudaError_t freed = cudaFreeAsync(scratch, stream);
  REE_RETURN_IF_ERROR(status);
  REE_CUDA_CHECK(freed);
  return Status::kSuccess;
}

}  // namespace

Status intLinearRow(const LinearArgs& args, cudaStream_t stream) {
  return intLinearRowWithKernel(args, nullptr, IntLinearRowKernel::kAuto, stream);
}

Status intLinearRow(const LinearArgs& args, const IntLinearRowDeviceWeights* prepared,
                    cudaStream_t stream) {
  return intLinearRowWithKernel(args, prepared, IntLinearRowKernel::kAuto, stream);
}

Status intLinearRowWithKernel(const LinearArgs& args, const IntLinearRowDeviceWeights* prepared,
                              IntLinearRowKernel kernel, cudaStream_t stream) {
  return runRow(args, prepared, prepared ? prepared->impl_->exponents : nullptr, kernel, stream);
}

Status prepareIntLinearRowWeights(const LinearArgs& args, cudaStream_t stream,
                                  std::unique_ptr<IntLinearRowDeviceWeights>* out) {
  REE_CHECK_ARG(out != nullptr, "prepareIntLinearRowWeights (cuda): out is null");
  REE_CHECK_ARG(args.w != nullptr && args.n >= 1 && args.n <= INT32_MAX && args.k >= 1 &&
                    args.k <= int_linear_row::kMaxK,
                "prepareIntLinearRowWeights (cuda): w must be a non-empty [n, k] matrix with "
                "k <= %lld (n=%lld, k=%lld)",
                static_cast<long long>(int_linear_row::kMaxK), static_cast<long long>(args.n),
                static_cast<long long>(args.k));
  REE_CHECK_ARG(args.w_row_stride == 0 || args.w_row_stride >= args.k,
                "prepareIntLinearRowWeights (cuda): w_row_stride must be 0 or >= k=%lld (got "
                "%lld)",
                static_cast<long long>(args.k), static_cast<long long>(args.w_row_stride));
  REE_CHECK_ARG(isStorageType(args.w_dtype),
                "prepareIntLinearRowWeights (cuda): w_dtype must be f32, bf16 or f16 (got %d)",
                static_cast<int>(args.w_dtype));
  auto prepared = std::unique_ptr<IntLinearRowDeviceWeights>(new IntLinearRowDeviceWeights());
  prepared->rows_ = args.n;
  prepared->k_ = args.k;
  REE_CUDA_CHECK_MSG(cudaMalloc(&prepared->impl_->exponents, static_cast<size_t>(4 * args.n)),
                     "prepareIntLinearRowWeights (cuda): %lld bytes of row exponents",
                     static_cast<long long>(4 * args.n));
  REE_RETURN_IF_ERROR(launchRowExponents(args.w, args.w_dtype, args.wStride(), args.n, args.k,
                                         prepared->impl_->exponents, stream));
  *out = std::move(prepared);
  return Status::kSuccess;
}

}  // namespace cuda
}  // namespace ree::repops
