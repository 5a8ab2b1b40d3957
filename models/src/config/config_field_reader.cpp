#include "config_field_reader.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "ree/core/text.h"

namespace ree::models {
namespace {

// Shortest text that reads back as `value` (the JSON text transformers would show).
std::string numberText(double value) {
  char text[40];
  std::snprintf(text, sizeof(text), "%.17g", value);
  for (int precision = 1; precision < 17; ++precision) {
    char shorter[40];
    std::snprintf(shorter, sizeof(shorter), "%.*g", precision, value);
    if (std::strtod(shorter, nullptr) == value) return shorter;
  }
  return text;
}

}  // namespace

const ConfigFieldReader::Json* ConfigFieldReader::find(const char* key) const {
  auto it = object_.find(key);
  if (it == object_.end() || it->is_null()) return nullptr;
  return &*it;
}

Status ConfigFieldReader::fail(Status status, const char* key, const std::string& what) const {
  return REE_FAIL(status, "config file '%s': field '%s%s' %s", source_.c_str(), prefix_.c_str(),
                  key, what.c_str());
}

Status ConfigFieldReader::integer(const char* key, std::optional<int64_t> fallback,
                                  int64_t min_value, int64_t max_value, int64_t* out) const {
  const Json* value = find(key);
  if (value == nullptr) {
    if (!fallback) return fail(Status::kInvalidArgument, key, "is missing");
    *out = *fallback;
  } else if (value->is_number_unsigned()) {
    if (value->get<uint64_t>() > static_cast<uint64_t>(max_value)) {
      return fail(Status::kInvalidArgument, key,
                  "is " + std::to_string(value->get<uint64_t>()) + ", exceeds the limit " +
                      std::to_string(max_value));
    }
    *out = static_cast<int64_t>(value->get<uint64_t>());
  } else if (value->is_number_integer()) {
    *out = value->get<int64_t>();
  } else {
    return fail(Status::kInvalidArgument, key,
                "is not an integer (" + printableText(value->dump(), 40) + ")");
  }
  const std::string shown = std::to_string(*out) + (value == nullptr ? " (the default)" : "");
  if (*out < min_value) {
    return fail(Status::kInvalidArgument, key,
                "is " + shown + ", must be >= " + std::to_string(min_value));
  }
  if (*out > max_value) {
    return fail(Status::kInvalidArgument, key,
                "is " + shown + ", exceeds the limit " + std::to_string(max_value));
  }
  return Status::kSuccess;
}

Status ConfigFieldReader::number(const char* key, std::optional<double> fallback, double min_value,
                                 bool min_inclusive, double max_value, double* out) const {
  const Json* value = find(key);
  if (value == nullptr) {
    if (!fallback) return fail(Status::kInvalidArgument, key, "is missing");
    *out = *fallback;
    return Status::kSuccess;
  }
  if (!value->is_number()) {
    return fail(Status::kInvalidArgument, key,
                "is not a number (" + printableText(value->dump(), 40) + ")");
  }
  *out = value->get<double>();
  const bool above_min = min_inclusive ? *out >= min_value : *out > min_value;
  if (!std::isfinite(*out) || !above_min) {
    return fail(Status::kInvalidArgument, key,
                "is " + value->dump() + ", must be " + (min_inclusive ? ">= " : "> ") +
                    numberText(min_value));
  }
  if (*out > max_value) {
    return fail(Status::kInvalidArgument, key,
                "is " + value->dump() + ", exceeds the limit " + numberText(max_value));
  }
  return Status::kSuccess;
}

Status ConfigFieldReader::boolean(const char* key, bool fallback, bool* out) const {
  const Json* value = find(key);
  if (value == nullptr) {
    *out = fallback;
    return Status::kSuccess;
  }
  if (!value->is_boolean()) {
    return fail(Status::kInvalidArgument, key,
                "is not a boolean (" + printableText(value->dump(), 40) + ")");
  }
  *out = value->get<bool>();
  return Status::kSuccess;
}

Status ConfigFieldReader::string(const char* key, const std::string& fallback,
                                 std::string* out) const {
  const Json* value = find(key);
  if (value == nullptr) {
    *out = fallback;
    return Status::kSuccess;
  }
  if (!value->is_string()) {
    return fail(Status::kInvalidArgument, key,
                "is not a string (" + printableText(value->dump(), 40) + ")");
  }
  *out = value->get<std::string>();
  return Status::kSuccess;
}

Status ConfigFieldReader::tokenId(const char* key, const Json& value, int64_t vocab_size,
                                  int64_t* out) const {
  if (!value.is_number_integer()) {
    return fail(Status::kInvalidArgument, key,
                "holds a non-integer token id (" + printableText(value.dump(), 40) + ")");
  }
  if (value.is_number_unsigned() && value.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
    return fail(Status::kInvalidArgument, key, "holds a token id that is too large");
  }
  *out = value.get<int64_t>();
  if (*out < 0 || (vocab_size > 0 && *out >= vocab_size)) {
    return fail(Status::kInvalidArgument, key,
                "holds token id " + std::to_string(*out) + ", outside the vocabulary [0, " +
                    std::to_string(vocab_size) + ")");
  }
  return Status::kSuccess;
}

Status ConfigFieldReader::optionalTokenId(const char* key, std::optional<int64_t> fallback,
                                          int64_t vocab_size, std::optional<int64_t>* out) const {
  auto it = object_.find(key);
  if (it == object_.end()) {
    *out = fallback;
    if (fallback && vocab_size > 0 && (*fallback < 0 || *fallback >= vocab_size)) {
      return fail(Status::kInvalidArgument, key,
                  "is absent and its default " + std::to_string(*fallback) +
                      " lies outside the vocabulary");
    }
    return Status::kSuccess;
  }
  out->reset();
  if (it->is_null()) return Status::kSuccess;
  int64_t id = 0;
  REE_RETURN_IF_ERROR(tokenId(key, *it, vocab_size, &id));
  *out = id;
  return Status::kSuccess;
}

Status ConfigFieldReader::tokenIdList(const char* key, std::optional<int64_t> fallback,
                                      int64_t vocab_size, std::vector<int64_t>* out) const {
  out->clear();
  auto it = object_.find(key);
  if (it == object_.end()) {
    std::optional<int64_t> single;
    REE_RETURN_IF_ERROR(optionalTokenId(key, fallback, vocab_size, &single));
    if (single) out->push_back(*single);
    return Status::kSuccess;
  }
  if (it->is_null()) return Status::kSuccess;
  if (it->is_array()) {
    if (it->empty()) return fail(Status::kInvalidArgument, key, "is an empty list");
    for (const Json& element : *it) {
      int64_t id = 0;
      REE_RETURN_IF_ERROR(tokenId(key, element, vocab_size, &id));
      out->push_back(id);
    }
    return Status::kSuccess;
  }
  int64_t id = 0;
  REE_RETURN_IF_ERROR(tokenId(key, *it, vocab_size, &id));
  out->push_back(id);
  return Status::kSuccess;
}

}  // namespace ree::models
