#include "ree/models/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <limits>
#include <nlohmann/json.hpp>
#include <string_view>

#include "ree/core/file.h"
#include "ree/core/json_guard.h"

namespace ree::models {
namespace {

using Json = nlohmann::json;

// Dtypes of the safetensors format whose elements are smaller than a byte: known, not readable.
bool isSubByteDTypeName(const std::string& name) {
  return name == "F4" || name == "F6_E2M3" || name == "F6_E3M2";
}

// Nesting of a safetensors header: root object -> tensor object -> shape array.
constexpr size_t kMaxHeaderDepth = 3;

// Reads a non-negative JSON integer; `what` names it in the error.
Status readCount(const Json& value, const std::string& file, const std::string& tensor,
                 const char* what, uint64_t* out) {
  if (value.is_number_unsigned()) {
    *out = value.get<uint64_t>();
    return Status::kSuccess;
  }
  if (value.is_number_integer()) {
    return REE_FAIL(Status::kIoError, "safetensors file '%s': tensor '%s': %s is negative (%lld)",
                    file.c_str(), tensor.c_str(), what,
                    static_cast<long long>(value.get<int64_t>()));
  }
  return REE_FAIL(Status::kIoError,
                  "safetensors file '%s': tensor '%s': %s is not a non-negative integer (%s)",
                  file.c_str(), tensor.c_str(), what, printableText(value.dump(), 40).c_str());
}

Status parseTensorEntry(const std::string& file, const std::string& key, const Json& entry,
                        uint64_t data_bytes, TensorInfo* info) {
  const std::string name = printableText(key);
  const char* f = file.c_str();
  const char* n = name.c_str();
  if (key.size() > kMaxTensorNameBytes) {
    return REE_FAIL(Status::kIoError,
                    "safetensors file '%s': tensor '%s': name of %zu bytes exceeds the limit of "
                    "%zu bytes",
                    f, printableText(key, 60).c_str(), key.size(), kMaxTensorNameBytes);
  }
  if (!entry.is_object()) {
    return REE_FAIL(Status::kIoError, "safetensors file '%s': tensor '%s': entry is not an object",
                    f, n);
  }
  auto dtype_it = entry.find("dtype");
  auto shape_it = entry.find("shape");
  auto offsets_it = entry.find("data_offsets");
  if (dtype_it == entry.end() || !dtype_it->is_string()) {
    return REE_FAIL(Status::kIoError,
                    "safetensors file '%s': tensor '%s': field 'dtype' missing or not a string", f,
                    n);
  }
  if (shape_it == entry.end() || !shape_it->is_array()) {
    return REE_FAIL(Status::kIoError,
                    "safetensors file '%s': tensor '%s': field 'shape' missing or not an array", f,
                    n);
  }
  if (offsets_it == entry.end() || !offsets_it->is_array() || offsets_it->size() != 2) {
    return REE_FAIL(Status::kIoError,
                    "safetensors file '%s': tensor '%s': field 'data_offsets' missing or not an "
                    "array [begin, end]",
                    f, n);
  }
  if (shape_it->size() > kMaxTensorRank) {
    return REE_FAIL(Status::kIoError,
                    "safetensors file '%s': tensor '%s': field 'shape' has %zu axes, more than the "
                    "limit of %zu",
                    f, n, shape_it->size(), kMaxTensorRank);
  }
  const std::string& dtype_name = dtype_it->get_ref<const std::string&>();
  info->name = key;
  if (!parseDTypeName(dtype_name, &info->dtype)) {
    if (isSubByteDTypeName(dtype_name)) {
      return REE_FAIL(Status::kUnsupported,
                      "safetensors file '%s': tensor '%s': dtype %s is unsupported (sub-byte)", f,
                      n, dtype_name.c_str());
    }
    return REE_FAIL(Status::kIoError, "safetensors file '%s': tensor '%s': unknown dtype '%s'", f,
                    n, printableText(dtype_name, 40).c_str());
  }

  // Element count and byte size, with overflow checks (uint64 intermediate, result <= INT64_MAX).
  uint64_t numel = 1;
  info->shape.clear();
  for (size_t axis = 0; axis < shape_it->size(); ++axis) {
    uint64_t extent = 0;
    std::string what = "shape[" + std::to_string(axis) + "]";
    REE_RETURN_IF_ERROR(readCount((*shape_it)[axis], file, name, what.c_str(), &extent));
    if (extent > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
        __builtin_mul_overflow(numel, extent, &numel) ||
        numel > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return REE_FAIL(Status::kIoError,
                      "safetensors file '%s': tensor '%s': shape element count overflows", f, n);
    }
    info->shape.push_back(static_cast<int64_t>(extent));
  }
  uint64_t expected_bytes = 0;
  if (__builtin_mul_overflow(numel, static_cast<uint64_t>(dtypeSize(info->dtype)),
                             &expected_bytes)) {
    return REE_FAIL(Status::kIoError, "safetensors file '%s': tensor '%s': byte size overflows", f,
                    n);
  }

  REE_RETURN_IF_ERROR(
      readCount((*offsets_it)[0], file, name, "data_offsets[0]", &info->data_begin));
  REE_RETURN_IF_ERROR(readCount((*offsets_it)[1], file, name, "data_offsets[1]", &info->data_end));
  const auto begin = static_cast<unsigned long long>(info->data_begin);
  const auto end = static_cast<unsigned long long>(info->data_end);
  if (info->data_begin > info->data_end) {
    return REE_FAIL(
        Status::kIoError,
        "safetensors file '%s': tensor '%s': data_offsets [%llu, %llu] end before begin", f, n,
        begin, end);
  }
  if (info->data_end > data_bytes) {
    return REE_FAIL(Status::kIoError,
                    "safetensors file '%s': tensor '%s': data_offsets [%llu, %llu] exceed the data "
                    "section (%llu bytes)",
                    f, n, begin, end, static_cast<unsigned long long>(data_bytes));
  }
  if (info->data_end - info->data_begin != expected_bytes) {
    return REE_FAIL(Status::kIoError,
                    "safetensors file '%s': tensor '%s': data_offsets span %llu bytes but shape x "
                    "%s needs %llu",
                    f, n, end - begin, dtype_name.c_str(),
                    static_cast<unsigned long long>(expected_bytes));
  }
  return Status::kSuccess;
}

// Maps the regular file `path` read-only. A FIFO, a directory or a device is refused before it is
// opened (nothing blocks), and opened with O_NONBLOCK in case it was swapped in meanwhile.
Status mapRegularFile(const std::string& path, const std::string& shown, const void** mapping,
                      uint64_t* bytes) {
  const std::string what = "safetensors file";
  REE_RETURN_IF_ERROR(statRegularFile(path, what.c_str(), nullptr));
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    return REE_FAIL(Status::kIoError, "safetensors file '%s': cannot open: %s", shown.c_str(),
                    std::strerror(errno));
  }
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return REE_FAIL(Status::kIoError, "safetensors file '%s': not a regular file", shown.c_str());
  }
  const auto file_bytes = static_cast<uint64_t>(st.st_size);
  if (file_bytes < 8) {
    ::close(fd);
    return REE_FAIL(Status::kIoError,
                    "safetensors file '%s': truncated: %llu bytes, fewer than the 8-byte header "
                    "length",
                    shown.c_str(), static_cast<unsigned long long>(file_bytes));
  }
  void* mapped = mmap(nullptr, file_bytes, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);  // the mapping keeps its own reference to the file
  if (mapped == MAP_FAILED) {
    return REE_FAIL(Status::kIoError, "safetensors file '%s': mmap of %llu bytes failed: %s",
                    shown.c_str(), static_cast<unsigned long long>(file_bytes),
                    std::strerror(errno));
  }
  *mapping = mapped;
  *bytes = file_bytes;
  return Status::kSuccess;
}

// Reads the header length field and checks it against the limit and the file.
Status readHeaderLength(const unsigned char* mapping, uint64_t file_bytes, const char* f,
                        uint64_t* header_bytes) {
  uint64_t length = 0;
  for (int i = 7; i >= 0; --i)
    length = (length << 8) | mapping[i];
  if (length > kMaxSafetensorsHeaderBytes) {
    return REE_FAIL(Status::kIoError,
                    "safetensors file '%s': header length %llu exceeds the limit of %llu bytes", f,
                    static_cast<unsigned long long>(length),
                    static_cast<unsigned long long>(kMaxSafetensorsHeaderBytes));
  }
  if (length > file_bytes - 8) {
    return REE_FAIL(Status::kIoError,
                    "safetensors file '%s': header length %llu exceeds the file (%llu bytes after "
                    "the length field); truncated?",
                    f, static_cast<unsigned long long>(length),
                    static_cast<unsigned long long>(file_bytes - 8));
  }
  if (length < 2 || mapping[8] != '{') {
    return REE_FAIL(Status::kIoError, "safetensors file '%s': header does not start with '{'", f);
  }
  *header_bytes = length;
  return Status::kSuccess;
}

// Parses the header's JSON text into tensors and metadata. The guard runs first: it refuses
// repeated keys and deep nesting in linear time, so the plain parse that follows cannot keep a
// value another reader would not see.
Status parseHeader(const char* text, uint64_t length, const std::string& shown, uint64_t data_bytes,
                   std::vector<TensorInfo>* tensors, std::map<std::string, std::string>* metadata) {
  const char* f = shown.c_str();
  JsonGuardLimits limits;
  limits.max_depth = kMaxHeaderDepth;
  REE_RETURN_IF_ERROR(checkJsonText(std::string_view(text, length),
                                    "safetensors file '" + shown + "': header", limits));
  Json header = Json::parse(text, text + length, nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded() || !header.is_object()) {
    return REE_FAIL(Status::kIoError, "safetensors file '%s': header is not a valid JSON object",
                    f);
  }
  tensors->reserve(header.size());
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it.value().is_object()) {
        return REE_FAIL(Status::kIoError,
                        "safetensors file '%s': field '__metadata__' is not an object", f);
      }
      for (auto meta = it.value().begin(); meta != it.value().end(); ++meta) {
        if (!meta.value().is_string()) {
          return REE_FAIL(Status::kIoError,
                          "safetensors file '%s': field '__metadata__.%s' is not a string", f,
                          printableText(meta.key()).c_str());
        }
        (*metadata)[meta.key()] = meta.value().get<std::string>();
      }
      continue;
    }
    TensorInfo info;
    REE_RETURN_IF_ERROR(parseTensorEntry(shown, it.key(), it.value(), data_bytes, &info));
    tensors->push_back(std::move(info));
  }
  return Status::kSuccess;
}

// Sorts `tensors` into storage order and refuses two that share a byte (a tensor of zero bytes
// occupies nothing and may share its offset).
Status sortAndCheckOverlaps(std::vector<TensorInfo>* tensors, const char* f) {
  std::sort(tensors->begin(), tensors->end(), [](const TensorInfo& a, const TensorInfo& b) {
    if (a.data_begin != b.data_begin) return a.data_begin < b.data_begin;
    if (a.data_end != b.data_end) return a.data_end < b.data_end;
    return a.name < b.name;
  });
  const TensorInfo* previous = nullptr;  // the non-empty tensor ending last so far
  for (const TensorInfo& info : *tensors) {
    if (info.bytes() == 0) continue;
    if (previous != nullptr && info.data_begin < previous->data_end) {
      return REE_FAIL(
          Status::kIoError,
          "safetensors file '%s': tensor '%s' [%llu, %llu) overlaps tensor '%s' [%llu, "
          "%llu)",
          f, printableText(info.name).c_str(), static_cast<unsigned long long>(info.data_begin),
          static_cast<unsigned long long>(info.data_end), printableText(previous->name).c_str(),
          static_cast<unsigned long long>(previous->data_begin),
          static_cast<unsigned long long>(previous->data_end));
    }
    previous = &info;
  }
  return Status::kSuccess;
}

}  // namespace

SafetensorsFile::~SafetensorsFile() {
  if (mapping_ != nullptr) munmap(const_cast<unsigned char*>(mapping_), mapping_bytes_);
}

Status SafetensorsFile::open(const std::string& path, std::unique_ptr<SafetensorsFile>* out) {
  REE_CHECK_ARG(out != nullptr, "SafetensorsFile::open: out is null");
  out->reset();
  const std::string shown = printableText(path, 400);
  const char* f = shown.c_str();
  const void* mapped = nullptr;
  uint64_t file_bytes = 0;
  REE_RETURN_IF_ERROR(mapRegularFile(path, shown, &mapped, &file_bytes));
  // Owned from here on: the destructor unmaps on every error path.
  std::unique_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->path_ = path;
  file->mapping_ = static_cast<const unsigned char*>(mapped);
  file->mapping_bytes_ = file_bytes;

  uint64_t header_bytes = 0;
  REE_RETURN_IF_ERROR(readHeaderLength(file->mapping_, file_bytes, f, &header_bytes));
  file->header_bytes_ = header_bytes;
  file->data_ = file->mapping_ + 8 + header_bytes;
  const uint64_t data_bytes = file_bytes - 8 - header_bytes;
  try {
    REE_RETURN_IF_ERROR(parseHeader(reinterpret_cast<const char*>(file->mapping_ + 8), header_bytes,
                                    shown, data_bytes, &file->tensors_, &file->metadata_));
  } catch (const std::exception& e) {
    // nlohmann is asked not to throw; this catches allocation failures and library surprises.
    return REE_FAIL(Status::kIoError, "safetensors file '%s': header could not be parsed: %s", f,
                    e.what());
  }
  REE_RETURN_IF_ERROR(sortAndCheckOverlaps(&file->tensors_, f));
  const auto& tensors = file->tensors_;
  file->index_.reserve(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i)
    file->index_.emplace(tensors[i].name, i);
  *out = std::move(file);
  return Status::kSuccess;
}

const TensorInfo* SafetensorsFile::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

Status SafetensorsFile::bytes(const std::string& name, TensorView* out) const {
  REE_CHECK_ARG(out != nullptr, "SafetensorsFile::bytes: out is null");
  const TensorInfo* info = find(name);
  if (info == nullptr) {
    return REE_FAIL(Status::kInvalidArgument, "safetensors file '%s': no tensor '%s'",
                    printableText(path_, 400).c_str(), printableText(name).c_str());
  }
  out->data = info->bytes() == 0 ? nullptr : data_ + info->data_begin;
  out->dtype = info->dtype;
  out->shape = info->shape;
  out->bytes = info->bytes();
  return Status::kSuccess;
}

Status SafetensorsFile::view(const std::string& name, TensorView* out) const {
  REE_CHECK_ARG(out != nullptr, "SafetensorsFile::view: out is null");
  const TensorInfo* info = find(name);
  if (info != nullptr && !isComputeDType(info->dtype)) {
    return REE_FAIL(Status::kUnsupported,
                    "safetensors file '%s': tensor '%s' has dtype %s, unsupported (F32, F16 and "
                    "BF16 are)",
                    printableText(path_, 400).c_str(), printableText(name).c_str(),
                    dtypeName(info->dtype));
  }
  return bytes(name, out);
}

}  // namespace ree::models
