// The forward pass of a CausalLM (causal_lm.h): embedding, decoder layers and head, written once
// against the runtime's OperationSet for every architecture of the table (architecture.h); the
// weights are loaded by causal_lm_weights.cpp.
#include <algorithm>
#include <utility>

#include "causal_lm_impl.h"

namespace ree::models {
namespace {

ActivationKind activationKind(Activation activation) {
  switch (activation) {
    case Activation::kSilu:
      return ActivationKind::kSilu;
    case Activation::kGeluTanh:
      return ActivationKind::kGeluTanh;
    case Activation::kGelu:
      return ActivationKind::kGeluErf;
  }
  return ActivationKind::kSilu;
}

}  // namespace

Status Workspace::get(int id, Device device, ComputeDType dtype, std::vector<int64_t> shape,
                      Tensor* out) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  size_t bytes = static_cast<size_t>(n) * dtypeSize(dtype);
  requested_[id] = bytes;
  Tensor& buffer = buffers_[id];
  if (!buffer.defined() || buffer.nbytes() < bytes) {
    REE_CHECK_ARG(!frozen_, "workspace buffer %d needs %zu bytes while a graph is recorded", id,
                  bytes);
    int64_t elements = static_cast<int64_t>((bytes + 3) / 4 + (bytes + 3) / 16);  // +25% room
    REE_RETURN_IF_ERROR(Tensor::empty(device, ComputeDType::kF32, {elements}, &buffer));
  }
  *out = Tensor::wrap(buffer.data(), device, dtype, std::move(shape));
  return Status::kSuccess;
}

Status Workspace::reserve(const std::map<int, size_t>& bytes, Device device) {
  for (const auto& [id, size] : bytes) {
    Tensor unused;
    REE_RETURN_IF_ERROR(
        get(id, device, ComputeDType::kF32, {static_cast<int64_t>((size + 3) / 4)}, &unused));
  }
  return Status::kSuccess;
}

Status CausalLM::Impl::scratch(int id, std::vector<int64_t> shape, Tensor* out,
                               ComputeDType dtype) {
  Workspace& in_use = graph_workspace != nullptr ? *graph_workspace : workspace;
  return in_use.get(id, device(), dtype, std::move(shape), out);
}

Status CausalLM::Impl::linear(const Linear& l, const Tensor& x, int id, Tensor* out) {
  REE_RETURN_IF_ERROR(scratch(id, {x.dim(0), l.weight.dim(0)}, out, act_dtype));
  return ops->linear(x, l.weight, l.biasOrNull(), *out);
}

Status CausalLM::Impl::split(const Tensor& fused,
                             std::initializer_list<std::pair<int, int64_t>> blocks,
                             std::initializer_list<Tensor*> outs) {
  const int64_t t = fused.dim(0);
  int64_t offset = 0;
  auto out = outs.begin();
  for (const auto& block : blocks) {
    const int64_t width = block.second;
    if (t == 1) {
      **out = Tensor::wrap(static_cast<char*>(fused.data()) + offset * dtypeSize(fused.dtype()),
                           fused.device(), fused.dtype(), {1, width});
    } else {
      REE_RETURN_IF_ERROR(scratch(block.first, {t, width}, *out, fused.dtype()));
      REE_RETURN_IF_ERROR(ops->copyColumns(fused, offset, **out));
    }
    offset += width;
    ++out;
  }
  return Status::kSuccess;
}

Status CausalLM::Impl::norm(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& out) {
  float eps = static_cast<float>(config.norm_eps);
  if (config.norm == NormKind::kLayerNorm) return ops->layerNorm(x, w, b, eps, out);
  return ops->rmsNorm(x, w, eps, out);
}

Status CausalLM::Impl::attentionInputs(size_t index, const Tensor& hidden, AttentionOperands* out) {
  const Layer& l = layers[index];
  int64_t t = hidden.dim(0), hd = config.head_dim;
  int64_t nh = config.num_heads, nkv = config.num_kv_heads;
  Tensor normed, q, k, v;
  REE_RETURN_IF_ERROR(scratch(kNormed, {t, config.hidden_size}, &normed, act_dtype));
  REE_RETURN_IF_ERROR(norm(hidden, l.norm1_w, l.norm1_b, normed));
  // Steps of at most ops->fusedProjectionMaxTokens() tokens run the fused projections (q|k|v and
  // gate|up): decode-sized steps are bound by weight bytes and launches, and one product over the
  // concatenated rows streams the same bytes in one launch with a fuller grid. Each output still
  // comes from its own weight row with the same K, so the reproducible set's bits are those of
  // the separate projections.
  if (t <= ops->fusedProjectionMaxTokens() && l.qkv.weight.defined()) {
    Tensor qkv;
    REE_RETURN_IF_ERROR(linear(l.qkv, normed, kQkv, &qkv));
    REE_RETURN_IF_ERROR(split(qkv, {{kQ, nh * hd}, {kK, nkv * hd}, {kV, nkv * hd}}, {&q, &k, &v}));
  } else {
    REE_RETURN_IF_ERROR(linear(l.q, normed, kQ, &q));
    REE_RETURN_IF_ERROR(linear(l.k, normed, kK, &k));
    REE_RETURN_IF_ERROR(linear(l.v, normed, kV, &v));
  }
  out->q3 = q.reshaped({t, nh, hd});
  out->k3 = k.reshaped({t, nkv, hd});
  out->v3 = v.reshaped({t, nkv, hd});
  if (config.qk_norm) {
    Tensor qr = q.reshaped({t * nh, hd}), kr = k.reshaped({t * nkv, hd});
    REE_RETURN_IF_ERROR(ops->rmsNorm(qr, l.q_norm, static_cast<float>(config.norm_eps), qr));
    REE_RETURN_IF_ERROR(ops->rmsNorm(kr, l.k_norm, static_cast<float>(config.norm_eps), kr));
  }
  const bool qk_adjacent =
      t == 1 && static_cast<char*>(q.data()) + q.nbytes() == static_cast<char*>(k.data());
  out->qk =
      qk_adjacent ? Tensor::wrap(q.data(), q.device(), q.dtype(), {1, nh + nkv, hd}) : Tensor();
  return scratch(kAttn, {t, nh, hd}, &out->attn, act_dtype);
}

Status CausalLM::Impl::attentionCore(size_t index, AttentionOperands& a, const StepBatch& batch) {
  if (config.rope_type != RopeType::kNone) {
    if (a.qk.defined()) {
      REE_RETURN_IF_ERROR(ops->rope(a.qk, batch.positions, rope));
    } else {
      REE_RETURN_IF_ERROR(ops->rope(a.q3, batch.positions, rope));
      REE_RETURN_IF_ERROR(ops->rope(a.k3, batch.positions, rope));
    }
  }
  return ops->attention(a.q3, a.k3, a.v3, cache[index], batch, a.attn);
}

Status CausalLM::Impl::attentionOutputAndMlp(size_t index, const AttentionOperands& a,
                                             Tensor& hidden) {
  const Layer& l = layers[index];
  const int64_t t = hidden.dim(0);
  // The residual connection, fused: hidden += o(attn).
  REE_RETURN_IF_ERROR(
      ops->linearAccumulate(a.attn.reshaped({t, config.num_heads * config.head_dim}), l.o.weight,
                            l.o.biasOrNull(), hidden));
  Tensor normed;
  REE_RETURN_IF_ERROR(scratch(kNormed, {t, config.hidden_size}, &normed, act_dtype));
  REE_RETURN_IF_ERROR(norm(hidden, l.norm2_w, l.norm2_b, normed));
  return mlpBlock(l, normed, hidden);
}

Status CausalLM::Impl::mlpBlock(const Layer& l, const Tensor& normed, Tensor& hidden) {
  Tensor act;
  if (facts->layout == LayerLayout::kGpt2) {
    Tensor up;
    REE_RETURN_IF_ERROR(linear(l.up, normed, kUp, &up));
    REE_RETURN_IF_ERROR(scratch(kAct, up.shape(), &act, act_dtype));
    REE_RETURN_IF_ERROR(ops->activation(activationKind(config.activation), up, act));
  } else {
    Tensor gate, up;
    if (normed.dim(0) <= ops->fusedProjectionMaxTokens() && l.gate_up.weight.defined()) {
      Tensor gate_up;
      REE_RETURN_IF_ERROR(linear(l.gate_up, normed, kGateUp, &gate_up));
      const int64_t inner = l.gate.weight.dim(0);
      REE_RETURN_IF_ERROR(split(gate_up, {{kGate, inner}, {kUp, inner}}, {&gate, &up}));
    } else {
      REE_RETURN_IF_ERROR(linear(l.gate, normed, kGate, &gate));
      REE_RETURN_IF_ERROR(linear(l.up, normed, kUp, &up));
    }
    REE_RETURN_IF_ERROR(scratch(kAct, up.shape(), &act, act_dtype));
    REE_RETURN_IF_ERROR(ops->gatedActivation(activationKind(config.activation), gate, up, act));
  }
  // The residual connection, fused: hidden += down(act).
  return ops->linearAccumulate(act, l.down.weight, l.down.biasOrNull(), hidden);
}

Status CausalLM::Impl::layer(size_t index, Tensor& hidden, const StepBatch& batch) {
  AttentionOperands a;
  REE_RETURN_IF_ERROR(attentionInputs(index, hidden, &a));
  REE_RETURN_IF_ERROR(attentionCore(index, a, batch));
  return attentionOutputAndMlp(index, a, hidden);
}

CausalLM::CausalLM(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CausalLM::~CausalLM() = default;

const ModelConfig& CausalLM::config() const {
  return impl_->config;
}
OperationSet& CausalLM::ops() const {
  return *impl_->ops;
}
int64_t CausalLM::firstLayer() const {
  return impl_->range.begin;
}
int64_t CausalLM::endLayer() const {
  return impl_->range.end;
}
::ree::DType CausalLM::weightDType() const {
  return impl_->weight_dtype;
}
::ree::DType CausalLM::activationDType() const {
  return impl_->act_dtype;
}
void CausalLM::setStepGraphs(bool enabled) {
  impl_->graphs.enabled = enabled;
  if (!enabled) impl_->graphs.sets.clear();
}
int64_t CausalLM::graphReplayedSteps() const {
  return impl_->graphs.replayed_steps;
}
void CausalLM::releaseCache() {
  impl_->cache.clear();
}
int CausalLM::cacheBlocks() const {
  return impl_->cache.empty() ? 0 : impl_->cache[0].numBlocks();
}
int CausalLM::cacheBlockSize() const {
  return impl_->cache.empty() ? 0 : impl_->cache[0].blockSize();
}

bool CausalLM::cacheBlockBytes(const ModelConfig& config, ::ree::DType kv_dtype, int64_t layers,
                               int block_size, int64_t* bytes) {
  *bytes = 2 * static_cast<int64_t>(dtypeSize(kv_dtype));  // K and V
  for (int64_t factor : {int64_t{block_size}, config.num_kv_heads, config.head_dim, layers}) {
    if (__builtin_mul_overflow(*bytes, factor, bytes)) return false;
  }
  return true;
}

Status CausalLM::allocateCache(int num_blocks, int block_size, int max_context) {
  Impl& m = *impl_;
  REE_CHECK_ARG(num_blocks >= 1 && block_size >= 1 && max_context >= 1,
                "allocateCache: %d blocks of %d tokens for a context of %d", num_blocks, block_size,
                max_context);
  REE_RETURN_IF_ERROR(checkContextAgainstSlidingWindow(m.config, max_context));
  // K and V of every layer, counted in 64 bits before anything is allocated.
  int64_t block_bytes = 0, bytes = 0;
  if (!cacheBlockBytes(m.config, m.kv_dtype, static_cast<int64_t>(m.layers.size()), block_size,
                       &block_bytes) ||
      __builtin_mul_overflow(block_bytes, int64_t{num_blocks}, &bytes)) {
    return REE_FAIL(Status::kInvalidArgument,
                    "KV cache of %d blocks of %d tokens over %zu layers: its size in bytes "
                    "overflows 64 bits",
                    num_blocks, block_size, m.layers.size());
  }
  m.cache.clear();
  for (size_t i = 0; i < m.layers.size(); ++i) {
    LayerKvCache c;
    std::vector<int64_t> shape = {num_blocks, block_size, m.config.num_kv_heads, m.config.head_dim};
    // RepOps attention reads only positions that were appended, so its pool is not cleared (on
    // the host, untouched pages cost nothing); the ATen sets' kernels may load rows past a
    // sequence's end (masked), so theirs starts as zeros, never NaN, as before paging.
    const bool clear = m.ops->kind() != OperationSetKind::kReproducible;
    REE_RETURN_IF_ERROR(
        (clear ? Tensor::zeros : Tensor::empty)(m.device(), m.kv_dtype, shape, &c.k));
    REE_RETURN_IF_ERROR(
        (clear ? Tensor::zeros : Tensor::empty)(m.device(), m.kv_dtype, shape, &c.v));
    m.cache.push_back(std::move(c));
  }
  return Status::kSuccess;
}

Status CausalLM::embed(const std::vector<int32_t>& ids, const StepBatch& batch, Tensor* hidden) {
  Impl& m = *impl_;
  REE_CHECK_ARG(m.range.embedding, "embed() on a stage without the embedding");
  REE_CHECK_ARG(static_cast<int>(ids.size()) == batch.tokens(),
                "embed: %zu ids for a step of %d tokens", ids.size(), batch.tokens());
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= m.config.vocab_size) {
      return REE_FAIL(Status::kInvalidArgument,
                      "token id %d at position %zu is outside the vocabulary [0, %lld)", ids[i], i,
                      static_cast<long long>(m.config.vocab_size));
    }
  }
  REE_RETURN_IF_ERROR(Tensor::empty(
      m.device(), m.act_dtype, {static_cast<int64_t>(ids.size()), m.config.hidden_size}, hidden));
  REE_RETURN_IF_ERROR(m.ops->embedding(ids, m.embed_tokens, *hidden));
  return addPositionEmbeddings(batch, hidden);
}

bool CausalLM::embedsDeviceIds() const {
  const Impl& m = *impl_;
  return m.range.embedding && m.embed_tokens.dim(0) == m.config.vocab_size &&
         m.ops->embedsDeviceIds(m.embed_tokens);
}

Status CausalLM::embedDeviceIds(const int32_t* ids, const StepBatch& batch, Tensor* hidden) {
  Impl& m = *impl_;
  REE_CHECK_ARG(embedsDeviceIds(), "embedDeviceIds: this stage cannot embed ids in device memory");
  REE_RETURN_IF_ERROR(Tensor::empty(m.device(), m.act_dtype,
                                    {static_cast<int64_t>(batch.tokens()), m.config.hidden_size},
                                    hidden));
  REE_RETURN_IF_ERROR(m.ops->embeddingOfDeviceIds(ids, batch.tokens(), m.embed_tokens, *hidden));
  return addPositionEmbeddings(batch, hidden);
}

// GPT-2's learned positions, added to the token embeddings (nothing for rotary models).
Status CausalLM::addPositionEmbeddings(const StepBatch& batch, Tensor* hidden) {
  Impl& m = *impl_;
  if (!m.embed_positions.defined()) return Status::kSuccess;
  for (int32_t pos : batch.positions) {
    if (pos >= m.config.max_position_embeddings) {
      return REE_FAIL(Status::kInvalidArgument,
                      "position %d exceeds the model's %lld learned positions", pos,
                      static_cast<long long>(m.config.max_position_embeddings));
    }
  }
  Tensor pos_embed;
  REE_RETURN_IF_ERROR(m.scratch(kPositions, hidden->shape(), &pos_embed, m.act_dtype));
  REE_RETURN_IF_ERROR(m.ops->embedding(batch.positions, m.embed_positions, pos_embed));
  return m.ops->addInPlace(*hidden, pos_embed);
}

// Every sequence's table covers its positions with blocks of the pool, and no block receives the
// rows of two sequences in one step (blocks of a shared prefix are only read). Linear in the
// tables' entries: it runs every step.
Status CausalLM::checkBlockTables(const StepBatch& batch) const {
  const int blocks = cacheBlocks(), block_size = cacheBlockSize();
  std::vector<int32_t> written;
  for (int s = 0; s < batch.batch(); ++s) {
    const int64_t cached = batch.cached_lens[s];
    const int64_t total = cached + batch.query_offsets[s + 1] - batch.query_offsets[s];
    const int64_t needed = (total + block_size - 1) / block_size;
    if (needed > batch.blocks_per_seq) {
      return REE_FAIL(Status::kInvalidArgument,
                      "sequence %d needs %lld tokens of context, more than its %d KV cache "
                      "blocks of %d tokens",
                      s, static_cast<long long>(total), batch.blocks_per_seq, block_size);
    }
    const int32_t* table =
        batch.block_tables.data() + static_cast<size_t>(s) * batch.blocks_per_seq;
    for (int64_t j = 0; j < needed; ++j) {
      REE_CHECK_ARG(table[j] >= 0 && table[j] < blocks,
                    "sequence %d: its block %lld is KV cache block %d of %d", s,
                    static_cast<long long>(j), table[j], blocks);
    }
    for (int64_t j = cached / block_size; j < needed; ++j)
      written.push_back(table[j]);
  }
  std::sort(written.begin(), written.end());
  auto twice = std::adjacent_find(written.begin(), written.end());
  REE_CHECK_ARG(twice == written.end(), "KV cache block %d receives rows twice in one step",
                twice == written.end() ? 0 : *twice);
  return Status::kSuccess;
}

Status CausalLM::runLayers(Tensor& hidden, const StepBatch& batch, const LayerObserver& observer) {
  Impl& m = *impl_;
  REE_CHECK_ARG(m.cache.size() == m.layers.size(), "runLayers: allocateCache() was not called");
  REE_CHECK_ARG(hidden.dim(0) == batch.tokens(), "runLayers: hidden has %lld rows for %d tokens",
                static_cast<long long>(hidden.dim(0)), batch.tokens());
  if (!m.layers.empty()) REE_RETURN_IF_ERROR(checkBlockTables(batch));
  if (m.graphsApply(hidden, static_cast<bool>(observer))) return m.runLayersGraphed(hidden, batch);
  for (size_t i = 0; i < m.layers.size(); ++i) {
    REE_RETURN_IF_ERROR(m.layer(i, hidden, batch));
    if (observer) REE_RETURN_IF_ERROR(observer(m.range.begin + static_cast<int64_t>(i), hidden));
  }
  return Status::kSuccess;
}

Status CausalLM::logits(const Tensor& hidden, const std::vector<int32_t>& rows, Tensor* out) {
  Impl& m = *impl_;
  REE_CHECK_ARG(m.range.head, "logits() on a stage without the head");
  int64_t r = static_cast<int64_t>(rows.size());
  for (int64_t i = 0; i < r; ++i) {
    REE_CHECK_ARG(rows[i] >= 0 && rows[i] < hidden.dim(0), "logits: row %d of %lld", rows[i],
                  static_cast<long long>(hidden.dim(0)));
  }
  // One row (decode at batch 1) is read where it is, a view of hidden: no copy, no launch.
  Tensor selected, normed;
  if (r == 1) {
    selected = hidden.rows(rows[0], 1);
  } else {
    REE_RETURN_IF_ERROR(m.scratch(kSelected, {r, m.config.hidden_size}, &selected, m.act_dtype));
    for (int64_t i = 0; i < r; ++i)
      REE_RETURN_IF_ERROR(copyTensor(hidden.rows(rows[i], 1), selected.rows(i, 1)));
  }
  REE_RETURN_IF_ERROR(m.scratch(kFinalNorm, {r, m.config.hidden_size}, &normed, m.act_dtype));
  REE_RETURN_IF_ERROR(m.norm(selected, m.final_norm_w, m.final_norm_b, normed));
  REE_RETURN_IF_ERROR(Tensor::empty(m.device(), ComputeDType::kF32, {r, m.config.vocab_size}, out));
  return m.ops->linear(normed, m.lm_head, nullptr, *out);
}

}  // namespace ree::models
