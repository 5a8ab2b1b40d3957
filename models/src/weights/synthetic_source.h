// Weights without files (Checkpoint::synthetic): every tensor a config expects, with values that
// depend only on (seed, tensor name, element index), generated when first asked for.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ree/models/model_config.h"
#include "ree/models/weight_source.h"

namespace ree::models {

class SyntheticSource final : public WeightSource {
 public:
  SyntheticSource(const ModelConfig& config, uint64_t seed);

  uint64_t seed() const { return seed_; }
  // Frees the generated values; later views regenerate them.
  void release() const;

  const char* formatName() const override { return "synthetic"; }
  const std::string& path() const override { return path_; }
  const std::string& directory() const override { return directory_; }
  const std::vector<std::string>& files() const override { return files_; }
  Status fileOf(const std::string& name, std::string* file) const override;
  const std::vector<std::string>& tensorNames() const override { return names_; }
  bool contains(const std::string& name) const override { return infos_.count(name) != 0; }
  Status info(const std::string& name, TensorInfo* out) const override;
  Status bytes(const std::string& name, TensorView* out) const override;
  std::map<std::string, std::string> metadata() const override { return {}; }
  size_t mappedFileCount() const override { return 0; }

 private:
  std::string path_;
  std::string directory_;
  std::vector<std::string> files_;
  uint64_t seed_ = 0;
  std::vector<std::string> names_;
  std::map<std::string, TensorInfo> infos_;
  mutable std::mutex mutex_;
  mutable std::map<std::string, std::vector<uint8_t>> data_;
};

}  // namespace ree::models
