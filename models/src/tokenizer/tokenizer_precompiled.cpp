// The Precompiled normalizer (see tokenizer_precompiled.h): spm_precompiled 0.1.x, lib.rs.
#include "tokenizer_precompiled.h"

#include <algorithm>
#include <array>
#include <utility>

#include "tokenizer_text.h"
#include "tokenizer_unicode.h"

namespace ree::models::tokenizer_internal {
namespace {

// Rust's base64 STANDARD engine: the standard alphabet, canonical padding required, no trailing
// bits. False on anything else.
bool decodeBase64(std::string_view text, std::string* out) {
  static const std::array<int8_t, 256> kValues = [] {
    std::array<int8_t, 256> values{};
    values.fill(-1);
    const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (int i = 0; i < 64; ++i)
      values[static_cast<unsigned char>(alphabet[i])] = static_cast<int8_t>(i);
    return values;
  }();
  if (text.size() % 4 != 0) return false;
  out->clear();
  for (size_t at = 0; at < text.size(); at += 4) {
    const std::string_view group = text.substr(at, 4);
    size_t padding = 0;
    if (at + 4 == text.size() && group[3] == '=') padding = group[2] == '=' ? 2 : 1;
    uint32_t bits = 0;
    for (size_t k = 0; k < 4 - padding; ++k) {
      const int8_t value = kValues[static_cast<unsigned char>(group[k])];
      if (value < 0) return false;
      bits = bits << 6 | static_cast<uint32_t>(value);
    }
    bits <<= 6 * padding;
    if (padding > 0 && (bits & ((1u << (8 * padding)) - 1)) != 0) return false;  // trailing bits
    for (size_t k = 0; k < 3 - padding; ++k)
      out->push_back(static_cast<char>(bits >> (16 - 8 * k) & 0xFF));
  }
  return true;
}

uint32_t readLittleEndian32(const std::string& blob, size_t at) {
  return static_cast<uint32_t>(static_cast<unsigned char>(blob[at])) |
         static_cast<uint32_t>(static_cast<unsigned char>(blob[at + 1])) << 8 |
         static_cast<uint32_t>(static_cast<unsigned char>(blob[at + 2])) << 16 |
         static_cast<uint32_t>(static_cast<unsigned char>(blob[at + 3])) << 24;
}

// darts-clone unit fields, as spm_precompiled computes them on a 64-bit usize.
bool hasLeaf(uint64_t unit) {
  return (unit >> 8 & 1) == 1;
}
uint64_t valueOf(uint64_t unit) {
  return unit & ((uint64_t{1} << 31) - 1);
}
uint64_t labelOf(uint64_t unit) {
  return unit & ((uint64_t{1} << 31) | 0xFF);
}
uint64_t offsetOf(uint64_t unit) {
  return (unit >> 10) << ((unit & (uint64_t{1} << 9)) >> 6);
}

Status panics(const char* what) {
  return REE_FAIL(Status::kInvalidArgument,
                  "encode: the Precompiled normalizer's charsmap %s (tokenizers panics here)",
                  what);
}

}  // namespace

Status PrecompiledCharsmap::parse(const LoadContext& ctx, const json& object,
                                  const std::string& field, PrecompiledCharsmap* out) {
  std::string text, blob;
  REE_RETURN_IF_ERROR(
      ctx.getRequiredString(object, "precompiled_charsmap", field, &text, kMaxFileBytes));
  if (!decodeBase64(text, &blob)) {
    return ctx.malformed(field + ".precompiled_charsmap", "invalid base64");
  }
  if (blob.size() < 4)
    return ctx.malformed(field + ".precompiled_charsmap", "shorter than 4 bytes");
  const size_t units = readLittleEndian32(blob, 0) / 4;
  if (blob.size() - 4 < units * 4) {
    return ctx.malformed(field + ".precompiled_charsmap", "the trie is longer than the blob");
  }
  if (units == 0) {
    return ctx.unsupported(field + ".precompiled_charsmap",
                           "an empty trie (tokenizers panics on any text)");
  }
  out->trie_.resize(units);
  for (size_t i = 0; i < units; ++i)
    out->trie_[i] = readLittleEndian32(blob, 4 + 4 * i);
  out->replacements_ = blob.substr(4 + 4 * units);
  if (!text::isValidUtf8(out->replacements_)) {
    return ctx.malformed(field + ".precompiled_charsmap", "replacements are not UTF-8");
  }
  return Status::kSuccess;
}

// DoubleArray::common_prefix_search, walked to its end as in spm_precompiled (an index outside
// the trie anywhere on the walk is a panic there), keeping the first (shortest) result.
Status PrecompiledCharsmap::transform(std::string_view chunk, bool* found,
                                      std::string_view* replacement) const {
  *found = false;
  uint64_t first_value = 0;
  uint64_t node = offsetOf(trie_[0]);
  for (char byte : chunk) {
    const auto c = static_cast<unsigned char>(byte);
    if (c == 0) break;
    node ^= c;
    if (node >= trie_.size()) return panics("leads outside its trie");
    const uint64_t unit = trie_[node];
    if (labelOf(unit) != c) break;
    node ^= offsetOf(unit);
    if (!hasLeaf(unit)) continue;
    if (node >= trie_.size()) return panics("leads outside its trie");
    if (!*found) first_value = valueOf(trie_[node]);
    *found = true;
  }
  if (!*found) return Status::kSuccess;
  // The replacement runs from the value to the next NUL; Rust slices it as a str, so it must
  // start inside the replacements and on a character boundary.
  if (first_value > replacements_.size()) return panics("points past its replacements");
  const size_t begin = static_cast<size_t>(first_value);
  if (begin < replacements_.size() &&
      (static_cast<unsigned char>(replacements_[begin]) & 0xC0) == 0x80) {
    return panics("points inside a character of its replacements");
  }
  const size_t end = std::min(replacements_.find('\0', begin), replacements_.size());
  *replacement = std::string_view(replacements_).substr(begin, end - begin);
  return Status::kSuccess;
}

Status PrecompiledCharsmap::apply(std::string* text) const {
  std::string out;
  out.reserve(text->size());
  bool found = false;
  std::string_view replacement;
  for (std::string_view cluster : graphemeClusters(*text)) {
    if (cluster.size() < 6) {
      REE_RETURN_IF_ERROR(transform(cluster, &found, &replacement));
      if (found) {
        out.append(replacement);
        continue;
      }
    }
    for (size_t at = 0; at < cluster.size();) {
      const size_t begin = at;
      nextCodePoint(cluster, &at);
      const std::string_view character = cluster.substr(begin, at - begin);
      REE_RETURN_IF_ERROR(transform(character, &found, &replacement));
      out.append(found ? replacement : character);
    }
  }
  *text = std::move(out);
  return Status::kSuccess;
}

}  // namespace ree::models::tokenizer_internal
