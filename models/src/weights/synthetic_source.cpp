#include "synthetic_source.h"

#include <algorithm>

#include "ree/core/parallel.h"
#include "ree/core/text.h"
#include "ree/kernels/numeric.h"
#include "ree/models/checkpoint.h"

namespace ree::models {
namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t nameHash(const std::string& name) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : name)
    h = (h ^ c) * 1099511628211ull;
  return h;
}

// Fills `bytes` with the synthetic values of tensor `info` (see Checkpoint::synthetic).
void generateSynthetic(const TensorInfo& info, uint64_t seed, std::vector<uint8_t>* bytes) {
  bytes->resize(info.bytes());
  const int64_t n = info.numel();
  const bool is_bias =
      info.name.size() > 5 && info.name.compare(info.name.size() - 5, 5, ".bias") == 0;
  float constant = info.shape.size() == 1 ? (is_bias ? 0.0f : 1.0f) : -1.0f;
  // Linear weights are [out, in] (GPT-2's Conv1D: [in, out]); either way +-1/sqrt(fan-in) keeps
  // activations of any depth in range.
  int64_t fan_in = info.shape.size() == 2 ? (info.name.rfind("transformer.", 0) == 0 &&
                                                     info.name.find(".h.") != std::string::npos
                                                 ? info.shape[0]
                                                 : info.shape[1])
                                          : 1;
  float scale = 1.0f;
  while (scale * scale * static_cast<float>(fan_in) > 1.0f)
    scale *= 0.5f;  // a power of two near 1/sqrt(fan_in): exact, no libm
  const uint64_t key = splitmix64(seed ^ nameHash(info.name));
  uint8_t* out = bytes->data();
  const DType dtype = info.dtype;
  parallelFor(n, 1 << 16, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      float value = constant;
      if (constant < 0.0f) {
        // 24 random bits -> uniform in [-1, 1) exactly representable in fp32.
        uint64_t r = splitmix64(key + static_cast<uint64_t>(i)) >> 40;
        value = (static_cast<float>(r) * (1.0f / 8388608.0f) - 1.0f) * scale;
      }
      if (dtype == DType::kBF16) {
        reinterpret_cast<bf16_t*>(out)[i] = toBF16(value);
      } else if (dtype == DType::kF16) {
        reinterpret_cast<f16_t*>(out)[i] = toF16(value);
      } else {
        reinterpret_cast<float*>(out)[i] = value;
      }
    }
  });
}

}  // namespace

SyntheticSource::SyntheticSource(const ModelConfig& config, uint64_t seed) : seed_(seed) {
  path_ = "synthetic:" + std::to_string(seed);
  directory_ = path_;
  files_ = {path_};
  DType dtype = config.dtype ? *config.dtype : DType::kBF16;
  std::string prefix = config.architecture == Architecture::kGpt2 ? "transformer." : "model.";
  for (const ExpectedTensor& tensor : expectedTensors(config, prefix)) {
    TensorInfo info;
    info.name = tensor.name;
    info.dtype = dtype;
    info.shape = tensor.shape;
    uint64_t numel = 1;
    for (int64_t d : tensor.shape)
      numel *= static_cast<uint64_t>(d);
    info.data_begin = 0;
    info.data_end = numel * dtypeSize(dtype);
    infos_[tensor.name] = info;
    names_.push_back(tensor.name);
  }
  std::sort(names_.begin(), names_.end());
}

void SyntheticSource::release() const {
  std::lock_guard<std::mutex> lock(mutex_);
  data_.clear();
}

Status SyntheticSource::fileOf(const std::string& name, std::string* file) const {
  REE_CHECK_ARG(file != nullptr, "SyntheticSource::fileOf: file is null");
  if (!contains(name)) {
    return REE_FAIL(Status::kInvalidArgument, "checkpoint '%s': no tensor '%s'", path_.c_str(),
                    printableText(name).c_str());
  }
  *file = path_;
  return Status::kSuccess;
}

Status SyntheticSource::info(const std::string& name, TensorInfo* out) const {
  REE_CHECK_ARG(out != nullptr, "SyntheticSource::info: out is null");
  auto it = infos_.find(name);
  if (it == infos_.end()) {
    return REE_FAIL(Status::kInvalidArgument, "checkpoint '%s': no tensor '%s'", path_.c_str(),
                    printableText(name).c_str());
  }
  *out = it->second;
  return Status::kSuccess;
}

Status SyntheticSource::bytes(const std::string& name, TensorView* out) const {
  REE_CHECK_ARG(out != nullptr, "SyntheticSource::bytes: out is null");
  TensorInfo tensor;
  REE_RETURN_IF_ERROR(info(name, &tensor));
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<uint8_t>& bytes = data_[name];
  if (bytes.size() != tensor.bytes()) generateSynthetic(tensor, seed_, &bytes);
  *out = TensorView{bytes.empty() ? nullptr : bytes.data(), tensor.dtype, tensor.shape,
                    tensor.bytes()};
  return Status::kSuccess;
}

}  // namespace ree::models
