// A Hugging Face model directory's safetensors weights as a WeightSource: one model.safetensors,
// or shards listed by model.safetensors.index.json ({"metadata": {...}, "weight_map": {tensor:
// shard file}}).
//
// Shards are mapped lazily: open() reads the index (and checks that every shard it names is a
// regular file), and a shard is mapped and validated (SafetensorsFile::open) the first time one of
// its tensors is asked for; the index must not promise a tensor its shard lacks. A pipeline stage
// that asks only for its layers therefore maps only the shards holding them.
//
// Only regular files are read: a directory, FIFO or device named model.safetensors, as the index
// or as a shard is refused with its real cause, and nothing blocks. The index is read whole up to
// kMaxIndexBytes, checked by ree/core/json_guard.h (no repeated keys; linear time) and then parsed;
// tensor names are at most kMaxTensorNameBytes, shard names plain file names (no '/') of at most
// kMaxShardNameBytes, and at most kMaxWeightFiles shards.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ree/core/status.h"
#include "ree/models/safetensors.h"
#include "ree/models/weight_source.h"

namespace ree::models {

inline constexpr const char* kSafetensorsSingleFile = "model.safetensors";
inline constexpr const char* kSafetensorsIndexFile = "model.safetensors.index.json";
// The index of a 400B-parameter model is a few megabytes.
inline constexpr uint64_t kMaxIndexBytes = uint64_t{64} << 20;
inline constexpr size_t kMaxShardNameBytes = 255;  // NAME_MAX

class SafetensorsSource final : public WeightSource {
 public:
  // `path`: a model directory (model.safetensors preferred over the index, as transformers does),
  // or a single .safetensors file.
  static Status open(const std::string& path, std::unique_ptr<SafetensorsSource>* out);

  SafetensorsSource(const SafetensorsSource&) = delete;
  SafetensorsSource& operator=(const SafetensorsSource&) = delete;

  bool sharded() const { return sharded_; }

  const char* formatName() const override { return "safetensors"; }
  const std::string& path() const override { return path_; }
  const std::string& directory() const override { return directory_; }
  const std::vector<std::string>& files() const override { return shard_files_; }
  Status fileOf(const std::string& name, std::string* file) const override;
  const std::vector<std::string>& tensorNames() const override { return names_; }
  bool contains(const std::string& name) const override { return shard_of_.count(name) != 0; }
  Status info(const std::string& name, TensorInfo* out) const override;
  Status bytes(const std::string& name, TensorView* out) const override;
  std::map<std::string, std::string> metadata() const override;
  size_t mappedFileCount() const override;

 private:
  SafetensorsSource() = default;
  Status openSingle(const std::string& file_path);
  Status openIndex(const std::string& index_path);
  Status shardFile(size_t shard, const SafetensorsFile** out) const;
  Status lookup(const std::string& name, const SafetensorsFile** file) const;

  std::string path_;
  std::string directory_;
  bool sharded_ = false;
  std::vector<std::string> names_;
  std::vector<std::string> shard_files_;
  std::map<std::string, size_t> shard_of_;           // tensor name -> index in shard_files_
  std::vector<std::vector<size_t>> names_of_shard_;  // indexes in names_, per shard
  std::map<std::string, std::string> index_metadata_;
  mutable std::mutex mutex_;
  mutable std::vector<std::unique_ptr<SafetensorsFile>> shards_;  // mapped on demand
};

}  // namespace ree::models
