#include "ree/models/causal_lm.h"

#include <cstring>
#include <initializer_list>
#include <map>
#include <utility>

namespace ree::models {
namespace {

// The runtime's element types (models::DType is the wider safetensors set).
using ComputeDType = ::ree::DType;

ComputeDType computeDType(DType dtype) {
  switch (dtype) {
    case DType::kF16:
      return ComputeDType::kF16;
    case DType::kBF16:
      return ComputeDType::kBF16;
    default:
      return ComputeDType::kF32;  // view() hands out F32/F16/BF16 only
  }
}

bool isGpt2(const ModelConfig& config) {
  return config.architecture == Architecture::kGpt2;
}

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

// Reusable activation buffers: a step asks for buffer `id` with a shape; the storage grows when a
// step needs more and is reused otherwise (no allocation per operator in steady-state decode).
class Workspace {
 public:
  Status get(int id, Device device, ComputeDType dtype, std::vector<int64_t> shape, Tensor* out) {
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    size_t bytes = static_cast<size_t>(n) * dtypeSize(dtype);
    Tensor& buffer = buffers_[id];
    if (!buffer.defined() || buffer.nbytes() < bytes) {
      int64_t elements = static_cast<int64_t>((bytes + 3) / 4 + (bytes + 3) / 16);  // +25% room
      REE_RETURN_IF_ERROR(Tensor::empty(device, ComputeDType::kF32, {elements}, &buffer));
    }
    *out = Tensor::wrap(buffer.data(), device, dtype, std::move(shape));
    return Status::kSuccess;
  }

 private:
  std::map<int, Tensor> buffers_;
};

enum BufferId {
  kNormed = 1,
  kQ,
  kK,
  kV,
  kAttn,
  kGate,
  kUp,
  kAct,
  kPositions,
  kSelected,
  kFinalNorm,
  kQkv,
  kGateUp
};

// Steps with at most this many tokens run the fused projections (q|k|v and gate|up): decode-sized
// steps are bound by weight bytes and launches, and one GEMV over the concatenated rows streams
// the same bytes in one launch with a fuller grid. Each output still comes from its own weight
// row with the same K, so the reproducible set's bits are those of the separate projections.
constexpr int64_t kFusedProjectionMaxTokens = 16;

struct Linear {
  Tensor weight;  // [N, K]
  Tensor bias;    // [N] or undefined
  const Tensor* biasOrNull() const { return bias.defined() ? &bias : nullptr; }
};

struct Layer {
  Tensor norm1_w, norm1_b, norm2_w, norm2_b;  // RMSNorm: only *_w
  Linear q, k, v, o;
  Tensor q_norm, k_norm;  // Qwen3
  Linear gate, up, down;  // GPT-2: up = c_fc, down = c_proj
  // GPU only: the rows of q, k, v (and gate, up) side by side in one tensor; q.weight etc. are
  // then views into it. Undefined where the projections are not fused.
  Linear qkv, gate_up;
};

}  // namespace

struct CausalLM::Impl {
  ModelConfig config;
  OperationSet* ops = nullptr;
  LayerRange range;
  ComputeDType checkpoint_dtype = ComputeDType::kBF16;
  ComputeDType weight_dtype = ComputeDType::kBF16;  // after the optional load-time conversion
  ComputeDType act_dtype = ComputeDType::kF32;
  ComputeDType kv_dtype = ComputeDType::kBF16;
  Tensor embed_tokens, embed_positions, final_norm_w, final_norm_b, lm_head;
  std::vector<Layer> layers;
  std::vector<LayerKvCache> cache;
  Workspace workspace;
  RopeSpec rope;
  std::string prefix;
  std::vector<std::shared_ptr<void>> host_buffers;  // transposed/owned host weights

  Device device() const { return ops->device(); }

  // Host tensor of `view`'s bytes in weight_dtype: zero-copy when no conversion is needed.
  Status hostWeights(const TensorView& view, Tensor* out) {
    ComputeDType dtype = computeDType(view.dtype);
    Tensor host = Tensor::wrap(const_cast<void*>(view.data), Device::cpu(), dtype, view.shape);
    if (dtype == weight_dtype) {
      *out = host;
      return Status::kSuccess;
    }
    REE_RETURN_IF_ERROR(Tensor::empty(Device::cpu(), weight_dtype, view.shape, out));
    int64_t n = host.numel();
    for (int64_t i = 0; i < n; ++i) {
      float value = dtype == ComputeDType::kF32    ? host.as<float>()[i]
                    : dtype == ComputeDType::kBF16 ? toFloat(host.as<bf16_t>()[i])
                                                   : toFloat(host.as<f16_t>()[i]);
      if (weight_dtype == ComputeDType::kF32) out->as<float>()[i] = value;
      if (weight_dtype == ComputeDType::kBF16) out->as<bf16_t>()[i] = toBF16(value);
      if (weight_dtype == ComputeDType::kF16) out->as<f16_t>()[i] = toF16(value);
    }
    return Status::kSuccess;
  }

  // Loads checkpoint tensor `name` as a device tensor (zero-copy on the CPU without conversion).
  Status loadTensor(const Checkpoint& checkpoint, const std::string& name, Tensor* out) {
    TensorView view;
    REE_RETURN_IF_ERROR(checkpoint.view(name, &view));
    if (computeDType(view.dtype) != checkpoint_dtype) {
      return REE_FAIL(Status::kMismatch, "%s: tensor %s is %s but the model's weights are %s",
                      checkpoint.path().c_str(), name.c_str(), dtypeName(view.dtype),
                      ::ree::dtypeName(checkpoint_dtype));
    }
    Tensor host;
    REE_RETURN_IF_ERROR(hostWeights(view, &host));
    if (!device().isCuda()) {
      *out = host;
      return Status::kSuccess;
    }
    return toDevice(host, device(), out);
  }

  // Loads a Conv1D weight [K, N] (GPT-2) as an nn.Linear weight [N, K], optionally only columns
  // [col_begin, col_begin + cols) of the original (c_attn holds q, k and v side by side).
  Status loadTransposed(const Checkpoint& checkpoint, const std::string& name, int64_t col_begin,
                        int64_t cols, Tensor* out) {
    TensorView view;
    REE_RETURN_IF_ERROR(checkpoint.view(name, &view));
    if (view.shape.size() != 2 || col_begin + cols > view.shape[1]) {
      return REE_FAIL(Status::kMismatch,
                      "%s: tensor %s has an unexpected shape for a Conv1D weight",
                      checkpoint.path().c_str(), name.c_str());
    }
    int64_t k = view.shape[0], n_all = view.shape[1];
    size_t elem = dtypeSize(view.dtype);
    Tensor host;
    REE_RETURN_IF_ERROR(Tensor::empty(Device::cpu(), computeDType(view.dtype), {cols, k}, &host));
    const char* src = static_cast<const char*>(view.data);
    char* dst = static_cast<char*>(host.data());
    for (int64_t r = 0; r < k; ++r) {
      for (int64_t c = 0; c < cols; ++c) {
        std::memcpy(dst + (c * k + r) * elem, src + (r * n_all + col_begin + c) * elem, elem);
      }
    }
    TensorView transposed{host.data(), view.dtype, host.shape(), host.nbytes()};
    Tensor converted;
    REE_RETURN_IF_ERROR(hostWeights(transposed, &converted));
    if (converted.data() == host.data()) converted = host;  // keep the owning storage alive
    if (!device().isCuda()) {
      *out = converted;
      return Status::kSuccess;
    }
    return toDevice(converted, device(), out);
  }

  // A slice [begin, begin + count) of a 1-D checkpoint tensor (GPT-2's c_attn bias).
  Status loadSlice(const Checkpoint& checkpoint, const std::string& name, int64_t begin,
                   int64_t count, Tensor* out) {
    TensorView view;
    REE_RETURN_IF_ERROR(checkpoint.view(name, &view));
    if (view.shape.size() != 1 || begin + count > view.shape[0]) {
      return REE_FAIL(Status::kMismatch, "%s: tensor %s has an unexpected shape",
                      checkpoint.path().c_str(), name.c_str());
    }
    const char* base = static_cast<const char*>(view.data) + begin * dtypeSize(view.dtype);
    TensorView slice{
        base, view.dtype, {count}, static_cast<uint64_t>(count * dtypeSize(view.dtype))};
    Tensor host;
    REE_RETURN_IF_ERROR(hostWeights(slice, &host));
    if (!device().isCuda()) {
      *out = host;
      return Status::kSuccess;
    }
    return toDevice(host, device(), out);
  }

  Status loadLlamaLayer(const Checkpoint& ck, int64_t i, Layer* layer) {
    std::string p = prefix + "layers." + std::to_string(i) + ".";
    REE_RETURN_IF_ERROR(loadTensor(ck, p + "input_layernorm.weight", &layer->norm1_w));
    REE_RETURN_IF_ERROR(loadTensor(ck, p + "post_attention_layernorm.weight", &layer->norm2_w));
    auto linear = [&](const std::string& name, bool bias, Linear* out) -> Status {
      REE_RETURN_IF_ERROR(loadTensor(ck, p + name + ".weight", &out->weight));
      if (bias) REE_RETURN_IF_ERROR(loadTensor(ck, p + name + ".bias", &out->bias));
      return Status::kSuccess;
    };
    REE_RETURN_IF_ERROR(linear("self_attn.q_proj", config.qkv_bias, &layer->q));
    REE_RETURN_IF_ERROR(linear("self_attn.k_proj", config.qkv_bias, &layer->k));
    REE_RETURN_IF_ERROR(linear("self_attn.v_proj", config.qkv_bias, &layer->v));
    REE_RETURN_IF_ERROR(linear("self_attn.o_proj", config.o_proj_bias, &layer->o));
    if (config.qk_norm) {
      REE_RETURN_IF_ERROR(loadTensor(ck, p + "self_attn.q_norm.weight", &layer->q_norm));
      REE_RETURN_IF_ERROR(loadTensor(ck, p + "self_attn.k_norm.weight", &layer->k_norm));
    }
    REE_RETURN_IF_ERROR(linear("mlp.gate_proj", config.mlp_bias, &layer->gate));
    REE_RETURN_IF_ERROR(linear("mlp.up_proj", config.mlp_bias, &layer->up));
    REE_RETURN_IF_ERROR(linear("mlp.down_proj", config.mlp_bias, &layer->down));
    if (device().isCuda()) {
      REE_RETURN_IF_ERROR(fuseRows({&layer->q, &layer->k, &layer->v}, &layer->qkv));
      REE_RETURN_IF_ERROR(fuseRows({&layer->gate, &layer->up}, &layer->gate_up));
    }
    return Status::kSuccess;
  }

  // Concatenates the weight rows (and biases) of `parts` into `fused` and turns each part into a
  // view of its rows, so the device holds every weight once.
  Status fuseRows(std::initializer_list<Linear*> parts, Linear* fused) {
    const Linear& first = **parts.begin();
    int64_t rows = 0;
    bool biases = true;
    for (const Linear* part : parts) {
      REE_CHECK_ARG(part->weight.rank() == 2 && part->weight.dim(1) == first.weight.dim(1) &&
                        part->weight.dtype() == first.weight.dtype(),
                    "fuseRows: %s does not match %s", part->weight.describe().c_str(),
                    first.weight.describe().c_str());
      rows += part->weight.dim(0);
      biases = biases && part->bias.defined() && part->bias.dtype() == first.bias.dtype();
    }
    bool any_bias = false;
    for (const Linear* part : parts)
      any_bias = any_bias || part->bias.defined();
    if (any_bias && !biases) return Status::kSuccess;  // mixed biases: keep them separate
    REE_RETURN_IF_ERROR(
        Tensor::empty(device(), first.weight.dtype(), {rows, first.weight.dim(1)}, &fused->weight));
    if (biases) {
      REE_RETURN_IF_ERROR(Tensor::empty(device(), first.bias.dtype(), {rows}, &fused->bias));
    }
    int64_t offset = 0;
    for (Linear* part : parts) {
      const int64_t n = part->weight.dim(0);
      Tensor weight_rows = fused->weight.rows(offset, n);
      REE_RETURN_IF_ERROR(copyTensor(part->weight, weight_rows));
      part->weight = weight_rows;
      if (biases) {
        Tensor bias_rows = fused->bias.rows(offset, n);
        REE_RETURN_IF_ERROR(copyTensor(part->bias, bias_rows));
        part->bias = bias_rows;
      }
      offset += n;
    }
    return Status::kSuccess;
  }

  Status loadGpt2Layer(const Checkpoint& ck, int64_t i, Layer* layer) {
    std::string p = prefix + "h." + std::to_string(i) + ".";
    int64_t h = config.hidden_size;
    REE_RETURN_IF_ERROR(loadTensor(ck, p + "ln_1.weight", &layer->norm1_w));
    REE_RETURN_IF_ERROR(loadTensor(ck, p + "ln_1.bias", &layer->norm1_b));
    REE_RETURN_IF_ERROR(loadTensor(ck, p + "ln_2.weight", &layer->norm2_w));
    REE_RETURN_IF_ERROR(loadTensor(ck, p + "ln_2.bias", &layer->norm2_b));
    Linear* qkv[3] = {&layer->q, &layer->k, &layer->v};
    for (int j = 0; j < 3; ++j) {
      REE_RETURN_IF_ERROR(loadTransposed(ck, p + "attn.c_attn.weight", j * h, h, &qkv[j]->weight));
      REE_RETURN_IF_ERROR(loadSlice(ck, p + "attn.c_attn.bias", j * h, h, &qkv[j]->bias));
    }
    REE_RETURN_IF_ERROR(loadTransposed(ck, p + "attn.c_proj.weight", 0, h, &layer->o.weight));
    REE_RETURN_IF_ERROR(loadTensor(ck, p + "attn.c_proj.bias", &layer->o.bias));
    int64_t inner = config.intermediate_size;
    REE_RETURN_IF_ERROR(loadTransposed(ck, p + "mlp.c_fc.weight", 0, inner, &layer->up.weight));
    REE_RETURN_IF_ERROR(loadTensor(ck, p + "mlp.c_fc.bias", &layer->up.bias));
    REE_RETURN_IF_ERROR(loadTransposed(ck, p + "mlp.c_proj.weight", 0, h, &layer->down.weight));
    REE_RETURN_IF_ERROR(loadTensor(ck, p + "mlp.c_proj.bias", &layer->down.bias));
    return Status::kSuccess;
  }

  Status scratch(int id, std::vector<int64_t> shape, Tensor* out, ComputeDType dtype) {
    return workspace.get(id, device(), dtype, std::move(shape), out);
  }

  Status linear(const Linear& l, const Tensor& x, int id, Tensor* out) {
    REE_RETURN_IF_ERROR(scratch(id, {x.dim(0), l.weight.dim(0)}, out, act_dtype));
    return ops->linear(x, l.weight, l.biasOrNull(), *out);
  }

  // The column blocks of a fused projection's output [t, sum of widths] as dense [t, width]
  // tensors: views when t == 1 (the blocks are contiguous), else copies into scratch buffers.
  Status split(const Tensor& fused, std::initializer_list<std::pair<int, int64_t>> blocks,
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
        REE_RETURN_IF_ERROR(copyColumns(fused, offset, **out));
      }
      offset += width;
      ++out;
    }
    return Status::kSuccess;
  }

  Status norm(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& out) {
    float eps = static_cast<float>(config.norm_eps);
    if (config.norm == NormKind::kLayerNorm) return ops->layerNorm(x, w, b, eps, out);
    return ops->rmsNorm(x, w, eps, out);
  }

  Status layer(size_t index, Tensor& hidden, const StepBatch& batch) {
    const Layer& l = layers[index];
    int64_t t = hidden.dim(0), h = config.hidden_size, hd = config.head_dim;
    int64_t nh = config.num_heads, nkv = config.num_kv_heads;
    Tensor normed, q, k, v, attn;
    REE_RETURN_IF_ERROR(scratch(kNormed, {t, h}, &normed, act_dtype));
    REE_RETURN_IF_ERROR(norm(hidden, l.norm1_w, l.norm1_b, normed));
    const bool fused = t <= kFusedProjectionMaxTokens;
    if (fused && l.qkv.weight.defined()) {
      Tensor qkv;
      REE_RETURN_IF_ERROR(linear(l.qkv, normed, kQkv, &qkv));
      REE_RETURN_IF_ERROR(
          split(qkv, {{kQ, nh * hd}, {kK, nkv * hd}, {kV, nkv * hd}}, {&q, &k, &v}));
    } else {
      REE_RETURN_IF_ERROR(linear(l.q, normed, kQ, &q));
      REE_RETURN_IF_ERROR(linear(l.k, normed, kK, &k));
      REE_RETURN_IF_ERROR(linear(l.v, normed, kV, &v));
    }
    Tensor q3 = q.reshaped({t, nh, hd}), k3 = k.reshaped({t, nkv, hd}),
           v3 = v.reshaped({t, nkv, hd});
    if (config.qk_norm) {
      Tensor qr = q.reshaped({t * nh, hd}), kr = k.reshaped({t * nkv, hd});
      REE_RETURN_IF_ERROR(ops->rmsNorm(qr, l.q_norm, static_cast<float>(config.norm_eps), qr));
      REE_RETURN_IF_ERROR(ops->rmsNorm(kr, l.k_norm, static_cast<float>(config.norm_eps), kr));
    }
    if (config.rope_type != RopeType::kNone) {
      const bool qk_adjacent =
          t == 1 && static_cast<char*>(q.data()) + q.nbytes() == static_cast<char*>(k.data());
      if (qk_adjacent) {
        // One token of a fused projection: k's heads follow q's, so one launch rotates both.
        Tensor qk = Tensor::wrap(q.data(), q.device(), q.dtype(), {1, nh + nkv, hd});
        REE_RETURN_IF_ERROR(ops->rope(qk, batch.positions, rope));
      } else {
        REE_RETURN_IF_ERROR(ops->rope(q3, batch.positions, rope));
        REE_RETURN_IF_ERROR(ops->rope(k3, batch.positions, rope));
      }
    }
    REE_RETURN_IF_ERROR(scratch(kAttn, {t, nh, hd}, &attn, act_dtype));
    REE_RETURN_IF_ERROR(ops->attention(q3, k3, v3, cache[index], batch, attn));
    // Residual connections: hidden += o(attn) and, below, hidden += down(act), fused.
    REE_RETURN_IF_ERROR(
        ops->linearAccumulate(attn.reshaped({t, nh * hd}), l.o.weight, l.o.biasOrNull(), hidden));

    REE_RETURN_IF_ERROR(norm(hidden, l.norm2_w, l.norm2_b, normed));
    Tensor act;
    if (isGpt2(config)) {
      Tensor up;
      REE_RETURN_IF_ERROR(linear(l.up, normed, kUp, &up));
      REE_RETURN_IF_ERROR(scratch(kAct, up.shape(), &act, act_dtype));
      REE_RETURN_IF_ERROR(ops->activation(activationKind(config.activation), up, act));
    } else {
      Tensor gate, up;
      if (fused && l.gate_up.weight.defined()) {
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
    return ops->linearAccumulate(act, l.down.weight, l.down.biasOrNull(), hidden);
  }
};

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
int CausalLM::cacheSlots() const {
  return impl_->cache.empty() ? 0 : impl_->cache[0].slots();
}
int CausalLM::cacheMaxLen() const {
  return impl_->cache.empty() ? 0 : impl_->cache[0].maxLen();
}

Status CausalLM::load(const ModelConfig& config, const Checkpoint& checkpoint, OperationSet& ops,
                      const LayerRange& range, std::unique_ptr<CausalLM>* out,
                      const LoadOptions& options) {
  REE_CHECK_ARG(out != nullptr, "CausalLM::load: out is null");
  auto impl = std::make_unique<Impl>();
  impl->config = config;
  impl->ops = &ops;
  impl->range = range;
  if (impl->range.end < 0) impl->range.end = config.num_layers;
  REE_CHECK_ARG(impl->range.begin >= 0 && impl->range.begin <= impl->range.end &&
                    impl->range.end <= config.num_layers,
                "layer range [%lld, %lld) is outside the model's %lld layers",
                static_cast<long long>(impl->range.begin), static_cast<long long>(impl->range.end),
                static_cast<long long>(config.num_layers));
  impl->prefix = tensorNamePrefix(config, checkpoint);

  ValidateOptions validate;
  validate.first_layer = impl->range.begin;
  validate.end_layer = impl->range.end;
  validate.embedding = range.embedding || (range.head && config.tie_word_embeddings);
  validate.head = range.head;
  validate.allow_unexpected = true;
  REE_RETURN_IF_ERROR(validateCheckpoint(config, checkpoint, validate));

  // The weights' dtype: the first expected tensor's (validateCheckpoint made them agree).
  std::vector<ExpectedTensor> expected = expectedTensors(config, impl->prefix);
  TensorInfo first;
  REE_RETURN_IF_ERROR(checkpoint.info(expected.front().name, &first));
  impl->checkpoint_dtype = computeDType(first.dtype);
  impl->weight_dtype = options.weight_dtype ? *options.weight_dtype : impl->checkpoint_dtype;
  impl->act_dtype = ops.activationDType(impl->weight_dtype);
  impl->kv_dtype = ops.kvCacheDType(impl->weight_dtype);

  bool gpt2 = isGpt2(config);
  const std::string& p = impl->prefix;
  std::string embed_name = gpt2 ? p + "wte.weight" : p + "embed_tokens.weight";
  if (range.embedding || (range.head && config.tie_word_embeddings)) {
    REE_RETURN_IF_ERROR(impl->loadTensor(checkpoint, embed_name, &impl->embed_tokens));
  }
  if (range.embedding && gpt2) {
    REE_RETURN_IF_ERROR(impl->loadTensor(checkpoint, p + "wpe.weight", &impl->embed_positions));
  }
  if (range.head) {
    if (gpt2) {
      REE_RETURN_IF_ERROR(impl->loadTensor(checkpoint, p + "ln_f.weight", &impl->final_norm_w));
      REE_RETURN_IF_ERROR(impl->loadTensor(checkpoint, p + "ln_f.bias", &impl->final_norm_b));
    } else {
      REE_RETURN_IF_ERROR(impl->loadTensor(checkpoint, p + "norm.weight", &impl->final_norm_w));
    }
    if (config.tie_word_embeddings) {
      impl->lm_head = impl->embed_tokens;
    } else {
      REE_RETURN_IF_ERROR(impl->loadTensor(checkpoint, "lm_head.weight", &impl->lm_head));
    }
  }
  for (int64_t i = impl->range.begin; i < impl->range.end; ++i) {
    Layer layer;
    REE_RETURN_IF_ERROR(gpt2 ? impl->loadGpt2Layer(checkpoint, i, &layer)
                             : impl->loadLlamaLayer(checkpoint, i, &layer));
    impl->layers.push_back(std::move(layer));
  }
  RopeSpec& rope = impl->rope;
  rope.rotary_dim = static_cast<int>(config.head_dim);
  rope.theta = static_cast<float>(config.rope_theta);
  if (config.rope_type == RopeType::kLlama3) {
    rope.llama3 = true;
    rope.llama3_factor = config.llama3_factor;
    rope.llama3_low_freq_factor = config.llama3_low_freq_factor;
    rope.llama3_high_freq_factor = config.llama3_high_freq_factor;
    rope.llama3_original_max_positions =
        static_cast<int>(config.llama3_original_max_position_embeddings);
  }
  out->reset(new CausalLM(std::move(impl)));
  return Status::kSuccess;
}

Status CausalLM::allocateCache(int slots, int max_len) {
  Impl& m = *impl_;
  REE_CHECK_ARG(slots >= 1 && max_len >= 1, "allocateCache: %d slots of %d tokens", slots, max_len);
  m.cache.clear();
  for (size_t i = 0; i < m.layers.size(); ++i) {
    LayerKvCache c;
    std::vector<int64_t> shape = {slots, max_len, m.config.num_kv_heads, m.config.head_dim};
    REE_RETURN_IF_ERROR(Tensor::zeros(m.device(), m.kv_dtype, shape, &c.k));
    REE_RETURN_IF_ERROR(Tensor::zeros(m.device(), m.kv_dtype, shape, &c.v));
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
  if (m.embed_positions.defined()) {
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
    REE_RETURN_IF_ERROR(m.ops->addInPlace(*hidden, pos_embed));
  }
  return Status::kSuccess;
}

Status CausalLM::runLayers(Tensor& hidden, const StepBatch& batch, const LayerObserver& observer) {
  Impl& m = *impl_;
  REE_CHECK_ARG(m.cache.size() == m.layers.size(), "runLayers: allocateCache() was not called");
  REE_CHECK_ARG(hidden.dim(0) == batch.tokens(), "runLayers: hidden has %lld rows for %d tokens",
                static_cast<long long>(hidden.dim(0)), batch.tokens());
  for (int s = 0; s < batch.batch(); ++s) {
    int n_new = batch.query_offsets[s + 1] - batch.query_offsets[s];
    REE_CHECK_ARG(batch.cache_slots[s] >= 0 && batch.cache_slots[s] < cacheSlots(),
                  "sequence %d uses KV cache slot %d of %d", s, batch.cache_slots[s], cacheSlots());
    if (batch.cached_lens[s] + n_new > cacheMaxLen()) {
      return REE_FAIL(Status::kInvalidArgument,
                      "sequence %d needs %d tokens of context, more than the KV cache's %d", s,
                      batch.cached_lens[s] + n_new, cacheMaxLen());
    }
  }
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
  Tensor selected, normed;
  REE_RETURN_IF_ERROR(m.scratch(kSelected, {r, m.config.hidden_size}, &selected, m.act_dtype));
  for (int64_t i = 0; i < r; ++i) {
    REE_CHECK_ARG(rows[i] >= 0 && rows[i] < hidden.dim(0), "logits: row %d of %lld", rows[i],
                  static_cast<long long>(hidden.dim(0)));
    REE_RETURN_IF_ERROR(copyTensor(hidden.rows(rows[i], 1), selected.rows(i, 1)));
  }
  REE_RETURN_IF_ERROR(m.scratch(kFinalNorm, {r, m.config.hidden_size}, &normed, m.act_dtype));
  REE_RETURN_IF_ERROR(m.norm(selected, m.final_norm_w, m.final_norm_b, normed));
  REE_RETURN_IF_ERROR(Tensor::empty(m.device(), ComputeDType::kF32, {r, m.config.vocab_size}, out));
  return m.ops->linear(normed, m.lm_head, nullptr, *out);
}

std::vector<NodeCost> modelGraphCosts(const ModelConfig& c, int weight_bytes) {
  std::vector<NodeCost> nodes;
  int64_t h = c.hidden_size, hd = c.head_dim, nh = c.num_heads, nkv = c.num_kv_heads;
  int64_t inner = c.intermediate_size;
  bool gpt2 = c.architecture == Architecture::kGpt2;
  NodeCost embed{"embedding", c.vocab_size * h * weight_bytes, 0, 0};
  if (gpt2) embed.parameter_bytes += c.max_position_embeddings * h * weight_bytes;
  nodes.push_back(embed);
  int64_t attn_params = h * nh * hd + 2 * h * nkv * hd + nh * hd * h;
  int64_t mlp_params = (gpt2 ? 2 : 3) * h * inner;
  for (int64_t i = 0; i < c.num_layers; ++i) {
    NodeCost layer;
    layer.name = "layer." + std::to_string(i);
    layer.parameter_bytes = (attn_params + mlp_params + 2 * h) * weight_bytes;
    layer.flops_per_token = 2 * (attn_params + mlp_params);
    layer.kv_bytes_per_token = 2 * nkv * hd * weight_bytes;
    nodes.push_back(layer);
  }
  // The head reads a [vocab, hidden] matrix every token whether or not it is tied to the
  // embedding, and a pipeline's last stage must hold it (tied: a copy of the embedding).
  int64_t head_params = c.vocab_size * h + h;
  nodes.push_back(NodeCost{"head", head_params * weight_bytes, 2 * c.vocab_size * h, 0});
  return nodes;
}

}  // namespace ree::models
