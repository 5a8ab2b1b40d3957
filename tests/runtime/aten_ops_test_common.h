// Helpers shared by the ATen operation set tests (aten_ops_test.cpp on the CPU,
// aten_ops_gpu_test.cpp on a GPU): host tensors of rounded random values, read-back, tolerance
// comparison, and a fixed run of every operator whose output bytes can be compared.
#pragma once

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "ree/runtime/operation_set.h"
#include "test_util.h"

namespace ree {
namespace aten_test {

constexpr double kF32Roundoff = 1.0 / (1 << 24);

inline double unitRoundoff(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return kF32Roundoff;
    case DType::kBF16:
      return 1.0 / (1 << 8);
    case DType::kF16:
      return 1.0 / (1 << 11);
  }
  return 1.0;
}

using test::roundTo;

// Normal(0, scale) values already rounded to `dtype`, so the reference sees exactly what is stored.
inline std::vector<float> randomIn(DType dtype, size_t n, uint64_t seed, float scale = 1.0f) {
  std::vector<float> values = test::randomValues<float>(n, seed, scale);
  for (float& v : values)
    v = roundTo(dtype, v);
  return values;
}

inline Tensor makeTensor(DType dtype, std::vector<int64_t> shape,
                         const std::vector<float>& values) {
  Tensor t;
  EXPECT_EQ(Tensor::empty(Device::cpu(), dtype, std::move(shape), &t), Status::kSuccess);
  EXPECT_EQ(static_cast<size_t>(t.numel()), values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    switch (dtype) {
      case DType::kF32:
        t.as<float>()[i] = values[i];
        break;
      case DType::kBF16:
        t.as<bf16_t>()[i] = toBF16(values[i]);
        break;
      case DType::kF16:
        t.as<f16_t>()[i] = toF16(values[i]);
        break;
    }
  }
  return t;
}

inline Tensor makeZeros(DType dtype, std::vector<int64_t> shape) {
  Tensor t;
  EXPECT_EQ(Tensor::zeros(Device::cpu(), dtype, std::move(shape), &t), Status::kSuccess);
  return t;
}

inline std::vector<double> readTensor(const Tensor& t) {
  std::vector<double> values(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < values.size(); ++i) {
    switch (t.dtype()) {
      case DType::kF32:
        values[i] = t.as<float>()[i];
        break;
      case DType::kBF16:
        values[i] = toFloat(t.as<bf16_t>()[i]);
        break;
      case DType::kF16:
        values[i] = toFloat(t.as<f16_t>()[i]);
        break;
    }
  }
  return values;
}

inline std::vector<unsigned char> bytesOf(const Tensor& t) {
  const auto* p = static_cast<const unsigned char*>(t.data());
  return std::vector<unsigned char>(p, p + t.nbytes());
}

// Expects |actual - reference| <= tolerance elementwise; reports the worst element.
inline void expectClose(const std::vector<double>& actual, const std::vector<double>& reference,
                        const std::vector<double>& tolerance, const std::string& what) {
  ASSERT_EQ(actual.size(), reference.size()) << what;
  size_t failures = 0;
  size_t worst = 0;
  double worst_ratio = 0.0;
  for (size_t i = 0; i < actual.size(); ++i) {
    double error = std::fabs(actual[i] - reference[i]);
    double ratio = error == 0.0 ? 0.0 : error / tolerance[i];
    if (!(error <= tolerance[i])) ++failures;  // NaN counts as a failure
    if (!(ratio <= worst_ratio)) {
      worst_ratio = ratio;
      worst = i;
    }
  }
  if (std::getenv("REE_TEST_VERBOSE") != nullptr) {
    std::printf("  %-40s worst error/tolerance %.3g\n", what.c_str(), worst_ratio);
  }
  EXPECT_EQ(failures, 0u) << what << ": worst element " << worst << " got " << actual[worst]
                          << " expected " << reference[worst] << " tolerance " << tolerance[worst]
                          << " (error/tolerance " << worst_ratio << ")";
}

inline std::unique_ptr<OperationSet> createSet(OperationSetKind kind) {
  std::unique_ptr<OperationSet> set;
  Status status = createOperationSet(kind, Device::cpu(), &set);
  if (status == Status::kUnsupported) return nullptr;  // a build without LibTorch
  EXPECT_EQ(status, Status::kSuccess) << lastErrorMessage();
  return set;
}

#define REE_EXPECT_OK(expr) \
  EXPECT_EQ((expr), ::ree::Status::kSuccess) << #expr << ": " << ::ree::lastErrorMessage()

// A host-made tensor on `device` (itself on the CPU).
inline Tensor onDevice(const Tensor& host, Device device) {
  if (!device.isCuda()) return host;
  Tensor t;
  EXPECT_EQ(toDevice(host, device, &t), Status::kSuccess) << lastErrorMessage();
  return t;
}

// Appends the bytes of `t` (copied to the host first when it is on a GPU).
inline void appendHostBytes(const Tensor& t, std::vector<unsigned char>* bytes) {
  Tensor host = t;
  if (t.device().isCuda()) {
    EXPECT_EQ(toDevice(t, Device::cpu(), &host), Status::kSuccess);
  }
  std::vector<unsigned char> b = bytesOf(host);
  bytes->insert(bytes->end(), b.begin(), b.end());
}

// Runs every operator once on fixed inputs and returns all outputs' bytes.
inline std::vector<unsigned char> runEveryOperator(OperationSet& set, DType dtype) {
  const Device device = set.device();
  std::vector<unsigned char> bytes;
  auto dev = [&](const Tensor& host) { return onDevice(host, device); };
  auto keep = [&](const Tensor& t) { appendHostBytes(t, &bytes); };
  const int64_t m = 33, k = 160, n = 96, vocab = 50;
  Tensor table = dev(makeTensor(dtype, {vocab, k}, randomIn(dtype, vocab * k, 500)));
  Tensor x = dev(makeZeros(dtype, {m, k}));
  std::vector<int32_t> ids(m);
  for (int64_t i = 0; i < m; ++i)
    ids[i] = static_cast<int32_t>((i * 7) % vocab);
  REE_EXPECT_OK(set.embedding(ids, table, x));
  REE_EXPECT_OK(set.addInPlace(x, dev(makeTensor(dtype, {m, k}, randomIn(dtype, m * k, 501)))));
  keep(x);
  Tensor normed = dev(makeZeros(dtype, {m, k}));
  REE_EXPECT_OK(
      set.rmsNorm(x, dev(makeTensor(dtype, {k}, randomIn(dtype, k, 502))), 1e-6f, normed));
  keep(normed);
  Tensor layer_normed = dev(makeZeros(dtype, {m, k}));
  REE_EXPECT_OK(set.layerNorm(x, dev(makeTensor(dtype, {k}, randomIn(dtype, k, 503))),
                              dev(makeTensor(dtype, {k}, randomIn(dtype, k, 504))), 1e-5f,
                              layer_normed));
  keep(layer_normed);
  Tensor projected = dev(makeZeros(dtype, {m, n}));
  Tensor bias = dev(makeTensor(dtype, {n}, randomIn(dtype, n, 506)));
  REE_EXPECT_OK(set.linear(
      normed, dev(makeTensor(dtype, {n, k}, randomIn(dtype, n * k, 505, 0.1f))), &bias, projected));
  keep(projected);
  // The residual connection without a bias (the default set's fused GEMM on a GPU).
  Tensor residual = dev(makeTensor(dtype, {m, n}, randomIn(dtype, m * n, 511)));
  REE_EXPECT_OK(set.linearAccumulate(
      normed, dev(makeTensor(dtype, {n, k}, randomIn(dtype, n * k, 512, 0.1f))), nullptr,
      residual));
  keep(residual);
  // projected as q/k/v of 2 sequences: 6 heads of 16, 2 kv heads.
  const int64_t heads = 6, kv_heads = 2, d = 16;
  Tensor q = dev(makeTensor(dtype, {m, heads, d}, randomIn(dtype, m * heads * d, 507)));
  Tensor k_new = dev(makeTensor(dtype, {m, kv_heads, d}, randomIn(dtype, m * kv_heads * d, 508)));
  Tensor v_new = dev(makeTensor(dtype, {m, kv_heads, d}, randomIn(dtype, m * kv_heads * d, 509)));
  RopeSpec spec;
  spec.rotary_dim = d;
  spec.theta = 500000.0f;
  spec.llama3 = true;
  spec.llama3_factor = 8.0f;
  spec.llama3_low_freq_factor = 1.0f;
  spec.llama3_high_freq_factor = 4.0f;
  spec.llama3_original_max_positions = 8192;
  StepBatch batch;
  batch.query_offsets = {0, 20, static_cast<int32_t>(m)};
  batch.cached_lens = {0, 0};
  batch.cache_slots = {1, 0};
  EXPECT_EQ(batch.finalize(), Status::kSuccess);
  REE_EXPECT_OK(set.rope(q, batch.positions, spec));
  REE_EXPECT_OK(set.rope(k_new, batch.positions, spec));
  keep(q);
  // A partial, interleaved rotation (GPT-J style) of fresh values.
  Tensor q_partial = dev(makeTensor(dtype, {m, heads, d}, randomIn(dtype, m * heads * d, 513)));
  RopeSpec partial;
  partial.rotary_dim = d / 2;
  partial.interleaved = true;
  REE_EXPECT_OK(set.rope(q_partial, batch.positions, partial));
  keep(q_partial);
  LayerKvCache cache{dev(makeZeros(dtype, {2, 40, kv_heads, d})),
                     dev(makeZeros(dtype, {2, 40, kv_heads, d}))};
  Tensor attended = dev(makeZeros(dtype, {m, heads, d}));
  REE_EXPECT_OK(set.attention(q, k_new, v_new, cache, batch, attended));
  keep(attended);
  keep(cache.k);
  Tensor gated = dev(makeZeros(dtype, {m, n}));
  REE_EXPECT_OK(set.gatedActivation(ActivationKind::kSilu, projected, projected, gated));
  keep(gated);
  Tensor activated = dev(makeZeros(dtype, {m, n}));
  REE_EXPECT_OK(set.activation(ActivationKind::kGeluTanh, projected, activated));
  keep(activated);
  REE_EXPECT_OK(set.synchronize());
  return bytes;
}

// Three steps of attention over one cache, as a serving engine batches them: two prefills in
// non-adjacent slots; a step mixing a decode, a chunk after cached tokens, a fresh prefill and a
// sequence with no new token; then a batched decode. Grouped-query heads (8 over 2). Returns the
// bytes of every step's output and of the caches after the last step.
inline std::vector<unsigned char> runAttentionSteps(OperationSet& set, DType dtype, int64_t d) {
  const Device device = set.device();
  const int64_t heads = 8, kv_heads = 2, slots = 4, max_len = 48;
  auto dev = [&](const Tensor& host) { return onDevice(host, device); };
  std::vector<unsigned char> bytes;
  auto keep = [&](const Tensor& t) { appendHostBytes(t, &bytes); };
  LayerKvCache cache{dev(makeZeros(dtype, {slots, max_len, kv_heads, d})),
                     dev(makeZeros(dtype, {slots, max_len, kv_heads, d}))};
  std::vector<int32_t> cached(slots, 0);
  const std::vector<std::vector<std::pair<int, int>>> steps = {
      {{3, 11}, {0, 4}}, {{0, 1}, {3, 6}, {2, 9}, {1, 0}}, {{2, 1}, {0, 1}, {3, 1}}};
  uint64_t seed = 900;
  for (const auto& step : steps) {
    StepBatch batch;
    batch.query_offsets.push_back(0);
    for (const auto& [slot, count] : step) {
      batch.cached_lens.push_back(cached[slot]);
      batch.cache_slots.push_back(slot);
      batch.query_offsets.push_back(batch.query_offsets.back() + count);
      cached[slot] += count;
    }
    EXPECT_EQ(batch.finalize(), Status::kSuccess);
    const int64_t tokens = batch.tokens();
    Tensor q =
        dev(makeTensor(dtype, {tokens, heads, d}, randomIn(dtype, tokens * heads * d, seed)));
    Tensor k = dev(
        makeTensor(dtype, {tokens, kv_heads, d}, randomIn(dtype, tokens * kv_heads * d, seed + 1)));
    Tensor v = dev(
        makeTensor(dtype, {tokens, kv_heads, d}, randomIn(dtype, tokens * kv_heads * d, seed + 2)));
    seed += 10;
    Tensor out = dev(makeZeros(dtype, {tokens, heads, d}));
    REE_EXPECT_OK(set.attention(q, k, v, cache, batch, out));
    keep(out);
  }
  keep(cache.k);
  keep(cache.v);
  REE_EXPECT_OK(set.synchronize());
  return bytes;
}

}  // namespace aten_test
}  // namespace ree
