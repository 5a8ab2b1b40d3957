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

#include "aten_operation_set.h"
#include "aten_ops.h"
#include "ree/core/log.h"

namespace ree {
namespace aten_ops {

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

// A GPU set gathers rows by ids that the device selected (decode lookahead): index_select reads
// them where they are, ordered after the kernel that wrote them (both on the legacy stream).
bool AtenOperationSet::embedsDeviceIds(const Tensor& table) const {
  return device_.isCuda() && table.device() == device_ && table.rank() == 2;
}

Status AtenOperationSet::embeddingOfDeviceIds(const int32_t* ids, int64_t count,
                                              const Tensor& table, Tensor& out) {
  REE_CHECK_ARG(embedsDeviceIds(table), "embeddingOfDeviceIds: table %s on the %s set on %s",
                table.describe().c_str(), name(), device_.str().c_str());
  REE_RETURN_IF_ERROR(checkTensor("embeddingOfDeviceIds", "out", out));
  REE_CHECK_ARG(ids != nullptr && count >= 0 && out.rank() == 2 && out.dim(0) == count &&
                    out.dim(1) == table.dim(1) && out.dtype() == table.dtype(),
                "embeddingOfDeviceIds: %lld ids into out %s from table %s",
                static_cast<long long>(count), out.describe().c_str(), table.describe().c_str());
  if (count == 0) return Status::kSuccess;
  return run("embeddingOfDeviceIds", [&] {
    at::Tensor index = at::for_blob(const_cast<int32_t*>(ids), {count})
                           .options(at::TensorOptions().dtype(at::kInt).device(aten_device_))
                           .target_device(aten_device_)
                           .make_tensor();
    at::Tensor result = view(out);
    at::index_select_out(result, view(table), 0, index);
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
  if (fusesOnCuda() && weight.dtype() == x.dtype()) {
    // LibTorch's fused RMSNorm kernel (x * rsqrt(mean(x^2) + eps) * weight in fp32, rounded
    // once): one launch and a copy instead of seven, since a batch-1 decode step is bound by the
    // host's cost per launch. Close to transformers, not its bits (docs/operation-sets.md).
    return run("rmsNorm", [&] {
      view(out).copy_(at::rms_norm(view(x), {x.dim(-1)}, view(weight), static_cast<double>(eps)));
    });
  }
  return run("rmsNorm", [&] {
    // transformers' LlamaRMSNorm.forward with its bits, in fewer launches and temporaries:
    //   hidden = x.to(float32); variance = hidden.pow(2).mean(-1, keepdim=True)
    //   hidden = hidden * torch.rsqrt(variance + eps); weight * hidden.to(x.dtype)
    // `+ eps` and rsqrt run in place on the fresh variance (the same kernels). The product and
    // its cast to x's dtype are one mul into a tensor of x's dtype: the product is computed in
    // fp32 and rounded to nearest even on store, as the separate copy kernel rounds it.
    at::Tensor input = view(x);
    at::Tensor hidden = input.to(at::kFloat);
    at::Tensor variance = hidden.pow(2).mean(-1, /*keepdim=*/true);
    variance.add_(static_cast<double>(eps)).rsqrt_();
    at::Tensor normalized = at::empty_like(input);
    at::mul_out(normalized, hidden, variance);
    at::Tensor result = view(out);
    at::mul_out(result, view(weight), normalized);
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
    at::Tensor result = view(out, {rows, n});
    if (out.dtype() == x.dtype()) {
      at::linear_out(result, view(x, {rows, k}), view(weight), aten_bias);
    } else {
      result.copy_(at::linear(view(x, {rows, k}), view(weight), aten_bias));
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
  if (fusesOnCuda() && bias == nullptr) {
    // acc += x w^T as one cuBLAS GEMM with beta = 1 (the product is added in fp32 and rounded
    // once): one launch, no temporary. Close to transformers, not its bits.
    return run("linearAccumulate", [&] {
      view(acc, {rows, weight.dim(0)}).addmm_(view(x, {rows, weight.dim(1)}), view(weight).t());
    });
  }
  return run("linearAccumulate", [&] {
    std::optional<at::Tensor> aten_bias;
    if (bias != nullptr) aten_bias = view(*bias);
    at::Tensor product = at::linear(view(x, {rows, weight.dim(1)}), view(weight), aten_bias);
    view(acc, {rows, weight.dim(0)}).add_(product);
  });
}

// ---- activations --------------------------------------------------------------------------------

namespace {

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

void applyActivationOut(ActivationKind act, const at::Tensor& x, at::Tensor& out) {
  switch (act) {
    case ActivationKind::kSilu:
      at::silu_out(out, x);
      return;
    case ActivationKind::kGeluTanh:
      at::gelu_out(out, x, "tanh");
      return;
    case ActivationKind::kGeluErf:
      at::gelu_out(out, x, "none");
      return;
  }
  throw std::invalid_argument("unknown activation kind " + std::to_string(static_cast<int>(act)));
}

// Whether the bytes of a and b overlap.
bool overlaps(const Tensor& a, const Tensor& b) {
  const char* a_begin = static_cast<const char*>(a.data());
  const char* b_begin = static_cast<const char*>(b.data());
  return a_begin < b_begin + b.nbytes() && b_begin < a_begin + a.nbytes();
}

bool knownActivation(ActivationKind act) {
  return act == ActivationKind::kSilu || act == ActivationKind::kGeluTanh ||
         act == ActivationKind::kGeluErf;
}

}  // namespace

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
    // LlamaMLP: act_fn(gate_proj(x)) * up_proj(x), both ops in the activations' dtype. The
    // activation goes straight into out unless out overlaps an input (then to a temporary).
    at::Tensor result = view(out);
    if (overlaps(out, gate) || overlaps(out, up)) {
      at::mul_out(result, applyActivation(act, view(gate)), view(up));
      return;
    }
    applyActivationOut(act, view(gate), result);
    at::mul_out(result, result, view(up));
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
    applyActivationOut(act, view(x), result);
  });
}

// On the current stream, as the set's operators: a graph capture records it with them.
Status AtenOperationSet::copyColumns(const Tensor& src, int64_t col_begin, Tensor& dst) {
  REE_RETURN_IF_ERROR(checkTensor("copyColumns", "src", src));
  REE_RETURN_IF_ERROR(checkTensor("copyColumns", "dst", dst));
  REE_CHECK_ARG(
      src.rank() == 2 && dst.rank() == 2 && src.dtype() == dst.dtype() &&
          src.dim(0) == dst.dim(0) && col_begin >= 0 && col_begin + dst.dim(1) <= src.dim(1),
      "copyColumns: columns [%lld, +%lld) of %s into %s", static_cast<long long>(col_begin),
      static_cast<long long>(dst.rank() == 2 ? dst.dim(1) : -1), src.describe().c_str(),
      dst.describe().c_str());
  if (dst.numel() == 0) return Status::kSuccess;
  return run("copyColumns", [&] { view(dst).copy_(view(src).narrow(1, col_begin, dst.dim(1))); });
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

}  // namespace aten_ops

using aten_ops::AtenOperationSet;
using aten_ops::kDeterministicCpuThreads;

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
