// Host time per call of the ATen operation sets' operators (default, and deterministic for
// comparison) at decode shapes: one token, tiny widths, on the CPU. The kernels' own work is then
// a few hundred nanoseconds, so what is measured is what every call costs the host on any device:
// REE's checks and views, ATen's dispatcher, TensorIterator set-up, temporaries and the operation
// set's caches. BM_DecodeLayer calls the operators as a layer of CausalLM does on a GPU (fused
// q/k/v and gate/up projections, one rope for q and k); BM_DecodeStep runs 32 such layers with
// new positions each step, as a Llama-3-8B-shaped decode step at batch 1 does.
//
//   bench_aten_host_bench --benchmark_min_time=0.5 --benchmark_filter=/0
//
// Argument 0 is the default set, 1 the deterministic set. Without LibTorch every case skips.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "ree/core/status.h"
#include "ree/kernels/numeric.h"
#include "ree/runtime/operation_set.h"
#include "ree/runtime/tensor.h"

namespace {

using ree::Device;
using ree::DType;
using ree::OperationSet;
using ree::OperationSetKind;
using ree::Status;
using ree::Tensor;

constexpr int64_t kHidden = 64;
constexpr int64_t kHeads = 4;
constexpr int64_t kKvHeads = 2;
constexpr int64_t kHeadDim = 16;
constexpr int64_t kInner = 128;
constexpr int64_t kVocab = 256;
constexpr int64_t kMaxLen = 256;
constexpr int32_t kCached = 32;  // tokens already in the cache at the measured step
constexpr int kLayers = 32;      // Llama-3-8B
constexpr int64_t kQkvWidth = (kHeads + 2 * kKvHeads) * kHeadDim;

// Small finite bf16 values from a fixed linear congruential sequence.
Tensor filled(std::vector<int64_t> shape, uint32_t seed) {
  Tensor t;
  if (Tensor::empty(Device::cpu(), DType::kBF16, std::move(shape), &t) != Status::kSuccess) {
    return t;
  }
  uint32_t state = seed * 2654435761u + 1u;
  for (int64_t i = 0; i < t.numel(); ++i) {
    state = state * 1664525u + 1013904223u;
    t.as<ree::bf16_t>()[i] = ree::toBF16(static_cast<float>(state >> 8) / (1u << 24) - 0.5f);
  }
  return t;
}

ree::RopeSpec llama3Rope() {
  ree::RopeSpec spec;
  spec.rotary_dim = static_cast<int>(kHeadDim);
  spec.theta = 500000.0f;
  spec.llama3 = true;
  spec.llama3_factor = 8.0;
  spec.llama3_low_freq_factor = 1.0;
  spec.llama3_high_freq_factor = 4.0;
  spec.llama3_original_max_positions = 8192;
  return spec;
}

ree::StepBatch decodeBatch(int32_t cached) {
  ree::StepBatch batch;
  batch.query_offsets = {0, 1};
  batch.cached_lens = {cached};
  batch.cache_slots = {0};
  (void)batch.finalize();
  return batch;
}

// The weights, activations and KV caches of a decode step (weights shared by all layers).
struct DecodeModel {
  std::unique_ptr<OperationSet> ops;
  Tensor embed = filled({kVocab, kHidden}, 1), norm_w = filled({kHidden}, 2);
  Tensor qkv_w = filled({kQkvWidth, kHidden}, 3), o_w = filled({kHidden, kHeads*kHeadDim}, 4);
  Tensor gate_up_w = filled({2 * kInner, kHidden}, 5), down_w = filled({kHidden, kInner}, 6);
  Tensor lm_head = filled({kVocab, kHidden}, 7);
  Tensor hidden = filled({1, kHidden}, 8), normed = filled({1, kHidden}, 9);
  Tensor qkv = filled({1, kQkvWidth}, 10), attn = filled({1, kHeads, kHeadDim}, 11);
  Tensor gate_up = filled({1, 2 * kInner}, 12), act = filled({1, kInner}, 13);
  Tensor logits;
  std::vector<ree::LayerKvCache> caches;
  ree::RopeSpec rope = llama3Rope();

  explicit DecodeModel(OperationSetKind kind) {
    if (ree::createOperationSet(kind, Device::cpu(), &ops) != Status::kSuccess) ops.reset();
    (void)Tensor::empty(Device::cpu(), DType::kF32, {1, kVocab}, &logits);
    for (int l = 0; l < kLayers; ++l) {
      caches.push_back({filled({1, kMaxLen, kKvHeads, kHeadDim}, 100 + 2 * l),
                        filled({1, kMaxLen, kKvHeads, kHeadDim}, 101 + 2 * l)});
    }
  }
  Tensor q() const {
    return Tensor::wrap(qkv.data(), qkv.device(), qkv.dtype(), {1, kHeads, kHeadDim});
  }
  Tensor qk() const {
    return Tensor::wrap(qkv.data(), qkv.device(), qkv.dtype(), {1, kHeads + kKvHeads, kHeadDim});
  }
  Tensor kvPart(int which) const {
    const int64_t offset = (kHeads + which * kKvHeads) * kHeadDim;
    return Tensor::wrap(qkv.as<ree::bf16_t>() + offset, qkv.device(), qkv.dtype(),
                        {1, kKvHeads, kHeadDim});
  }
  Tensor gate() const {
    return Tensor::wrap(gate_up.data(), gate_up.device(), gate_up.dtype(), {1, kInner});
  }
  Tensor up() const {
    return Tensor::wrap(gate_up.as<ree::bf16_t>() + kInner, gate_up.device(), gate_up.dtype(),
                        {1, kInner});
  }
};

DecodeModel* modelFor(benchmark::State& state) {
  static DecodeModel default_set(OperationSetKind::kDefault);
  static DecodeModel deterministic_set(OperationSetKind::kDeterministic);
  DecodeModel* model = state.range(0) == 0 ? &default_set : &deterministic_set;
  if (!model->ops) {
    state.SkipWithError("no ATen operation set in this build (REE_TORCH=OFF)");
    return nullptr;
  }
  return model;
}

// Runs `call` once per iteration; an error ends the case with its message.
template <typename Call>
void timeCalls(benchmark::State& state, Call&& call) {
  DecodeModel* m = modelFor(state);
  if (m == nullptr) return;
  for (auto _ : state) {
    if (call(*m) != Status::kSuccess) {
      state.SkipWithError("an operator failed (see the log above)");
      return;
    }
  }
}

Status decodeLayer(DecodeModel& m, int layer, const ree::StepBatch& batch) {
  OperationSet& ops = *m.ops;
  REE_RETURN_IF_ERROR(ops.rmsNorm(m.hidden, m.norm_w, 1e-5f, m.normed));
  REE_RETURN_IF_ERROR(ops.linear(m.normed, m.qkv_w, nullptr, m.qkv));
  Tensor qk = m.qk();
  REE_RETURN_IF_ERROR(ops.rope(qk, batch.positions, m.rope));
  REE_RETURN_IF_ERROR(
      ops.attention(m.q(), m.kvPart(1), m.kvPart(2), m.caches[layer], batch, m.attn));
  REE_RETURN_IF_ERROR(
      ops.linearAccumulate(m.attn.reshaped({1, kHeads * kHeadDim}), m.o_w, nullptr, m.hidden));
  REE_RETURN_IF_ERROR(ops.rmsNorm(m.hidden, m.norm_w, 1e-5f, m.normed));
  REE_RETURN_IF_ERROR(ops.linear(m.normed, m.gate_up_w, nullptr, m.gate_up));
  REE_RETURN_IF_ERROR(ops.gatedActivation(ree::ActivationKind::kSilu, m.gate(), m.up(), m.act));
  return ops.linearAccumulate(m.act, m.down_w, nullptr, m.hidden);
}

Status decodeStep(DecodeModel& m, const ree::StepBatch& batch) {
  REE_RETURN_IF_ERROR(m.ops->embedding({7}, m.embed, m.hidden));
  for (int layer = 0; layer < kLayers; ++layer) {
    REE_RETURN_IF_ERROR(decodeLayer(m, layer, batch));
  }
  REE_RETURN_IF_ERROR(m.ops->rmsNorm(m.hidden, m.norm_w, 1e-5f, m.normed));
  return m.ops->linear(m.normed, m.lm_head, nullptr, m.logits);
}

const ree::StepBatch& measuredBatch() {
  static const ree::StepBatch batch = decodeBatch(kCached);
  return batch;
}

void BM_Embedding(benchmark::State& state) {
  const std::vector<int32_t> ids = {7};
  timeCalls(state, [&](DecodeModel& m) { return m.ops->embedding(ids, m.embed, m.hidden); });
}

void BM_AddInPlace(benchmark::State& state) {
  timeCalls(state, [](DecodeModel& m) { return m.ops->addInPlace(m.hidden, m.normed); });
}

void BM_RmsNorm(benchmark::State& state) {
  timeCalls(state,
            [](DecodeModel& m) { return m.ops->rmsNorm(m.hidden, m.norm_w, 1e-5f, m.normed); });
}

void BM_Linear(benchmark::State& state) {
  timeCalls(state, [](DecodeModel& m) { return m.ops->linear(m.normed, m.qkv_w, nullptr, m.qkv); });
}

void BM_LinearLogits(benchmark::State& state) {
  timeCalls(state,
            [](DecodeModel& m) { return m.ops->linear(m.normed, m.lm_head, nullptr, m.logits); });
}

void BM_LinearAccumulate(benchmark::State& state) {
  timeCalls(state, [](DecodeModel& m) {
    return m.ops->linearAccumulate(m.act, m.down_w, nullptr, m.hidden);
  });
}

// The step's cos/sin tables are cached: what 31 of a step's 32 rope calls cost.
void BM_Rope(benchmark::State& state) {
  timeCalls(state, [](DecodeModel& m) {
    Tensor qk = m.qk();
    return m.ops->rope(qk, measuredBatch().positions, m.rope);
  });
}

// A new position every call: the first rope call of a step, which builds the tables.
void BM_RopeNewPosition(benchmark::State& state) {
  const std::vector<int32_t> positions[2] = {{kCached}, {kCached + 1}};
  int call = 0;
  timeCalls(state, [&](DecodeModel& m) {
    Tensor qk = m.qk();
    return m.ops->rope(qk, positions[call++ & 1], m.rope);
  });
}

void BM_Attention(benchmark::State& state) {
  timeCalls(state, [](DecodeModel& m) {
    return m.ops->attention(m.q(), m.kvPart(1), m.kvPart(2), m.caches[0], measuredBatch(), m.attn);
  });
}

void BM_GatedActivation(benchmark::State& state) {
  timeCalls(state, [](DecodeModel& m) {
    return m.ops->gatedActivation(ree::ActivationKind::kSilu, m.gate(), m.up(), m.act);
  });
}

void BM_DecodeLayer(benchmark::State& state) {
  timeCalls(state, [](DecodeModel& m) { return decodeLayer(m, 0, measuredBatch()); });
}

// 32 layers, the embedding, the final norm and the logits, at a new position every step.
void BM_DecodeStep(benchmark::State& state) {
  const ree::StepBatch batches[2] = {decodeBatch(kCached), decodeBatch(kCached + 1)};
  int step = 0;
  timeCalls(state, [&](DecodeModel& m) { return decodeStep(m, batches[step++ & 1]); });
}

#define REE_ATEN_HOST_BENCH(name) \
  BENCHMARK(name)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond)->UseRealTime()

REE_ATEN_HOST_BENCH(BM_Embedding);
REE_ATEN_HOST_BENCH(BM_AddInPlace);
REE_ATEN_HOST_BENCH(BM_RmsNorm);
REE_ATEN_HOST_BENCH(BM_Linear);
REE_ATEN_HOST_BENCH(BM_LinearLogits);
REE_ATEN_HOST_BENCH(BM_LinearAccumulate);
REE_ATEN_HOST_BENCH(BM_Rope);
REE_ATEN_HOST_BENCH(BM_RopeNewPosition);
REE_ATEN_HOST_BENCH(BM_Attention);
REE_ATEN_HOST_BENCH(BM_GatedActivation);
REE_ATEN_HOST_BENCH(BM_DecodeLayer);
REE_ATEN_HOST_BENCH(BM_DecodeStep);

}  // namespace

BENCHMARK_MAIN();
