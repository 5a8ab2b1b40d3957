// Typed, validated access to the fields of one JSON object of a config file (model_config.cpp).
// Every error is one line naming the file and the field (with `prefix`, e.g. "rope_scaling.",
// for nested objects) and, for a value out of range, the bound it broke. A JSON null counts as
// absent, as transformers treats it.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "ree/core/status.h"

namespace ree::models {

class ConfigFieldReader {
 public:
  using Json = nlohmann::json;

  ConfigFieldReader(const Json& object, std::string source, std::string prefix = "")
      : object_(object), source_(std::move(source)), prefix_(std::move(prefix)) {}

  const Json* find(const char* key) const;
  bool has(const char* key) const { return find(key) != nullptr; }
  // Present in the object, null or not.
  bool contains(const char* key) const { return object_.contains(key); }

  Status fail(Status status, const char* key, const std::string& what) const;

  // An integer in [min_value, max_value]; absent: *out = fallback, or an error when fallback is
  // empty. A fallback is checked against the range too.
  Status integer(const char* key, std::optional<int64_t> fallback, int64_t min_value,
                 int64_t max_value, int64_t* out) const;

  // A finite number above `min_value` (or equal to it when `min_inclusive`) and at most
  // `max_value`; absent: *out = fallback, or an error when fallback is empty.
  Status number(const char* key, std::optional<double> fallback, double min_value,
                bool min_inclusive, double max_value, double* out) const;

  Status boolean(const char* key, bool fallback, bool* out) const;
  Status string(const char* key, const std::string& fallback, std::string* out) const;

  // A token id in [0, vocab_size) (no upper bound when vocab_size <= 0).
  Status tokenId(const char* key, const Json& value, int64_t vocab_size, int64_t* out) const;
  // bos/pad style: an int or null; absent: `fallback`.
  Status optionalTokenId(const char* key, std::optional<int64_t> fallback, int64_t vocab_size,
                         std::optional<int64_t>* out) const;
  // eos style: an int, a list of ints, or null; absent: `fallback`.
  Status tokenIdList(const char* key, std::optional<int64_t> fallback, int64_t vocab_size,
                     std::vector<int64_t>* out) const;

  const std::string& source() const { return source_; }

 private:
  const Json& object_;
  std::string source_;
  std::string prefix_;
};

}  // namespace ree::models
