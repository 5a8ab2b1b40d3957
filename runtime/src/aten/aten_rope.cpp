// Rotary embedding of the ATen sets: LlamaRotaryEmbedding and apply_rotary_pos_emb of transformers,
// op for op; the cos/sin tables of a step are computed once and shared by every layer.
#if defined(REE_WITH_TORCH)

#include <cmath>

#include "aten_operation_set.h"

namespace ree {
namespace aten_ops {

// ---- rotary embedding ---------------------------------------------------------------------------

namespace {

bool sameRopeSpec(const RopeSpec& a, const RopeSpec& b) {
  return a.rotary_dim == b.rotary_dim && a.theta == b.theta && a.llama3 == b.llama3 &&
         a.llama3_factor == b.llama3_factor &&
         a.llama3_low_freq_factor == b.llama3_low_freq_factor &&
         a.llama3_high_freq_factor == b.llama3_high_freq_factor &&
         a.llama3_original_max_positions == b.llama3_original_max_positions;
}

}  // namespace

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

void AtenOperationSet::computeRopeTables(const at::Tensor& positions, const RopeSpec& spec,
                                         at::ScalarType dtype, RopeTables* tables) {
  const int64_t tokens = positions.size(0);
  at::Tensor inv_freq = inverseFrequencies(spec);
  // LlamaRotaryEmbedding.forward: freqs = position_ids[..., None].float() * inv_freq, cos/sin in
  // fp32 (attention_scaling is 1 for default and llama3 rope), then cast to x's dtype.
  at::Tensor freqs = positions.to(at::kFloat).unsqueeze(-1) * inv_freq;
  // Half-split: emb = cat(freqs, freqs); interleaved: each frequency twice in a row (GPT-J's
  // repeat_interleave(2), written as expand so it is a pure copy on every device).
  at::Tensor emb = spec.interleaved
                       ? freqs.unsqueeze(-1).expand({tokens, spec.rotary_dim / 2, 2}).flatten(-2)
                       : at::cat({freqs, freqs}, -1);
  tables->cos_sin = {emb.cos().to(dtype).unsqueeze(1),  // [tokens, 1, rotary_dim]
                     emb.sin().to(dtype).unsqueeze(1)};
  if (fusesOnCuda()) {
    // sin with rotate_half's signs folded in (negation is exact): -sin where rotate_half negates.
    const at::Tensor& sin = tables->cos_sin.second;
    if (spec.interleaved) {
      tables->sin_signed = sin.clone();
      tables->sin_signed.slice(-1, 0, spec.rotary_dim, 2).neg_();
    } else {
      const int64_t half = spec.rotary_dim / 2;
      tables->sin_signed = at::cat({sin.narrow(-1, 0, half).neg(), sin.narrow(-1, half, half)}, -1);
    }
  }
}

const std::pair<at::Tensor, at::Tensor>& AtenOperationSet::ropeTables(
    const std::vector<int32_t>& positions, const RopeSpec& spec, at::ScalarType dtype) {
  RopeTables& tables = rope_tables_;
  if (tables.valid && tables.dtype == dtype && tables.spec.interleaved == spec.interleaved &&
      sameRopeSpec(tables.spec, spec) && tables.positions == positions) {
    return tables.cos_sin;
  }
  computeRopeTables(positions_upload_.get(positions), spec, dtype, &tables);
  tables.positions = positions;
  tables.spec = spec;
  tables.dtype = dtype;
  tables.valid = true;
  return tables.cos_sin;
}

namespace {

// rotate_half(x) (or GPT-J's rotate_every_two when interleaved) as a new tensor.
at::Tensor turnedCopy(const at::Tensor& rotated, const RopeSpec& spec) {
  if (spec.interleaved) {
    // rotate_every_two: pairs (x[2i], x[2i+1]) -> (-x[2i+1], x[2i]).
    at::Tensor even = rotated.slice(-1, 0, spec.rotary_dim, 2);
    at::Tensor odd = rotated.slice(-1, 1, spec.rotary_dim, 2);
    return at::stack({-odd, even}, -1).flatten(-2);
  }
  // rotate_half: cat((-x2, x1)). The halves are concatenated first and the first one negated in
  // place: negation is exact, so these are the same bits with one temporary less.
  const int64_t half = spec.rotary_dim / 2;
  at::Tensor turned = at::cat({rotated.narrow(-1, half, half), rotated.narrow(-1, 0, half)}, -1);
  turned.narrow(-1, 0, half).neg_();
  return turned;
}

// rotate_half's permutation without its signs (those are in RopeTables::sin_signed).
at::Tensor turnedUnsigned(const at::Tensor& rotated, const RopeSpec& spec) {
  if (spec.interleaved) {
    at::Tensor even = rotated.slice(-1, 0, spec.rotary_dim, 2);
    at::Tensor odd = rotated.slice(-1, 1, spec.rotary_dim, 2);
    return at::stack({odd, even}, -1).flatten(-2);
  }
  const int64_t half = spec.rotary_dim / 2;
  return at::cat({rotated.narrow(-1, half, half), rotated.narrow(-1, 0, half)}, -1);
}

}  // namespace

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
  if (fusesOnCuda()) {
    // Three launches instead of five: x = x * cos, then x += turned * sin_signed (addcmul in
    // fp32, rounded once). Close to transformers, not its bits.
    return run("rope", [&] {
      // A bound step (bindStep) reads its tables from the fixed buffers a graph may record.
      const bool bound = boundRopeApplies(tokens, spec, scalarTypeOf(x.dtype()));
      const at::Tensor& cos =
          bound ? bound_.cos : ropeTables(positions, spec, scalarTypeOf(x.dtype())).first;
      const at::Tensor& sin_signed = bound ? bound_.sin_signed : rope_tables_.sin_signed;
      at::Tensor rotated = view(x).narrow(-1, 0, spec.rotary_dim);
      at::Tensor turned = turnedUnsigned(rotated, spec);
      rotated.mul_(cos.narrow(0, 0, tokens)).addcmul_(turned, sin_signed.narrow(0, 0, tokens));
    });
  }
  return run("rope", [&] {
    const auto& [cos, sin] = ropeTables(positions, spec, scalarTypeOf(x.dtype()));
    at::Tensor rotated = view(x).narrow(-1, 0, spec.rotary_dim);
    at::Tensor turned = turnedCopy(rotated, spec);
    // apply_rotary_pos_emb: (q * cos) + (rotate_half(q) * sin), every op in x's dtype. The
    // second product runs in place on the fresh turned copy, and the sum of a whole head goes
    // straight into x: the same kernels and bits as computing it into a temporary and copying
    // it back. A partial rotation keeps the temporary: ATen's CPU loops for a strided output
    // encode a bf16 NaN differently from its vectorised ones, which transformers' sum takes.
    at::Tensor cos_term = rotated * cos;
    turned.mul_(sin);
    if (rotated.is_contiguous()) {
      at::add_out(rotated, cos_term, turned);
    } else {
      rotated.copy_(cos_term + turned);
    }
  });
}

}  // namespace aten_ops
}  // namespace ree

#endif  // REE_WITH_TORCH
