// The ATen baseline of bench/cuda/attention_bench.cu (see aten_sdpa.h). GQA through SDPA's
// enable_gqa, so ATen reads each KV head once, as our kernel does; no mask beyond is_causal for
// prefill; decode queries see every key. Contiguous [batch, heads, len, head_dim] K/V, which is
// ATen's most favourable layout (our kernel reads a paged cache).
#include "aten_sdpa.h"

#include <ATen/ATen.h>
#include <ATen/SDPBackend.h>

#include <cmath>
#include <exception>
#include <vector>

namespace bench {
namespace {

std::string firstLine(const char* text) {
  std::string s(text);
  const size_t end = s.find('\n');
  return end == std::string::npos ? s : s.substr(0, end);
}

class AtenSdpaImpl final : public AtenSdpa {
 public:
  explicit AtenSdpaImpl(const AtenSdpaShape& shape) : shape_(shape) {
    const auto options = at::TensorOptions().dtype(at::kBFloat16).device(at::kCUDA, 0);
    q_ = at::randn({shape.batch, shape.n_heads, shape.q_len, shape.head_dim}, options);
    for (int s = 0; s < shape.sets; ++s) {
      k_.push_back(
          at::randn({shape.batch, shape.n_kv_heads, shape.kv_len, shape.head_dim}, options));
      v_.push_back(
          at::randn({shape.batch, shape.n_kv_heads, shape.kv_len, shape.head_dim}, options));
    }
    scale_ = 1.0 / std::sqrt(static_cast<double>(shape.head_dim));
    causal_ = shape.q_len > 1;
  }

  bool run(int index, std::string* error) override {
    try {
      const int set = index % shape_.sets;
      out_ = at::scaled_dot_product_attention(q_, k_[set], v_[set], std::nullopt, 0.0, causal_,
                                              scale_, /*enable_gqa=*/true);
      return true;
    } catch (const std::exception& e) {
      *error = firstLine(e.what());
      return false;
    }
  }

  std::string backend() const override {
    try {
      const int64_t choice = at::_fused_sdp_choice(q_, k_[0], v_[0], std::nullopt, 0.0, causal_,
                                                   scale_, /*enable_gqa=*/true);
      switch (static_cast<at::SDPBackend>(choice)) {
        case at::SDPBackend::flash_attention:
          return "flash";
        case at::SDPBackend::efficient_attention:
          return "efficient";
        case at::SDPBackend::cudnn_attention:
          return "cudnn";
        case at::SDPBackend::math:
          return "math";
        default:
          return "other (" + std::to_string(choice) + ")";
      }
    } catch (const std::exception& e) {
      return "unknown (" + firstLine(e.what()) + ")";
    }
  }

 private:
  AtenSdpaShape shape_;
  at::Tensor q_, out_;
  std::vector<at::Tensor> k_, v_;
  double scale_ = 1.0;
  bool causal_ = false;
};

}  // namespace

std::unique_ptr<AtenSdpa> AtenSdpa::create(const AtenSdpaShape& shape, std::string* error) {
  try {
    return std::make_unique<AtenSdpaImpl>(shape);
  } catch (const std::exception& e) {
    *error = firstLine(e.what());
    return nullptr;
  }
}

}  // namespace bench
