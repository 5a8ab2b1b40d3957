// Loading a CausalLM: the checkpoint's tensors of the instance's layer range, named by the
// architecture table (architecture.h), converted to the weight dtype and moved to the device.
#include <cstring>
#include <initializer_list>
#include <utility>

#include "causal_lm_impl.h"
#include "ree/models/gguf_source.h"

namespace ree::models {
namespace {

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

}  // namespace

Status CausalLM::Impl::hostWeights(const TensorView& view, Tensor* out) {
  ComputeDType dtype = computeDType(view.dtype);
  Tensor host = Tensor::wrap(const_cast<void*>(view.data), Device::cpu(), dtype, view.shape);
  // safetensors does not require a tensor's data to start at a multiple of its element size (the
  // header's padding is optional): such bytes are copied to an aligned tensor before any element
  // is read, since reading a misaligned bf16/f32 is undefined behaviour.
  if (reinterpret_cast<uintptr_t>(view.data) % dtypeSize(view.dtype) != 0) {
    Tensor aligned;
    REE_RETURN_IF_ERROR(Tensor::empty(Device::cpu(), dtype, view.shape, &aligned));
    std::memcpy(aligned.data(), view.data, aligned.nbytes());
    host = aligned;
  }
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

Status CausalLM::Impl::loadTensor(const Checkpoint& checkpoint, const std::string& name,
                                  Tensor* out) {
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

Status CausalLM::Impl::loadMaybeQuantized(const Checkpoint& checkpoint, const std::string& name,
                                          Tensor* out) {
  const auto* gguf = dynamic_cast<const GgufSource*>(&checkpoint.source());
  QuantizedWeightInfo info;
  if (gguf == nullptr || weight_dtype != ComputeDType::kF32 || !keepsQuantizedWeights(*ops) ||
      !gguf->quantType(name, &info.type)) {
    return loadTensor(checkpoint, name, out);
  }
  // The load rules see the dequantised values as for any tensor (dtype, finite values); the
  // model then keeps the blocks those values come from, and the values go.
  TensorView view;
  REE_RETURN_IF_ERROR(checkpoint.view(name, &view));
  if (computeDType(view.dtype) != checkpoint_dtype || view.shape.size() != 2) {
    return loadTensor(checkpoint, name, out);
  }
  info.k = view.shape[1];
  info.row_bytes = quantizedRowBytes(info.type, info.k);
  Tensor host;
  REE_RETURN_IF_ERROR(
      Tensor::empty(Device::cpu(), ComputeDType::kF16, {view.shape[0], info.row_bytes / 2}, &host));
  REE_RETURN_IF_ERROR(gguf->copyQuantizedRows(name, host.data(), host.nbytes()));
  gguf->releaseDequantized(name);
  if (device().isCuda()) {
    REE_RETURN_IF_ERROR(toDevice(host, device(), out));
  } else {
    *out = host;
  }
  return quantized.add(*out, info);
}

Status CausalLM::Impl::loadTransposed(const Checkpoint& checkpoint, const std::string& name,
                                      int64_t col_begin, int64_t cols, Tensor* out) {
  TensorView view;
  REE_RETURN_IF_ERROR(checkpoint.view(name, &view));
  if (view.shape.size() != 2 || col_begin + cols > view.shape[1]) {
    return REE_FAIL(Status::kMismatch, "%s: tensor %s has an unexpected shape for a Conv1D weight",
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

Status CausalLM::Impl::loadSlice(const Checkpoint& checkpoint, const std::string& name,
                                 int64_t begin, int64_t count, Tensor* out) {
  TensorView view;
  REE_RETURN_IF_ERROR(checkpoint.view(name, &view));
  if (view.shape.size() != 1 || begin + count > view.shape[0]) {
    return REE_FAIL(Status::kMismatch, "%s: tensor %s has an unexpected shape",
                    checkpoint.path().c_str(), name.c_str());
  }
  const char* base = static_cast<const char*>(view.data) + begin * dtypeSize(view.dtype);
  TensorView slice{base, view.dtype, {count}, static_cast<uint64_t>(count * dtypeSize(view.dtype))};
  Tensor host;
  REE_RETURN_IF_ERROR(hostWeights(slice, &host));
  if (!device().isCuda()) {
    *out = host;
    return Status::kSuccess;
  }
  return toDevice(host, device(), out);
}

Status CausalLM::Impl::loadLlamaLayer(const Checkpoint& ck, int64_t i, Layer* layer) {
  const TensorNames& names = facts->names;
  const std::string p = prefix + names.layers + std::to_string(i) + ".";
  auto weight = [&](const char* name, Tensor* out) {
    return loadTensor(ck, p + name + ".weight", out);
  };
  auto linear = [&](const char* name, bool bias, Linear* out) -> Status {
    REE_RETURN_IF_ERROR(loadMaybeQuantized(ck, p + name + ".weight", &out->weight));
    if (bias) REE_RETURN_IF_ERROR(loadTensor(ck, p + name + ".bias", &out->bias));
    return Status::kSuccess;
  };
  REE_RETURN_IF_ERROR(weight(names.norm1, &layer->norm1_w));
  REE_RETURN_IF_ERROR(weight(names.norm2, &layer->norm2_w));
  REE_RETURN_IF_ERROR(linear(names.q, config.qkv_bias, &layer->q));
  REE_RETURN_IF_ERROR(linear(names.k, config.qkv_bias, &layer->k));
  REE_RETURN_IF_ERROR(linear(names.v, config.qkv_bias, &layer->v));
  REE_RETURN_IF_ERROR(linear(names.o, config.o_proj_bias, &layer->o));
  if (config.qk_norm) {
    REE_RETURN_IF_ERROR(weight(names.q_norm, &layer->q_norm));
    REE_RETURN_IF_ERROR(weight(names.k_norm, &layer->k_norm));
  }
  REE_RETURN_IF_ERROR(linear(names.gate, config.mlp_bias, &layer->gate));
  REE_RETURN_IF_ERROR(linear(names.up, config.mlp_bias, &layer->up));
  REE_RETURN_IF_ERROR(linear(names.down, config.mlp_bias, &layer->down));
  if (device().isCuda()) {
    REE_RETURN_IF_ERROR(fuseRows({&layer->q, &layer->k, &layer->v}, &layer->qkv));
    REE_RETURN_IF_ERROR(fuseRows({&layer->gate, &layer->up}, &layer->gate_up));
  }
  return Status::kSuccess;
}

Status CausalLM::Impl::fuseRows(std::initializer_list<Linear*> parts, Linear* fused) {
  const Linear& first = **parts.begin();
  // Block rows fuse like any rows when every part has the same block type and K; mixed parts
  // (e.g. a Q6_K v beside Q4_K q and k) stay separate projections.
  QuantizedWeightInfo info, part_info;
  const bool blocks = findQuantizedWeight(first.weight, &info);
  for (const Linear* part : parts) {
    const bool part_blocks = findQuantizedWeight(part->weight, &part_info);
    if (part_blocks != blocks) return Status::kSuccess;
    if (blocks && (part_info.type != info.type || part_info.k != info.k)) return Status::kSuccess;
  }
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
  if (blocks) REE_RETURN_IF_ERROR(quantized.add(fused->weight, info));
  int64_t offset = 0;
  for (Linear* part : parts) {
    const int64_t n = part->weight.dim(0);
    Tensor weight_rows = fused->weight.rows(offset, n);
    REE_RETURN_IF_ERROR(copyTensor(part->weight, weight_rows));
    if (blocks) quantized.remove(part->weight);  // now rows of the fused tensor
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

Status CausalLM::Impl::loadGpt2Layer(const Checkpoint& ck, int64_t i, Layer* layer) {
  const TensorNames& names = facts->names;
  const std::string p = prefix + names.layers + std::to_string(i) + ".";
  auto name = [&](const char* tensor, const char* kind) { return p + tensor + kind; };
  const int64_t h = config.hidden_size;
  REE_RETURN_IF_ERROR(loadTensor(ck, name(names.norm1, ".weight"), &layer->norm1_w));
  REE_RETURN_IF_ERROR(loadTensor(ck, name(names.norm1, ".bias"), &layer->norm1_b));
  REE_RETURN_IF_ERROR(loadTensor(ck, name(names.norm2, ".weight"), &layer->norm2_w));
  REE_RETURN_IF_ERROR(loadTensor(ck, name(names.norm2, ".bias"), &layer->norm2_b));
  Linear* qkv[3] = {&layer->q, &layer->k, &layer->v};
  for (int j = 0; j < 3; ++j) {
    REE_RETURN_IF_ERROR(loadTransposed(ck, name(names.qkv, ".weight"), j * h, h, &qkv[j]->weight));
    REE_RETURN_IF_ERROR(loadSlice(ck, name(names.qkv, ".bias"), j * h, h, &qkv[j]->bias));
  }
  REE_RETURN_IF_ERROR(loadTransposed(ck, name(names.o, ".weight"), 0, h, &layer->o.weight));
  REE_RETURN_IF_ERROR(loadTensor(ck, name(names.o, ".bias"), &layer->o.bias));
  const int64_t inner = config.intermediate_size;
  REE_RETURN_IF_ERROR(loadTransposed(ck, name(names.up, ".weight"), 0, inner, &layer->up.weight));
  REE_RETURN_IF_ERROR(loadTensor(ck, name(names.up, ".bias"), &layer->up.bias));
  REE_RETURN_IF_ERROR(loadTransposed(ck, name(names.down, ".weight"), 0, h, &layer->down.weight));
  REE_RETURN_IF_ERROR(loadTensor(ck, name(names.down, ".bias"), &layer->down.bias));
  return Status::kSuccess;
}

Status CausalLM::Impl::loadWeights(const Checkpoint& checkpoint) {
  const TensorNames& names = facts->names;
  const std::string& p = prefix;
  if (range.embedding || (range.head && config.tie_word_embeddings)) {
    REE_RETURN_IF_ERROR(loadMaybeQuantized(checkpoint, p + names.token_embedding, &embed_tokens));
  }
  if (range.embedding && names.position_embedding != nullptr) {
    REE_RETURN_IF_ERROR(loadTensor(checkpoint, p + names.position_embedding, &embed_positions));
  }
  if (range.head) {
    const std::string final_norm = p + names.final_norm;
    REE_RETURN_IF_ERROR(loadTensor(checkpoint, final_norm + ".weight", &final_norm_w));
    if (config.norm == NormKind::kLayerNorm) {
      REE_RETURN_IF_ERROR(loadTensor(checkpoint, final_norm + ".bias", &final_norm_b));
    }
    if (config.tie_word_embeddings) {
      lm_head = embed_tokens;
    } else {
      REE_RETURN_IF_ERROR(loadMaybeQuantized(checkpoint, names.lm_head, &lm_head));
    }
  }
  const bool gpt2_layout = facts->layout == LayerLayout::kGpt2;
  for (int64_t i = range.begin; i < range.end; ++i) {
    Layer layer;
    REE_RETURN_IF_ERROR(gpt2_layout ? loadGpt2Layer(checkpoint, i, &layer)
                                    : loadLlamaLayer(checkpoint, i, &layer));
    layers.push_back(std::move(layer));
  }
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
  return Status::kSuccess;
}

Status CausalLM::Impl::prepareLinearWeights() {
  for (const Layer& layer : layers) {
    for (const Linear* l : {&layer.q, &layer.k, &layer.v, &layer.o, &layer.gate, &layer.up,
                            &layer.down, &layer.qkv, &layer.gate_up}) {
      if (l->weight.defined()) REE_RETURN_IF_ERROR(ops->prepareLinearWeight(l->weight));
    }
  }
  if (lm_head.defined()) REE_RETURN_IF_ERROR(ops->prepareLinearWeight(lm_head));
  return Status::kSuccess;
}

Status CausalLM::load(const ModelConfig& config, const Checkpoint& checkpoint, OperationSet& ops,
                      const LayerRange& range, std::unique_ptr<CausalLM>* out,
                      const LoadOptions& options) {
  REE_CHECK_ARG(out != nullptr, "CausalLM::load: out is null");
  auto impl = std::make_unique<Impl>();
  impl->config = config;
  impl->facts = &architectureFacts(config.architecture);
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
  REE_RETURN_IF_ERROR(validateCheckpoint(config, checkpoint, validate));

  // The weights' dtype: the first expected tensor's (validateCheckpoint made them agree).
  std::vector<ExpectedTensor> expected = expectedTensors(config, impl->prefix);
  TensorInfo first;
  REE_RETURN_IF_ERROR(checkpoint.info(expected.front().name, &first));
  impl->checkpoint_dtype = computeDType(first.dtype);
  impl->weight_dtype = options.weight_dtype ? *options.weight_dtype : impl->checkpoint_dtype;
  impl->act_dtype = ops.activationDType(impl->weight_dtype);
  impl->kv_dtype = ops.kvCacheDType(impl->weight_dtype);
  REE_RETURN_IF_ERROR(impl->loadWeights(checkpoint));
  REE_RETURN_IF_ERROR(impl->prepareLinearWeights());
  out->reset(new CausalLM(std::move(impl)));
  return Status::kSuccess;
}

}  // namespace ree::models
