// Hand-made GGUF files for tests: a valid file by default, every field open to corruption (counts,
// lengths, types, offsets), written byte by byte as the format defines them (little-endian).
#pragma once

#include <cstdint>
#include <cstring>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

namespace ree::models::test {

inline std::string u32le(uint32_t value) {
  std::string out(4, '\0');
  for (int i = 0; i < 4; ++i)
    out[i] = static_cast<char>((value >> (8 * i)) & 0xff);
  return out;
}

inline std::string u64le(uint64_t value) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i)
    out[i] = static_cast<char>((value >> (8 * i)) & 0xff);
  return out;
}

// A GGUF string: uint64 length, then the bytes.
inline std::string ggufString(const std::string& text) {
  return u64le(text.size()) + text;
}

// An array value's body (after the ARRAY type): element type, count, elements.
inline std::string stringArray(const std::vector<std::string>& items) {
  std::string out = u32le(8) + u64le(items.size());
  for (const std::string& item : items)
    out += ggufString(item);
  return out;
}

inline std::string i32Array(const std::vector<int32_t>& items) {
  std::string out = u32le(5) + u64le(items.size());
  for (int32_t item : items)
    out += u32le(static_cast<uint32_t>(item));
  return out;
}

struct GgufTensorSpec {
  std::string name;
  std::vector<uint64_t> dims;      // ne[0] first
  uint32_t type = 0;               // F32
  std::string data;                // the tensor's bytes
  std::optional<uint64_t> offset;  // default: the next aligned offset
};

class GgufBuilder {
 public:
  uint32_t version = 3;
  std::optional<uint64_t> tensor_count;    // default: tensors.size()
  std::optional<uint64_t> metadata_count;  // default: entries
  uint64_t alignment = 32;                 // of the padding and default offsets
  std::vector<std::string> entries;        // encoded key/value pairs
  std::vector<GgufTensorSpec> tensors;
  std::string raw_tensor_infos;  // appended after the encoded tensor infos (counted by the caller)

  void addEntry(const std::string& key, uint32_t type, const std::string& value) {
    entries.push_back(ggufString(key) + u32le(type) + value);
  }
  void addString(const std::string& key, const std::string& value) {
    addEntry(key, 8, ggufString(value));
  }
  void addU32(const std::string& key, uint32_t value) { addEntry(key, 4, u32le(value)); }
  void addF32(const std::string& key, float value) {
    uint32_t bits = 0;
    std::memcpy(&bits, &value, 4);
    addEntry(key, 6, u32le(bits));
  }
  // The metadata of a llama file, in this order: architecture, alignment 32, the layer count,
  // widths, head counts and context, RMSNorm epsilon 1e-5, RoPE base 10000.
  void addLlamaMetadata(uint32_t layers, uint32_t hidden, uint32_t feed_forward, uint32_t heads,
                        uint32_t kv_heads, uint32_t context) {
    addString("general.architecture", "llama");
    addU32("general.alignment", 32);
    addU32("llama.block_count", layers);
    addU32("llama.embedding_length", hidden);
    addU32("llama.feed_forward_length", feed_forward);
    addU32("llama.attention.head_count", heads);
    addU32("llama.attention.head_count_kv", kv_heads);
    addU32("llama.context_length", context);
    addF32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
    addF32("llama.rope.freq_base", 10000.0f);
  }
  void addF32Tensor(const std::string& name, std::vector<uint64_t> dims,
                    const std::vector<float>& values) {
    std::string data(values.size() * 4, '\0');
    if (!values.empty()) std::memcpy(&data[0], values.data(), data.size());
    tensors.push_back(GgufTensorSpec{name, std::move(dims), 0, data, std::nullopt});
  }

  // The encoded tensor info of `tensor` at `offset`.
  static std::string tensorInfo(const GgufTensorSpec& tensor, uint64_t offset) {
    std::string out = ggufString(tensor.name) + u32le(static_cast<uint32_t>(tensor.dims.size()));
    for (uint64_t d : tensor.dims)
      out += u64le(d);
    return out + u32le(tensor.type) + u64le(offset);
  }

  std::string bytes() const {
    std::string out = "GGUF" + u32le(version) + u64le(tensor_count.value_or(tensors.size())) +
                      u64le(metadata_count.value_or(entries.size()));
    for (const std::string& entry : entries)
      out += entry;
    std::string data;
    for (const GgufTensorSpec& tensor : tensors) {
      data.append((alignment - data.size() % alignment) % alignment, '\0');
      const uint64_t offset = tensor.offset.value_or(data.size());
      out += tensorInfo(tensor, offset);
      if (!tensor.offset) data += tensor.data;
    }
    out += raw_tensor_infos;
    out.append((alignment - out.size() % alignment) % alignment, '\0');
    return out + data;
  }

  void write(const std::string& path) const { writeFile(path, bytes()); }

  static void writeFile(const std::string& path, const std::string& bytes) {
    std::ofstream(path, std::ios::binary)
        .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
};

}  // namespace ree::models::test
