// The ATen operation sets: `default` (LibTorch's fast paths) and `deterministic` (LibTorch with
// deterministic algorithms, TF32 and reduced-precision reductions off, a fixed CPU thread count and
// the math attention backend). docs/operation-sets.md states what each one guarantees.
//
// Every operator mirrors the PyTorch code of transformers (LlamaRMSNorm, LlamaRotaryEmbedding,
// _compute_llama3_parameters, sdpa_attention_forward, LlamaMLP) op for op, so that an ATen run
// reproduces a transformers run of the same dtype on the same device as closely as possible.
// ree::Tensor memory is wrapped with at::for_blob (no copies); results are written into the
// caller's tensors with out= variants or copy_.
#if defined(REE_WITH_TORCH)

#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>

#include <cmath>
#include <cstdlib>
#include <exception>
#include <limits>
#include <new>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>

#include "aten_ops.h"
#include "aten_uploads.h"
#include "aten_varlen_attention.h"
#include "ree/core/log.h"

namespace ree {
namespace {

// Intra-op CPU threads of the deterministic set. ATen's CPU reductions and MKL/oneDNN GEMMs split
// work by thread count, so it must be fixed for run-to-run identical bits; 1 is the one value that
// every machine can honour and that makes the partitioning independent of the host.
constexpr int kDeterministicCpuThreads = 1;

at::ScalarType scalarTypeOf(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return at::kFloat;
    case DType::kBF16:
      return at::kBFloat16;
    case DType::kF16:
      return at::kHalf;
  }
  return at::kFloat;
}

// "[2, 3, 4]" for error messages.
std::string shapeString(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    text += (i ? ", " : "") + std::to_string(shape[i]);
  }
  return text + "]";
}

// The process-wide ATen settings that the deterministic set pins, saved and restored around each
// of its calls so that a default set in the same process keeps ATen's own defaults.
struct DeterminismSettings {
  bool deterministic_algorithms = false;
  bool deterministic_warn_only = false;
  bool fill_uninitialized_memory = true;
  bool allow_tf32_cublas = false;
  bool allow_tf32_cudnn = false;
  at::CuBLASReductionOption bf16_reduction_cublas =
      at::CuBLASReductionOption::AllowReducedPrecisionWithSplitK;
  at::CuBLASReductionOption fp16_reduction_cublas =
      at::CuBLASReductionOption::AllowReducedPrecisionWithSplitK;
  bool deterministic_cudnn = false;
  bool benchmark_cudnn = false;
  bool deterministic_mkldnn = false;
  bool fp16_bf16_reduction_math_sdp = false;

  static DeterminismSettings current() {
    at::Context& context = at::globalContext();
    DeterminismSettings settings;
    settings.deterministic_algorithms = context.deterministicAlgorithms();
    settings.deterministic_warn_only = context.deterministicAlgorithmsWarnOnly();
    settings.fill_uninitialized_memory = context.deterministicFillUninitializedMemory();
    settings.allow_tf32_cublas = context.allowTF32CuBLAS();
    settings.allow_tf32_cudnn = context.allowTF32CuDNN();
    settings.bf16_reduction_cublas = context.allowBF16ReductionCuBLAS();
    settings.fp16_reduction_cublas = context.allowFP16ReductionCuBLAS();
    settings.deterministic_cudnn = context.deterministicCuDNN();
    settings.benchmark_cudnn = context.benchmarkCuDNN();
    settings.deterministic_mkldnn = context.deterministicMkldnn();
    settings.fp16_bf16_reduction_math_sdp = context.allowFP16BF16ReductionMathSDP();
    return settings;
  }

  // What the deterministic set runs under.
  static DeterminismSettings deterministic() {
    DeterminismSettings settings;
    settings.deterministic_algorithms = true;
    settings.deterministic_warn_only = false;  // an op without a deterministic kernel is an error
    // Filling every torch.empty with NaN guards against kernels that read uninitialised memory;
    // ours write every output element, so skip the extra memory traffic.
    settings.fill_uninitialized_memory = false;
    settings.allow_tf32_cublas = false;
    settings.allow_tf32_cudnn = false;
    // Split-K stays allowed (cuBLAS reduces its partial sums in a fixed order given a fixed
    // workspace); reduced-precision (bf16/fp16) partial sums do not.
    settings.bf16_reduction_cublas = at::CuBLASReductionOption::DisallowReducedPrecisionAllowSplitK;
    settings.fp16_reduction_cublas = at::CuBLASReductionOption::DisallowReducedPrecisionAllowSplitK;
    settings.deterministic_cudnn = true;
    settings.benchmark_cudnn = false;
    settings.deterministic_mkldnn = true;
    settings.fp16_bf16_reduction_math_sdp = false;
    return settings;
  }

  static void setReduction(bool bf16, at::CuBLASReductionOption option) {
    bool allow_reduced = option == at::CuBLASReductionOption::AllowReducedPrecisionWithSplitK;
    bool allow_splitk = option != at::CuBLASReductionOption::DisallowReducedPrecisionDisallowSplitK;
    if (bf16) {
      at::globalContext().setAllowBF16ReductionCuBLAS(allow_reduced, allow_splitk);
    } else {
      at::globalContext().setAllowFP16ReductionCuBLAS(allow_reduced, allow_splitk);
    }
  }

  void apply() const {
    at::Context& context = at::globalContext();
    context.setDeterministicAlgorithms(deterministic_algorithms, deterministic_warn_only);
    context.setDeterministicFillUninitializedMemory(fill_uninitialized_memory);
    if (context.allowTF32CuBLAS() != allow_tf32_cublas)
      context.setAllowTF32CuBLAS(allow_tf32_cublas);
    if (context.allowTF32CuDNN() != allow_tf32_cudnn) context.setAllowTF32CuDNN(allow_tf32_cudnn);
    setReduction(true, bf16_reduction_cublas);
    setReduction(false, fp16_reduction_cublas);
    context.setDeterministicCuDNN(deterministic_cudnn);
    context.setBenchmarkCuDNN(benchmark_cudnn);
    context.setDeterministicMkldnn(deterministic_mkldnn);
    context.setAllowFP16BF16ReductionMathSDP(fp16_bf16_reduction_math_sdp);
  }
};

// Puts ATen in the operation set's mode for the duration of one call.
class ModeScope {
 public:
  ModeScope(OperationSetKind kind, bool cpu) : active_(kind == OperationSetKind::kDeterministic) {
    if (!active_) return;
    saved_ = DeterminismSettings::current();
    DeterminismSettings::deterministic().apply();
    // Not restored: resizing ATen's thread pools on every call would cost more than the ops.
    if (cpu && at::get_num_threads() != kDeterministicCpuThreads) {
      at::set_num_threads(kDeterministicCpuThreads);
    }
  }
  ~ModeScope() {
    if (!active_) return;
    try {
      saved_.apply();
    } catch (...) {
      // Restoring flags that were just read back cannot fail in practice; never throw here.
    }
  }
  ModeScope(const ModeScope&) = delete;
  ModeScope& operator=(const ModeScope&) = delete;

 private:
  bool active_;
  DeterminismSettings saved_;
};

class AtenOperationSet final : public OperationSet {
 public:
  AtenOperationSet(OperationSetKind kind, Device device)
      : kind_(kind),
        device_(device),
        aten_device_(device.isCuda() ? at::Device(at::kCUDA, static_cast<int8_t>(device.index))
                                     : at::Device(at::kCPU)) {}

  OperationSetKind kind() const override { return kind_; }
  Device device() const override { return device_; }
  // Activations and caches stay in the model's dtype, as in a transformers run.
  DType activationDType(DType weight_dtype) const override { return weight_dtype; }
  DType kvCacheDType(DType weight_dtype) const override { return weight_dtype; }

  Status embedding(const std::vector<int32_t>& ids, const Tensor& table, Tensor& out) override;
  Status addInPlace(Tensor& acc, const Tensor& x) override;
  Status rmsNorm(const Tensor& x, const Tensor& weight, float eps, Tensor& out) override;
  Status layerNorm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps,
                   Tensor& out) override;
  Status linear(const Tensor& x, const Tensor& weight, const Tensor* bias, Tensor& out) override;
  Status linearAccumulate(const Tensor& x, const Tensor& weight, const Tensor* bias,
                          Tensor& acc) override;
  Status rope(Tensor& x, const std::vector<int32_t>& positions, const RopeSpec& spec) override;
  Status attention(const Tensor& q, const Tensor& k_new, const Tensor& v_new, LayerKvCache& cache,
                   const StepBatch& batch, Tensor& out) override;
  Status gatedActivation(ActivationKind act, const Tensor& gate, const Tensor& up,
                         Tensor& out) override;
  Status activation(ActivationKind act, const Tensor& x, Tensor& out) override;
  Status synchronize() override;

 private:
  // Runs `body` in this set's mode; every exception becomes a Status naming the operator.
  template <typename Body>
  Status run(const char* op, Body&& body);

  // Checks that `t` is a usable tensor of this set: defined, on its device.
  Status checkTensor(const char* op, const char* name, const Tensor& t) const;

  // Zero-copy ATen view of `t` (same dtype, shape and device). The device is given, not looked
  // up: plain from_blob asks the driver which device owns the pointer (cudaPointerGetAttributes)
  // for every view, dozens per layer, which cost more host time than the decode step's kernels.
  at::Tensor view(const Tensor& t) const {
    return at::for_blob(t.data(), t.shape())
        .options(at::TensorOptions().dtype(scalarTypeOf(t.dtype())).device(aten_device_))
        .target_device(aten_device_)
        .make_tensor();
  }

  // Inverse frequencies of `spec` (fp32, on this set's device), cached for the last spec.
  at::Tensor inverseFrequencies(const RopeSpec& spec);
  // cos and sin [tokens, 1, rotary_dim] in `dtype` for these positions: computed by the first
  // rope call of a step and reused by the others (q and k of every layer share them).
  const std::pair<at::Tensor, at::Tensor>& ropeTables(const std::vector<int32_t>& positions,
                                                      const RopeSpec& spec, at::ScalarType dtype);
  // The attention of every sequence in one FlashAttention call (default set, CUDA, bf16/fp16);
  // false when it does not apply, or failed once in this process (then the per-sequence path).
  bool tryVarlenAttention(const at::Tensor& q, const at::Tensor& k_new, const at::Tensor& v_new,
                          at::Tensor& k_cache, at::Tensor& v_cache, const StepBatch& batch,
                          double scale, at::Tensor& out);

  OperationSetKind kind_;
  Device device_;
  at::Device aten_device_;
  bool have_rope_cache_ = false;
  RopeSpec cached_rope_spec_;
  at::Tensor cached_inv_freq_;
  // Host vectors every layer of a step passes again, uploaded once (aten_uploads.h).
  aten_ops::UploadCache positions_upload_{aten_device_};
  aten_ops::UploadCache varlen_upload_{aten_device_};
  struct RopeTables {
    bool valid = false;
    std::vector<int32_t> positions;
    RopeSpec spec;
    at::ScalarType dtype = at::kFloat;
    std::pair<at::Tensor, at::Tensor> cos_sin;
  } rope_tables_;
  bool varlen_failed_ = false;
};

template <typename Body>
Status AtenOperationSet::run(const char* op, Body&& body) {
  try {
    ModeScope scope(kind_, !device_.isCuda());
    body();
    return Status::kSuccess;
  } catch (const c10::OutOfMemoryError& e) {
    return REE_FAIL(Status::kOutOfMemory, "%s (%s set on %s): out of memory: %s", op, name(),
                    device_.str().c_str(), e.what_without_backtrace());
  } catch (const c10::AcceleratorError& e) {
    return REE_FAIL(Status::kCudaError, "%s (%s set on %s): CUDA error: %s", op, name(),
                    device_.str().c_str(), e.what_without_backtrace());
  } catch (const c10::Error& e) {
    return REE_FAIL(Status::kInternal, "%s (%s set on %s): ATen error: %s", op, name(),
                    device_.str().c_str(), e.what_without_backtrace());
  } catch (const std::bad_alloc&) {
    return REE_FAIL(Status::kOutOfMemory, "%s (%s set on %s): out of host memory", op, name(),
                    device_.str().c_str());
  } catch (const std::exception& e) {
    return REE_FAIL(Status::kInternal, "%s (%s set on %s): %s", op, name(), device_.str().c_str(),
                    e.what());
  } catch (...) {
    return REE_FAIL(Status::kInternal, "%s (%s set on %s): unknown exception", op, name(),
                    device_.str().c_str());
  }
}

Status AtenOperationSet::checkTensor(const char* op, const char* name, const Tensor& t) const {
  REE_CHECK_ARG(t.data() != nullptr || t.numel() == 0, "%s: %s (%s) has no data", op, name,
                t.describe().c_str());
  REE_CHECK_ARG(t.device() == device_, "%s: %s is %s, but the %s operation set runs on %s", op,
                name, t.describe().c_str(), this->name(), device_.str().c_str());
  return Status::kSuccess;
}

// ---- embedding, add -----------------------------------------------------------------------------

Status AtenOperationSet::embedding(const std::vector<int32_t>& ids, const Tensor& table,
                                   Tensor& out) {
  REE_RETURN_IF_ERROR(checkTensor("embedding", "table", table));
  REE_RETURN_IF_ERROR(checkTensor("embedding", "out", out));
  REE_CHECK_ARG(table.rank() == 2, "embedding: table must be [vocab, hidden], got %s",
                table.describe().c_str());
  const int64_t tokens = static_cast<int64_t>(ids.size());
  REE_CHECK_ARG(out.rank() == 2 && out.dim(0) == tokens && out.dim(1) == table.dim(1),
                "embedding: out must be [%lld, %lld] for %lld ids, got %s",
                static_cast<long long>(tokens), static_cast<long long>(table.dim(1)),
                static_cast<long long>(tokens), out.describe().c_str());
  REE_CHECK_ARG(out.dtype() == table.dtype(), "embedding: out %s and table %s differ in dtype",
                out.describe().c_str(), table.describe().c_str());
  for (int64_t t = 0; t < tokens; ++t) {
    REE_CHECK_ARG(ids[t] >= 0 && ids[t] < table.dim(0),
                  "embedding: token id %d at position %lld is outside the table's %lld rows",
                  ids[t], static_cast<long long>(t), static_cast<long long>(table.dim(0)));
  }
  if (tokens == 0) return Status::kSuccess;
  return run("embedding", [&] {
    at::Tensor result = view(out);
    at::index_select_out(result, view(table), 0, aten_ops::uploadInts(ids, aten_device_));
  });
}

Status AtenOperationSet::addInPlace(Tensor& acc, const Tensor& x) {
  REE_RETURN_IF_ERROR(checkTensor("addInPlace", "acc", acc));
  REE_RETURN_IF_ERROR(checkTensor("addInPlace", "x", x));
  REE_CHECK_ARG(acc.shape() == x.shape() && acc.dtype() == x.dtype(),
                "addInPlace: acc %s and x %s must have the same shape and dtype",
                acc.describe().c_str(), x.describe().c_str());
  if (acc.numel() == 0) return Status::kSuccess;
  return run("addInPlace", [&] { view(acc).add_(view(x)); });
}

// ---- norms --------------------------------------------------------------------------------------

Status AtenOperationSet::rmsNorm(const Tensor& x, const Tensor& weight, float eps, Tensor& out) {
  REE_RETURN_IF_ERROR(checkTensor("rmsNorm", "x", x));
  REE_RETURN_IF_ERROR(checkTensor("rmsNorm", "weight", weight));
  REE_RETURN_IF_ERROR(checkTensor("rmsNorm", "out", out));
  REE_CHECK_ARG(x.rank() >= 1 && x.dim(-1) > 0, "rmsNorm: x %s needs a non-empty last dimension",
                x.describe().c_str());
  REE_CHECK_ARG(weight.rank() == 1 && weight.dim(0) == x.dim(-1),
                "rmsNorm: weight %s must be [%lld] to match x %s", weight.describe().c_str(),
                static_cast<long long>(x.dim(-1)), x.describe().c_str());
  REE_CHECK_ARG(out.shape() == x.shape() && out.dtype() == x.dtype(),
                "rmsNorm: out %s must have the shape and dtype of x %s", out.describe().c_str(),
                x.describe().c_str());
  REE_CHECK_ARG(eps >= 0.0f, "rmsNorm: eps %g is negative", static_cast<double>(eps));
  if (x.numel() == 0) return Status::kSuccess;
  return run("rmsNorm", [&] {
    // transformers' LlamaRMSNorm.forward, op for op.
    at::Tensor input = view(x);
    at::Tensor hidden = input.to(at::kFloat);
    at::Tensor variance = hidden.pow(2).mean(-1, /*keepdim=*/true);
    hidden = hidden * at::rsqrt(variance + static_cast<double>(eps));
    at::Tensor result = view(out);
    at::mul_out(result, view(weight), hidden.to(input.scalar_type()));
  });
}

Status AtenOperationSet::layerNorm(const Tensor& x, const Tensor& weight, const Tensor& bias,
                                   float eps, Tensor& out) {
  REE_RETURN_IF_ERROR(checkTensor("layerNorm", "x", x));
  REE_RETURN_IF_ERROR(checkTensor("layerNorm", "weight", weight));
  REE_RETURN_IF_ERROR(checkTensor("layerNorm", "out", out));
  const bool has_bias = bias.data() != nullptr;
  if (has_bias) REE_RETURN_IF_ERROR(checkTensor("layerNorm", "bias", bias));
  REE_CHECK_ARG(x.rank() >= 1 && x.dim(-1) > 0, "layerNorm: x %s needs a non-empty last dimension",
                x.describe().c_str());
  REE_CHECK_ARG(weight.rank() == 1 && weight.dim(0) == x.dim(-1),
                "layerNorm: weight %s must be [%lld] to match x %s", weight.describe().c_str(),
                static_cast<long long>(x.dim(-1)), x.describe().c_str());
  REE_CHECK_ARG(!has_bias || (bias.rank() == 1 && bias.dim(0) == x.dim(-1)),
                "layerNorm: bias %s must be [%lld] to match x %s", bias.describe().c_str(),
                static_cast<long long>(x.dim(-1)), x.describe().c_str());
  REE_CHECK_ARG(out.shape() == x.shape() && out.dtype() == x.dtype(),
                "layerNorm: out %s must have the shape and dtype of x %s", out.describe().c_str(),
                x.describe().c_str());
  if (x.numel() == 0) return Status::kSuccess;
  return run("layerNorm", [&] {
    std::optional<at::Tensor> aten_bias;
    if (has_bias) aten_bias = view(bias);
    at::Tensor result =
        at::layer_norm(view(x), {x.dim(-1)}, view(weight), aten_bias, static_cast<double>(eps));
    view(out).copy_(result);
  });
}

// ---- linear -------------------------------------------------------------------------------------

Status AtenOperationSet::linear(const Tensor& x, const Tensor& weight, const Tensor* bias,
                                Tensor& out) {
  REE_RETURN_IF_ERROR(checkTensor("linear", "x", x));
  REE_RETURN_IF_ERROR(checkTensor("linear", "weight", weight));
  REE_RETURN_IF_ERROR(checkTensor("linear", "out", out));
  if (bias != nullptr) REE_RETURN_IF_ERROR(checkTensor("linear", "bias", *bias));
  REE_CHECK_ARG(weight.rank() == 2, "linear: weight must be [N, K] (nn.Linear layout), got %s",
                weight.describe().c_str());
  const int64_t n = weight.dim(0);
  const int64_t k = weight.dim(1);
  REE_CHECK_ARG(x.rank() >= 1 && x.dim(-1) == k,
                "linear: x %s must end in K = %lld, the input size of weight %s",
                x.describe().c_str(), static_cast<long long>(k), weight.describe().c_str());
  REE_CHECK_ARG(x.dtype() == activationDType(weight.dtype()),
                "linear: x %s must be in the activation dtype %s of weight %s",
                x.describe().c_str(), dtypeName(activationDType(weight.dtype())),
                weight.describe().c_str());
  std::vector<int64_t> out_shape = x.shape();
  out_shape.back() = n;
  // out is in x's dtype, or fp32 (logits): then the product is computed in x's dtype, as
  // transformers does, and widened exactly.
  REE_CHECK_ARG(
      out.shape() == out_shape && (out.dtype() == x.dtype() || out.dtype() == DType::kF32),
      "linear: out %s must be %s%s (or f32) for x %s and weight %s", out.describe().c_str(),
      dtypeName(x.dtype()), shapeString(out_shape).c_str(), x.describe().c_str(),
      weight.describe().c_str());
  REE_CHECK_ARG(bias == nullptr ||
                    (bias->rank() == 1 && bias->dim(0) == n && bias->dtype() == weight.dtype()),
                "linear: bias %s must be %s[%lld] to match weight %s",
                bias ? bias->describe().c_str() : "", dtypeName(weight.dtype()),
                static_cast<long long>(n), weight.describe().c_str());
  if (out.numel() == 0) return Status::kSuccess;
  const int64_t rows = x.numel() / k;
  return run("linear", [&] {
    std::optional<at::Tensor> aten_bias;
    if (bias != nullptr) aten_bias = view(*bias);
    at::Tensor result = view(out).view({rows, n});
    if (out.dtype() == x.dtype()) {
      at::linear_out(result, view(x).view({rows, k}), view(weight), aten_bias);
    } else {
      result.copy_(at::linear(view(x).view({rows, k}), view(weight), aten_bias));
    }
  });
}

// The product goes to an ATen temporary (the caching allocator: no device allocation or free per
// call, nothing that waits), then is added in acc's dtype: transformers' `residual + o_proj(x)`.
Status AtenOperationSet::linearAccumulate(const Tensor& x, const Tensor& weight, const Tensor* bias,
                                          Tensor& acc) {
  REE_RETURN_IF_ERROR(checkTensor("linearAccumulate", "acc", acc));
  REE_CHECK_ARG(weight.rank() == 2 && acc.rank() >= 1 && acc.dim(-1) == weight.dim(0) &&
                    acc.dtype() == x.dtype() && x.rank() >= 1 && weight.dim(1) > 0 &&
                    x.numel() / weight.dim(1) == acc.numel() / weight.dim(0),
                "linearAccumulate: acc %s does not match x %s and weight %s",
                acc.describe().c_str(), x.describe().c_str(), weight.describe().c_str());
  REE_RETURN_IF_ERROR(checkTensor("linearAccumulate", "x", x));
  REE_RETURN_IF_ERROR(checkTensor("linearAccumulate", "weight", weight));
  if (bias != nullptr) REE_RETURN_IF_ERROR(checkTensor("linearAccumulate", "bias", *bias));
  REE_CHECK_ARG(x.dim(-1) == weight.dim(1) && x.dtype() == weight.dtype(),
                "linearAccumulate: x %s must end in K = %lld in the dtype of weight %s",
                x.describe().c_str(), static_cast<long long>(weight.dim(1)),
                weight.describe().c_str());
  if (acc.numel() == 0) return Status::kSuccess;
  const int64_t rows = acc.numel() / weight.dim(0);
  return run("linearAccumulate", [&] {
    std::optional<at::Tensor> aten_bias;
    if (bias != nullptr) aten_bias = view(*bias);
    at::Tensor product = at::linear(view(x).view({rows, weight.dim(1)}), view(weight), aten_bias);
    view(acc).view({rows, weight.dim(0)}).add_(product);
  });
}

// ---- rotary embedding ---------------------------------------------------------------------------

bool sameRopeSpec(const RopeSpec& a, const RopeSpec& b) {
  return a.rotary_dim == b.rotary_dim && a.theta == b.theta && a.llama3 == b.llama3 &&
         a.llama3_factor == b.llama3_factor &&
         a.llama3_low_freq_factor == b.llama3_low_freq_factor &&
         a.llama3_high_freq_factor == b.llama3_high_freq_factor &&
         a.llama3_original_max_positions == b.llama3_original_max_positions;
}

at::Tensor AtenOperationSet::inverseFrequencies(const RopeSpec& spec) {
  if (have_rope_cache_ && sameRopeSpec(spec, cached_rope_spec_)) return cached_inv_freq_;
  // transformers computes inv_freq once, on the CPU (rope_init_fn(config) takes no device), in
  // fp32; the tensor expressions below transcribe its Python ones, including Python's
  // `scalar / tensor` = tensor.reciprocal() * scalar and `scalar ** tensor` = torch.pow.
  // _compute_default_rope_parameters:
  //   inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
  const int64_t dim = spec.rotary_dim;
  at::Tensor exponent = at::arange(0, dim, 2, at::kLong).to(at::kFloat) / dim;
  at::Tensor inv_freq = at::pow(static_cast<double>(spec.theta), exponent).reciprocal() * 1.0;
  if (spec.llama3) {
    // _compute_llama3_parameters. Python evaluates the scalar-only expressions in double.
    const double factor = spec.llama3_factor;
    const double low_freq_factor = spec.llama3_low_freq_factor;
    const double high_freq_factor = spec.llama3_high_freq_factor;
    const double old_context_len = spec.llama3_original_max_positions;
    constexpr double kPythonMathPi = 3.141592653589793;  // math.pi
    const double low_freq_wavelen = old_context_len / low_freq_factor;
    const double high_freq_wavelen = old_context_len / high_freq_factor;
    at::Tensor wavelen = inv_freq.reciprocal() * (2 * kPythonMathPi);
    at::Tensor inv_freq_llama = at::where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq);
    at::Tensor smooth_factor = (wavelen.reciprocal() * old_context_len - low_freq_factor) /
                               (high_freq_factor - low_freq_factor);
    at::Tensor smoothed_inv_freq =
        at::rsub(smooth_factor, 1) * inv_freq_llama / factor + smooth_factor * inv_freq_llama;
    at::Tensor is_medium_freq =
        at::bitwise_not(wavelen < high_freq_wavelen) * at::bitwise_not(wavelen > low_freq_wavelen);
    inv_freq = at::where(is_medium_freq, smoothed_inv_freq, inv_freq_llama);
  }
  cached_inv_freq_ = inv_freq.to(aten_device_);
  cached_rope_spec_ = spec;
  have_rope_cache_ = true;
  return cached_inv_freq_;
}

const std::pair<at::Tensor, at::Tensor>& AtenOperationSet::ropeTables(
    const std::vector<int32_t>& positions, const RopeSpec& spec, at::ScalarType dtype) {
  RopeTables& tables = rope_tables_;
  if (tables.valid && tables.dtype == dtype && tables.spec.interleaved == spec.interleaved &&
      sameRopeSpec(tables.spec, spec) && tables.positions == positions) {
    return tables.cos_sin;
  }
  const int64_t tokens = static_cast<int64_t>(positions.size());
  at::Tensor inv_freq = inverseFrequencies(spec);
  // LlamaRotaryEmbedding.forward: freqs = position_ids[..., None].float() * inv_freq, cos/sin in
  // fp32 (attention_scaling is 1 for default and llama3 rope), then cast to x's dtype.
  at::Tensor freqs = positions_upload_.get(positions).to(at::kFloat).unsqueeze(-1) * inv_freq;
  // Half-split: emb = cat(freqs, freqs); interleaved: each frequency twice in a row (GPT-J's
  // repeat_interleave(2), written as expand so it is a pure copy on every device).
  at::Tensor emb = spec.interleaved
                       ? freqs.unsqueeze(-1).expand({tokens, spec.rotary_dim / 2, 2}).flatten(-2)
                       : at::cat({freqs, freqs}, -1);
  tables.cos_sin = {emb.cos().to(dtype).unsqueeze(1),  // [tokens, 1, rotary_dim]
                    emb.sin().to(dtype).unsqueeze(1)};
  tables.positions = positions;
  tables.spec = spec;
  tables.dtype = dtype;
  tables.valid = true;
  return tables.cos_sin;
}

Status AtenOperationSet::rope(Tensor& x, const std::vector<int32_t>& positions,
                              const RopeSpec& spec) {
  REE_RETURN_IF_ERROR(checkTensor("rope", "x", x));
  REE_CHECK_ARG(x.rank() == 3, "rope: x must be [tokens, heads, head_dim], got %s",
                x.describe().c_str());
  const int64_t tokens = x.dim(0);
  const int64_t head_dim = x.dim(2);
  REE_CHECK_ARG(static_cast<int64_t>(positions.size()) == tokens,
                "rope: %zu positions for x %s (one per token expected)", positions.size(),
                x.describe().c_str());
  REE_CHECK_ARG(spec.rotary_dim > 0 && spec.rotary_dim % 2 == 0 && spec.rotary_dim <= head_dim,
                "rope: rotary_dim %d must be even, positive and <= head_dim %lld", spec.rotary_dim,
                static_cast<long long>(head_dim));
  REE_CHECK_ARG(spec.theta > 0.0f, "rope: theta %g must be positive",
                static_cast<double>(spec.theta));
  REE_CHECK_ARG(
      !spec.llama3 ||
          (spec.llama3_factor > 0.0f && spec.llama3_low_freq_factor > 0.0f &&
           spec.llama3_high_freq_factor != spec.llama3_low_freq_factor &&
           spec.llama3_high_freq_factor > 0.0f && spec.llama3_original_max_positions > 0),
      "rope: llama3 scaling needs factor > 0, low/high frequency factors > 0 and "
      "distinct, original_max_positions > 0 (got %g, %g, %g, %d)",
      static_cast<double>(spec.llama3_factor), static_cast<double>(spec.llama3_low_freq_factor),
      static_cast<double>(spec.llama3_high_freq_factor), spec.llama3_original_max_positions);
  for (size_t t = 0; t < positions.size(); ++t) {
    REE_CHECK_ARG(positions[t] >= 0, "rope: position %d of token %zu is negative", positions[t], t);
  }
  if (x.numel() == 0) return Status::kSuccess;
  return run("rope", [&] {
    const auto& [cos, sin] = ropeTables(positions, spec, scalarTypeOf(x.dtype()));
    at::Tensor rotated = view(x).narrow(-1, 0, spec.rotary_dim);
    at::Tensor turned;
    if (spec.interleaved) {
      // GPT-J's rotate_every_two: pairs (x[2i], x[2i+1]) -> (-x[2i+1], x[2i]).
      at::Tensor even = rotated.slice(-1, 0, spec.rotary_dim, 2);
      at::Tensor odd = rotated.slice(-1, 1, spec.rotary_dim, 2);
      turned = at::stack({-odd, even}, -1).flatten(-2);
    } else {
      // rotate_half: (x1, x2) -> (-x2, x1) on the two halves.
      const int64_t half = spec.rotary_dim / 2;
      turned = at::cat({-rotated.narrow(-1, half, half), rotated.narrow(-1, 0, half)}, -1);
    }
    // apply_rotary_pos_emb: (q * cos) + (rotate_half(q) * sin), every op in x's dtype.
    at::Tensor result = (rotated * cos) + (turned * sin);
    rotated.copy_(result);
  });
}

// ---- attention ----------------------------------------------------------------------------------

Status AtenOperationSet::attention(const Tensor& q, const Tensor& k_new, const Tensor& v_new,
                                   LayerKvCache& cache, const StepBatch& batch, Tensor& out) {
  REE_RETURN_IF_ERROR(checkTensor("attention", "q", q));
  REE_RETURN_IF_ERROR(checkTensor("attention", "k_new", k_new));
  REE_RETURN_IF_ERROR(checkTensor("attention", "v_new", v_new));
  REE_RETURN_IF_ERROR(checkTensor("attention", "cache.k", cache.k));
  REE_RETURN_IF_ERROR(checkTensor("attention", "cache.v", cache.v));
  REE_RETURN_IF_ERROR(checkTensor("attention", "out", out));
  REE_CHECK_ARG(q.rank() == 3, "attention: q must be [tokens, heads, head_dim], got %s",
                q.describe().c_str());
  REE_CHECK_ARG(cache.k.rank() == 4 && cache.v.shape() == cache.k.shape(),
                "attention: cache k %s and v %s must both be [slots, max_len, kv_heads, head_dim]",
                cache.k.describe().c_str(), cache.v.describe().c_str());
  const int64_t tokens = q.dim(0);
  const int64_t heads = q.dim(1);
  const int64_t head_dim = q.dim(2);
  const int64_t kv_heads = cache.k.dim(2);
  const int64_t slots = cache.k.dim(0);
  const int64_t max_len = cache.k.dim(1);
  REE_CHECK_ARG(cache.k.dim(3) == head_dim && kv_heads > 0 && heads % kv_heads == 0,
                "attention: cache %s does not fit q %s (head_dim must match and heads must be a "
                "multiple of kv_heads)",
                cache.k.describe().c_str(), q.describe().c_str());
  const std::vector<int64_t> kv_shape = {tokens, kv_heads, head_dim};
  REE_CHECK_ARG(k_new.shape() == kv_shape && v_new.shape() == kv_shape,
                "attention: k_new %s and v_new %s must be %s", k_new.describe().c_str(),
                v_new.describe().c_str(), shapeString(kv_shape).c_str());
  REE_CHECK_ARG(out.shape() == q.shape(), "attention: out %s must have the shape of q %s",
                out.describe().c_str(), q.describe().c_str());
  REE_CHECK_ARG(k_new.dtype() == q.dtype() && v_new.dtype() == q.dtype() &&
                    cache.k.dtype() == q.dtype() && cache.v.dtype() == q.dtype() &&
                    out.dtype() == q.dtype(),
                "attention: q, k_new, v_new, cache and out must share one dtype (q %s, k_new %s, "
                "v_new %s, cache.k %s, cache.v %s, out %s)",
                dtypeName(q.dtype()), dtypeName(k_new.dtype()), dtypeName(v_new.dtype()),
                dtypeName(cache.k.dtype()), dtypeName(cache.v.dtype()), dtypeName(out.dtype()));
  const int sequences = batch.batch();
  REE_CHECK_ARG(static_cast<int>(batch.query_offsets.size()) == sequences + 1 &&
                    static_cast<int>(batch.cache_slots.size()) == sequences &&
                    batch.query_offsets[0] == 0 && batch.tokens() == tokens,
                "attention: batch has %zu query offsets, %zu slots and %d tokens for %d sequences "
                "and q %s (expected batch + 1 offsets from 0 to %lld)",
                batch.query_offsets.size(), batch.cache_slots.size(), batch.tokens(), sequences,
                q.describe().c_str(), static_cast<long long>(tokens));
  std::set<int32_t> used_slots;
  for (int s = 0; s < sequences; ++s) {
    const int32_t begin = batch.query_offsets[s];
    const int32_t count = batch.query_offsets[s + 1] - begin;
    const int32_t slot = batch.cache_slots[s];
    const int32_t cached = batch.cached_lens[s];
    REE_CHECK_ARG(count >= 0, "attention: query_offsets decrease at sequence %d (%d -> %d)", s,
                  begin, batch.query_offsets[s + 1]);
    REE_CHECK_ARG(slot >= 0 && slot < slots,
                  "attention: sequence %d uses cache slot %d, outside the cache's %lld slots", s,
                  slot, static_cast<long long>(slots));
    REE_CHECK_ARG(used_slots.insert(slot).second,
                  "attention: cache slot %d is used by two sequences of the batch", slot);
    REE_CHECK_ARG(cached >= 0 && static_cast<int64_t>(cached) + count <= max_len,
                  "attention: sequence %d has %d cached + %d new tokens, more than the cache's "
                  "max_len %lld",
                  s, cached, count, static_cast<long long>(max_len));
  }
  if (tokens == 0) return Status::kSuccess;
  return run("attention", [&] {
    at::Tensor q_all = view(q);
    at::Tensor k_all = view(k_new);
    at::Tensor v_all = view(v_new);
    at::Tensor k_cache = view(cache.k);
    at::Tensor v_cache = view(cache.v);
    at::Tensor out_all = view(out);
    const int64_t group = heads / kv_heads;
    // transformers passes scaling = head_dim ** -0.5 (a Python double).
    const double scale = std::pow(static_cast<double>(head_dim), -0.5);
    if (tryVarlenAttention(q_all, k_all, v_all, k_cache, v_cache, batch, scale, out_all)) return;
    for (int s = 0; s < sequences; ++s) {
      const int64_t begin = batch.query_offsets[s];
      const int64_t count = batch.query_offsets[s + 1] - begin;
      if (count == 0) continue;
      const int64_t cached = batch.cached_lens[s];
      const int64_t total = cached + count;
      at::Tensor k_slot = k_cache[batch.cache_slots[s]];  // [max_len, kv_heads, head_dim]
      at::Tensor v_slot = v_cache[batch.cache_slots[s]];
      k_slot.narrow(0, cached, count).copy_(k_all.narrow(0, begin, count));
      v_slot.narrow(0, cached, count).copy_(v_all.narrow(0, begin, count));
      // [1, heads, count, head_dim] queries over [1, heads, total, head_dim] keys and values.
      at::Tensor query = q_all.narrow(0, begin, count).transpose(0, 1).unsqueeze(0);
      auto expandKv = [&](const at::Tensor& slot_tensor) {
        at::Tensor kv = slot_tensor.narrow(0, 0, total).transpose(0, 1);  // [kv, total, d]
        if (group > 1) {
          // transformers' repeat_kv: kv head j serves query heads j*group .. j*group+group-1.
          kv = kv.unsqueeze(1)
                   .expand({kv_heads, group, total, head_dim})
                   .reshape({heads, total, head_dim});
        }
        return kv.unsqueeze(0);
      };
      at::Tensor key = expandKv(k_slot);
      at::Tensor value = expandKv(v_slot);
      // Causal, aligned to the end: query i (position cached + i) sees positions <= cached + i.
      // Without cached tokens that is SDPA's is_causal; a single query sees everything.
      std::optional<at::Tensor> mask;
      bool is_causal = false;
      if (cached == 0) {
        is_causal = count > 1;
      } else if (count > 1) {
        at::TensorOptions index_options = at::TensorOptions().dtype(at::kLong).device(aten_device_);
        at::Tensor key_positions = at::arange(total, index_options).unsqueeze(0);
        at::Tensor query_positions = at::arange(cached, total, index_options).unsqueeze(1);
        at::Tensor visible = key_positions <= query_positions;  // [count, total]
        if (kind_ == OperationSetKind::kDeterministic) {
          // The math kernel adds its mask to the scores; the public SDPA entry point converts a
          // boolean mask the same way before calling it: 0 where visible, -inf elsewhere.
          mask = at::zeros({count, total}, query.options())
                     .masked_fill_(visible.logical_not(), -std::numeric_limits<double>::infinity());
        } else {
          mask = visible;  // SDPA's boolean convention: true = attend
        }
      }
      at::Tensor result;
      if (kind_ == OperationSetKind::kDeterministic) {
        // The math backend: plain matmul + softmax in fp32, no fused flash/memory-efficient
        // kernels (whose tiling depends on the GPU).
        result = std::get<0>(at::_scaled_dot_product_attention_math(
            query, key, value, mask, 0.0, is_causal, std::nullopt, scale));
      } else {
        result = at::scaled_dot_product_attention(query, key, value, mask, 0.0, is_causal, scale);
      }
      out_all.narrow(0, begin, count).copy_(result[0].transpose(0, 1));
    }
  });
}

bool AtenOperationSet::tryVarlenAttention(const at::Tensor& q, const at::Tensor& k_new,
                                          const at::Tensor& v_new, at::Tensor& k_cache,
                                          at::Tensor& v_cache, const StepBatch& batch, double scale,
                                          at::Tensor& out) {
  if (kind_ != OperationSetKind::kDefault || varlen_failed_ ||
      !aten_ops::varlenAttentionApplies(q, k_cache)) {
    return false;
  }
  aten_ops::VarlenLayout layout;
  if (!aten_ops::buildVarlenLayout(batch, k_cache.size(0), k_cache.size(1), &layout)) return false;
  try {
    aten_ops::varlenAttention(q, k_new, v_new, k_cache, v_cache, layout,
                              varlen_upload_.get(layout.packed), scale, out);
    return true;
  } catch (const c10::Error& e) {
    // A LibTorch built without FlashAttention, or a GPU it does not support: the per-sequence
    // path computes the same attention. Its appends to the cache are idempotent, so redoing
    // them there is harmless.
    varlen_failed_ = true;
    logMessage(LogLevel::kWarning,
               "default set on %s: FlashAttention varlen unavailable (%s); attention runs per "
               "sequence",
               device_.str().c_str(), e.what_without_backtrace());
    return false;
  }
}

// ---- activations --------------------------------------------------------------------------------

at::Tensor applyActivation(ActivationKind act, const at::Tensor& x) {
  switch (act) {
    case ActivationKind::kSilu:
      return at::silu(x);
    case ActivationKind::kGeluTanh:
      return at::gelu(x, "tanh");
    case ActivationKind::kGeluErf:
      return at::gelu(x, "none");
  }
  throw std::invalid_argument("unknown activation kind " + std::to_string(static_cast<int>(act)));
}

bool knownActivation(ActivationKind act) {
  return act == ActivationKind::kSilu || act == ActivationKind::kGeluTanh ||
         act == ActivationKind::kGeluErf;
}

Status AtenOperationSet::gatedActivation(ActivationKind act, const Tensor& gate, const Tensor& up,
                                         Tensor& out) {
  REE_RETURN_IF_ERROR(checkTensor("gatedActivation", "gate", gate));
  REE_RETURN_IF_ERROR(checkTensor("gatedActivation", "up", up));
  REE_RETURN_IF_ERROR(checkTensor("gatedActivation", "out", out));
  REE_CHECK_ARG(knownActivation(act), "gatedActivation: unknown activation kind %d",
                static_cast<int>(act));
  REE_CHECK_ARG(gate.shape() == up.shape() && gate.shape() == out.shape() &&
                    gate.dtype() == up.dtype() && gate.dtype() == out.dtype(),
                "gatedActivation: gate %s, up %s and out %s must have one shape and dtype",
                gate.describe().c_str(), up.describe().c_str(), out.describe().c_str());
  if (out.numel() == 0) return Status::kSuccess;
  return run("gatedActivation", [&] {
    // LlamaMLP: act_fn(gate_proj(x)) * up_proj(x), both ops in the activations' dtype.
    at::Tensor result = view(out);
    at::mul_out(result, applyActivation(act, view(gate)), view(up));
  });
}

Status AtenOperationSet::activation(ActivationKind act, const Tensor& x, Tensor& out) {
  REE_RETURN_IF_ERROR(checkTensor("activation", "x", x));
  REE_RETURN_IF_ERROR(checkTensor("activation", "out", out));
  REE_CHECK_ARG(knownActivation(act), "activation: unknown activation kind %d",
                static_cast<int>(act));
  REE_CHECK_ARG(x.shape() == out.shape() && x.dtype() == out.dtype(),
                "activation: x %s and out %s must have one shape and dtype", x.describe().c_str(),
                out.describe().c_str());
  if (out.numel() == 0) return Status::kSuccess;
  return run("activation", [&] {
    at::Tensor result = view(out);
    switch (act) {
      case ActivationKind::kSilu:
        at::silu_out(result, view(x));
        break;
      case ActivationKind::kGeluTanh:
        at::gelu_out(result, view(x), "tanh");
        break;
      case ActivationKind::kGeluErf:
        at::gelu_out(result, view(x), "none");
        break;
    }
  });
}

Status AtenOperationSet::synchronize() {
  if (!device_.isCuda()) return Status::kSuccess;
  return run("synchronize", [&] {
    // The current stream of the set's device, through c10's device-generic interface (no CUDA
    // headers needed here).
    const c10::impl::DeviceGuardImplInterface* impl = c10::impl::getDeviceGuardImpl(at::kCUDA);
    impl->getStream(aten_device_).synchronize();
  });
}

}  // namespace

Status createAtenOperationSet(OperationSetKind kind, Device device,
                              std::unique_ptr<OperationSet>* out) {
  REE_CHECK_ARG(out != nullptr, "createAtenOperationSet: out is null");
  REE_CHECK_ARG(kind == OperationSetKind::kDefault || kind == OperationSetKind::kDeterministic,
                "createAtenOperationSet: --operation-set %s is not an ATen set (default or "
                "deterministic)",
                operationSetName(kind));
  try {
    if (device.isCuda()) {
      if (!at::hasCUDA()) {
        return REE_FAIL(Status::kUnsupported,
                        "--operation-set %s on %s: this LibTorch has no usable CUDA (CPU-only "
                        "wheel, no driver or no GPU)",
                        operationSetName(kind), device.str().c_str());
      }
      const int64_t gpus = static_cast<int64_t>(at::getNumGPUs());
      REE_CHECK_ARG(device.index >= 0 && device.index < gpus,
                    "--device %s: LibTorch sees only %lld CUDA device(s)", device.str().c_str(),
                    static_cast<long long>(gpus));
    }
    if (kind == OperationSetKind::kDeterministic) {
      // cuBLAS is only deterministic with a fixed workspace per handle; PyTorch reads this
      // variable when it first sizes a cuBLAS workspace, and deterministic mode refuses cuBLAS
      // calls without it. The user's own setting wins.
      setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", /*overwrite=*/0);
      if (!device.isCuda()) at::set_num_threads(kDeterministicCpuThreads);
    }
    *out = std::make_unique<AtenOperationSet>(kind, device);
    return Status::kSuccess;
  } catch (const c10::Error& e) {
    return REE_FAIL(Status::kInternal, "creating the %s operation set on %s: %s",
                    operationSetName(kind), device.str().c_str(), e.what_without_backtrace());
  } catch (const std::exception& e) {
    return REE_FAIL(Status::kInternal, "creating the %s operation set on %s: %s",
                    operationSetName(kind), device.str().c_str(), e.what());
  }
}

}  // namespace ree

#endif  // REE_WITH_TORCH
