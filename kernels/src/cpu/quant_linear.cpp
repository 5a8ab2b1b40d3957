// CPU linear over GGUF-quantised weights (quant_linear.h): the output features are split into
// tasks of whole 16-row panels; a task dequantises its weight rows into a cache-sized fp32 buffer
// (quant_blocks.h, the values of gguf-dequant.md) and runs cpu::linear on them, so every output
// is repops-1's chain over exactly those values (the bits of dequantise-at-load), whatever the
// split or the thread count. A model never holds more than a task's fp32 rows per thread.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <vector>

#include "ree/core/parallel.h"
#include "ree/kernels/quant_linear.h"

namespace ree::repops {
namespace {

constexpr int64_t kTaskBytes = 256 << 10;  // fp32 rows dequantised per task (L2-sized)
constexpr int64_t kPanelRows = 16;         // cpu::linear's panel of output features

bool rangesOverlap(const void* a, int64_t a_bytes, const void* b, int64_t b_bytes) {
  if (a == nullptr || b == nullptr || a_bytes <= 0 || b_bytes <= 0) return false;
  auto a0 = reinterpret_cast<uintptr_t>(a);
  auto b0 = reinterpret_cast<uintptr_t>(b);
  return a0 < b0 + static_cast<uintptr_t>(b_bytes) && b0 < a0 + static_cast<uintptr_t>(a_bytes);
}

}  // namespace

Status validateQuantLinearArgs(const QuantLinearArgs& args) {
  const int type = static_cast<int>(args.w_type);
  REE_CHECK_ARG(type >= 0 && type < kQuantTypeCount, "quant linear: unknown w_type %d", type);
  const LinearArgs& a = args.linear;
  const int block = quantBlockElems(args.w_type);
  REE_CHECK_ARG(a.k >= 1 && a.k % block == 0,
                "quant linear: k=%lld must be a positive multiple of %s's block of %d",
                static_cast<long long>(a.k), quantTypeName(args.w_type), block);
  REE_CHECK_ARG(args.w_row_bytes == 0 || args.w_row_bytes >= args.rowBytes(),
                "quant linear: w_row_bytes must be 0 or >= %lld, the bytes of a row of %lld %s "
                "elements (got %lld)",
                static_cast<long long>(args.rowBytes()), static_cast<long long>(a.k),
                quantTypeName(args.w_type), static_cast<long long>(args.w_row_bytes));
  REE_CHECK_ARG(a.bias == nullptr || a.bias_dtype == DType::kF32,
                "quant linear: bias_dtype must be f32 (got %s)", dtypeName(a.bias_dtype));
  REE_CHECK_ARG(a.w != nullptr, "quant linear: w is null");
  // linear's checks of the dtypes, shapes and strides (with m = 0, so that it leaves the
  // pointers alone: its w extent would count elements of w_dtype); the pointers are checked here,
  // w's extent in bytes.
  LinearArgs shapes = a;
  shapes.m = 0;
  shapes.w_dtype = DType::kF32;
  shapes.w_row_stride = 0;
  REE_RETURN_IF_ERROR(validateLinearArgs(shapes));
  REE_CHECK_ARG(a.m >= 0 && a.m <= INT32_MAX, "quant linear: m must be in [0, 2^31) (got %lld)",
                static_cast<long long>(a.m));
  if (a.m > 0) {
    REE_CHECK_ARG(a.x != nullptr && a.y != nullptr, "quant linear: x or y is null (m=%lld)",
                  static_cast<long long>(a.m));
    const int64_t y_bytes = ((a.m - 1) * a.yStride() + a.n) * dtypeSize(a.y_dtype);
    const int64_t x_bytes = ((a.m - 1) * a.xStride() + a.k) * dtypeSize(a.x_dtype);
    const int64_t w_bytes = (a.n - 1) * args.wRowBytes() + args.rowBytes();
    REE_CHECK_ARG(!rangesOverlap(a.y, y_bytes, a.x, x_bytes), "quant linear: y overlaps x");
    REE_CHECK_ARG(!rangesOverlap(a.y, y_bytes, a.w, w_bytes), "quant linear: y overlaps w");
    REE_CHECK_ARG(!rangesOverlap(a.y, y_bytes, a.bias, a.n * 4), "quant linear: y overlaps bias");
  }
  return Status::kSuccess;
}

Status validateQuantEmbeddingArgs(const QuantEmbeddingArgs& a) {
  const int type = static_cast<int>(a.type);
  REE_CHECK_ARG(type >= 0 && type < kQuantTypeCount, "quant embedding: unknown type %d", type);
  const int block = quantBlockElems(a.type);
  REE_CHECK_ARG(a.k >= 1 && a.k % block == 0 && a.rows >= 1,
                "quant embedding: table [%lld, %lld] needs rows >= 1 and k a multiple of %s's "
                "block of %d",
                static_cast<long long>(a.rows), static_cast<long long>(a.k), quantTypeName(a.type),
                block);
  const int64_t row_bytes = a.k / block * quantBlockBytes(a.type);
  REE_CHECK_ARG(a.row_bytes == 0 || a.row_bytes >= row_bytes,
                "quant embedding: row_bytes must be 0 or >= %lld (got %lld)",
                static_cast<long long>(row_bytes), static_cast<long long>(a.row_bytes));
  REE_CHECK_ARG(a.count >= 0, "quant embedding: count must be >= 0");
  if (a.count == 0) return Status::kSuccess;
  REE_CHECK_ARG(a.table != nullptr && a.ids != nullptr && a.out != nullptr,
                "quant embedding: table, ids or out is null");
  for (int64_t t = 0; t < a.count; ++t) {
    REE_CHECK_ARG(a.ids[t] >= 0 && a.ids[t] < a.rows,
                  "quant embedding: id %d (token %lld) is outside the table's %lld rows", a.ids[t],
                  static_cast<long long>(t), static_cast<long long>(a.rows));
  }
  return Status::kSuccess;
}

namespace cpu {

Status quantEmbedding(const QuantEmbeddingArgs& a) {
  REE_RETURN_IF_ERROR(validateQuantEmbeddingArgs(a));
  const int64_t row_bytes =
      a.row_bytes ? a.row_bytes : a.k / quantBlockElems(a.type) * quantBlockBytes(a.type);
  const auto* table = static_cast<const unsigned char*>(a.table);
  parallelFor(a.count, 1, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t)
      dequantizeBlocks(a.type, table + a.ids[t] * row_bytes, a.k, a.out + t * a.k);
  });
  return Status::kSuccess;
}

Status quantLinear(const QuantLinearArgs& args) {
  REE_RETURN_IF_ERROR(validateQuantLinearArgs(args));
  const LinearArgs& a = args.linear;
  if (a.m == 0) return Status::kSuccess;
  const int64_t row_bytes = args.wRowBytes();
  // Tasks of whole 16-row panels whose fp32 rows fit in a core's cache (at most 8 panels).
  const int64_t panel_bytes = kPanelRows * 4 * a.k;
  const int64_t task_rows =
      kPanelRows * std::max<int64_t>(1, std::min<int64_t>(8, kTaskBytes / panel_bytes));
  const auto* blocks = static_cast<const unsigned char*>(a.w);
  std::atomic<int> failed{0};
  parallelFor((a.n + task_rows - 1) / task_rows, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> weights(static_cast<size_t>(task_rows * a.k));
    for (int64_t task = begin; task < end; ++task) {
      const int64_t n0 = task * task_rows;
      const int64_t rows = std::min(task_rows, a.n - n0);
      for (int64_t r = 0; r < rows; ++r) {
        dequantizeBlocks(args.w_type, blocks + (n0 + r) * row_bytes, a.k, weights.data() + r * a.k);
      }
      LinearArgs slice = a;
      slice.w = weights.data();
      slice.w_dtype = DType::kF32;
      slice.w_row_stride = 0;
      slice.n = rows;
      slice.bias = a.bias ? static_cast<const float*>(a.bias) + n0 : nullptr;
      slice.y = static_cast<char*>(a.y) + n0 * dtypeSize(a.y_dtype);
      slice.y_row_stride = a.yStride();
      // Inside a parallelFor task cpu::linear runs on this thread (parallel.h), over these rows.
      if (linear(slice) != Status::kSuccess) failed.store(1);
    }
  });
  if (failed.load() != 0) return REE_FAIL(Status::kInternal, "quant linear: a slice failed");
  return Status::kSuccess;
}

}  // namespace cpu
}  // namespace ree::repops
