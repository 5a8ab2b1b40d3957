// The one loading interface of model weight formats. A format reader (safetensors today; GGUF and
// ONNX next) implements WeightSource: it lists the tensors it holds (name, dtype, shape), hands out
// a tensor's bytes by name (memory-mapped, valid while the source lives), its metadata, and the
// files it reads (for a model's identity). Everything above it is format-neutral: Checkpoint
// (checkpoint.h) opens a model directory through the reader that fits, checks values (non-finite
// weights) and the config's expected tensors, and the model loads from Checkpoint only.
//
// A reader validates every size it reads from a file before it allocates or hands out a view
// (counts, shapes, offsets, string lengths, size * dtype in 64 bits), so that a view never points
// outside its mapping; errors are one line naming the file and the tensor or field.
//
// Adding a format: implement WeightSource in models/src/<format>_source.cpp (header in
// models/include/ree/models/), and let Checkpoint::open recognise its files.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ree/core/status.h"
#include "ree/core/text.h"

namespace ree::models {

// Element types of stored tensors whose elements are whole bytes (safetensors spelling).
enum class DType : uint8_t {
  kF32,
  kF16,
  kBF16,
  kF64,
  kI64,
  kI32,
  kI16,
  kI8,
  kU64,
  kU32,
  kU16,
  kU8,
  kBool,
  kF8E4M3,
  kF8E5M2,
  kF8E8M0,
};

// Spelling of a dtype: "F32", "F16", "BF16", "I64", "F8_E4M3", ...
const char* dtypeName(DType dtype);

// Bytes per element.
size_t dtypeSize(DType dtype);

// True for the dtypes REE computes with and view() hands out: F32, F16, BF16.
bool isComputeDType(DType dtype);

// Parses a dtype spelling; false if it is not one of the byte-sized dtypes above.
bool parseDTypeName(const std::string& name, DType* out);

// Limits every reader applies to what a file declares, before allocating anything for it.
inline constexpr size_t kMaxTensorNameBytes = 1024;  // real names are < 100 bytes
inline constexpr size_t kMaxTensorRank = 16;         // real tensors have <= 5 axes
inline constexpr size_t kMaxWeightFiles = 65536;     // shards of one model (405B models: ~200)

// One tensor as its file describes it (already validated).
struct TensorInfo {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  uint64_t data_begin = 0;  // byte offsets in its file's data section (safetensors: after the
  uint64_t data_end = 0;    // 8 + N header bytes)

  uint64_t bytes() const { return data_end - data_begin; }
  // Product of the shape (1 for a scalar); cannot overflow, the reader checked it.
  int64_t numel() const;
};

// A read-only view of a tensor's bytes inside a mapping; valid while its owner (the source or the
// Checkpoint) lives. Row-major (C order), little-endian.
struct TensorView {
  const void* data = nullptr;  // nullptr only for a tensor of zero bytes
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  uint64_t bytes = 0;

  int64_t numel() const;
};

// Thread-safe: every method may be called concurrently.
class WeightSource {
 public:
  virtual ~WeightSource() = default;

  // The format's name, as the weights' identity records it: "safetensors", "synthetic".
  virtual const char* formatName() const = 0;
  // What was opened: a model directory or a single file.
  virtual const std::string& path() const = 0;
  // The directory the files() are relative to.
  virtual const std::string& directory() const = 0;
  // The files holding the weights (names relative to directory()), sorted; one when not sharded.
  virtual const std::vector<std::string>& files() const = 0;
  // The file holding `name`; kInvalidArgument if there is no such tensor.
  virtual Status fileOf(const std::string& name, std::string* file) const = 0;

  // All tensor names, sorted bytewise.
  virtual const std::vector<std::string>& tensorNames() const = 0;
  virtual bool contains(const std::string& name) const = 0;
  // Dtype and shape of `name` (any dtype); kInvalidArgument if absent.
  virtual Status info(const std::string& name, TensorInfo* out) const = 0;
  // The stored bytes of `name`, any dtype; kInvalidArgument if absent.
  virtual Status bytes(const std::string& name, TensorView* out) const = 0;

  // Free-form key/value metadata of the files (safetensors' "__metadata__" or the index's
  // "metadata"; values that are not strings are given as their JSON text).
  virtual std::map<std::string, std::string> metadata() const = 0;
  // Files mapped so far (a reader may map lazily, as tensors are asked for).
  virtual size_t mappedFileCount() const = 0;
};

}  // namespace ree::models
