// Matrix products: MatMul, Gemm and Conv (im2col, an exact gather, then one matrix product) all
// end in the operation set's linear(): out[m, n] = x[m, :] . w[n, :] (+ bias[n]), which under the
// reproducible set is the RepOp linear (linear.md: one canonical dot per output, independent of M).
#include <algorithm>

#include "device_ops.h"
#include "ops.h"
#include "ree/kernels/elementwise.h"
#include "tensor_util.h"

namespace ree::compiler {

namespace {

// out [M, N] = x [M, K] . w [N, K]^T (+ bias [N]) through the operation set.
Status linearRows(OpContext& c, const GraphTensor& x, const GraphTensor& w, const GraphTensor* bias,
                  int64_t m, int64_t n, int64_t k, GraphTensor* out) {
  REE_CHECK_ARG(k >= 1 && n >= 1, "%s: empty matrix product (K = %lld, N = %lld)",
                c.node.label().c_str(), static_cast<long long>(k), static_cast<long long>(n));
  GraphTensor result;
  REE_RETURN_IF_ERROR(emptyOn(c.device, ElementType::kFloat32, {m, n}, &result));
  if (m > 0) {
    Tensor y = floatView(result);
    Tensor b = bias != nullptr ? floatView(*bias, {n}) : Tensor();
    REE_RETURN_IF_ERROR(c.ops->linear(floatView(x, {m, k}), floatView(w, {n, k}),
                                      bias != nullptr ? &b : nullptr, y));
  }
  *out = std::move(result);
  return Status::kSuccess;
}

// [..., K, N] -> [..., N, K]
Status transposeLastTwo(const GraphTensor& in, GraphTensor* out) {
  std::vector<int64_t> perm(in.shape.size());
  for (size_t i = 0; i < perm.size(); ++i)
    perm[i] = static_cast<int64_t>(i);
  std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
  return transposeTensor(in, perm, out);
}

// MatMul against a weight the compiler stored as [N, K]: every row of `a` through one linear().
Status matMulTransposedWeight(OpContext& c, const GraphTensor& a, const GraphTensor& w) {
  REE_CHECK_ARG(!a.shape.empty() && w.shape.size() == 2, "%s: operands %s and %s",
                c.node.label().c_str(), shapeText(a.shape).c_str(), shapeText(w.shape).c_str());
  const int64_t n = w.shape[0], k = w.shape[1];
  REE_CHECK_ARG(k >= 1 && n >= 1, "%s: empty matrix product (K = %lld, N = %lld)",
                c.node.label().c_str(), static_cast<long long>(k), static_cast<long long>(n));
  REE_CHECK_ARG(a.shape.back() == k, "%s: inner dims differ: %s x [%lld, %lld]",
                c.node.label().c_str(), shapeText(a.shape).c_str(), static_cast<long long>(k),
                static_cast<long long>(n));
  Shape out_shape(a.shape.begin(), a.shape.end() - 1);
  out_shape.push_back(n);
  GraphTensor result;
  REE_RETURN_IF_ERROR(linearRows(c, a, w, nullptr, a.numel() / k, n, k, &result));
  c.outputs[0] = reshapedView(result, out_shape);
  return Status::kSuccess;
}

Status runMatMul(OpContext& c) {
  const GraphTensor *a0, *b0;
  REE_RETURN_IF_ERROR(c.floatInput(0, &a0));
  REE_RETURN_IF_ERROR(c.floatInput(1, &b0));
  if (c.node.intAttribute(kWeightTransposedAttribute, 0) != 0) {
    return matMulTransposedWeight(c, *a0, *b0);
  }
  REE_CHECK_ARG(!a0->shape.empty() && !b0->shape.empty(), "%s: scalar operand",
                c.node.label().c_str());
  GraphTensor a = *a0, b = *b0;
  const bool a_vector = a.shape.size() == 1, b_vector = b.shape.size() == 1;
  if (a_vector) a.shape.insert(a.shape.begin(), 1);
  if (b_vector) b.shape.push_back(1);
  const int64_t m = a.shape[a.shape.size() - 2], k = a.shape.back();
  const int64_t n = b.shape.back();
  REE_CHECK_ARG(b.shape[b.shape.size() - 2] == k, "%s: inner dims differ: %s x %s",
                c.node.label().c_str(), shapeText(a0->shape).c_str(), shapeText(b0->shape).c_str());
  Shape a_batch(a.shape.begin(), a.shape.end() - 2), b_batch(b.shape.begin(), b.shape.end() - 2);
  Shape batch;
  REE_RETURN_IF_ERROR(broadcastShapes(a_batch, b_batch, c.node.label(), &batch));
  Shape out_shape = batch;
  if (!a_vector) out_shape.push_back(m);
  if (!b_vector) out_shape.push_back(n);
  GraphTensor wt;
  if (b_batch.empty()) {
    // One weight for every row: a single linear over all batch rows.
    REE_RETURN_IF_ERROR(transposeLastTwo(b, &wt));
    GraphTensor full_a, result;
    Shape a_shape = batch;
    a_shape.push_back(m);
    a_shape.push_back(k);
    REE_RETURN_IF_ERROR(broadcastTo(a, a_shape, &full_a));
    REE_RETURN_IF_ERROR(linearRows(c, full_a, wt, nullptr, shapeProduct(batch) * m, n, k, &result));
    c.outputs[0] = reshapedView(result, out_shape);
    return Status::kSuccess;
  }
  Shape a_full = batch, b_full = batch;
  a_full.insert(a_full.end(), {m, k});
  b_full.insert(b_full.end(), {k, n});
  GraphTensor fa, fb;
  REE_RETURN_IF_ERROR(broadcastTo(a, a_full, &fa));
  REE_RETURN_IF_ERROR(broadcastTo(b, b_full, &fb));
  REE_RETURN_IF_ERROR(transposeLastTwo(fb, &wt));
  GraphTensor& out = c.outputs[0];
  REE_RETURN_IF_ERROR(emptyOn(c.device, ElementType::kFloat32, out_shape, &out));
  const int64_t batches = shapeProduct(batch);
  REE_CHECK_ARG(k >= 1 && n >= 1, "%s: empty matrix product (K = %lld, N = %lld)",
                c.node.label().c_str(), static_cast<long long>(k), static_cast<long long>(n));
  const Device device = out.storage.device();
  for (int64_t i = 0; i < batches && m > 0; ++i) {
    // Views of batch matrix i: one linear() each, written in place.
    Tensor xi = Tensor::wrap(fa.as<float>() + i * m * k, device, DType::kF32, {m, k});
    Tensor wi = Tensor::wrap(wt.as<float>() + i * n * k, device, DType::kF32, {n, k});
    Tensor yi = Tensor::wrap(out.as<float>() + i * m * n, device, DType::kF32, {m, n});
    REE_RETURN_IF_ERROR(c.ops->linear(xi, wi, nullptr, yi));
  }
  return Status::kSuccess;
}

Status runGemm(OpContext& c) {
  const GraphTensor *a0, *b0;
  REE_RETURN_IF_ERROR(c.floatInput(0, &a0));
  REE_RETURN_IF_ERROR(c.floatInput(1, &b0));
  REE_CHECK_ARG(a0->shape.size() == 2 && b0->shape.size() == 2, "%s: operands must be 2-D",
                c.node.label().c_str());
  REE_CHECK_ARG(c.node.floatAttribute("alpha", 1.0f) == 1.0f, "%s: alpha != 1 is not supported",
                c.node.label().c_str());
  GraphTensor a = *a0, w;
  if (c.node.intAttribute("transA", 0)) REE_RETURN_IF_ERROR(transposeLastTwo(*a0, &a));
  if (c.node.intAttribute("transB", 0)) {
    w = *b0;
  } else {
    REE_RETURN_IF_ERROR(transposeLastTwo(*b0, &w));
  }
  const int64_t m = a.shape[0], k = a.shape[1], n = w.shape[0];
  REE_CHECK_ARG(w.shape[1] == k, "%s: inner dims differ: %s x %s", c.node.label().c_str(),
                shapeText(a0->shape).c_str(), shapeText(b0->shape).c_str());
  const GraphTensor* bias = c.input(2);
  const float beta = c.node.floatAttribute("beta", 1.0f);
  REE_CHECK_ARG(bias == nullptr || (beta == 1.0f && bias->type == ElementType::kFloat32),
                "%s: a float C with beta = 1 is supported", c.node.label().c_str());
  const bool row_bias =
      bias != nullptr && bias->numel() == n &&
      (bias->shape.size() == 1 || (bias->shape.size() == 2 && bias->shape[0] == 1));
  if (row_bias) {
    return linearRows(c, a, w, bias, m, n, k, &c.outputs[0]);
  }
  GraphTensor product, c_full;
  REE_RETURN_IF_ERROR(linearRows(c, a, w, nullptr, m, n, k, &product));
  if (bias == nullptr) {
    c.outputs[0] = product;
    return Status::kSuccess;
  }
  REE_RETURN_IF_ERROR(broadcastTo(*bias, {m, n}, &c_full));
  REE_RETURN_IF_ERROR(emptyOn(c.device, ElementType::kFloat32, {m, n}, &c.outputs[0]));
  return dev::binary(c.device, BinaryOp::kAdd, product.as<float>(), c_full.as<float>(),
                     c.outputs[0].as<float>(), m * n);
}

}  // namespace

Status runConv(OpContext& c);  // ops_conv.cpp

void registerLinearOps(std::vector<OpDef>* table) {
  table->push_back({"MatMul", runMatMul, "OperationSet::linear (RepOp linear when reproducible)"});
  table->push_back({"Gemm", runGemm, "OperationSet::linear with C as bias (alpha = 1, beta = 1)"});
  table->push_back({"Conv", runConv, "im2col (exact gather) + OperationSet::linear, per group"});
}

}  // namespace ree::compiler
