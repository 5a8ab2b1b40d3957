// Decoders (see tokenizer_decoder.h).
#include "tokenizer_decoder.h"

#include <algorithm>
#include <string_view>

#include "tokenizer_byte_level.h"
#include "tokenizer_text.h"

namespace ree::models::tokenizer_internal {
namespace {

// A token whose every character is in the byte alphabet gives those bytes; any other token (e.g.
// an added token with a space) gives its own UTF-8 bytes. The whole is decoded lossily.
void decodeByteLevel(std::vector<std::string>* tokens) {
  const ByteLevelAlphabet& alphabet = byteLevelAlphabet();
  std::string bytes;
  for (const std::string& token : *tokens) {
    std::string mapped;
    bool all_mapped = true;
    for (size_t i = 0; i < token.size();) {
      const size_t length = text::utf8SequenceLength(static_cast<unsigned char>(token[i]));
      auto it = alphabet.code_point_to_byte.find(
          text::firstCodePoint(std::string_view(token).substr(i, length)));
      if (it == alphabet.code_point_to_byte.end()) {
        all_mapped = false;
        break;
      }
      mapped += static_cast<char>(it->second);
      i += length;
    }
    bytes += all_mapped ? mapped : token;
  }
  *tokens = {text::lossyUtf8(bytes)};
}

// The byte of a "<0xNN>" token (hex digits in either case), or -1.
int byteTokenValue(const std::string& token) {
  if (token.size() != 6 || token.compare(0, 3, "<0x") != 0 || token[5] != '>') return -1;
  unsigned value = 0;
  for (int k = 3; k < 5; ++k) {
    const char c = token[k];
    unsigned digit;
    if (c >= '0' && c <= '9') {
      digit = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      digit = c - 'a' + 10;
    } else if (c >= 'A' && c <= 'F') {
      digit = c - 'A' + 10;
    } else {
      return -1;
    }
    value = value * 16 + digit;
  }
  return static_cast<int>(value);
}

// Runs of <0xNN> tokens become their bytes if valid UTF-8, else one U+FFFD per byte.
void decodeByteFallback(std::vector<std::string>* tokens) {
  std::vector<std::string> out;
  std::string pending;
  auto flush = [&]() {
    if (pending.empty()) return;
    if (text::isValidUtf8(pending)) {
      out.push_back(pending);
    } else {
      for (size_t i = 0; i < pending.size(); ++i)
        out.push_back("\xEF\xBF\xBD");
    }
    pending.clear();
  };
  for (std::string& token : *tokens) {
    const int byte = byteTokenValue(token);
    if (byte >= 0) {
      pending += static_cast<char>(byte);
    } else {
      flush();
      out.push_back(std::move(token));
    }
  }
  flush();
  *tokens = std::move(out);
}

// Strip(content, start, stop): up to `start` leading and `stop` trailing `content` characters.
std::string stripToken(const std::string& token, const std::string& content, size_t start,
                       size_t stop) {
  std::vector<std::string_view> chars;
  for (size_t i = 0; i < token.size();) {
    const size_t length = text::utf8SequenceLength(static_cast<unsigned char>(token[i]));
    chars.push_back(std::string_view(token).substr(i, length));
    i += length;
  }
  size_t start_cut = 0;
  for (size_t i = 0; i < std::min(start, chars.size()); ++i) {
    if (chars[i] != content) break;
    start_cut = i + 1;
  }
  size_t stop_cut = chars.size();
  for (size_t i = 0; i < std::min(stop, chars.size()); ++i) {
    const size_t index = chars.size() - i - 1;
    if (chars[index] != content) break;
    stop_cut = index;
  }
  std::string stripped;
  for (size_t i = start_cut; i < stop_cut; ++i)
    stripped += chars[i];
  return stripped;
}

// tokenizers drops every replacement character of the first token (unless the prepend scheme is
// "never") and turns the others into spaces.
void decodeMetaspace(std::vector<std::string>* tokens, const std::string& replacement,
                     PrependScheme scheme) {
  for (size_t t = 0; t < tokens->size(); ++t) {
    std::string& token = (*tokens)[t];
    const bool drop = t == 0 && scheme != PrependScheme::kNever;
    std::string decoded;
    size_t at = 0, found;
    while ((found = token.find(replacement, at)) != std::string::npos) {
      decoded.append(token, at, found - at);
      if (!drop) decoded += ' ';
      at = found + replacement.size();
    }
    decoded.append(token, at, std::string::npos);
    token = std::move(decoded);
  }
}

Status parseStrip(const LoadContext& ctx, const json& object, const std::string& field,
                  Decoder* out) {
  out->kind = Decoder::Kind::kStrip;
  REE_RETURN_IF_ERROR(ctx.getRequiredString(object, "content", field, &out->content));
  if (out->content.empty() || text::utf8SequenceLength(static_cast<unsigned char>(
                                  out->content[0])) != out->content.size()) {
    return ctx.malformed(field + ".content", "expected a single character");
  }
  REE_RETURN_IF_ERROR(ctx.getRequiredSize(object, "start", field, &out->strip_start));
  return ctx.getRequiredSize(object, "stop", field, &out->strip_stop);
}

}  // namespace

Status Decoder::apply(std::vector<std::string>* tokens) const {
  switch (kind) {
    case Kind::kSequence:
      for (const Decoder& child : children)
        REE_RETURN_IF_ERROR(child.apply(tokens));
      return Status::kSuccess;
    case Kind::kByteLevel:
      decodeByteLevel(tokens);
      return Status::kSuccess;
    case Kind::kReplace:
      for (std::string& token : *tokens)
        REE_RETURN_IF_ERROR(replaceAll(pattern, &token, content));
      return Status::kSuccess;
    case Kind::kByteFallback:
      decodeByteFallback(tokens);
      return Status::kSuccess;
    case Kind::kFuse: {
      std::string joined;
      for (const std::string& token : *tokens)
        joined += token;
      *tokens = {joined};
      return Status::kSuccess;
    }
    case Kind::kStrip:
      for (std::string& token : *tokens)
        token = stripToken(token, content, strip_start, strip_stop);
      return Status::kSuccess;
    case Kind::kMetaspace:
      decodeMetaspace(tokens, content, prepend_scheme);
      return Status::kSuccess;
  }
  return Status::kSuccess;
}

Status parseDecoder(const LoadContext& ctx, const json& object, const std::string& field,
                    Decoder* out) {
  std::string type;
  REE_RETURN_IF_ERROR(ctx.getType(object, field, &type));
  if (type == "Sequence") {
    out->kind = Decoder::Kind::kSequence;
    const json* list = nullptr;
    REE_RETURN_IF_ERROR(ctx.getArray(object, "decoders", field, kMaxListItems, &list));
    for (size_t i = 0; i < list->size(); ++i) {
      Decoder child;
      REE_RETURN_IF_ERROR(
          parseDecoder(ctx, (*list)[i], elementField(field + ".decoders", i), &child));
      out->children.push_back(std::move(child));
    }
    return Status::kSuccess;
  }
  if (type == "Replace") {
    out->kind = Decoder::Kind::kReplace;
    REE_RETURN_IF_ERROR(ctx.getRequiredString(object, "content", field, &out->content));
    if (!object.contains("pattern")) return ctx.malformed(field + ".pattern", "missing");
    return parsePattern(ctx, object["pattern"], field + ".pattern", &out->pattern);
  }
  if (type == "Strip") return parseStrip(ctx, object, field, out);
  if (type == "Metaspace") {
    out->kind = Decoder::Kind::kMetaspace;
    out->content = "\xE2\x96\x81";
    bool split = true;
    return parseMetaspaceOptions(ctx, object, field, &out->content, &out->prepend_scheme, &split);
  }
  if (type == "ByteLevel") {
    out->kind = Decoder::Kind::kByteLevel;
    return checkByteLevelFields(ctx, object, field);
  }
  static const std::pair<const char*, Decoder::Kind> kSimple[] = {
      {"ByteFallback", Decoder::Kind::kByteFallback}, {"Fuse", Decoder::Kind::kFuse}};
  for (const auto& [name, kind] : kSimple) {
    if (type == name) {
      out->kind = kind;
      return Status::kSuccess;
    }
  }
  return ctx.unsupported(field + ".type", "unsupported decoder '" + type +
                                              "' (supported: Sequence, ByteLevel, Replace, "
                                              "ByteFallback, Fuse, Strip, Metaspace)");
}

}  // namespace ree::models::tokenizer_internal
