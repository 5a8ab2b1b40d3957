// Linear layer RepOp (GEMM / GEMV): Y[m, n] = round_out(canonicalDot_k(X[m, k], W[n, k]) (+
// bias[n])).
//
// The dot is the canonical dot of reduce.h (chunks of 128 along k, an fma chain from +0 inside a
// chunk, chunk partials merged left to right); the optional bias is added once, in fp32, after the
// dot; any NaN result is written as the canonical positive quiet NaN; bf16 output rounds to nearest
// even (numeric.h). Spec: docs/repops-spec/linear.md. The bits depend only on the values of one
// output's inputs, never on M, tile shapes, thread counts, SM count or GPU model.
#pragma once

#include <cstdint>

#include "ree/core/status.h"
#include "ree/kernels/numeric.h"

namespace ree::repops {

// Pointers and shapes of one linear layer. Strides count elements, not bytes; a stride of 0 means
// the dense default (K for x and w, N for y). Every pointer is host memory for the CPU entry point
// and device memory for the CUDA one.
struct LinearArgs {
  const void* x = nullptr;      // activations [M, K], row stride x_row_stride
  DType x_dtype = DType::kF32;  // kF32 or kBF16
  int64_t x_row_stride = 0;

  const void* w =
      nullptr;  // weights [N, K] (Hugging Face nn.Linear layout), row stride w_row_stride
  DType w_dtype = DType::kBF16;  // kF32, kBF16 or kF16
  int64_t w_row_stride = 0;

  const void* bias = nullptr;      // optional [N]; nullptr means no bias
  DType bias_dtype = DType::kF32;  // kF32 or the same dtype as w

  void* y = nullptr;  // output [M, N], row stride y_row_stride; must not overlap x, w or bias
  DType y_dtype = DType::kF32;  // kF32 or kBF16
  int64_t y_row_stride = 0;

  int64_t m = 0;  // rows of x and y; 0 is a valid no-op
  int64_t n = 0;  // output features, >= 1
  int64_t k = 0;  // input features, 1 .. 2^31 - 1

  // True: Y = add(Y, the layer's output), i.e. each element becomes R_T(L(Y) + L(R_T(v))) with the
  // sum's NaN canonicalised, exactly the pointwise `add` of a separate linear output (dtype of y)
  // to Y (the residual connection, without the extra tensor and launch). Y must hold values.
  bool accumulate = false;

  // True promises that no work queued earlier on the stream writes w or bias (model parameters,
  // uploaded before the run). The CUDA GEMV then starts reading its first weights while the
  // previous kernel on the stream is still running. Never changes the bits; ignored on the CPU.
  bool w_is_constant = false;

  // The row strides in effect (a stride of 0 resolved to the dense default).
  int64_t xStride() const { return x_row_stride ? x_row_stride : k; }
  int64_t wStride() const { return w_row_stride ? w_row_stride : k; }
  int64_t yStride() const { return y_row_stride ? y_row_stride : n; }
};

namespace detail {

// The last steps of every output, shared by the CPU and CUDA kernels: the bias add (one fp32
// addition after the merged dot) and NaN canonicalisation (x86 and CUDA produce different NaN bits
// for the same invalid operation, so the sign and payload of a NaN are not reproducible; the
// output NaN is always 0x7fc00000).
REE_HD float linearFinish(float dot, bool has_bias, float bias) {
  float value = has_bias ? dot + bias : dot;
  if ((floatBits(value) & 0x7fffffffu) > 0x7f800000u) value = bitsFloat(0x7fc00000u);
  return value;
}

// accumulate: the stored element from the old fp32 value of Y and the finished output v (already
// rounded to Y's dtype and widened back): pointwise add's R_T(canonical(L(a) + L(b))) before R_T.
REE_HD float linearAccumulate(float old_value, float v) {
  float sum = old_value + v;
  if ((floatBits(sum) & 0x7fffffffu) > 0x7f800000u) sum = bitsFloat(0x7fc00000u);
  return sum;
}

// Stores the finished output `value` at y[index] (fp32 or bf16 y): rounded to bf16 (RNE), or with
// accumulate, Y's old value plus the output rounded to Y's dtype, through linearAccumulate.
REE_HD void linearStore(void* y, bool y_is_bf16, int64_t index, float value, bool accumulate) {
  if (y_is_bf16) {
    bf16_t* out = static_cast<bf16_t*>(y) + index;
    *out = accumulate ? toBF16(linearAccumulate(toFloat(*out), toFloat(toBF16(value))))
                      : toBF16(value);
  } else {
    float* out = static_cast<float*>(y) + index;
    *out = accumulate ? linearAccumulate(*out, value) : value;
  }
}

}  // namespace detail

// Checks dtypes, shapes, strides and pointers; kInvalidArgument with a message naming the argument.
Status validateLinearArgs(const LinearArgs& args);

namespace cpu {

// Runs on the calling thread plus the parallelFor pool (cpu_parallel.h).
Status linear(const LinearArgs& args);

// For tests and benchmarks: false forces the portable scalar loop instead of the AVX2+FMA one
// chosen at run time on CPUs that have it (both perform the same IEEE operations; default true).
void setLinearSimdEnabled(bool enabled);

}  // namespace cpu

namespace cuda {

// Kernel choice. Every kernel gives the same bits; kAuto picks by M and alignment.
enum class LinearKernel : int {
  kAuto = 0,
  kGemv = 1,  // split over N and over the 128-wide k-chunks; needs 16-byte aligned rows of x and w
  kGemm = 2,  // register-tiled fp32-FFMA GEMM; any shape and alignment
};

// Enqueues the layer on `stream`; returns once launched (no synchronisation).
Status linear(const LinearArgs& args, cudaStream_t stream);

// Same with an explicit kernel (tests, benchmarks). kUnsupported if `kernel` cannot serve args.
Status linearWithKernel(const LinearArgs& args, LinearKernel kernel, cudaStream_t stream);

}  // namespace cuda
}  // namespace ree::repops
