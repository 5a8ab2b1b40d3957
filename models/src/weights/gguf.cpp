// The GGUF header parser (ree/models/gguf.h): bounds-checked reads from the mapping, each count
// checked against the bytes left before anything is allocated for it.
#include "ree/models/gguf.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>

#include "ree/core/file.h"
#include "ree/core/text.h"
#include "ree/models/weight_source.h"

namespace ree::models {
namespace {

using ull = unsigned long long;

constexpr GgmlTypeTraits kGgmlTypes[] = {
    {0, "F32", 1, 4},         {1, "F16", 1, 2},         {2, "Q4_0", 32, 18},
    {3, "Q4_1", 32, 20},      {6, "Q5_0", 32, 22},      {7, "Q5_1", 32, 24},
    {8, "Q8_0", 32, 34},      {9, "Q8_1", 32, 40},      {10, "Q2_K", 256, 84},
    {11, "Q3_K", 256, 110},   {12, "Q4_K", 256, 144},   {13, "Q5_K", 256, 176},
    {14, "Q6_K", 256, 210},   {15, "Q8_K", 256, 292},   {16, "IQ2_XXS", 256, 66},
    {17, "IQ2_XS", 256, 74},  {18, "IQ3_XXS", 256, 98}, {19, "IQ1_S", 256, 50},
    {20, "IQ4_NL", 32, 18},   {21, "IQ3_S", 256, 110},  {22, "IQ2_S", 256, 82},
    {23, "IQ4_XS", 256, 136}, {24, "I8", 1, 1},         {25, "I16", 1, 2},
    {26, "I32", 1, 4},        {27, "I64", 1, 8},        {28, "F64", 1, 8},
    {29, "IQ1_M", 256, 56},   {30, "BF16", 1, 2},       {34, "TQ1_0", 256, 54},
    {35, "TQ2_0", 256, 66},   {39, "MXFP4", 32, 17},
};

constexpr const char* kValueTypeNames[] = {"UINT8",  "INT8",    "UINT16", "INT16",  "UINT32",
                                           "INT32",  "FLOAT32", "BOOL",   "STRING", "ARRAY",
                                           "UINT64", "INT64",   "FLOAT64"};

bool isKnownValueType(uint32_t type) {
  return type <= static_cast<uint32_t>(GgufValueType::kF64);
}

uint64_t readLittleEndian(const unsigned char* p, uint64_t bytes) {
  uint64_t value = 0;
  for (uint64_t i = bytes; i-- > 0;)
    value = (value << 8) | p[i];
  return value;
}

// Well-formed UTF-8: no overlong forms, surrogates or code points above U+10FFFF.
bool isValidUtf8(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    size_t extra = 0;
    uint32_t code = 0, minimum = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      extra = 1, code = c & 0x1F, minimum = 0x80;
    } else if ((c & 0xF0) == 0xE0) {
      extra = 2, code = c & 0x0F, minimum = 0x800;
    } else if ((c & 0xF8) == 0xF0) {
      extra = 3, code = c & 0x07, minimum = 0x10000;
    } else {
      return false;
    }
    if (text.size() - i <= extra) return false;
    for (size_t k = 1; k <= extra; ++k) {
      const auto next = static_cast<unsigned char>(text[i + k]);
      if ((next & 0xC0) != 0x80) return false;
      code = (code << 6) | (next & 0x3F);
    }
    if (code < minimum || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return false;
    i += extra + 1;
  }
  return true;
}

// Maps the regular file `path` read-only (a FIFO or device is refused before it is opened).
Status mapFile(const std::string& path, const std::string& shown, const void** mapping,
               uint64_t* bytes) {
  REE_RETURN_IF_ERROR(statRegularFile(path, "GGUF file", nullptr));
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    return REE_FAIL(Status::kIoError, "GGUF file '%s': cannot open: %s", shown.c_str(),
                    std::strerror(errno));
  }
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return REE_FAIL(Status::kIoError, "GGUF file '%s': not a regular file", shown.c_str());
  }
  const auto file_bytes = static_cast<uint64_t>(st.st_size);
  if (file_bytes < 24) {
    ::close(fd);
    return REE_FAIL(Status::kIoError,
                    "GGUF file '%s': truncated: %llu bytes, fewer than the 24-byte header",
                    shown.c_str(), static_cast<ull>(file_bytes));
  }
  void* mapped = mmap(nullptr, file_bytes, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (mapped == MAP_FAILED) {
    return REE_FAIL(Status::kIoError, "GGUF file '%s': mmap of %llu bytes failed: %s",
                    shown.c_str(), static_cast<ull>(file_bytes), std::strerror(errno));
  }
  *mapping = mapped;
  *bytes = file_bytes;
  return Status::kSuccess;
}

}  // namespace

uint64_t ggufScalarBytes(GgufValueType type) {
  switch (type) {
    case GgufValueType::kU8:
    case GgufValueType::kI8:
    case GgufValueType::kBool:
      return 1;
    case GgufValueType::kU16:
    case GgufValueType::kI16:
      return 2;
    case GgufValueType::kU32:
    case GgufValueType::kI32:
    case GgufValueType::kF32:
      return 4;
    case GgufValueType::kU64:
    case GgufValueType::kI64:
    case GgufValueType::kF64:
      return 8;
    default:
      return 0;
  }
}

const char* ggufValueTypeName(GgufValueType type) {
  const auto id = static_cast<uint32_t>(type);
  return isKnownValueType(id) ? kValueTypeNames[id] : "?";
}

const GgmlTypeTraits* ggmlTypeTraits(uint32_t id) {
  for (const GgmlTypeTraits& traits : kGgmlTypes) {
    if (traits.id == id) return &traits;
  }
  return nullptr;
}

const char* ggmlTypeName(GgmlType type) {
  const GgmlTypeTraits* traits = ggmlTypeTraits(static_cast<uint32_t>(type));
  return traits != nullptr ? traits->name : "?";
}

// Reads the header of one mapped file into its GgufFile.
class GgufParser {
 public:
  GgufParser(GgufFile* file, std::string shown)
      : file_(*file),
        shown_(std::move(shown)),
        base_(file->mapping_),
        size_(file->mapping_bytes_) {}

  Status parse() {
    REE_RETURN_IF_ERROR(readPreamble());
    for (uint64_t i = 0; i < metadata_count_; ++i)
      REE_RETURN_IF_ERROR(readKeyValue(i));
    REE_RETURN_IF_ERROR(readAlignment());
    file_.tensors_.reserve(tensor_count_);
    for (uint64_t i = 0; i < tensor_count_; ++i)
      REE_RETURN_IF_ERROR(readTensorInfo(i));
    return placeTensors();
  }

 private:
  Status fail(const std::string& what) const {
    return REE_FAIL(Status::kIoError, "GGUF file '%s': %s", shown_.c_str(), what.c_str());
  }
  Status truncated(const std::string& what) const {
    return fail(what + " at byte " + std::to_string(pos_) + " runs past the end of the file (" +
                std::to_string(size_) + " bytes)");
  }
  uint64_t left() const { return size_ - pos_; }
  bool take(uint64_t n, const unsigned char** p) {
    if (n > left()) return false;
    *p = base_ + pos_;
    pos_ += n;
    return true;
  }
  bool u32(uint32_t* value) {
    const unsigned char* p = nullptr;
    if (!take(4, &p)) return false;
    *value = static_cast<uint32_t>(readLittleEndian(p, 4));
    return true;
  }
  bool u64(uint64_t* value) {
    const unsigned char* p = nullptr;
    if (!take(8, &p)) return false;
    *value = readLittleEndian(p, 8);
    return true;
  }

  Status readPreamble();
  Status readCount(const char* what, uint64_t limit, uint64_t min_entry_bytes, uint64_t* out);
  Status readString(const std::string& what, uint64_t max_bytes, std::string_view* out);
  Status readName(const char* what, uint64_t max_bytes, std::string_view* out);
  Status readKeyValue(uint64_t index);
  Status readValue(const std::string& what, GgufValue* value);
  Status readArray(const std::string& what, GgufValue* value);
  Status readAlignment();
  Status readTensorInfo(uint64_t index);
  Status readTensorShape(const std::string& what, GgufTensorInfo* tensor);
  Status placeTensors();

  GgufFile& file_;
  std::string shown_;
  const unsigned char* base_;
  uint64_t size_;
  uint64_t pos_ = 0;
  uint64_t tensor_count_ = 0;
  uint64_t metadata_count_ = 0;
};

Status GgufParser::readPreamble() {
  const unsigned char* magic = nullptr;
  take(4, &magic);  // mapFile checked the 24 bytes of the preamble
  if (std::memcmp(magic, "GGUF", 4) != 0) return fail("not a GGUF file (no 'GGUF' magic)");
  uint32_t version = 0;
  u32(&version);
  if (version != 2 && version != 3) {
    if ((version & 0xFFFFu) == 0 && (version >> 24) >= 2) {
      return REE_FAIL(Status::kUnsupported, "GGUF file '%s': big-endian files are unsupported",
                      shown_.c_str());
    }
    return REE_FAIL(Status::kUnsupported,
                    "GGUF file '%s': version %u is unsupported (versions 2 and 3 are)",
                    shown_.c_str(), version);
  }
  file_.version_ = version;
  // A tensor info takes at least 33 bytes (1-byte name, one dimension); an entry 13 bytes.
  REE_RETURN_IF_ERROR(readCount("tensor count", kMaxGgufTensors, 33, &tensor_count_));
  return readCount("metadata count", kMaxGgufMetadataEntries, 13, &metadata_count_);
}

Status GgufParser::readCount(const char* what, uint64_t limit, uint64_t min_entry_bytes,
                             uint64_t* out) {
  u64(out);
  if (*out > limit) {
    return fail(std::string(what) + " " + std::to_string(*out) + " exceeds the limit of " +
                std::to_string(limit));
  }
  if (*out > left() / min_entry_bytes) {
    return fail(std::string(what) + " " + std::to_string(*out) + " cannot fit in the file's " +
                std::to_string(size_) + " bytes");
  }
  return Status::kSuccess;
}

Status GgufParser::readString(const std::string& what, uint64_t max_bytes, std::string_view* out) {
  uint64_t length = 0;
  if (!u64(&length)) return truncated(what + ": string length");
  if (length > max_bytes && max_bytes < left()) {  // else: the end of the file is the limit
    return fail(what + ": string length " + std::to_string(length) + " exceeds the limit of " +
                std::to_string(max_bytes) + " bytes");
  }
  const unsigned char* p = nullptr;
  if (!take(length, &p)) {
    return truncated(what + ": string of " + std::to_string(length) + " bytes");
  }
  *out = std::string_view(reinterpret_cast<const char*>(p), length);
  return Status::kSuccess;
}

// A key or tensor name: non-empty, valid UTF-8, at most `max_bytes`.
Status GgufParser::readName(const char* what, uint64_t max_bytes, std::string_view* out) {
  REE_RETURN_IF_ERROR(readString(what, max_bytes, out));
  if (out->empty()) return fail(std::string(what) + " is empty");
  if (!isValidUtf8(*out)) {
    return fail(std::string(what) + " '" + printableText(std::string(*out)) +
                "' is not valid UTF-8");
  }
  return Status::kSuccess;
}

Status GgufParser::readKeyValue(uint64_t index) {
  std::string_view key_view;
  const std::string what_key = "metadata entry " + std::to_string(index) + ": key";
  REE_RETURN_IF_ERROR(readName(what_key.c_str(), kMaxGgufKeyBytes, &key_view));
  std::string key(key_view);
  const std::string what = "metadata key '" + printableText(key) + "'";
  GgufValue value;
  REE_RETURN_IF_ERROR(readValue(what, &value));
  if (!file_.values_.emplace(key, std::move(value)).second) return fail(what + " appears twice");
  file_.keys_.push_back(std::move(key));
  return Status::kSuccess;
}

Status GgufParser::readValue(const std::string& what, GgufValue* value) {
  uint32_t type = 0;
  if (!u32(&type)) return truncated(what + ": value type");
  if (!isKnownValueType(type)) return fail(what + ": unknown value type " + std::to_string(type));
  value->type = static_cast<GgufValueType>(type);
  if (value->type == GgufValueType::kString) return readString(what, UINT64_MAX, &value->text);
  if (value->type == GgufValueType::kArray) return readArray(what, value);
  const uint64_t bytes = ggufScalarBytes(value->type);
  const unsigned char* p = nullptr;
  if (!take(bytes, &p)) return truncated(what + ": " + ggufValueTypeName(value->type) + " value");
  value->scalar = readLittleEndian(p, bytes);
  if (value->type == GgufValueType::kBool && value->scalar > 1) {
    return fail(what + ": BOOL value " + std::to_string(value->scalar) + " is neither 0 nor 1");
  }
  return Status::kSuccess;
}

Status GgufParser::readArray(const std::string& what, GgufValue* value) {
  uint32_t type = 0;
  if (!u32(&type)) return truncated(what + ": array element type");
  if (!isKnownValueType(type)) {
    return fail(what + ": unknown array element type " + std::to_string(type));
  }
  value->element_type = static_cast<GgufValueType>(type);
  if (value->element_type == GgufValueType::kArray) {
    return REE_FAIL(Status::kUnsupported, "GGUF file '%s': %s: nested arrays are unsupported",
                    shown_.c_str(), what.c_str());
  }
  if (!u64(&value->count)) return truncated(what + ": array length");
  const bool strings = value->element_type == GgufValueType::kString;
  const uint64_t element_bytes = strings ? 8 : ggufScalarBytes(value->element_type);
  if (value->count > left() / element_bytes) {
    return fail(what + ": array of " + std::to_string(value->count) + " " +
                ggufValueTypeName(value->element_type) + " elements cannot fit in the " +
                std::to_string(left()) + " bytes left");
  }
  if (!strings) {
    take(value->count * element_bytes, &value->elements);  // checked just above
    return Status::kSuccess;
  }
  value->strings.resize(value->count);  // at most left() / 8 entries
  for (uint64_t i = 0; i < value->count; ++i) {
    // The context is built only on failure: token lists hold 10^5 strings.
    uint64_t length = 0;
    const unsigned char* p = nullptr;
    if (!u64(&length) || !take(length, &p)) {
      return truncated(what + "[" + std::to_string(i) + "]: string");
    }
    value->strings[i] = std::string_view(reinterpret_cast<const char*>(p), length);
  }
  return Status::kSuccess;
}

Status GgufParser::readAlignment() {
  const GgufValue* value = file_.find("general.alignment");
  if (value == nullptr) return Status::kSuccess;
  if (value->type != GgufValueType::kU32) {
    return fail(std::string("metadata key 'general.alignment' has type ") +
                ggufValueTypeName(value->type) + ", not UINT32");
  }
  const uint64_t alignment = value->scalar;
  if (alignment == 0 || (alignment & (alignment - 1)) != 0 || alignment > kMaxGgufAlignment) {
    return fail("metadata key 'general.alignment' is " + std::to_string(alignment) +
                ", not a power of two <= " + std::to_string(kMaxGgufAlignment));
  }
  file_.alignment_ = alignment;
  return Status::kSuccess;
}

Status GgufParser::readTensorInfo(uint64_t index) {
  std::string_view name;
  const std::string what_name = "tensor info " + std::to_string(index) + ": name";
  REE_RETURN_IF_ERROR(readName(what_name.c_str(), kMaxTensorNameBytes, &name));
  GgufTensorInfo tensor;
  tensor.name = std::string(name);
  const std::string what = "tensor '" + printableText(tensor.name) + "'";
  REE_RETURN_IF_ERROR(readTensorShape(what, &tensor));
  if (!u64(&tensor.offset)) return truncated(what + ": offset");
  if (tensor.offset % file_.alignment_ != 0) {
    return fail(what + ": offset " + std::to_string(tensor.offset) +
                " is not a multiple of the alignment " + std::to_string(file_.alignment_));
  }
  if (!file_.tensor_index_.emplace(tensor.name, file_.tensors_.size()).second) {
    return fail(what + " appears twice");
  }
  file_.tensors_.push_back(std::move(tensor));
  return Status::kSuccess;
}

// Dimensions, type and byte size, in checked 64-bit arithmetic.
Status GgufParser::readTensorShape(const std::string& what, GgufTensorInfo* tensor) {
  uint32_t n_dims = 0;
  if (!u32(&n_dims)) return truncated(what + ": dimension count");
  if (n_dims == 0 || n_dims > kMaxGgufDims) {
    return fail(what + ": " + std::to_string(n_dims) + " dimensions (1 to 4 are allowed)");
  }
  uint64_t elements = 1;
  for (uint32_t d = 0; d < n_dims; ++d) {
    uint64_t extent = 0;
    if (!u64(&extent)) return truncated(what + ": dimension " + std::to_string(d));
    if (extent == 0) return fail(what + ": dimension " + std::to_string(d) + " is 0");
    if (__builtin_mul_overflow(elements, extent, &elements) ||
        elements > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return fail(what + ": element count overflows 63 bits");
    }
    tensor->dims.push_back(extent);
  }
  tensor->elements = elements;
  uint32_t type = 0;
  if (!u32(&type)) return truncated(what + ": type");
  const GgmlTypeTraits* traits = ggmlTypeTraits(type);
  if (traits == nullptr) return fail(what + ": unknown ggml type " + std::to_string(type));
  tensor->type = static_cast<GgmlType>(type);
  if (tensor->dims[0] % traits->block_elems != 0) {
    return fail(what + ": dimension 0 (" + std::to_string(tensor->dims[0]) +
                ") is not a multiple of " + traits->name + "'s block of " +
                std::to_string(traits->block_elems));
  }
  if (__builtin_mul_overflow(elements / traits->block_elems, uint64_t{traits->block_bytes},
                             &tensor->bytes)) {
    return fail(what + ": byte size overflows 64 bits");
  }
  return Status::kSuccess;
}

// The data section and every tensor inside it, none sharing a byte with another.
Status GgufParser::placeTensors() {
  const uint64_t alignment = file_.alignment_;
  const uint64_t padding = (alignment - pos_ % alignment) % alignment;
  file_.data_offset_ = pos_ + padding;
  if (file_.tensors_.empty()) return Status::kSuccess;
  if (padding > left()) return truncated("padding before the data section");
  const uint64_t data_bytes = size_ - file_.data_offset_;
  std::vector<const GgufTensorInfo*> by_offset;
  by_offset.reserve(file_.tensors_.size());
  for (const GgufTensorInfo& tensor : file_.tensors_) {
    if (tensor.offset > data_bytes || tensor.bytes > data_bytes - tensor.offset) {
      uint64_t begin = 0, end = 0;
      const bool huge = __builtin_add_overflow(file_.data_offset_, tensor.offset, &begin) ||
                        __builtin_add_overflow(begin, tensor.bytes, &end);
      return fail("tensor '" + printableText(tensor.name) + "': data [" +
                  (huge ? "data section + " + std::to_string(tensor.offset) + ", +" +
                              std::to_string(tensor.bytes) + " bytes"
                        : std::to_string(begin) + ", " + std::to_string(end)) +
                  ") beyond the file's " + std::to_string(size_) + " bytes");
    }
    by_offset.push_back(&tensor);
  }
  std::sort(by_offset.begin(), by_offset.end(),
            [](const GgufTensorInfo* a, const GgufTensorInfo* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const GgufTensorInfo& before = *by_offset[i - 1];
    if (by_offset[i]->offset < before.offset + before.bytes) {
      return fail("tensor '" + printableText(by_offset[i]->name) + "' (offset " +
                  std::to_string(by_offset[i]->offset) + ") overlaps tensor '" +
                  printableText(before.name) + "' [" + std::to_string(before.offset) + ", " +
                  std::to_string(before.offset + before.bytes) + ")");
    }
  }
  return Status::kSuccess;
}

GgufFile::~GgufFile() {
  if (mapping_ != nullptr) munmap(const_cast<unsigned char*>(mapping_), mapping_bytes_);
}

Status GgufFile::open(const std::string& path, std::unique_ptr<GgufFile>* out) {
  REE_CHECK_ARG(out != nullptr, "GgufFile::open: out is null");
  out->reset();
  const std::string shown = printableText(path, 400);
  const void* mapped = nullptr;
  uint64_t bytes = 0;
  REE_RETURN_IF_ERROR(mapFile(path, shown, &mapped, &bytes));
  std::unique_ptr<GgufFile> file(new GgufFile());  // unmaps on every error path
  file->path_ = path;
  file->mapping_ = static_cast<const unsigned char*>(mapped);
  file->mapping_bytes_ = bytes;
  try {
    GgufParser parser(file.get(), shown);
    REE_RETURN_IF_ERROR(parser.parse());
  } catch (const std::exception& e) {  // allocation failure: every count was bounded first
    return REE_FAIL(Status::kIoError, "GGUF file '%s': %s", shown.c_str(), e.what());
  }
  *out = std::move(file);
  return Status::kSuccess;
}

const GgufValue* GgufFile::find(const std::string& key) const {
  auto it = values_.find(key);
  return it == values_.end() ? nullptr : &it->second;
}

const GgufTensorInfo* GgufFile::findTensor(const std::string& name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

const unsigned char* GgufFile::tensorData(const GgufTensorInfo& tensor) const {
  return mapping_ + data_offset_ + tensor.offset;
}

}  // namespace ree::models
