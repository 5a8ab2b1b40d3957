// Pattern fusion: what torch.onnx.export writes out op by op, lowered to the RepOps REE's native
// models call, so a compiled transformers model gives the native engine's bits (docs/compiler.md,
// "Fusions"):
//  - RMSNorm: Pow(x, 2) -> ReduceMean(last axis) -> Add(eps) -> Sqrt -> Div(1, .) -> Mul(x, .)
//    [-> Cast to float] -> Mul(weight) becomes SimplifiedLayerNormalization
//    (OperationSet::rmsNorm);
//  - attention: MatMul(Q, Transpose(K, [0, 1, 3, 2])) -> Mul(scale) -> Add(mask) -> Softmax(last)
//    [-> Casts to float] -> MatMul(., V) becomes ReeCausalAttention (domain "ree",
//    ops_attention.cpp), which calls OperationSet::attention when the mask is causal and the scale
//    is 1/sqrt(head_dim) at run time, and otherwise runs the original nodes (kept in the fused
//    node's `fallback`), so its bits are then exactly the unfused graph's.
// Intermediate values must have no reader outside the pattern and must not be graph outputs.
#pragma once

#include "graph.h"

namespace ree::compiler {

struct FusionStats {
  int rms_norms = 0;
  int attentions = 0;
};

// Rewrites `graph` in place (nodes left without readers are removed).
Status fusePatterns(Graph* graph, FusionStats* stats);

}  // namespace ree::compiler
