// Internal to kernels/src/cpu: the AVX2+FMA build of the scalar CPU kernels (correctly rounded
// math, element-wise activations, row operations, RoPE, attention). Their arithmetic calls
// std::fmaf (fmaF32, reduce.h), which the portable x86-64 build turns into a libm call per
// element; built for AVX2 and FMA, the same source makes it one vfmadd instruction and may use
// 256-bit vectors (4x faster sigmoid). No bit changes: an fma is exactly rounded either way,
// -ffp-contract=off still forbids the compiler to fuse anything else, and vectorised loops keep
// every operation's order. The choice is made at run time (the binary stays portable: no -march
// flag).
#pragma once

#include <cstdint>

#include "ree/core/parallel.h"

namespace ree::repops::cpu {

// Whether this CPU has AVX2 and FMA and the AVX2+FMA build is enabled (setVectorMathEnabled).
bool vectorMathAvailable();

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
// Marks a lambda to be compiled into its caller, so that runAvx2Fma builds it (and the inline
// functions it calls) for AVX2 and FMA.
#define REE_VECTOR_MATH_INLINE __attribute__((always_inline))

template <typename Body>
__attribute__((target("avx2,fma"))) void runAvx2Fma(const Body& body) {
  body();
}

// The same with every call inside body compiled into it (flatten), for a small body whose callees
// the compiler would otherwise keep out of line in their portable build (crExp's table step in
// softmax: 4x slower). Not for large bodies: flattening their cold paths into the loops made
// LayerNorm 2x slower.
template <typename Body>
__attribute__((target("avx2,fma"), flatten)) void runAvx2FmaFlat(const Body& body) {
  body();
}

// body(), in the AVX2+FMA build when available, else in the portable one.
template <typename Body>
void runVectorMath(const Body& body) {
  if (vectorMathAvailable()) {
    runAvx2Fma(body);
  } else {
    body();
  }
}

template <typename Body>
void runVectorMathFlat(const Body& body) {
  if (vectorMathAvailable()) {
    runAvx2FmaFlat(body);
  } else {
    body();
  }
}
#else
#define REE_VECTOR_MATH_INLINE
template <typename Body>
void runVectorMath(const Body& body) {
  body();
}
template <typename Body>
void runVectorMathFlat(const Body& body) {
  body();
}
#endif

// parallelFor (core/parallel.h) whose ranges run fn(begin, end) through runVectorMath; fn must be
// a lambda marked REE_VECTOR_MATH_INLINE.
template <typename Fn>
void parallelForVectorMath(int64_t n, int64_t grain, const Fn& fn) {
  parallelFor(n, grain, [&](int64_t begin, int64_t end) {
    runVectorMath([&]() REE_VECTOR_MATH_INLINE { fn(begin, end); });
  });
}

}  // namespace ree::repops::cpu
