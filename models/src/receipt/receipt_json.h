// Shared by the receipt files (receipt.h): receipt_format.cpp (Receipt -> JSON, hashes, writing),
// receipt_parse.cpp (JSON -> Receipt, strict), receipt_validate.cpp (internal consistency) and
// receipt_verify.cpp (re-execution).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "ree/models/receipt.h"

namespace ree::receipt_detail {

using Json = nlohmann::json;

// Canonical JSON: keys sorted (nlohmann's objects are std::maps: byte order, which is code point
// order for UTF-8, as Python's sort_keys), no whitespace, UTF-8 unescaped, control characters
// escaped as Python does. The receipt holds no floats, so number formatting cannot differ.
std::string canonicalJson(const Json& value);

// Strings the receipt stores must be valid UTF-8 so that the bytes written are the bytes hashed;
// invalid sequences become U+FFFD exactly as nlohmann's dump writes them.
std::string validUtf8(const std::string& text);

// Decimal form of a float32 recorded next to its bits: "%.9g" round-trips every float32.
std::string floatDecimal(float value);
// The float32's bits as 8 lowercase hex digits ("3f800000" for 1.0f).
std::string bitsHex(float value);

bool isLowerHex(const std::string& s, size_t digits);

// The receipt without receipt_sha256, as the canonical body and the file hold it.
Json receiptBodyJson(const Receipt& receipt);

}  // namespace ree::receipt_detail
