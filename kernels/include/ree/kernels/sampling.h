// Token selection over fp32 logits rows, RepOps spec repops-1 (docs/repops-spec/sampling.md):
// argmax, the Philox4x32-10 counter-based generator, and temperature / top-k / top-p sampling.
// Every step is integer arithmetic, an order defined by value then index, correctly rounded crExp
// or the canonical sum of reduce.h, so CPU and GPU select the same token.
#pragma once

#include <cstdint>

#include "ree/core/status.h"
#include "ree/kernels/crmath.h"
#include "ree/kernels/numeric.h"
#include "ree/kernels/reduce.h"

namespace ree {

// ---- Philox4x32-10 (Salmon et al., SC'11; Random123) -----------------------------------------
struct Philox4x32 {
  uint32_t v[4];
};

REE_HD void philoxMulHiLo(uint32_t a, uint32_t b, uint32_t* hi, uint32_t* lo) {
  const uint64_t product = static_cast<uint64_t>(a) * static_cast<uint64_t>(b);
  *hi = static_cast<uint32_t>(product >> 32);
  *lo = static_cast<uint32_t>(product);
}

// Ten rounds of Philox4x32 on `counter` with `key`; the key is bumped between rounds.
REE_HD Philox4x32 philox4x32_10(Philox4x32 counter, uint32_t key0, uint32_t key1) {
  constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      key0 += kWeyl0;
      key1 += kWeyl1;
    }
    uint32_t hi0, lo0, hi1, lo1;
    philoxMulHiLo(kMul0, counter.v[0], &hi0, &lo0);
    philoxMulHiLo(kMul1, counter.v[2], &hi1, &lo1);
    counter = Philox4x32{{hi1 ^ counter.v[1] ^ key0, lo1, hi0 ^ counter.v[3] ^ key1, lo0}};
  }
  return counter;
}

// The uniform draw of (seed, sequence, step): key = (seed low 32, seed high 32), counter =
// (step low, step high, sequence low, sequence high); u = (word0 >> 8) * 2^-24, in [0, 1) and
// exact in fp32 (24 random bits).
REE_HD float samplingUniform(uint64_t seed, uint64_t sequence, uint64_t step) {
  Philox4x32 counter{{static_cast<uint32_t>(step), static_cast<uint32_t>(step >> 32),
                      static_cast<uint32_t>(sequence), static_cast<uint32_t>(sequence >> 32)}};
  Philox4x32 out =
      philox4x32_10(counter, static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
  return static_cast<float>(out.v[0] >> 8) * 5.9604644775390625e-8f;  // 2^-24
}

// ---- Candidate order ---------------------------------------------------------------------------
// A 32-bit key whose unsigned order is the numeric order of non-NaN floats (-0 and +0 equal).
REE_HD uint32_t samplingValueKey(float value) {
  uint32_t bits = floatBits(value);
  if ((bits & 0x7fffffffu) == 0) bits = 0;  // -0 -> +0
  return (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
}

// Ascending order of this key = value descending, then index ascending. Keys are unique within a
// row, so any correct sort gives the same permutation.
REE_HD uint64_t samplingSortKey(float value, uint32_t index) {
  return (static_cast<uint64_t>(~samplingValueKey(value)) << 32) | index;
}

// True when (value a, index ia) is selected over (b, ib) by argmax: NaN beats every number (the
// first NaN wins, like torch.argmax), then the larger value, then the lower index.
REE_HD bool argmaxBetter(float a, int64_t ia, float b, int64_t ib) {
  const bool a_nan = a != a, b_nan = b != b;
  if (a_nan || b_nan) return a_nan && (!b_nan || ia < ib);
  if (a != b) return a > b;
  return ia < ib;
}

// Running canonical prefix sums: add(e_j) returns prefix_j, the value canonicalSum of reduce.h
// would return for e_0..e_j. prefix of the last term equals canonicalSum of all terms exactly.
struct CanonicalPrefix {
  ChunkMerge merged;  // chunks already finished
  float partial = 0.0f;
  int in_chunk = 0;
  REE_HD float add(float term) {
    if (in_chunk == kReduceChunk) {
      merged.add(partial);
      partial = 0.0f;
      in_chunk = 0;
    }
    partial = partial + term;
    ++in_chunk;
    return merged.count == 0 ? partial : merged.total + partial;
  }
};

// Unnormalised probability of the candidate with logit `value` when the best candidate has
// `best`: crExp((value - best) / temperature). The best candidate gets exactly 1.
REE_HD float samplingWeight(float value, float best, float temperature) {
  return crExp((value - best) / temperature);
}

}  // namespace ree

namespace ree::repops {

// Per-row sampling parameters.
struct SamplingParams {
  float temperature = 1.0f;  // in [0, kMaxSamplingTemperature]; 0: greedy (argmax)
  int32_t top_k = 0;         // >= 0; 0 (or >= vocab): no top-k; 1: greedy
  float top_p = 1.0f;        // in (0, 1]; 1: no top-p
  uint64_t seed = 0;         // Philox key
  uint64_t sequence = 0;     // request / sequence id (Philox counter words 2-3)
  uint64_t step = 0;         // decode step (Philox counter words 0-1)
};

// The one set of sampling limits, used by the kernels, the engine's requests and receipts
// (docs/repops-spec/sampling.md): temperature in [0, kMaxSamplingTemperature] (so finite),
// top_k >= 0, top_p in (0, 1]. The temperature bound only refuses nonsense: at T = 1e4 logits
// that differ by less than 1 get weights within 1e-4 of each other, a uniform draw in practice.
constexpr float kMaxSamplingTemperature = 1e4f;

// kInvalidArgument unless `params` is within the limits; the message names the field as
// "<who>.temperature" (e.g. who = "sample: params[3]" or "requests[3].sampling").
Status validateSamplingParams(const SamplingParams& params, const char* who);

}  // namespace ree::repops

namespace ree::repops::cpu {

// out[b] = index of the best logit of row b (argmaxBetter order). Host pointers.
Status argmax(const float* logits, int64_t batch, int64_t vocab, int32_t* out);

// out[b] = token sampled from row b with params[b] (docs/repops-spec/sampling.md). Host pointers.
Status sample(const float* logits, int64_t batch, int64_t vocab, const SamplingParams* params,
              int32_t* out);

}  // namespace ree::repops::cpu

namespace ree::repops::cuda {

// logits and out are device pointers; params is a host array of `batch` entries, read before the
// call returns (it may be reused at once). Neither call waits for the stream: out is written in
// its order.
Status argmax(const float* logits, int64_t batch, int64_t vocab, int32_t* out, cudaStream_t stream);
Status sample(const float* logits, int64_t batch, int64_t vocab, const SamplingParams* params,
              int32_t* out, cudaStream_t stream);

}  // namespace ree::repops::cuda
