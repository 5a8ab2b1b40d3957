// Typed reads of GGUF metadata values (GgufFile::integer, number, string), each failing with one
// line naming the file and the key.
#include <cstring>
#include <limits>

#include "ree/core/text.h"
#include "ree/models/gguf.h"

namespace ree::models {
namespace {

// The value of an integer type as a signed 128-bit-free pair: negative (with magnitude) or not.
bool integerValue(const GgufValue& value, bool* negative, uint64_t* magnitude) {
  const uint64_t bits = value.scalar;
  auto signedOf = [&](int width) {
    const uint64_t sign = uint64_t{1} << (width - 1);
    *negative = (bits & sign) != 0;
    *magnitude = *negative ? (~bits + 1) & ((width == 64) ? ~uint64_t{0} : (sign << 1) - 1) : bits;
  };
  *negative = false;
  *magnitude = bits;
  switch (value.type) {
    case GgufValueType::kU8:
    case GgufValueType::kU16:
    case GgufValueType::kU32:
    case GgufValueType::kU64:
      return true;
    case GgufValueType::kI8:
      signedOf(8);
      return true;
    case GgufValueType::kI16:
      signedOf(16);
      return true;
    case GgufValueType::kI32:
      signedOf(32);
      return true;
    case GgufValueType::kI64:
      signedOf(64);
      return true;
    default:
      return false;
  }
}

Status keyFailure(const GgufFile& file, const std::string& key, const std::string& what) {
  return REE_FAIL(Status::kIoError, "GGUF file '%s': metadata key '%s' %s",
                  printableText(file.path(), 400).c_str(), printableText(key).c_str(),
                  what.c_str());
}

Status findKey(const GgufFile& file, const std::string& key, const GgufValue** out) {
  *out = file.find(key);
  if (*out == nullptr) return keyFailure(file, key, "is missing");
  return Status::kSuccess;
}

}  // namespace

Status GgufFile::integer(const std::string& key, int64_t* out) const {
  const GgufValue* value = nullptr;
  REE_RETURN_IF_ERROR(findKey(*this, key, &value));
  bool negative = false;
  uint64_t magnitude = 0;
  if (!integerValue(*value, &negative, &magnitude)) {
    return keyFailure(
        *this, key, std::string("has type ") + ggufValueTypeName(value->type) + ", not an integer");
  }
  if (negative) return keyFailure(*this, key, "is negative (-" + std::to_string(magnitude) + ")");
  if (magnitude > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return keyFailure(*this, key, "is " + std::to_string(magnitude) + ", above 2^63 - 1");
  }
  *out = static_cast<int64_t>(magnitude);
  return Status::kSuccess;
}

Status GgufFile::number(const std::string& key, double* out) const {
  const GgufValue* value = nullptr;
  REE_RETURN_IF_ERROR(findKey(*this, key, &value));
  if (value->type == GgufValueType::kF32) {
    float f = 0.0f;
    const auto bits = static_cast<uint32_t>(value->scalar);
    std::memcpy(&f, &bits, sizeof(f));
    *out = f;
    return Status::kSuccess;
  }
  if (value->type == GgufValueType::kF64) {
    std::memcpy(out, &value->scalar, sizeof(*out));
    return Status::kSuccess;
  }
  bool negative = false;
  uint64_t magnitude = 0;
  if (!integerValue(*value, &negative, &magnitude)) {
    return keyFailure(*this, key,
                      std::string("has type ") + ggufValueTypeName(value->type) + ", not a number");
  }
  *out = negative ? -static_cast<double>(magnitude) : static_cast<double>(magnitude);
  return Status::kSuccess;
}

Status GgufFile::string(const std::string& key, std::string* out) const {
  const GgufValue* value = nullptr;
  REE_RETURN_IF_ERROR(findKey(*this, key, &value));
  if (value->type != GgufValueType::kString) {
    return keyFailure(*this, key,
                      std::string("has type ") + ggufValueTypeName(value->type) + ", not STRING");
  }
  *out = std::string(value->text);
  return Status::kSuccess;
}

}  // namespace ree::models
