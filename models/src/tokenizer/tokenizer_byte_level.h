// Internal to the tokenizer: GPT-2's byte-level alphabet, shared by the ByteLevel pre-tokenizer
// (bytes to printable characters) and the ByteLevel decoder (back to bytes).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <unordered_map>

namespace ree::models::tokenizer_internal {

// Every byte maps to a printable code point: printable Latin-1 bytes to themselves, the others to
// U+0100 onwards, in byte order.
struct ByteLevelAlphabet {
  std::array<std::string, 256> byte_to_utf8;
  std::unordered_map<uint32_t, uint8_t> code_point_to_byte;
};

const ByteLevelAlphabet& byteLevelAlphabet();

}  // namespace ree::models::tokenizer_internal
