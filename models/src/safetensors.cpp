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
#include <set>

namespace ree::models {
namespace {

using Json = nlohmann::json;

struct DTypeEntry {
  DType dtype;
  const char* name;
  size_t size;
};

constexpr DTypeEntry kDTypes[] = {
    {DType::kF32, "F32", 4},        {DType::kF16, "F16", 2},        {DType::kBF16, "BF16", 2},
    {DType::kF64, "F64", 8},        {DType::kI64, "I64", 8},        {DType::kI32, "I32", 4},
    {DType::kI16, "I16", 2},        {DType::kI8, "I8", 1},          {DType::kU64, "U64", 8},
    {DType::kU32, "U32", 4},        {DType::kU16, "U16", 2},        {DType::kU8, "U8", 1},
    {DType::kBool, "BOOL", 1},      {DType::kF8E4M3, "F8_E4M3", 1}, {DType::kF8E5M2, "F8_E5M2", 1},
    {DType::kF8E8M0, "F8_E8M0", 1},
};

// Dtypes of the safetensors format whose elements are smaller than a byte: known, not readable.
bool isSubByteDTypeName(const std::string& name) {
  return name == "F4" || name == "F6_E2M3" || name == "F6_E3M2";
}

// Parses a JSON header and reports duplicate keys (the DOM would silently keep the last one) and
// nesting deeper than a safetensors header can have (root object -> tensor object -> shape).
struct HeaderParse {
  Json value;
  std::string duplicate_key;
  bool too_deep = false;
};

constexpr int kMaxHeaderDepth = 3;

void parseHeaderJson(const char* begin, const char* end, HeaderParse* result) {
  std::vector<std::set<std::string>> open_objects;
  auto callback = [&](int depth, Json::parse_event_t event, Json& parsed) -> bool {
    if (depth > kMaxHeaderDepth) {
      result->too_deep = true;
      return false;  // do not build the deep value
    }
    switch (event) {
      case Json::parse_event_t::object_start:
        open_objects.emplace_back();
        break;
      case Json::parse_event_t::object_end:
        if (!open_objects.empty()) open_objects.pop_back();
        break;
      case Json::parse_event_t::key:
        if (!open_objects.empty() && parsed.is_string()) {
          const std::string& key = parsed.get_ref<const std::string&>();
          if (!open_objects.back().insert(key).second && result->duplicate_key.empty()) {
            result->duplicate_key = key;
          }
        }
        break;
      default:
        break;
    }
    return true;
  };
  result->value = Json::parse(begin, end, callback, /*allow_exceptions=*/false);
}

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

int64_t shapeNumel(const std::vector<int64_t>& shape) {
  int64_t numel = 1;
  for (int64_t extent : shape)
    numel *= extent;
  return numel;
}

}  // namespace

const char* dtypeName(DType dtype) {
  for (const DTypeEntry& entry : kDTypes) {
    if (entry.dtype == dtype) return entry.name;
  }
  return "?";
}

size_t dtypeSize(DType dtype) {
  for (const DTypeEntry& entry : kDTypes) {
    if (entry.dtype == dtype) return entry.size;
  }
  return 0;
}

bool isComputeDType(DType dtype) {
  return dtype == DType::kF32 || dtype == DType::kF16 || dtype == DType::kBF16;
}

bool parseDTypeName(const std::string& name, DType* out) {
  for (const DTypeEntry& entry : kDTypes) {
    if (name == entry.name) {
      *out = entry.dtype;
      return true;
    }
  }
  return false;
}

int64_t TensorInfo::numel() const {
  return shapeNumel(shape);
}
int64_t TensorView::numel() const {
  return shapeNumel(shape);
}

SafetensorsFile::~SafetensorsFile() {
  if (mapping_ != nullptr) munmap(const_cast<unsigned char*>(mapping_), mapping_bytes_);
}

Status SafetensorsFile::open(const std::string& path, std::unique_ptr<SafetensorsFile>* out) {
  REE_CHECK_ARG(out != nullptr, "SafetensorsFile::open: out is null");
  out->reset();
  const std::string shown = printableText(path, 400);
  const char* f = shown.c_str();
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return REE_FAIL(Status::kIoError, "safetensors file '%s': cannot open: %s", f,
                    std::strerror(errno));
  }
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return REE_FAIL(Status::kIoError, "safetensors file '%s': not a regular file", f);
  }
  const auto file_bytes = static_cast<uint64_t>(st.st_size);
  if (file_bytes < 8) {
    ::close(fd);
    return REE_FAIL(Status::kIoError,
                    "safetensors file '%s': truncated: %llu bytes, fewer than the 8-byte header "
                    "length",
                    f, static_cast<unsigned long long>(file_bytes));
  }
  void* mapped = mmap(nullptr, file_bytes, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);  // the mapping keeps its own reference to the file
  if (mapped == MAP_FAILED) {
    return REE_FAIL(Status::kIoError, "safetensors file '%s': mmap of %llu bytes failed: %s", f,
                    static_cast<unsigned long long>(file_bytes), std::strerror(errno));
  }
  // Owned from here on: the destructor unmaps on every error path.
  std::unique_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->path_ = path;
  file->mapping_ = static_cast<const unsigned char*>(mapped);
  file->mapping_bytes_ = file_bytes;

  uint64_t header_bytes = 0;
  for (int i = 7; i >= 0; --i)
    header_bytes = (header_bytes << 8) | file->mapping_[i];
  if (header_bytes > kMaxSafetensorsHeaderBytes) {
    return REE_FAIL(Status::kIoError,
                    "safetensors file '%s': header length %llu exceeds the limit of %llu bytes", f,
                    static_cast<unsigned long long>(header_bytes),
                    static_cast<unsigned long long>(kMaxSafetensorsHeaderBytes));
  }
  if (header_bytes > file_bytes - 8) {
    return REE_FAIL(Status::kIoError,
                    "safetensors file '%s': header length %llu exceeds the file (%llu bytes after "
                    "the length field); truncated?",
                    f, static_cast<unsigned long long>(header_bytes),
                    static_cast<unsigned long long>(file_bytes - 8));
  }
  if (header_bytes < 2 || file->mapping_[8] != '{') {
    return REE_FAIL(Status::kIoError, "safetensors file '%s': header does not start with '{'", f);
  }
  file->header_bytes_ = header_bytes;
  file->data_ = file->mapping_ + 8 + header_bytes;
  const uint64_t data_bytes = file_bytes - 8 - header_bytes;

  try {
    HeaderParse parse;
    const char* header = reinterpret_cast<const char*>(file->mapping_ + 8);
    parseHeaderJson(header, header + header_bytes, &parse);
    if (parse.too_deep) {
      return REE_FAIL(Status::kIoError,
                      "safetensors file '%s': header JSON nests deeper than a safetensors header",
                      f);
    }
    if (parse.value.is_discarded() || !parse.value.is_object()) {
      return REE_FAIL(Status::kIoError, "safetensors file '%s': header is not a valid JSON object",
                      f);
    }
    if (!parse.duplicate_key.empty()) {
      return REE_FAIL(Status::kIoError, "safetensors file '%s': header repeats the key '%s'", f,
                      printableText(parse.duplicate_key).c_str());
    }
    for (auto it = parse.value.begin(); it != parse.value.end(); ++it) {
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
          file->metadata_[meta.key()] = meta.value().get<std::string>();
        }
        continue;
      }
      TensorInfo info;
      REE_RETURN_IF_ERROR(parseTensorEntry(shown, it.key(), it.value(), data_bytes, &info));
      file->tensors_.push_back(std::move(info));
    }
  } catch (const std::exception& e) {
    // nlohmann is asked not to throw; this catches allocation failures and library surprises.
    return REE_FAIL(Status::kIoError, "safetensors file '%s': header could not be parsed: %s", f,
                    e.what());
  }

  // Storage order; a tensor of zero bytes occupies nothing and may share its offset.
  auto& tensors = file->tensors_;
  std::sort(tensors.begin(), tensors.end(), [](const TensorInfo& a, const TensorInfo& b) {
    if (a.data_begin != b.data_begin) return a.data_begin < b.data_begin;
    if (a.data_end != b.data_end) return a.data_end < b.data_end;
    return a.name < b.name;
  });
  const TensorInfo* previous = nullptr;  // the non-empty tensor ending last so far
  for (const TensorInfo& info : tensors) {
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

Status SafetensorsFile::view(const std::string& name, TensorView* out) const {
  REE_CHECK_ARG(out != nullptr, "SafetensorsFile::view: out is null");
  const TensorInfo* info = find(name);
  if (info == nullptr) {
    return REE_FAIL(Status::kInvalidArgument, "safetensors file '%s': no tensor '%s'",
                    printableText(path_, 400).c_str(), printableText(name).c_str());
  }
  if (!isComputeDType(info->dtype)) {
    return REE_FAIL(Status::kUnsupported,
                    "safetensors file '%s': tensor '%s' has dtype %s, unsupported (F32, F16 and "
                    "BF16 are)",
                    printableText(path_, 400).c_str(), printableText(name).c_str(),
                    dtypeName(info->dtype));
  }
  out->data = info->bytes() == 0 ? nullptr : data_ + info->data_begin;
  out->dtype = info->dtype;
  out->shape = info->shape;
  out->bytes = info->bytes();
  return Status::kSuccess;
}

}  // namespace ree::models
