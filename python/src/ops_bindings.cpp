// RepOps bindings: thin calls of the kernels' C API on raw pointers. The caller owns the tensors
// (allocation, contiguity, dtype checks, device and stream) and passes their data pointers here;
// `stream` < 0 selects the CPU entry point (binding_util.h). ree.ops.rope_inv_freq uses one; the
// operators are C++ torch operators (torch_ops_*.cpp) calling the same entry points, and
// python/tests/test_ops_cpp.py and test_ops_model.py check them bitwise against these calls.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/tuple.h>

#include <algorithm>
#include <optional>
#include <tuple>
#include <vector>

#include "binding_util.h"
#include "ree/kernels/attention.h"
#include "ree/kernels/linear.h"
#include "ree/kernels/math_ops.h"
#include "ree/kernels/pointwise.h"
#include "ree/kernels/rope.h"
#include "ree/kernels/rowops.h"
#include "ree/kernels/sampling.h"

namespace nb = nanobind;

namespace ree::python {
namespace {

using repops::RowsIn;
using repops::RowsOut;
using repops::VecIn;

void linear(uint64_t x, int x_dtype, uint64_t w, int w_dtype, uint64_t bias, int bias_dtype,
            uint64_t y, int y_dtype, int64_t m, int64_t n, int64_t k, int64_t stream) {
  repops::LinearArgs args;
  args.x = pointer(x);
  args.x_dtype = dtypeFromCode(x_dtype);
  args.w = pointer(w);
  args.w_dtype = dtypeFromCode(w_dtype);
  args.bias = pointer(bias);
  args.bias_dtype = dtypeFromCode(bias_dtype);
  args.y = pointer(y);
  args.y_dtype = dtypeFromCode(y_dtype);
  args.m = m;
  args.n = n;
  args.k = k;
  REE_PY_RUN(stream, repops::cpu::linear(args), repops::cuda::linear(args, cuda_stream));
}

void rmsNorm(uint64_t x, int x_dtype, uint64_t w, int w_dtype, uint64_t y, int y_dtype,
             int64_t rows, int64_t cols, float eps, bool cast_before_weight, int64_t stream) {
  RowsIn in{pointer(x), dtypeFromCode(x_dtype), cols};
  VecIn weight{pointer(w), dtypeFromCode(w_dtype)};
  RowsOut out{pointer(y), dtypeFromCode(y_dtype), cols};
  auto variant =
      cast_before_weight ? repops::RmsNormVariant::kCastBeforeWeight : repops::RmsNormVariant::kF32;
  REE_PY_RUN(stream, repops::cpu::rmsNorm(in, weight, out, rows, cols, eps, variant),
             repops::cuda::rmsNorm(in, weight, out, rows, cols, eps, variant, cuda_stream));
}

void layerNorm(uint64_t x, int x_dtype, uint64_t w, int w_dtype, uint64_t b, int b_dtype,
               uint64_t y, int y_dtype, int64_t rows, int64_t cols, float eps, int64_t stream) {
  RowsIn in{pointer(x), dtypeFromCode(x_dtype), cols};
  VecIn weight{pointer(w), dtypeFromCode(w_dtype)};
  VecIn bias{pointer(b), dtypeFromCode(b_dtype)};
  RowsOut out{pointer(y), dtypeFromCode(y_dtype), cols};
  REE_PY_RUN(stream, repops::cpu::layerNorm(in, weight, bias, out, rows, cols, eps),
             repops::cuda::layerNorm(in, weight, bias, out, rows, cols, eps, cuda_stream));
}

void softmax(uint64_t x, int x_dtype, uint64_t y, int y_dtype, int64_t rows, int64_t cols, bool log,
             int64_t stream) {
  RowsIn in{pointer(x), dtypeFromCode(x_dtype), cols};
  RowsOut out{pointer(y), dtypeFromCode(y_dtype), cols};
  if (log) {
    REE_PY_RUN(stream, repops::cpu::logSoftmax(in, out, rows, cols),
               repops::cuda::logSoftmax(in, out, rows, cols, cuda_stream));
  } else {
    REE_PY_RUN(stream, repops::cpu::softmax(in, out, rows, cols),
               repops::cuda::softmax(in, out, rows, cols, cuda_stream));
  }
}

void reduceRows(int op, uint64_t x, int x_dtype, uint64_t out, int out_dtype, int64_t rows,
                int64_t cols, int64_t stream) {
  if (op < 0 || op > static_cast<int>(repops::ReduceOp::kVar)) {
    throw nb::value_error("reduce_rows: unknown reduction");
  }
  auto reduce = static_cast<repops::ReduceOp>(op);
  RowsIn in{pointer(x), dtypeFromCode(x_dtype), cols};
  DType dtype = dtypeFromCode(out_dtype);
  REE_PY_RUN(stream, repops::cpu::reduceRows(reduce, in, pointer(out), dtype, rows, cols),
             repops::cuda::reduceRows(reduce, in, pointer(out), dtype, rows, cols, cuda_stream));
}

void argmaxRows(uint64_t x, int x_dtype, uint64_t out, int64_t rows, int64_t cols, int64_t stream) {
  RowsIn in{pointer(x), dtypeFromCode(x_dtype), cols};
  auto* indices = pointer<int32_t>(out);
  REE_PY_RUN(stream, repops::cpu::argmaxRows(in, indices, rows, cols),
             repops::cuda::argmaxRows(in, indices, rows, cols, cuda_stream));
}

// n elements of one dtype to another (rowops cast), as rows of at most kRowOpsMaxCols elements.
void cast(uint64_t x, int x_dtype, uint64_t y, int y_dtype, int64_t n, int64_t stream) {
  if (n <= 0) return;
  const DType from = dtypeFromCode(x_dtype), to = dtypeFromCode(y_dtype);
  const int64_t cols = std::min<int64_t>(n, repops::kRowOpsMaxCols);
  const int64_t rows = n / cols, tail = n - rows * cols;
  RowsIn in{pointer(x), from, cols};
  RowsOut out{pointer(y), to, cols};
  REE_PY_RUN(stream, repops::cpu::cast(in, out, rows, cols),
             repops::cuda::cast(in, out, rows, cols, cuda_stream));
  if (tail == 0) return;
  const int64_t done = rows * cols;
  RowsIn tail_in{static_cast<const char*>(in.data) + done * dtypeSize(from), from, tail};
  RowsOut tail_out{static_cast<char*>(out.data) + done * dtypeSize(to), to, tail};
  REE_PY_RUN(stream, repops::cpu::cast(tail_in, tail_out, 1, tail),
             repops::cuda::cast(tail_in, tail_out, 1, tail, cuda_stream));
}

void unaryMath(int op, uint64_t x, uint64_t y, int64_t n, int64_t stream) {
  if (op < 0 || op >= kUnaryMathOpCount) throw nb::value_error("unary_math: unknown function");
  auto math_op = static_cast<UnaryMathOp>(op);
  const auto* in = pointer<const float>(x);
  auto* out = pointer<float>(y);
  REE_PY_RUN(stream, repops::cpu::unaryMath(math_op, in, out, n),
             repops::cuda::unaryMath(math_op, in, out, n, cuda_stream));
}

Activation activationFromCode(int code) {
  if (code < 0 || code > 2) throw nb::value_error("activation: unknown activation");
  return static_cast<Activation>(code);
}

void activation(int act, int dtype, uint64_t x, uint64_t y, int64_t n, int64_t stream) {
  const Activation a = activationFromCode(act);
  const DType d = dtypeFromCode(dtype);
  REE_PY_RUN(stream, repops::cpu::activation(a, d, pointer(x), pointer(y), n),
             repops::cuda::activation(a, d, pointer(x), pointer(y), n, cuda_stream));
}

void gated(int act, int dtype, uint64_t gate, uint64_t up, uint64_t out, int64_t rows, int64_t cols,
           int64_t stream) {
  const Activation a = activationFromCode(act);
  const DType d = dtypeFromCode(dtype);
  REE_PY_RUN(stream,
             repops::cpu::gated(a, d, pointer(gate), cols, pointer(up), cols, pointer(out), cols,
                                rows, cols),
             repops::cuda::gated(a, d, pointer(gate), cols, pointer(up), cols, pointer(out), cols,
                                 rows, cols, cuda_stream));
}

// Host computation of the inverse frequencies (the CUDA version gives the same bits; ree/ops.py
// copies them to the tensor's device). llama3: (factor, low_freq_factor, high_freq_factor,
// original_max_position_embeddings).
void ropeInvFreq(float base, int rotary_dim,
                 std::optional<std::tuple<double, double, double, int64_t>> llama3, uint64_t out) {
  RopeLlama3Scaling scaling;
  if (llama3) {
    std::tie(scaling.factor, scaling.low_freq_factor, scaling.high_freq_factor,
             scaling.original_max_position_embeddings) = *llama3;
  }
  check(
      repops::cpu::ropeInvFreq(base, rotary_dim, llama3 ? &scaling : nullptr, pointer<float>(out)));
}

void rope(int dtype, uint64_t x, int64_t tokens, int heads, int head_dim, int64_t token_stride,
          uint64_t positions, uint64_t inv_freq, int rotary_dim, bool interleaved, int64_t stream) {
  const DType d = dtypeFromCode(dtype);
  const RopeLayout layout = interleaved ? RopeLayout::kInterleaved : RopeLayout::kHalfSplit;
  const auto* pos = pointer<const int32_t>(positions);
  const auto* freq = pointer<const float>(inv_freq);
  REE_PY_RUN(stream,
             repops::cpu::rope(d, pointer(x), tokens, heads, head_dim, token_stride, pos, freq,
                               rotary_dim, layout),
             repops::cuda::rope(d, pointer(x), tokens, heads, head_dim, token_stride, pos, freq,
                                rotary_dim, layout, cuda_stream));
}

// Causal attention of `batch` sequences of q_len new queries each over kv_len positions (the
// queries are the last q_len of them): K and V are contiguous [batch, kv_len, n_kv_heads,
// head_dim], the contiguous layout of the paged cache (one block of kv_len rows per sequence).
void attention(int batch, int q_len, int kv_len, int n_heads, int n_kv_heads, int head_dim,
               uint64_t q, int q_dtype, uint64_t k, uint64_t v, int kv_dtype, uint64_t out,
               int out_dtype, float scale, int64_t stream) {
  if (batch < 0 || q_len < 0 || kv_len < q_len || kv_len < 1) {
    throw nb::value_error("attention: need 0 <= q_len <= kv_len and kv_len >= 1");
  }
  std::vector<int32_t> query_offsets(static_cast<size_t>(batch) + 1);
  for (int s = 0; s <= batch; ++s)
    query_offsets[s] = s * q_len;
  std::vector<int32_t> cached_lens(static_cast<size_t>(batch), kv_len - q_len);
  repops::AttentionArgs args;
  args.batch = batch;
  args.query_offsets = query_offsets.data();
  args.cached_lens = cached_lens.data();
  args.n_heads = n_heads;
  args.n_kv_heads = n_kv_heads;
  args.head_dim = head_dim;
  args.q = pointer(q);
  args.q_dtype = dtypeFromCode(q_dtype);
  args.out = pointer(out);
  args.out_dtype = dtypeFromCode(out_dtype);
  args.cache.k = pointer(k);
  args.cache.v = pointer(v);
  args.cache.dtype = dtypeFromCode(kv_dtype);
  args.cache.num_blocks = batch;
  args.cache.block_size = kv_len;
  args.cache.max_blocks_per_seq = 1;
  args.scale = scale;
  if (batch == 0 || q_len == 0) return;
  REE_PY_RUN(stream, repops::cpu::attention(args), repops::cuda::attention(args, cuda_stream));
}

void embedding(int dtype, uint64_t table, int64_t vocab, int64_t dim, uint64_t ids, int64_t count,
               uint64_t out, int64_t stream) {
  const DType d = dtypeFromCode(dtype);
  const auto* id = pointer<const int32_t>(ids);
  REE_PY_RUN(
      stream, repops::cpu::embedding(d, pointer(table), vocab, dim, id, count, pointer(out)),
      repops::cuda::embedding(d, pointer(table), vocab, dim, id, count, pointer(out), cuda_stream));
}

// Row b draws with the key (seed, sequence + b, step).
void sample(uint64_t logits, int64_t batch, int64_t vocab, float temperature, int top_k,
            float top_p, uint64_t seed, uint64_t sequence, uint64_t step, uint64_t out,
            int64_t stream) {
  std::vector<repops::SamplingParams> params(static_cast<size_t>(std::max<int64_t>(batch, 0)));
  for (size_t b = 0; b < params.size(); ++b) {
    params[b].temperature = temperature;
    params[b].top_k = top_k;
    params[b].top_p = top_p;
    params[b].seed = seed;
    params[b].sequence = sequence + b;
    params[b].step = step;
  }
  const auto* in = pointer<const float>(logits);
  auto* tokens = pointer<int32_t>(out);
  REE_PY_RUN(stream, repops::cpu::sample(in, batch, vocab, params.data(), tokens),
             repops::cuda::sample(in, batch, vocab, params.data(), tokens, cuda_stream));
}

}  // namespace

void bindOps(nb::module_& module) {
#if REE_WITH_CUDA
  module.attr("has_cuda") = true;
#else
  module.attr("has_cuda") = false;
#endif
  // The kernels never touch Python objects: other Python threads run while they compute.
  using release = nb::call_guard<nb::gil_scoped_release>;
  module.def("linear", &linear, release());
  module.def("rms_norm", &rmsNorm, release());
  module.def("layer_norm", &layerNorm, release());
  module.def("softmax", &softmax, release());
  module.def("reduce_rows", &reduceRows, release());
  module.def("argmax_rows", &argmaxRows, release());
  module.def("cast", &cast, release());
  module.def("unary_math", &unaryMath, release());
  module.def("activation", &activation, release());
  module.def("gated", &gated, release());
  module.def("rope_inv_freq", &ropeInvFreq, release());
  module.def("rope", &rope, release());
  module.def("attention", &attention, release());
  module.def("embedding", &embedding, release());
  module.def("sample", &sample, release());
}

}  // namespace ree::python
