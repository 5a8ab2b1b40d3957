// The reproducible operation set: every operator is a RepOp (kernels/), so the bits depend only on
// the inputs, never on the device, the batch composition or the thread count. Activations are fp32;
// the KV cache keeps bf16 for bf16/f16 weights (rounding happens once, when a row is appended, so
// prefill and decode read identical cache bits) and fp32 for fp32 weights. The spec version picks
// the linear layers' arithmetic: repops-1's fp32 chain, repops-2's exact integers with per-block
// exponents, or repops-3's with one exponent per row (one exact integer per output).
#include "reproducible_ops.h"

#include <algorithm>
#include <list>
#include <map>
#include <tuple>

#include "quantized_linear.h"
#include "ree/core/device.h"
#include "ree/kernels/attention.h"
#include "ree/kernels/int_linear.h"
#include "ree/kernels/int_linear_row.h"
#include "ree/kernels/linear.h"
#include "ree/kernels/pointwise.h"
#include "ree/kernels/rope.h"
#include "ree/kernels/rowops.h"

#if defined(REE_WITH_CUDA)
#include <cuda_runtime.h>

#include "ree/core/cuda_check.h"
#include "stream_graph.h"
// The CUDA entry points exist only in CUDA builds; elsewhere a CUDA device cannot be selected
// (init() refuses it), so these branches are unreachable but must still compile.
#define REE_CUDA_ONLY(call) (call)
#else
#define REE_CUDA_ONLY(call) REE_FAIL(Status::kUnsupported, "REE was built without CUDA")
#endif

namespace ree {
namespace {

using namespace repops;

class ReproducibleOps final : public OperationSet {
 public:
  // Under repops-1 GGUF weights may stay in blocks (quantized_weight.h): the same bits.
  ReproducibleOps(Device device, RepOpsSpec spec) : device_(device), spec_(spec) {
    setKeepsQuantizedWeights(this, spec == RepOpsSpec::kRepOps1);
  }
  ~ReproducibleOps() override {
    setKeepsQuantizedWeights(this, false);
#if defined(REE_WITH_CUDA)
    device_row_weights_.clear();  // before the stream their work was queued on
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
#endif
  }

  Status init() {
    if (!device_.isCuda()) return Status::kSuccess;
#if defined(REE_WITH_CUDA)
    // A blocking stream: work the model and engine queue on the legacy default stream (copies of
    // rows and logits) is ordered with the operators' work on this stream.
    if (cudaSetDevice(device_.index) != cudaSuccess || cudaStreamCreate(&stream_) != cudaSuccess) {
      return REE_FAIL(Status::kCudaError, "cannot create a CUDA stream on %s",
                      device_.str().c_str());
    }
    return Status::kSuccess;
#else
    return REE_FAIL(Status::kUnsupported, "REE was built without CUDA: no %s",
                    device_.str().c_str());
#endif
  }

  OperationSetKind kind() const override {
    return OperationSetKind::kReproducible;
  }
  Device device() const override {
    return device_;
  }
  DType activationDType(DType) const override {
    return DType::kF32;
  }
  DType kvCacheDType(DType weight_dtype) const override {
    return weight_dtype == DType::kF32 ? DType::kF32 : DType::kBF16;
  }

  Status embedding(const std::vector<int32_t>& ids, const Tensor& table, Tensor& out) override {
    REE_CHECK_ARG(out.dtype() == table.dtype() || out.dtype() == DType::kF32,
                  "embedding: table %s, out %s", table.describe().c_str(), out.describe().c_str());
    int64_t count = static_cast<int64_t>(ids.size());
    QuantizedWeightInfo quantized;
    if (findQuantizedWeight(table, &quantized)) {
      const int32_t* device_ids = nullptr;
      if (device_.isCuda()) REE_RETURN_IF_ERROR(upload(ids, &ids_buffer_, &device_ids));
      return quantizedEmbedding(device_, stream_, ids, device_ids, table, quantized, out);
    }
    if (out.dtype() != table.dtype()) {
      return gatherThenWiden(table, count, out,
                             [&](Tensor& gathered) { return embedding(ids, table, gathered); });
    }
    if (!device_.isCuda()) {
      return cpu::embedding(table.dtype(), table.data(), table.dim(0), table.dim(1), ids.data(),
                            count, out.data());
    }
    const int32_t* device_ids = nullptr;
    REE_RETURN_IF_ERROR(upload(ids, &ids_buffer_, &device_ids));
    return REE_CUDA_ONLY(cuda::embeddingHostChecked(table.dtype(), table.data(), table.dim(0),
                                                    table.dim(1), device_ids, ids.data(), count,
                                                    out.data(), stream_));
  }

  // Quantized tables (GGUF blocks) gather through quantizedEmbedding, which reads host ids.
  bool embedsDeviceIds(const Tensor& table) const override {
    QuantizedWeightInfo quantized;
    return !findQuantizedWeight(table, &quantized);
  }

  Status embeddingOfDeviceIds(const int32_t* ids, int64_t count, const Tensor& table,
                              Tensor& out) override {
    REE_CHECK_ARG(embedsDeviceIds(table), "embeddingOfDeviceIds: %s is a quantized table",
                  table.describe().c_str());
    REE_CHECK_ARG(out.dtype() == table.dtype() || out.dtype() == DType::kF32,
                  "embedding: table %s, out %s", table.describe().c_str(), out.describe().c_str());
    if (out.dtype() != table.dtype()) {
      return gatherThenWiden(table, count, out, [&](Tensor& gathered) {
        return embeddingOfDeviceIds(ids, count, table, gathered);
      });
    }
    if (!device_.isCuda()) {
      return cpu::embedding(table.dtype(), table.data(), table.dim(0), table.dim(1), ids, count,
                            out.data());
    }
    return REE_CUDA_ONLY(cuda::embeddingOfDeviceIds(table.dtype(), table.data(), table.dim(0),
                                                    table.dim(1), ids, count, out.data(), stream_));
  }

  Status addInPlace(Tensor& acc, const Tensor& x) override {
    REE_CHECK_ARG(acc.numel() == x.numel() && acc.dtype() == x.dtype(), "addInPlace: %s += %s",
                  acc.describe().c_str(), x.describe().c_str());
    if (!device_.isCuda())
      return cpu::add(acc.dtype(), acc.data(), x.data(), acc.data(), acc.numel());
    return REE_CUDA_ONLY(
        cuda::add(acc.dtype(), acc.data(), x.data(), acc.data(), acc.numel(), stream_));
  }

  Status rmsNorm(const Tensor& x, const Tensor& weight, float eps, Tensor& out) override {
    int64_t cols = x.dim(-1), rows = x.numel() / cols;
    RowsIn in{x.data(), x.dtype(), cols};
    VecIn w{weight.data(), weight.dtype()};
    RowsOut y{out.data(), out.dtype(), cols};
    if (!device_.isCuda()) return cpu::rmsNorm(in, w, y, rows, cols, eps, RmsNormVariant::kF32);
    return REE_CUDA_ONLY(cuda::rmsNorm(in, w, y, rows, cols, eps, RmsNormVariant::kF32, stream_));
  }

  Status layerNorm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps,
                   Tensor& out) override {
    int64_t cols = x.dim(-1), rows = x.numel() / cols;
    RowsIn in{x.data(), x.dtype(), cols};
    VecIn w{weight.data(), weight.dtype()};
    VecIn b{bias.defined() ? bias.data() : nullptr, bias.dtype()};
    RowsOut y{out.data(), out.dtype(), cols};
    if (!device_.isCuda()) return cpu::layerNorm(in, w, b, y, rows, cols, eps);
    return REE_CUDA_ONLY(cuda::layerNorm(in, w, b, y, rows, cols, eps, stream_));
  }

  Status linear(const Tensor& x, const Tensor& weight, const Tensor* bias, Tensor& out) override {
    return runLinear(x, weight, bias, out, /*accumulate=*/false);
  }

  // Under repops-3 on a GPU, decode batches up to the tiled kernel's range run fused: x is
  // quantised once for q|k|v (gate|up) instead of three (two) times, and the wider products fill
  // the GPU (int_linear_row_tiled.cuh). Elsewhere the default.
  int64_t fusedProjectionMaxTokens() const override {
    return spec_ == RepOpsSpec::kRepOps3 && device_.isCuda()
               ? 256
               : OperationSet::fusedProjectionMaxTokens();
  }

  // What the integer specs precompute from a parameter once, keyed by its pointer and shape
  // (runLinear uses it for that pointer and shape): repops-2 on the CPU, the weight's digit planes,
  // skipped with the same bits when they would not fit the budget; repops-3, the weight's row
  // exponents (IntLinearRowWeights on the CPU, IntLinearRowDeviceWeights on a GPU). Tied weights
  // are prepared once.
  Status prepareLinearWeight(const Tensor& weight) override {
    if (spec_ == RepOpsSpec::kRepOps1 || weight.dim(0) < 1) return Status::kSuccess;
    LinearArgs args;
    args.w = weight.data();
    args.w_dtype = weight.dtype();
    args.n = weight.dim(0);
    args.k = weight.dim(1);
    if (device_.isCuda()) return prepareOnDevice(args);
    if (spec_ == RepOpsSpec::kRepOps2) {
      return prepareOnHost(args, cpu::intLinearWeightsBytes(args.n, args.k),
                           &cpu::prepareIntLinearWeights, &block_weights_);
    }
    return prepareOnHost(args, cpu::intLinearRowWeightsBytes(args.n, args.k),
                         &cpu::prepareIntLinearRowWeights, &row_weights_);
  }

  // One kernel: the residual add happens in the linear layer's store (linear.md, step 5).
  Status linearAccumulate(const Tensor& x, const Tensor& weight, const Tensor* bias,
                          Tensor& acc) override {
    return runLinear(x, weight, bias, acc, /*accumulate=*/true);
  }

  Status rope(Tensor& x, const std::vector<int32_t>& positions, const RopeSpec& spec) override {
    REE_CHECK_ARG(x.rank() == 3 && static_cast<int64_t>(positions.size()) == x.dim(0),
                  "rope: x %s with %zu positions", x.describe().c_str(), positions.size());
    const std::vector<float>* inv_freq = nullptr;
    REE_RETURN_IF_ERROR(inverseFrequencies(spec, &inv_freq));
    int heads = static_cast<int>(x.dim(1)), head_dim = static_cast<int>(x.dim(2));
    RopeLayout layout = spec.interleaved ? RopeLayout::kInterleaved : RopeLayout::kHalfSplit;
    if (!device_.isCuda()) {
      return cpu::rope(x.dtype(), x.data(), x.dim(0), heads, head_dim, heads * head_dim,
                       positions.data(), inv_freq->data(), spec.rotary_dim, layout);
    }
    const int32_t* device_positions = nullptr;
    REE_RETURN_IF_ERROR(upload(positions, &positions_buffer_, &device_positions));
    if (device_inv_freq_key_ != inv_freq) {
      REE_RETURN_IF_ERROR(Tensor::empty(
          device_, DType::kF32, {static_cast<int64_t>(inv_freq->size())}, &device_inv_freq_));
      REE_RETURN_IF_ERROR(
          copyTensor(Tensor::wrap(const_cast<float*>(inv_freq->data()), Device::cpu(), DType::kF32,
                                  {static_cast<int64_t>(inv_freq->size())}),
                     device_inv_freq_, stream_));
      device_inv_freq_key_ = inv_freq;
    }
    return REE_CUDA_ONLY(cuda::rope(
        x.dtype(), x.data(), x.dim(0), heads, head_dim, heads * head_dim, device_positions,
        device_inv_freq_.as<float>(), spec.rotary_dim, layout, stream_));
  }

  Status attention(const Tensor& q, const Tensor& k_new, const Tensor& v_new, LayerKvCache& cache,
                   const StepBatch& batch, Tensor& out) override {
    int n_kv = static_cast<int>(cache.k.dim(2)), head_dim = static_cast<int>(cache.k.dim(3));
    // The step's block tables address the cache's blocks (StepBatch).
    KvAppendArgs append;
    append.batch = batch.batch();
    append.query_offsets = batch.query_offsets.data();
    append.cached_lens = batch.cached_lens.data();
    append.n_kv_heads = n_kv;
    append.head_dim = head_dim;
    append.k_new = k_new.data();
    append.v_new = v_new.data();
    append.new_dtype = k_new.dtype();
    append.k_cache = cache.k.data();
    append.v_cache = cache.v.data();
    append.cache_dtype = cache.k.dtype();
    append.num_blocks = cache.numBlocks();
    append.block_size = cache.blockSize();
    append.block_table = batch.block_tables.data();
    append.max_blocks_per_seq = batch.blocks_per_seq;
    AttentionArgs args;
    args.batch = batch.batch();
    args.query_offsets = batch.query_offsets.data();
    args.cached_lens = batch.cached_lens.data();
    args.n_heads = static_cast<int>(q.dim(1));
    args.n_kv_heads = n_kv;
    args.head_dim = head_dim;
    args.q = q.data();
    args.q_dtype = q.dtype();
    args.out = out.data();
    args.out_dtype = out.dtype();
    args.cache = PagedKvCache{cache.k.data(),      cache.v.data(),    cache.k.dtype(),
                              cache.numBlocks(),   cache.blockSize(), batch.block_tables.data(),
                              batch.blocks_per_seq};
    if (!device_.isCuda()) {
      REE_RETURN_IF_ERROR(cpu::appendKv(append));
      return cpu::attention(args);
    }
    REE_RETURN_IF_ERROR(REE_CUDA_ONLY(cuda::appendKv(append, stream_)));
    return REE_CUDA_ONLY(cuda::attention(args, stream_));
  }

  Status gatedActivation(ActivationKind act, const Tensor& gate, const Tensor& up,
                         Tensor& out) override {
    REE_CHECK_ARG(gate.numel() == up.numel() && up.numel() == out.numel() &&
                      gate.dtype() == out.dtype() && up.dtype() == out.dtype(),
                  "gatedActivation: gate %s, up %s, out %s", gate.describe().c_str(),
                  up.describe().c_str(), out.describe().c_str());
    int64_t cols = out.dim(-1), rows = out.numel() / cols;
    if (!device_.isCuda()) {
      return cpu::gated(toKernel(act), out.dtype(), gate.data(), cols, up.data(), cols, out.data(),
                        cols, rows, cols);
    }
    return REE_CUDA_ONLY(cuda::gated(toKernel(act), out.dtype(), gate.data(), cols, up.data(), cols,
                                     out.data(), cols, rows, cols, stream_));
  }

  Status activation(ActivationKind act, const Tensor& x, Tensor& out) override {
    REE_CHECK_ARG(x.numel() == out.numel() && x.dtype() == out.dtype(), "activation: x %s, out %s",
                  x.describe().c_str(), out.describe().c_str());
    if (!device_.isCuda()) {
      return cpu::activation(toKernel(act), x.dtype(), x.data(), out.data(), x.numel());
    }
    return REE_CUDA_ONLY(
        cuda::activation(toKernel(act), x.dtype(), x.data(), out.data(), x.numel(), stream_));
  }

  Status copyColumns(const Tensor& src, int64_t col_begin, Tensor& dst) override {
    return ::ree::copyColumns(src, col_begin, dst, stream_);
  }

  // Every operator queues on stream_, so recording stream_ records them; rope and attention read
  // their host metadata at recording time (OperationSet::beginGraphCapture).
  bool capturesGraphs() const override {
    return device_.isCuda();
  }
  // Not for one-token steps: their kernels are chained by programmatic dependent launch (each
  // starts while its predecessor drains), which a graph's boundaries with the eager attention
  // break, and the host already queues such a step faster than the GPU runs it. Measured on an
  // H100 (Llama-3-8B shape, repops-1): batch 1 144.7 -> 140.7 tok/s with graphs, batch 16
  // 1,051.5 -> 1,093.3.
  bool graphsPayAt(int64_t tokens) const override {
    return device_.isCuda() && tokens >= 2;
  }
  Status beginGraphCapture() override {
    REE_CHECK_ARG(device_.isCuda(), "the reproducible set on %s does not record graphs",
                  device_.str().c_str());
    return REE_CUDA_ONLY(beginStreamCapture(stream_, "reproducible operation set"));
  }
  Status endGraphCapture(std::unique_ptr<OperationGraph>* out) override {
    REE_CHECK_ARG(device_.isCuda(), "the reproducible set on %s does not record graphs",
                  device_.str().c_str());
    return REE_CUDA_ONLY(endStreamCapture(stream_, "reproducible operation set", out));
  }

  Status synchronize() override {
#if defined(REE_WITH_CUDA)
    if (stream_ != nullptr) {
      REE_CUDA_CHECK_MSG(cudaStreamSynchronize(stream_), "reproducible operation set on %s",
                         device_.str().c_str());
    }
#endif
    return Status::kSuccess;
  }

 private:
  Status runLinear(const Tensor& x, const Tensor& weight, const Tensor* bias, Tensor& out,
                   bool accumulate) {
    QuantizedWeightInfo quantized;
    if (spec_ == RepOpsSpec::kRepOps1 && findQuantizedWeight(weight, &quantized)) {
      return quantizedLinear(device_, stream_, x, weight, quantized, bias, out, accumulate);
    }
    LinearArgs args;
    args.x = x.data();
    args.x_dtype = x.dtype();
    args.w = weight.data();
    args.w_dtype = weight.dtype();
    if (bias != nullptr) {
      args.bias = bias->data();
      args.bias_dtype = bias->dtype();
    }
    args.y = out.data();
    args.y_dtype = out.dtype();
    args.m = x.numel() / x.dim(-1);
    args.n = weight.dim(0);
    args.k = weight.dim(1);
    args.w_is_constant = true;  // model parameters (OperationSet::linear)
    args.accumulate = accumulate;
    REE_CHECK_ARG(x.dim(-1) == args.k && out.numel() == args.m * args.n,
                  "linear: x %s, weight %s, out %s", x.describe().c_str(),
                  weight.describe().c_str(), out.describe().c_str());
    switch (spec_) {
      case RepOpsSpec::kRepOps2:
        if (!device_.isCuda()) return cpu::intLinear(args, preparedOnHost(block_weights_, args));
        return REE_CUDA_ONLY(cuda::intLinear(args, stream_));
      case RepOpsSpec::kRepOps3:
        if (!device_.isCuda()) return cpu::intLinearRow(args, preparedOnHost(row_weights_, args));
        return REE_CUDA_ONLY(cuda::intLinearRow(args, preparedOnDevice(args), stream_));
      case RepOpsSpec::kRepOps1:
        break;
    }
    if (!device_.isCuda()) return cpu::linear(args);
    return REE_CUDA_ONLY(cuda::linear(args, stream_));
  }

  // Prepared weights are keyed by pointer AND shape: a fused projection's weight (q|k|v, gate|up)
  // starts at the same address as its first part (causal_lm_weights.cpp), and each needs its own.
  using WeightKey = std::tuple<const void*, int64_t, int64_t>;
  static WeightKey keyOf(const LinearArgs& args) {
    return {args.w, args.n, args.k};
  }
  template <typename Weights>
  using HostWeightsMap = std::map<WeightKey, std::unique_ptr<Weights>>;

  // Prepares args.w into `map` unless it is there already or its `bytes` would take the host
  // weights past a quarter of the host's available memory (then runLinear quantises per call).
  template <typename Weights>
  Status prepareOnHost(const LinearArgs& args, int64_t bytes,
                       Status (*prepare)(const LinearArgs&, std::unique_ptr<Weights>*),
                       HostWeightsMap<Weights>* map) {
    if (map->count(keyOf(args)) != 0) return Status::kSuccess;
    if (prepared_bytes_ + bytes > hostAvailableMemoryBytes() / 4) return Status::kSuccess;
    std::unique_ptr<Weights> prepared;
    REE_RETURN_IF_ERROR(prepare(args, &prepared));
    (*map)[keyOf(args)] = std::move(prepared);
    prepared_bytes_ += bytes;
    return Status::kSuccess;
  }

  // The prepared weights of args.w for this shape, else null.
  template <typename Weights>
  static const Weights* preparedOnHost(const HostWeightsMap<Weights>& map, const LinearArgs& args) {
    auto it = map.find(keyOf(args));
    return it == map.end() ? nullptr : it->second.get();
  }

#if defined(REE_WITH_CUDA)
  // repops-3 on a GPU: the weight's device data (its row exponents), made once on the stream.
  Status prepareOnDevice(const LinearArgs& args) {
    if (spec_ != RepOpsSpec::kRepOps3 || device_row_weights_.count(keyOf(args)) != 0) {
      return Status::kSuccess;
    }
    std::unique_ptr<cuda::IntLinearRowDeviceWeights> prepared;
    REE_RETURN_IF_ERROR(cuda::prepareIntLinearRowWeights(args, stream_, &prepared));
    device_row_weights_[keyOf(args)] = std::move(prepared);
    return Status::kSuccess;
  }

  const cuda::IntLinearRowDeviceWeights* preparedOnDevice(const LinearArgs& args) const {
    auto it = device_row_weights_.find(keyOf(args));
    return it == device_row_weights_.end() ? nullptr : it->second.get();
  }
#else
  Status prepareOnDevice(const LinearArgs&) {
    return REE_FAIL(Status::kUnsupported, "REE was built without CUDA");
  }
#endif

  static Activation toKernel(ActivationKind act) {
    switch (act) {
      case ActivationKind::kSilu:
        return Activation::kSilu;
      case ActivationKind::kGeluTanh:
        return Activation::kGeluTanh;
      case ActivationKind::kGeluErf:
        return Activation::kGeluErf;
    }
    return Activation::kSilu;
  }

  // An fp32 `out` for a narrower table: `gather` fills rows in the table's dtype, then they are
  // widened exactly.
  template <typename Gather>
  Status gatherThenWiden(const Tensor& table, int64_t count, Tensor& out, Gather gather) {
    Tensor gathered;
    REE_RETURN_IF_ERROR(Tensor::empty(device_, table.dtype(), out.shape(), &gathered));
    REE_RETURN_IF_ERROR(gather(gathered));
    RowsIn in{gathered.data(), gathered.dtype(), table.dim(1)};
    RowsOut y{out.data(), out.dtype(), table.dim(1)};
    if (!device_.isCuda()) return cpu::cast(in, y, count, table.dim(1));
    return REE_CUDA_ONLY(cuda::cast(in, y, count, table.dim(1), stream_));
  }

  // A device copy of host int32 metadata (token ids, positions) and the values it holds.
  struct UploadBuffer {
    Tensor device;  // typed f32 only for its 4-byte size; its bytes are int32
    std::vector<int32_t> values;
  };

  // Copies host int32 metadata to a reusable device buffer ordered on the stream. A copy from
  // pageable memory can make the host wait for the stream, so values the buffer already holds
  // (every layer's rope calls of a step share one positions vector) are not sent again.
  Status upload(const std::vector<int32_t>& values, UploadBuffer* buffer, const int32_t** out) {
    int64_t n = static_cast<int64_t>(values.size());
    if (buffer->device.data() != nullptr && buffer->values == values) {
      *out = buffer->device.as<int32_t>();
      return Status::kSuccess;
    }
    buffer->values.clear();  // unknown contents until the copy below is queued
    if (buffer->device.numel() < n || !buffer->device.data()) {
      REE_RETURN_IF_ERROR(
          Tensor::empty(device_, DType::kF32, {std::max<int64_t>(n, 256)}, &buffer->device));
    }
    Tensor view = Tensor::wrap(buffer->device.data(), device_, DType::kF32, {n});
    REE_RETURN_IF_ERROR(copyTensor(
        Tensor::wrap(const_cast<int32_t*>(values.data()), Device::cpu(), DType::kF32, {n}), view,
        stream_));
    buffer->values = values;
    *out = buffer->device.as<int32_t>();
    return Status::kSuccess;
  }

  // Host inverse frequencies for `spec`, computed once (repops-1 ropeInvFreq; the CUDA path uses
  // the same bits uploaded to the device).
  Status inverseFrequencies(const RopeSpec& spec, const std::vector<float>** out) {
    for (auto& entry : inv_freq_cache_) {
      const RopeSpec& k = entry.first;
      if (k.rotary_dim == spec.rotary_dim && k.theta == spec.theta && k.llama3 == spec.llama3 &&
          k.llama3_factor == spec.llama3_factor &&
          k.llama3_low_freq_factor == spec.llama3_low_freq_factor &&
          k.llama3_high_freq_factor == spec.llama3_high_freq_factor &&
          k.llama3_original_max_positions == spec.llama3_original_max_positions) {
        *out = &entry.second;
        return Status::kSuccess;
      }
    }
    std::vector<float> values(static_cast<size_t>(spec.rotary_dim / 2));
    RopeLlama3Scaling scaling;
    scaling.factor = spec.llama3_factor;
    scaling.low_freq_factor = spec.llama3_low_freq_factor;
    scaling.high_freq_factor = spec.llama3_high_freq_factor;
    scaling.original_max_position_embeddings = spec.llama3_original_max_positions;
    REE_RETURN_IF_ERROR(cpu::ropeInvFreq(spec.theta, spec.rotary_dim,
                                         spec.llama3 ? &scaling : nullptr, values.data()));
    inv_freq_cache_.emplace_back(spec, std::move(values));
    *out = &inv_freq_cache_.back().second;
    return Status::kSuccess;
  }

  std::list<std::pair<RopeSpec, std::vector<float>>> inv_freq_cache_;
  UploadBuffer ids_buffer_, positions_buffer_;
  Tensor device_inv_freq_;
  const std::vector<float>* device_inv_freq_key_ = nullptr;

  Device device_;
  RepOpsSpec spec_;
  // prepareLinearWeight's results (one spec per set, so one of them is used) and the host bytes
  // they hold.
  HostWeightsMap<cpu::IntLinearWeights> block_weights_;
  HostWeightsMap<cpu::IntLinearRowWeights> row_weights_;
  int64_t prepared_bytes_ = 0;
#if defined(REE_WITH_CUDA)
  std::map<WeightKey, std::unique_ptr<cuda::IntLinearRowDeviceWeights>> device_row_weights_;
#endif
  cudaStream_t stream_ = nullptr;
};

}  // namespace

Status createReproducibleOperationSet(Device device, RepOpsSpec spec,
                                      std::unique_ptr<OperationSet>* out) {
  auto ops = std::make_unique<ReproducibleOps>(device, spec);
  REE_RETURN_IF_ERROR(ops->init());
  *out = std::move(ops);
  return Status::kSuccess;
}

}  // namespace ree
