// Read-only, memory-mapped reader of safetensors files
// (https://github.com/huggingface/safetensors).
//
// Layout: 8-byte little-endian header length N, N bytes of JSON header, then the data section.
// The header maps each tensor name to {"dtype", "shape", "data_offsets": [begin, end]} (offsets
// relative to the data section) and may hold "__metadata__" (string -> string).
//
// open() validates the whole header before anything is handed out, so a view never points outside
// the mapping: a regular file (a FIFO or a directory is refused without blocking), header length
// within the file and below kMaxSafetensorsHeaderBytes, well-formed JSON object without repeated
// keys (ree/core/json_guard.h, linear in the header), names of at most kMaxTensorNameBytes, every
// dtype known, every shape of at most kMaxTensorRank non-negative integers whose element count and
// byte size do not overflow 64 bits, 0 <= begin <= end <= data section size,
// end - begin == product(shape) * dtype size, and no two tensors sharing a byte. Gaps between
// tensors and bytes after the last tensor are allowed (the format does not forbid them).
//
// Tensors of byte-sized dtypes other than F32/F16/BF16 (I64, U8, BOOL, F8_*, ...) are validated
// and listed, but view() refuses them with kUnsupported naming the tensor: checkpoints carry such
// buffers now and then (attention masks, position ids) and they must not stop a load that does
// not ask for them. Sub-byte dtypes (F4, F6_*) and strings that are not safetensors dtypes make
// open() fail.
//
// Alignment: the safetensors writers pad the header so that every tensor starts at a multiple of
// its element size; a hand-made file need not, so TensorView::data is only guaranteed byte-aligned.
//
// Errors are one line naming the file and the tensor or field; see ree/core/status.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "ree/core/status.h"
#include "ree/core/text.h"
#include "ree/models/weight_source.h"

namespace ree::models {

// Largest header accepted, the limit of the reference implementation (100 MB).
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 100000000;

class SafetensorsFile {
 public:
  // Maps `path` read-only and validates its header. On failure *out is left empty.
  static Status open(const std::string& path, std::unique_ptr<SafetensorsFile>* out);

  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  uint64_t fileBytes() const { return mapping_bytes_; }
  uint64_t headerBytes() const { return header_bytes_; }

  // All tensors, in the order of their data offsets.
  const std::vector<TensorInfo>& tensors() const { return tensors_; }

  // The tensor called `name`, or nullptr.
  const TensorInfo* find(const std::string& name) const;

  // View of `name`: kInvalidArgument if absent, kUnsupported if its dtype is not F32/F16/BF16.
  Status view(const std::string& name, TensorView* out) const;
  // The stored bytes of `name`, any dtype: kInvalidArgument if absent.
  Status bytes(const std::string& name, TensorView* out) const;

  // The "__metadata__" entries (empty if the header has none).
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  SafetensorsFile() = default;

  std::string path_;
  const unsigned char* mapping_ = nullptr;
  uint64_t mapping_bytes_ = 0;
  uint64_t header_bytes_ = 0;
  const unsigned char* data_ = nullptr;  // first byte of the data section
  std::vector<TensorInfo> tensors_;
  std::unordered_map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace ree::models
