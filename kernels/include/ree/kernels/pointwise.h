// Embedding gather and elementwise operators, RepOps spec repops-1
// (docs/repops-spec/pointwise.md). Every element is computed independently from fp32 values
// loaded exactly from storage; the rounding points are those of torch's op-by-op evaluation of
// the transformers modules (each op rounds its result to the storage type), so the same formula
// serves f32 (rounding is the identity) and bf16/f16.
#pragma once

#include <cstdint>

#include "ree/core/status.h"
#include "ree/kernels/crmath.h"
#include "ree/kernels/numeric.h"

namespace ree {

enum class Activation : int {
  kSilu = 0,      // x * sigmoid(x)
  kGeluErf = 1,   // 0.5 x (1 + erf(x / sqrt 2))       (torch gelu, approximate="none")
  kGeluTanh = 2,  // 0.5 x (1 + tanh(sqrt(2/pi)(x + 0.044715 x^3)))  (approximate="tanh")
};

inline const char* activationName(Activation activation) {
  switch (activation) {
    case Activation::kSilu:
      return "silu";
    case Activation::kGeluErf:
      return "gelu_erf";
    case Activation::kGeluTanh:
      return "gelu_tanh";
  }
  return "?";
}

// The correctly rounded fp32 value of the activation (one rounding, from crmath).
REE_HD float activationF32(Activation activation, float x) {
  switch (activation) {
    case Activation::kSilu:
      return crSilu(x);
    case Activation::kGeluErf:
      return crGeluErf(x);
    case Activation::kGeluTanh:
      return crGeluTanh(x);
  }
  return x;
}

// Any NaN becomes the canonical positive quiet NaN before it is stored: x86 and CUDA produce and
// propagate NaNs with different signs and payloads (x86: -qNaN for inf - inf, the first operand's
// payload otherwise; CUDA: 0x7fffffff), so a NaN's bits are not reproducible unless canonicalised.
REE_HD float canonicalNaNF32(float value) {
  return value != value ? bitsFloat(0x7fc00000u) : value;
}

// activationF32 before its final NaN canonicalisation (the same value; a NaN may have any sign
// and payload), for the element functions below, which canonicalise NaN as they store: one NaN
// test per stored value instead of one per step (SwiGLU is bound by instruction issue).
REE_HD float activationBeforeCanonical(Activation activation, float x) {
  switch (activation) {
    case Activation::kSilu:
      return crdetail::siluBeforeCanonical(x);
    case Activation::kGeluErf:
      return crdetail::geluErfBeforeCanonical(x);
    case Activation::kGeluTanh:
      return crdetail::geluTanhBeforeCanonical(x);
  }
  return x;
}

// The element functions store R(v) = storeAs<T>(canonicalNaNF32(v)), written storeCanonical<T>(v).

// out = R(act(x)).
template <typename T>
REE_HD T activationElement(Activation activation, T x) {
  return storeCanonical<T>(activationBeforeCanonical(activation, loadFloat(x)));
}

// Gated unit: out = R(R(act(gate)) * up), as act_fn(gate_proj(x)) * up_proj(x) in torch. The
// inner R needs no NaN test of its own (roundThrough): a NaN activation makes the product NaN,
// which the outer R canonicalises.
template <typename T>
REE_HD T gatedElement(Activation activation, T gate, T up) {
  const float activated = roundThrough<T>(activationBeforeCanonical(activation, loadFloat(gate)));
  return storeCanonical<T>(activated * loadFloat(up));
}

template <typename T>
REE_HD T addElement(T a, T b) {
  return storeCanonical<T>(loadFloat(a) + loadFloat(b));
}

template <typename T>
REE_HD T mulElement(T a, T b) {
  return storeCanonical<T>(loadFloat(a) * loadFloat(b));
}

}  // namespace ree

namespace ree::repops::cpu {

// out[i, :] = table[ids[i], :] for i in [0, count); table is [vocab, dim] of `dtype`. Every id is
// validated before anything is written: an id outside [0, vocab) returns kInvalidArgument naming
// the first bad position and its id.
Status embedding(DType dtype, const void* table, int64_t vocab, int64_t dim, const int32_t* ids,
                 int64_t count, void* out);

// out = a + b and out = a * b over n elements (bf16 or f32; out may alias a or b).
Status add(DType dtype, const void* a, const void* b, void* out, int64_t n);
Status mul(DType dtype, const void* a, const void* b, void* out, int64_t n);

// out = act(x) over n elements (bf16, f16 or f32; out may alias x).
Status activation(Activation activation, DType dtype, const void* x, void* out, int64_t n);

// out[r, c] = R(R(act(gate[r, c])) * up[r, c]) for a [rows, cols] problem. Each operand has its
// own row stride (elements) so gate and up may be the halves of one fused [rows, 2*cols] buffer.
// kSilu gives SwiGLU, kGeluTanh / kGeluErf give GeGLU.
Status gated(Activation activation, DType dtype, const void* gate, int64_t gate_stride,
             const void* up, int64_t up_stride, void* out, int64_t out_stride, int64_t rows,
             int64_t cols);

}  // namespace ree::repops::cpu

namespace ree::repops::cuda {

// bf16 and f16 activation and gated calls of at least this many elements (16-byte aligned rows)
// look the activation up in a table of all 65536 results instead of computing it: the same bits,
// about fifteen instructions per element instead of sixty. Smaller calls compute (on H100 the table
// is faster from about 64 x 14336 elements, slower at 16 x 14336; docs/benchmarks-history.md).
constexpr int64_t kActivationTableMinElements = int64_t{1} << 19;

// Device pointers, work on `stream`. An out-of-range id writes a zero row and is recorded in a
// device flag (the lowest bad position, by atomicMin); the call then synchronizes `stream` and
// returns kInvalidArgument naming that position and its id.
Status embedding(DType dtype, const void* table, int64_t vocab, int64_t dim, const int32_t* ids,
                 int64_t count, void* out, cudaStream_t stream);
// Same gather when the caller also holds the ids on the host (`host_ids`, equal to the device
// `ids`): they are validated there, as the CPU kernel does, so the call never synchronizes
// `stream` (a decode step's first kernel then does not cost a host round trip).
Status embeddingHostChecked(DType dtype, const void* table, int64_t vocab, int64_t dim,
                            const int32_t* ids, const int32_t* host_ids, int64_t count, void* out,
                            cudaStream_t stream);
// Same gather for ids that the device produced in [0, vocab) (a decode step's argmax over `vocab`
// logits, runtime/token_select.h) and the host has not seen yet: never synchronizes `stream`. An
// id outside the table would give a zero row, so the caller must guarantee the range.
Status embeddingOfDeviceIds(DType dtype, const void* table, int64_t vocab, int64_t dim,
                            const int32_t* ids, int64_t count, void* out, cudaStream_t stream);
Status add(DType dtype, const void* a, const void* b, void* out, int64_t n, cudaStream_t stream);
Status mul(DType dtype, const void* a, const void* b, void* out, int64_t n, cudaStream_t stream);
Status activation(Activation activation, DType dtype, const void* x, void* out, int64_t n,
                  cudaStream_t stream);
Status gated(Activation activation, DType dtype, const void* gate, int64_t gate_stride,
             const void* up, int64_t up_stride, void* out, int64_t out_stride, int64_t rows,
             int64_t cols, cudaStream_t stream);

}  // namespace ree::repops::cuda
