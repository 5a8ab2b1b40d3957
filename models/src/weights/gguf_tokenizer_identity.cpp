// The bytes whose SHA-256 is a GGUF model's tokenizer_sha256 (docs/receipt.md, "Model identity"):
// every metadata entry the tokenizer and the chat template are built from, re-encoded as GGUF
// encodes them, in ascending byte order of the keys, so that the digest does not depend on where
// in the file the entries sit or on what else the file holds.
#include <algorithm>
#include <memory>
#include <vector>

#include "ree/models/gguf.h"
#include "ree/models/model_identity.h"

namespace ree {
namespace {

using models::GgufValue;
using models::GgufValueType;

constexpr const char* kTokenizerKeyPrefix = "tokenizer.";
// Read by the tokenizer besides tokenizer.*: it picks byte fallback and the decoders.
constexpr const char* kArchitectureKey = "general.architecture";

void appendLittleEndian(uint64_t value, size_t bytes, std::string* out) {
  for (size_t i = 0; i < bytes; ++i)
    out->push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

void appendString(std::string_view text, std::string* out) {
  appendLittleEndian(text.size(), 8, out);
  out->append(text.data(), text.size());
}

// The value as the file encodes it after its type: scalars little-endian, strings as uint64
// length + bytes, arrays as uint32 element type + uint64 count + the elements (never nested: the
// reader refuses that).
void appendValue(const GgufValue& value, std::string* out) {
  if (value.type == GgufValueType::kString) {
    appendString(value.text, out);
    return;
  }
  if (value.type != GgufValueType::kArray) {
    appendLittleEndian(value.scalar, ggufScalarBytes(value.type), out);
    return;
  }
  appendLittleEndian(static_cast<uint32_t>(value.element_type), 4, out);
  appendLittleEndian(value.count, 8, out);
  if (value.element_type == GgufValueType::kString) {
    for (std::string_view text : value.strings)
      appendString(text, out);
  } else if (value.count > 0) {
    // Numbers lie consecutively in the mapping, already little-endian.
    out->append(reinterpret_cast<const char*>(value.elements),
                value.count * ggufScalarBytes(value.element_type));
  }
}

bool isTokenizerKey(const std::string& key) {
  return key.rfind(kTokenizerKeyPrefix, 0) == 0;
}

}  // namespace

Status ggufTokenizerIdentityBytes(const models::GgufFile& file, std::string* bytes) {
  REE_CHECK_ARG(bytes != nullptr, "ggufTokenizerIdentityBytes: bytes is null");
  bytes->clear();
  std::vector<std::string> keys;
  for (const std::string& key : file.keys()) {
    if (isTokenizerKey(key)) keys.push_back(key);
  }
  if (keys.empty()) return Status::kSuccess;  // no tokenizer, no chat template: nothing to bind
  if (file.find(kArchitectureKey) != nullptr) keys.push_back(kArchitectureKey);
  std::sort(keys.begin(), keys.end());  // bytewise: char_traits<char> compares as unsigned char
  *bytes = std::string(kGgufTokenizerVersion) + "\n";
  for (const std::string& key : keys) {
    const GgufValue* value = file.find(key);
    appendString(key, bytes);
    appendLittleEndian(static_cast<uint32_t>(value->type), 4, bytes);
    appendValue(*value, bytes);
  }
  return Status::kSuccess;
}

Status ggufTokenizerIdentityBytes(const std::string& path, std::string* bytes) {
  REE_CHECK_ARG(bytes != nullptr, "ggufTokenizerIdentityBytes: bytes is null");
  std::unique_ptr<models::GgufFile> file;
  REE_RETURN_IF_ERROR(models::GgufFile::open(path, &file));
  return ggufTokenizerIdentityBytes(*file, bytes);
}

}  // namespace ree
