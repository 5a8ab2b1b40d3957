#include "ree/models/safetensors_source.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <nlohmann/json.hpp>

#include "ree/core/file.h"
#include "ree/core/json_guard.h"
#include "ree/core/text.h"

namespace ree::models {
namespace {

using Json = nlohmann::json;

// True when something (of any type) is at `path`, so that a directory or FIFO named like a
// weights file gets its real cause from the reader rather than "does not exist".
bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

bool isDirectory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// A shard name must stay inside the model directory.
bool isPlainFileName(const std::string& name) {
  return !name.empty() && name.size() <= kMaxShardNameBytes && name != "." && name != ".." &&
         name.find('/') == std::string::npos && name.find('\0') == std::string::npos;
}

std::string baseName(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Reads, guards and parses the index file (regular file, bounded, no repeated keys).
Status readIndex(const std::string& path, Json* index) {
  const std::string shown = printableText(path, 400);
  std::string text;
  REE_RETURN_IF_ERROR(readRegularFile(path, kMaxIndexBytes, "index file", &text));
  REE_RETURN_IF_ERROR(checkJsonText(text, "index file '" + shown + "'"));
  *index = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (index->is_discarded() || !index->is_object()) {
    return REE_FAIL(Status::kIoError, "index file '%s': not a valid JSON object", shown.c_str());
  }
  return Status::kSuccess;
}

// The index's "metadata" as strings: strings as they are, other values as their JSON text.
Status readIndexMetadata(const Json& index, const std::string& shown,
                         std::map<std::string, std::string>* out) {
  auto metadata = index.find("metadata");
  if (metadata == index.end() || metadata->is_null()) return Status::kSuccess;
  if (!metadata->is_object()) {
    return REE_FAIL(Status::kIoError, "index file '%s': field 'metadata' is not an object",
                    shown.c_str());
  }
  for (auto it = metadata->begin(); it != metadata->end(); ++it) {
    (*out)[it.key()] = it.value().is_string() ? it.value().get<std::string>() : it.value().dump();
  }
  return Status::kSuccess;
}

// Groups the weight_map's tensors by shard, checking every name against the limits.
Status readWeightMap(const Json& index, const std::string& shown,
                     std::map<std::string, std::vector<std::string>>* tensors_of_shard) {
  const char* f = shown.c_str();
  auto map_it = index.find("weight_map");
  if (map_it == index.end() || !map_it->is_object() || map_it->empty()) {
    return REE_FAIL(Status::kIoError,
                    "index file '%s': field 'weight_map' missing, not an object or empty", f);
  }
  for (auto it = map_it->begin(); it != map_it->end(); ++it) {
    if (it.key().size() > kMaxTensorNameBytes) {
      return REE_FAIL(Status::kIoError,
                      "index file '%s': field 'weight_map': tensor name '%s' of %zu bytes "
                      "exceeds the limit of %zu bytes",
                      f, printableText(it.key(), 60).c_str(), it.key().size(), kMaxTensorNameBytes);
    }
    if (!it.value().is_string() || !isPlainFileName(it.value().get<std::string>())) {
      return REE_FAIL(Status::kIoError,
                      "index file '%s': field 'weight_map.%s' is not a file name in the model "
                      "directory (at most %zu bytes, no '/')",
                      f, printableText(it.key()).c_str(), kMaxShardNameBytes);
    }
    auto& tensors = (*tensors_of_shard)[it.value().get<std::string>()];
    if (tensors.empty() && tensors_of_shard->size() > kMaxWeightFiles) {
      return REE_FAIL(Status::kIoError,
                      "index file '%s': field 'weight_map' names more than %zu shard files", f,
                      kMaxWeightFiles);
    }
    tensors.push_back(it.key());
  }
  return Status::kSuccess;
}

}  // namespace

Status SafetensorsSource::open(const std::string& path, std::unique_ptr<SafetensorsSource>* out) {
  REE_CHECK_ARG(out != nullptr, "SafetensorsSource::open: out is null");
  out->reset();
  const std::string shown = printableText(path, 400);
  std::unique_ptr<SafetensorsSource> source(new SafetensorsSource());
  source->path_ = path;
  if (!isDirectory(path)) {
    // A single file: SafetensorsFile::open names a FIFO, a device or a missing file as such.
    size_t slash = path.rfind('/');
    source->directory_ = slash == std::string::npos ? "." : path.substr(0, slash);
    REE_RETURN_IF_ERROR(source->openSingle(path));
  } else {
    source->directory_ = path;
    if (exists(path + "/" + kSafetensorsSingleFile)) {
      REE_RETURN_IF_ERROR(source->openSingle(path + "/" + kSafetensorsSingleFile));
    } else if (exists(path + "/" + kSafetensorsIndexFile)) {
      REE_RETURN_IF_ERROR(source->openIndex(path + "/" + kSafetensorsIndexFile));
    } else {
      return REE_FAIL(Status::kIoError, "checkpoint '%s': neither %s nor %s exists", shown.c_str(),
                      kSafetensorsSingleFile, kSafetensorsIndexFile);
    }
  }
  std::sort(source->names_.begin(), source->names_.end());
  source->names_of_shard_.resize(source->shard_files_.size());
  for (size_t i = 0; i < source->names_.size(); ++i) {
    source->names_of_shard_[source->shard_of_.at(source->names_[i])].push_back(i);
  }
  source->shards_.resize(source->shard_files_.size());
  *out = std::move(source);
  return Status::kSuccess;
}

Status SafetensorsSource::openSingle(const std::string& file_path) {
  std::unique_ptr<SafetensorsFile> file;
  REE_RETURN_IF_ERROR(SafetensorsFile::open(file_path, &file));
  shard_files_.push_back(baseName(file_path));
  for (const TensorInfo& info : file->tensors()) {
    names_.push_back(info.name);
    shard_of_.emplace(info.name, 0);
  }
  shards_.push_back(std::move(file));  // open() resizes shards_ to one: this one stays
  return Status::kSuccess;
}

Status SafetensorsSource::openIndex(const std::string& index_path) {
  const std::string shown = printableText(index_path, 400);
  sharded_ = true;
  std::map<std::string, std::vector<std::string>> tensors_of_shard;
  try {
    Json index;
    REE_RETURN_IF_ERROR(readIndex(index_path, &index));
    REE_RETURN_IF_ERROR(readIndexMetadata(index, shown, &index_metadata_));
    REE_RETURN_IF_ERROR(readWeightMap(index, shown, &tensors_of_shard));
  } catch (const std::exception& e) {
    return REE_FAIL(Status::kIoError, "index file '%s': %s", shown.c_str(), e.what());
  }
  for (const auto& [shard, tensors] : tensors_of_shard) {
    const std::string shard_path = directory_ + "/" + shard;
    struct stat st {};
    if (::stat(shard_path.c_str(), &st) != 0) {
      return REE_FAIL(Status::kIoError,
                      "index file '%s': shard '%s' (holding tensor '%s') is missing: %s",
                      shown.c_str(), printableText(shard).c_str(),
                      printableText(tensors.front()).c_str(), std::strerror(errno));
    }
    // A directory or FIFO in the shard's place: the real cause, with the index that names it.
    REE_RETURN_IF_ERROR(statRegularFile(shard_path, "shard file", nullptr));
    size_t shard_index = shard_files_.size();
    shard_files_.push_back(shard);
    for (const std::string& name : tensors) {
      shard_of_.emplace(name, shard_index);
      names_.push_back(name);
    }
  }
  return Status::kSuccess;
}

Status SafetensorsSource::fileOf(const std::string& name, std::string* file) const {
  REE_CHECK_ARG(file != nullptr, "SafetensorsSource::fileOf: file is null");
  auto it = shard_of_.find(name);
  if (it == shard_of_.end()) {
    return REE_FAIL(Status::kInvalidArgument, "checkpoint '%s': no tensor '%s'",
                    printableText(path_, 400).c_str(), printableText(name).c_str());
  }
  *file = shard_files_[it->second];
  return Status::kSuccess;
}

Status SafetensorsSource::shardFile(size_t shard, const SafetensorsFile** out) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!shards_[shard]) {
    std::unique_ptr<SafetensorsFile> file;
    REE_RETURN_IF_ERROR(SafetensorsFile::open(directory_ + "/" + shard_files_[shard], &file));
    // The index must not promise tensors the shard lacks.
    for (size_t name_index : names_of_shard_[shard]) {
      const std::string& name = names_[name_index];
      if (file->find(name) == nullptr) {
        return REE_FAIL(Status::kIoError,
                        "checkpoint '%s': index puts tensor '%s' in shard '%s', which lacks it",
                        printableText(path_, 400).c_str(), printableText(name).c_str(),
                        printableText(shard_files_[shard]).c_str());
      }
    }
    shards_[shard] = std::move(file);
  }
  *out = shards_[shard].get();
  return Status::kSuccess;
}

Status SafetensorsSource::lookup(const std::string& name, const SafetensorsFile** file) const {
  auto it = shard_of_.find(name);
  if (it == shard_of_.end()) {
    return REE_FAIL(Status::kInvalidArgument, "checkpoint '%s': no tensor '%s'",
                    printableText(path_, 400).c_str(), printableText(name).c_str());
  }
  return shardFile(it->second, file);
}

Status SafetensorsSource::info(const std::string& name, TensorInfo* out) const {
  REE_CHECK_ARG(out != nullptr, "SafetensorsSource::info: out is null");
  const SafetensorsFile* file = nullptr;
  REE_RETURN_IF_ERROR(lookup(name, &file));
  *out = *file->find(name);  // shardFile() checked that it is there
  return Status::kSuccess;
}

Status SafetensorsSource::bytes(const std::string& name, TensorView* out) const {
  REE_CHECK_ARG(out != nullptr, "SafetensorsSource::bytes: out is null");
  const SafetensorsFile* file = nullptr;
  REE_RETURN_IF_ERROR(lookup(name, &file));
  return file->bytes(name, out);
}

std::map<std::string, std::string> SafetensorsSource::metadata() const {
  if (sharded_) return index_metadata_;
  return shards_[0]->metadata();
}

size_t SafetensorsSource::mappedFileCount() const {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t count = 0;
  for (const auto& shard : shards_)
    count += shard ? 1 : 0;
  return count;
}

}  // namespace ree::models
