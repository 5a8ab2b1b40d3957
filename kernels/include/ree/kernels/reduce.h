// The canonical reduction orders of RepOps (docs/repops-spec.md, section 3).
//
// Every reduction of length n over fp32 values is split into chunks of kReduceChunk consecutive
// positions, [0,128), [128,256), ... (the last chunk may be shorter). Each chunk's partial is a
// sequential chain that starts from +0.0f and visits the chunk's positions in increasing order:
//   dot:    p = fmaf(a[k], b[k], p)
//   sum:    p = p + x[k]
// Partials are merged left to right: total = p_0, then total = total + p_c for c = 1, 2, ...
// An empty reduction (n == 0) is +0.0f.
//
// The order depends only on n and the positions: a GEMM thread that walks k in order, a GEMV warp
// whose lanes each take a chunk, and a CPU loop all produce the same bits. These helpers are the
// reference form; kernels may reorganise the work but must perform exactly these operations.
#pragma once

#include "ree/kernels/numeric.h"

#if !defined(__CUDA_ARCH__)
#include <cmath>
#endif

namespace ree {

constexpr int kReduceChunk = 128;

// Fused multiply-add with a single rounding on both sides of the build.
REE_HD float fmaF32(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
  return __fmaf_rn(a, b, c);
#else
  return std::fmaf(a, b, c);
#endif
}

REE_HD double fmaF64(double a, double b, double c) {
#if defined(__CUDA_ARCH__)
  return __fma_rn(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}

// Left-to-right merge of chunk partials.
struct ChunkMerge {
  float total = 0.0f;
  int count = 0;
  REE_HD void add(float partial) {
    total = (count == 0) ? partial : total + partial;
    ++count;
  }
};

// Canonical dot product of n elements; a(k) and b(k) return the k-th factor as float.
template <typename LoadA, typename LoadB>
REE_HD float canonicalDot(int n, LoadA a, LoadB b) {
  ChunkMerge merge;
  for (int begin = 0; begin < n; begin += kReduceChunk) {
    int end = begin + kReduceChunk < n ? begin + kReduceChunk : n;
    float partial = 0.0f;
    for (int k = begin; k < end; ++k)
      partial = fmaF32(a(k), b(k), partial);
    merge.add(partial);
  }
  return merge.total;
}

// Canonical sum of n elements; x(k) returns the k-th term as float.
template <typename Load>
REE_HD float canonicalSum(int n, Load x) {
  ChunkMerge merge;
  for (int begin = 0; begin < n; begin += kReduceChunk) {
    int end = begin + kReduceChunk < n ? begin + kReduceChunk : n;
    float partial = 0.0f;
    for (int k = begin; k < end; ++k)
      partial = partial + x(k);
    merge.add(partial);
  }
  return merge.total;
}

}  // namespace ree
