// The ATen operation sets' class (aten_ops.cpp: factory, embedding, norms, linear, activations;
// aten_rope.cpp; aten_attention.cpp) and the ATen mode it runs each call in. Internal header
// of runtime/src/aten/ (LibTorch types).
#pragma once

#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>
#include <c10/util/Exception.h>

#include <exception>
#include <memory>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "aten_uploads.h"
#include "aten_varlen_attention.h"
#include "ree/core/status.h"
#include "ree/runtime/operation_set.h"

namespace ree {
namespace aten_ops {

// Intra-op CPU threads of the deterministic set. ATen's CPU reductions and MKL/oneDNN GEMMs split
// work by thread count, so it must be fixed for run-to-run identical bits; 1 is the one value that
// every machine can honour and that makes the partitioning independent of the host.
constexpr int kDeterministicCpuThreads = 1;

inline at::ScalarType scalarTypeOf(DType dtype) {
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
inline std::string shapeString(const std::vector<int64_t>& shape) {
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

// Graph capture state of a CUDA ATen set (aten_graphs.cpp).
struct GraphRecorder;

// FlashAttention's max_seqlen_k for a step whose longest sequence has `max_k` positions, in a cache
// of `max_len` per sequence: rounded up to a power of two (at least 256, at most max_len), so that
// a recorded graph serves a step whose lengths grew within the same bucket. It picks the kernel's
// KV split, so every call uses it, recorded or not: the same bits either way.
int64_t flashKvLengthBucket(int64_t max_k, int64_t max_len);

class AtenOperationSet final : public OperationSet {
 public:
  AtenOperationSet(OperationSetKind kind, Device device);
  ~AtenOperationSet() override;

  OperationSetKind kind() const override { return kind_; }
  Device device() const override { return device_; }
  // Activations and caches stay in the model's dtype, as in a transformers run.
  DType activationDType(DType weight_dtype) const override { return weight_dtype; }
  DType kvCacheDType(DType weight_dtype) const override { return weight_dtype; }

  Status embedding(const std::vector<int32_t>& ids, const Tensor& table, Tensor& out) override;
  bool embedsDeviceIds(const Tensor& table) const override;
  Status embeddingOfDeviceIds(const int32_t* ids, int64_t count, const Tensor& table,
                              Tensor& out) override;
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
  Status copyColumns(const Tensor& src, int64_t col_begin, Tensor& dst) override;
  // aten_graphs.cpp: CUDA sets in a build with CUDA.
  bool capturesGraphs() const override;
  // aten_bound_step.cpp: the default set on CUDA with FlashAttention varlen.
  bool bindsSteps() const override { return fusesOnCuda() && !varlen_failed_; }
  Status bindStep(const StepBatch& batch, const RopeSpec* rope, const LayerKvCache& cache,
                  uint64_t* shape_key) override;
  void unbindStep() override;
  Status beginGraphCapture() override;
  Status endGraphCapture(std::unique_ptr<OperationGraph>* out) override;

 private:
  // Runs `body` in this set's mode; every exception becomes a Status naming the operator.
  template <typename Body>
  Status run(const char* op, Body&& body);

  // Checks that `t` is a usable tensor of this set: defined, on its device.
  Status checkTensor(const char* op, const char* name, const Tensor& t) const;

  // Zero-copy ATen view of `t` (same dtype, shape and device). The device is given, not looked
  // up: plain from_blob asks the driver which device owns the pointer (cudaPointerGetAttributes)
  // for every view, dozens per layer, which cost more host time than the decode step's kernels.
  at::Tensor view(const Tensor& t) const { return view(t, t.shape()); }
  // The same with another shape of t's element count (ree::Tensor is dense), in one step rather
  // than through ATen's view().
  at::Tensor view(const Tensor& t, at::IntArrayRef shape) const {
    return at::for_blob(t.data(), shape)
        .options(at::TensorOptions().dtype(scalarTypeOf(t.dtype())).device(aten_device_))
        .target_device(aten_device_)
        .make_tensor();
  }

  // Whether an operator takes its fused CUDA form: the default set on a GPU, where a decode step
  // is bound by the host's cost per kernel launch. The deterministic set and every CPU run keep
  // transformers' expressions and bits (docs/operation-sets.md).
  bool fusesOnCuda() const { return kind_ == OperationSetKind::kDefault && device_.isCuda(); }
  // Inverse frequencies of `spec` (fp32, on this set's device), cached for the last spec.
  at::Tensor inverseFrequencies(const RopeSpec& spec);
  // cos and sin [tokens, 1, rotary_dim] in `dtype` for these positions: computed by the first
  // rope call of a step and reused by the others (q and k of every layer share them).
  const std::pair<at::Tensor, at::Tensor>& ropeTables(const std::vector<int32_t>& positions,
                                                      const RopeSpec& spec, at::ScalarType dtype);
  struct RopeTables;
  // cos, sin and (fusesOnCuda) sin_signed of the int32 `positions` on the device.
  void computeRopeTables(const at::Tensor& positions, const RopeSpec& spec, at::ScalarType dtype,
                         RopeTables* tables);
  // Whether rope reads the bound step's tables (bindStep) for x of `tokens` rows.
  bool boundRopeApplies(int64_t tokens, const RopeSpec& spec, at::ScalarType dtype) const;
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
  aten_ops::VarlenRows varlen_rows_;
  struct RopeTables {
    bool valid = false;
    std::vector<int32_t> positions;
    RopeSpec spec;
    at::ScalarType dtype = at::kFloat;
    std::pair<at::Tensor, at::Tensor> cos_sin;
    at::Tensor sin_signed;  // fusesOnCuda(): sin with rotate_half's signs
  } rope_tables_;
  // The step bound by bindStep: its metadata in device buffers at fixed addresses (allocated
  // once, for up to kBoundTokens tokens), which rope and attention read until unbindStep.
  static constexpr int64_t kBoundTokens = 256;
  struct BoundStep {
    bool active = false;
    int64_t tokens = 0;
    // int32: positions [kBoundTokens] then the varlen layout's packed vector.
    at::Tensor metadata;
    at::Tensor rows;                // int64 [kBoundTokens]: the cache rows of the new tokens
    aten_ops::VarlenLayout layout;  // host copy, its packed vector on the device in `metadata`
    bool has_rope = false;
    RopeSpec spec;
    at::ScalarType dtype = at::kFloat;
    at::Tensor cos, sin_signed;  // [kBoundTokens, 1, rotary_dim]
  } bound_;
  bool varlen_failed_ = false;
  std::unique_ptr<GraphRecorder> recorder_;
};

template <typename Body>
Status AtenOperationSet::run(const char* op, Body&& body) {
  try {
    c10::InferenceMode inference;
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

}  // namespace aten_ops
}  // namespace ree
