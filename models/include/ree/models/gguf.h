// Read-only, memory-mapped reader of GGUF files (llama.cpp's format, versions 2 and 3,
// little-endian; https://github.com/ggml-org/ggml/blob/master/docs/gguf.md).
//
// Layout: "GGUF", uint32 version, uint64 tensor count, uint64 metadata count; the metadata
// (string key, uint32 value type, value; strings are uint64 length + bytes, arrays uint32 element
// type + uint64 count + elements); the tensor infos (string name, uint32 dimension count, uint64
// dimensions (ne[0] first: the fastest-varying axis), uint32 ggml type, uint64 offset); padding to
// general.alignment (default 32); the data section, where each tensor starts at its offset.
//
// open() validates the whole header before anything is handed out, in time linear in the header:
// a regular file; the magic and version (1 and big-endian files are refused); counts no larger
// than kMaxGgufTensors / kMaxGgufMetadataEntries nor than the bytes left could hold; every string
// within the file, keys and tensor names valid UTF-8 of at most kMaxGgufKeyBytes /
// kMaxTensorNameBytes bytes; every value type known, arrays not nested and their counts within
// the bytes left; no key and no tensor name twice; general.alignment (if present) a uint32 power
// of two <= kMaxGgufAlignment; 1 to 4 dimensions, each >= 1, whose product and byte size fit in
// 64 bits, ne[0] a multiple of the type's block; every ggml type known (its block size and bytes,
// even if REE cannot dequantize it); every offset a multiple of the alignment, every tensor's data
// inside the file, and no two tensors sharing a byte.
//
// Errors are one line naming the file and the field or tensor, e.g. "GGUF file 'm.gguf': tensor
// 'blk.3.attn_q.weight': data [1024, 5120) beyond the file's 4096 bytes".
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ree/core/status.h"

namespace ree::models {

inline constexpr uint64_t kMaxGgufTensors = uint64_t{1} << 20;          // 405B models: ~1100
inline constexpr uint64_t kMaxGgufMetadataEntries = uint64_t{1} << 20;  // real files: < 100
inline constexpr uint64_t kMaxGgufKeyBytes = 65535;                     // the format's own limit
inline constexpr uint64_t kMaxGgufAlignment = uint64_t{1} << 24;
inline constexpr uint32_t kMaxGgufDims = 4;  // GGML_MAX_DIMS
inline constexpr uint64_t kGgufDefaultAlignment = 32;

// Metadata value types (gguf_type).
enum class GgufValueType : uint32_t {
  kU8 = 0,
  kI8 = 1,
  kU16 = 2,
  kI16 = 3,
  kU32 = 4,
  kI32 = 5,
  kF32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kU64 = 10,
  kI64 = 11,
  kF64 = 12,
};

// "UINT32", "STRING", ...
const char* ggufValueTypeName(GgufValueType type);

// Bytes of one value of a scalar type as the file stores it; 0 for STRING, ARRAY and unknown types.
uint64_t ggufScalarBytes(GgufValueType type);

// Tensor types (ggml_type); the ids are the file's.
enum class GgmlType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kBF16 = 30,
  // Other known ids (IQ*, I8..I64, F64, TQ*, MXFP4, ...) have no name here; ggmlTypeName gives
  // their ggml spelling.
};

struct GgmlTypeTraits {
  uint32_t id;
  const char* name;      // ggml's spelling: "Q4_1"
  uint32_t block_elems;  // elements per block
  uint32_t block_bytes;  // bytes per block
};

// The traits of type `id`, or nullptr when ggml has no such type.
const GgmlTypeTraits* ggmlTypeTraits(uint32_t id);
// ggml's spelling of `type` ("?" if unknown).
const char* ggmlTypeName(GgmlType type);

// One metadata value. Strings point into the mapping (valid while the GgufFile lives).
struct GgufValue {
  GgufValueType type = GgufValueType::kU8;
  uint64_t scalar = 0;    // integers, bools and floats: the raw little-endian bits, zero-extended
  std::string_view text;  // kString
  GgufValueType element_type = GgufValueType::kU8;  // kArray
  uint64_t count = 0;                               // kArray: number of elements
  const unsigned char* elements = nullptr;          // kArray of numbers: the first element's bytes
  std::vector<std::string_view> strings;            // kArray of strings
};

struct GgufTensorInfo {
  std::string name;
  GgmlType type = GgmlType::kF32;
  std::vector<uint64_t> dims;  // ne[0] (fastest) first; 1 to 4 entries, each >= 1
  uint64_t elements = 0;       // product of dims
  uint64_t offset = 0;         // in the data section
  uint64_t bytes = 0;          // elements / block_elems * block_bytes
};

class GgufFile {
 public:
  // Maps `path` read-only and validates its header. On failure *out is left empty.
  static Status open(const std::string& path, std::unique_ptr<GgufFile>* out);

  ~GgufFile();
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  const std::string& path() const { return path_; }
  uint64_t fileBytes() const { return mapping_bytes_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t dataOffset() const { return data_offset_; }  // first byte of the data section

  // Metadata keys in file order, and their values.
  const std::vector<std::string>& keys() const { return keys_; }
  const GgufValue* find(const std::string& key) const;

  // Typed reads of one key, each failing with one line naming the file and the key: absent
  // (kIoError), another type (kIoError). integer() accepts every integer type, number() also
  // floats, and integer() refuses a negative value or one above INT64_MAX.
  Status integer(const std::string& key, int64_t* out) const;
  Status number(const std::string& key, double* out) const;
  Status string(const std::string& key, std::string* out) const;

  // Tensors in file order; find by name.
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* findTensor(const std::string& name) const;
  // The first byte of `tensor`'s data (inside the mapping; tensor.bytes bytes follow).
  const unsigned char* tensorData(const GgufTensorInfo& tensor) const;

 private:
  GgufFile() = default;
  friend class GgufParser;

  std::string path_;
  const unsigned char* mapping_ = nullptr;
  uint64_t mapping_bytes_ = 0;
  uint32_t version_ = 0;
  uint64_t alignment_ = kGgufDefaultAlignment;
  uint64_t data_offset_ = 0;
  std::vector<std::string> keys_;
  std::unordered_map<std::string, GgufValue> values_;
  std::vector<GgufTensorInfo> tensors_;
  std::unordered_map<std::string, size_t> tensor_index_;
};

}  // namespace ree::models
