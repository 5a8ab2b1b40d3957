// Rotary position embedding (RoPE), RepOps spec repops-1 (docs/repops-spec/pointwise.md, "RoPE").
//
// Inverse frequencies follow transformers' default and "llama3" rope initialisation as a fixed
// sequence of fp32 IEEE operations (CPU torch semantics) with the correctly rounded crPow; the
// rotation follows transformers' apply_rotary_pos_emb rounding points: cos/sin and every product
// and sum are rounded to the storage type, exactly as torch does for bf16/f16 tensors.
#pragma once

#include <cstdint>

#include "ree/core/status.h"
#include "ree/kernels/crmath.h"
#include "ree/kernels/numeric.h"

namespace ree {

// Which pairs of a head vector rotate together.
enum class RopeLayout : int {
  kHalfSplit = 0,    // Llama/NeoX "rotate_half": (x[i], x[i + rotary_dim/2])
  kInterleaved = 1,  // GPT-J "rotate_every_two": (x[2i], x[2i + 1])
};

// Llama 3.x frequency scaling (transformers rope_type "llama3"). The values are the config's
// Python numbers (doubles); see ropeInvFreqLlama3 for where each is rounded to fp32.
struct RopeLlama3Scaling {
  double factor = 8.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 8192;
};

// 2*pi rounded to fp32 (torch turns the Python scalar 2*math.pi into this when it multiplies an
// fp32 tensor).
constexpr float kRopeTwoPiF32 = 6.28318548202514648f;

// Default inverse frequency of pair i for rotary dimension d (even, > 0):
//   e = float(2i) / float(d); p = crPow(base, e); inv = 1.0f / p
REE_HD float ropeInvFreqDefault(int pair, int rotary_dim, float base) {
  float exponent = static_cast<float>(2 * pair) / static_cast<float>(rotary_dim);
  return 1.0f / crPow(base, exponent);
}

// transformers' _compute_llama3_parameters applied to one default inverse frequency, as torch
// evaluates it on CPU (fp32 tensor ops; Python scalars rounded to fp32 where they meet a tensor;
// `scalar / tensor` is reciprocal(tensor) * float(scalar)).
REE_HD float ropeInvFreqLlama3(float inv_freq, const RopeLlama3Scaling& scaling) {
  const float factor = static_cast<float>(scaling.factor);
  const float low_freq_factor = static_cast<float>(scaling.low_freq_factor);
  const double old_context_len = static_cast<double>(scaling.original_max_position_embeddings);
  // Python-double scalars, rounded once to fp32 where they meet the tensor.
  const float low_freq_wavelen = static_cast<float>(old_context_len / scaling.low_freq_factor);
  const float high_freq_wavelen = static_cast<float>(old_context_len / scaling.high_freq_factor);
  const float smooth_denominator =
      static_cast<float>(scaling.high_freq_factor - scaling.low_freq_factor);
  const float old_context_len_f32 = static_cast<float>(old_context_len);

  const float wavelen = (1.0f / inv_freq) * kRopeTwoPiF32;
  const float inv_freq_llama = (wavelen > low_freq_wavelen) ? inv_freq / factor : inv_freq;
  const bool is_medium = !(wavelen < high_freq_wavelen) && !(wavelen > low_freq_wavelen);
  if (!is_medium) return inv_freq_llama;
  const float smooth =
      ((1.0f / wavelen) * old_context_len_f32 - low_freq_factor) / smooth_denominator;
  const float low_part = ((1.0f - smooth) * inv_freq_llama) / factor;
  const float high_part = smooth * inv_freq_llama;
  return low_part + high_part;
}

// Rotation of one pair (a, b) -> (a*c - b*s, b*c + a*s), with c, s already rounded to storage T,
// every product and the sum rounded to T (torch's bf16/f16 op-by-op semantics; identity for f32).
// A NaN result is stored as the canonical NaN: CPUs and GPUs give NaNs (from a NaN input, or
// inf * 0 at position 0) different signs and payloads. A NaN product stays NaN through the sum,
// so the products' roundings need no NaN test of their own (roundThrough).
template <typename T>
REE_HD void ropeRotatePair(T& a, T& b, float c, float s) {
  const float x0 = loadFloat(a);
  const float x1 = loadFloat(b);
  const float x0c = roundThrough<T>(x0 * c);
  const float x1s = roundThrough<T>(x1 * s);
  const float x1c = roundThrough<T>(x1 * c);
  const float x0s = roundThrough<T>(x0 * s);
  a = storeCanonical<T>(x0c - x1s);
  b = storeCanonical<T>(x1c + x0s);
}

// cos (sine = false) or sin of pair i at a position, rounded to the storage type T. One value
// alone lets a GPU kernel give the cos and the sin of a pair to different threads.
template <typename T>
REE_HD float ropeCosOrSin(int32_t position, float inv_freq, bool sine) {
  const float angle = static_cast<float>(position) * inv_freq;
  return loadFloat(storeAs<T>(sine ? crSin(angle) : crCos(angle)));
}

// cos/sin of pair i at a position, rounded to the storage type T.
template <typename T>
REE_HD void ropeCosSin(int32_t position, float inv_freq, float* cos_out, float* sin_out) {
  *cos_out = ropeCosOrSin<T>(position, inv_freq, false);
  *sin_out = ropeCosOrSin<T>(position, inv_freq, true);
}

// Offsets (in elements, within a head) of the two members of pair i.
REE_HD void ropePairOffsets(RopeLayout layout, int pair, int rotary_dim, int* first, int* second) {
  if (layout == RopeLayout::kHalfSplit) {
    *first = pair;
    *second = pair + rotary_dim / 2;
  } else {
    *first = 2 * pair;
    *second = 2 * pair + 1;
  }
}

}  // namespace ree

namespace ree::repops::cpu {

// Fills inv_freq[rotary_dim / 2] (host memory). llama3 == nullptr: default frequencies.
Status ropeInvFreq(float base, int rotary_dim, const RopeLlama3Scaling* llama3, float* inv_freq);

// Rotates x in place. x holds `tokens` rows of `heads` heads of `head_dim` elements; a row starts
// `token_stride` elements after the previous one (token_stride >= heads * head_dim, so q or k may
// be a slice of a fused qkv buffer). positions[tokens] (host); inv_freq[rotary_dim / 2] (host).
// Only the first rotary_dim (even, <= head_dim) elements of each head rotate.
Status rope(DType dtype, void* x, int64_t tokens, int heads, int head_dim, int64_t token_stride,
            const int32_t* positions, const float* inv_freq, int rotary_dim, RopeLayout layout);

}  // namespace ree::repops::cpu

namespace ree::repops::cuda {

// As the CPU versions; pointers are device memory, work is queued on `stream`.
Status ropeInvFreq(float base, int rotary_dim, const RopeLlama3Scaling* llama3, float* inv_freq,
                   cudaStream_t stream);
Status rope(DType dtype, void* x, int64_t tokens, int heads, int head_dim, int64_t token_stride,
            const int32_t* positions, const float* inv_freq, int rotary_dim, RopeLayout layout,
            cudaStream_t stream);

}  // namespace ree::repops::cuda
