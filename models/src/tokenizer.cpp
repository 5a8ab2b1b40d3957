// Hugging Face tokenizer.json: loading and the encode/decode pipelines (docs/tokenizer.md).
//
// The pipeline mirrors `tokenizers` step for step, because exact ids depend on its order:
//   1. added tokens with normalized=false are cut out of the raw text (leftmost-longest match);
//   2. each remaining piece is normalized, then added tokens with normalized=true are cut out;
//   3. the pre-tokenizer splits the remaining pieces;
//   4. the BPE model turns each piece into ids (merges by rank, leftmost first);
//   5. the post-processor adds BOS/EOS when add_special_tokens is set.
#include "ree/models/tokenizer.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <fstream>
#include <queue>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "tokenizer_text.h"

namespace ree::models {
namespace {

using json = nlohmann::json;
using text::Span;

// The GPT-2 pre-tokenization regex that ByteLevel(use_regex=true) applies.
constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// ---------------------------------------------------------------------------------------------
// Load errors: always name the file and the JSON field.

struct LoadContext {
  std::string source;

  Status fail(Status status, const std::string& field, const std::string& what) const {
    return REE_FAIL(status, "tokenizer '%s': field '%s': %s", source.c_str(), field.c_str(),
                    what.c_str());
  }
  Status unsupported(const std::string& field, const std::string& what) const {
    return fail(Status::kUnsupported, field, what);
  }
  Status malformed(const std::string& field, const std::string& what) const {
    return fail(Status::kIoError, field, what);
  }

  // Optional typed members: absent or null keeps the default.
  Status getString(const json& object, const std::string& key, const std::string& field,
                   std::string* out, bool* present = nullptr) const {
    if (present) *present = false;
    auto it = object.find(key);
    if (it == object.end() || it->is_null()) return Status::kSuccess;
    if (!it->is_string()) return malformed(field + "." + key, "expected a string");
    *out = it->get<std::string>();
    if (present) *present = true;
    return Status::kSuccess;
  }
  Status getBool(const json& object, const std::string& key, const std::string& field,
                 bool* out) const {
    auto it = object.find(key);
    if (it == object.end() || it->is_null()) return Status::kSuccess;
    if (!it->is_boolean()) return malformed(field + "." + key, "expected a boolean");
    *out = it->get<bool>();
    return Status::kSuccess;
  }
  Status getSize(const json& object, const std::string& key, const std::string& field,
                 size_t* out) const {
    auto it = object.find(key);
    if (it == object.end() || it->is_null()) return Status::kSuccess;
    if (!it->is_number_unsigned())
      return malformed(field + "." + key, "expected an unsigned integer");
    *out = it->get<size_t>();
    return Status::kSuccess;
  }
  Status getType(const json& object, const std::string& field, std::string* type) const {
    if (!object.is_object()) return malformed(field, "expected an object or null");
    auto it = object.find("type");
    if (it == object.end() || !it->is_string()) return malformed(field + ".type", "missing");
    *type = it->get<std::string>();
    return Status::kSuccess;
  }
};

// ---------------------------------------------------------------------------------------------
// Patterns (Split, Replace): a literal string or a regex.

struct Pattern {
  std::string literal;
  std::shared_ptr<const text::Regex> regex;

  Status findAll(std::string_view input, std::vector<Span>* matches) const {
    if (regex) return regex->findAll(input, matches);
    matches->clear();
    size_t at = 0;
    while ((at = input.find(literal, at)) != std::string_view::npos) {
      matches->emplace_back(at, at + literal.size());
      at += literal.size();
    }
    return Status::kSuccess;
  }
};

Status parsePattern(const LoadContext& ctx, const json& object, const std::string& field,
                    Pattern* pattern) {
  if (!object.is_object() || object.size() != 1) {
    return ctx.malformed(field, "expected {\"String\": ...} or {\"Regex\": ...}");
  }
  if (object.contains("String") && object["String"].is_string()) {
    pattern->literal = object["String"].get<std::string>();
    if (pattern->literal.empty()) return ctx.unsupported(field + ".String", "empty pattern");
    return Status::kSuccess;
  }
  if (object.contains("Regex") && object["Regex"].is_string()) {
    std::string error;
    pattern->regex = text::Regex::compile(object["Regex"].get<std::string>(), &error);
    if (!pattern->regex) return ctx.unsupported(field + ".Regex", "PCRE2 rejects it: " + error);
    return Status::kSuccess;
  }
  return ctx.malformed(field, "expected {\"String\": ...} or {\"Regex\": ...}");
}

std::string replaceAll(const Pattern& pattern, const std::string& input, const std::string& content,
                       Status* status) {
  std::vector<Span> matches;
  *status = pattern.findAll(input, &matches);
  if (matches.empty()) return input;
  std::string out;
  size_t previous = 0;
  for (const Span& m : matches) {
    out.append(input, previous, m.first - previous);
    out += content;
    previous = m.second;
  }
  out.append(input, previous, std::string::npos);
  return out;
}

// SplitDelimiterBehavior of `tokenizers` (normalizer.rs, NormalizedString::split).
enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

// Pieces of a `length`-byte string cut at `matches`, after the behavior; empty pieces dropped.
std::vector<Span> splitByMatches(size_t length, const std::vector<Span>& matches,
                                 SplitBehavior behavior, bool invert) {
  struct Part {
    Span span;
    bool flag;  // is a match (before the fold) / must be removed (after it)
  };
  std::vector<Part> parts;
  size_t previous = 0;
  for (const Span& m : matches) {
    if (previous != m.first) parts.push_back({{previous, m.first}, false});
    parts.push_back({m, true});
    previous = m.second;
  }
  if (previous != length) parts.push_back({{previous, length}, false});
  if (invert) {
    for (Part& p : parts)
      p.flag = !p.flag;
  }
  std::vector<Part> folded;
  bool previous_match = false;
  switch (behavior) {
    case SplitBehavior::kRemoved:
      folded = parts;
      break;
    case SplitBehavior::kIsolated:
      for (const Part& p : parts)
        folded.push_back({p.span, false});
      break;
    case SplitBehavior::kContiguous:
      for (const Part& p : parts) {
        if (p.flag == previous_match && !folded.empty()) {
          folded.back().span.second = p.span.second;
        } else {
          folded.push_back({p.span, false});
        }
        previous_match = p.flag;
      }
      break;
    case SplitBehavior::kMergedWithPrevious:
      for (const Part& p : parts) {
        if (p.flag && !previous_match && !folded.empty()) {
          folded.back().span.second = p.span.second;
        } else {
          folded.push_back({p.span, false});
        }
        previous_match = p.flag;
      }
      break;
    case SplitBehavior::kMergedWithNext:
      for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
        if (it->flag && !previous_match && !folded.empty()) {
          folded.back().span.first = it->span.first;
        } else {
          folded.push_back({it->span, false});
        }
        previous_match = it->flag;
      }
      std::reverse(folded.begin(), folded.end());
      break;
  }
  std::vector<Span> out;
  for (const Part& p : folded) {
    if (!p.flag && p.span.second > p.span.first) out.push_back(p.span);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Byte-level alphabet of GPT-2: every byte maps to a printable code point.

struct ByteLevelAlphabet {
  std::array<std::string, 256> byte_to_utf8;
  std::unordered_map<uint32_t, uint8_t> code_point_to_byte;

  ByteLevelAlphabet() {
    uint32_t next_extra = 256;
    for (uint32_t b = 0; b < 256; ++b) {
      const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
      const uint32_t cp = printable ? b : next_extra++;
      byte_to_utf8[b] = text::encodeUtf8(cp);
      code_point_to_byte[cp] = static_cast<uint8_t>(b);
    }
  }
};

const ByteLevelAlphabet& byteLevelAlphabet() {
  static const ByteLevelAlphabet alphabet;
  return alphabet;
}

// ---------------------------------------------------------------------------------------------
// Pieces of text flowing through the pipeline.

struct Piece {
  std::string text;
  int32_t added_id = -1;   // >= 0: an added token, left alone by later stages
  bool at_origin = false;  // starts at offset 0 of the original text (Metaspace "first")
};

// ---------------------------------------------------------------------------------------------
// Normalizers: Sequence, Prepend, Replace.

struct Normalizer {
  enum class Kind { kSequence, kPrepend, kReplace } kind = Kind::kSequence;
  std::vector<Normalizer> children;
  std::string content;  // Prepend: prefix; Replace: replacement
  Pattern pattern;

  Status apply(std::string* s) const {
    switch (kind) {
      case Kind::kSequence:
        for (const Normalizer& child : children)
          REE_RETURN_IF_ERROR(child.apply(s));
        return Status::kSuccess;
      case Kind::kPrepend:
        if (!s->empty()) s->insert(0, content);
        return Status::kSuccess;
      case Kind::kReplace: {
        Status status = Status::kSuccess;
        *s = replaceAll(pattern, *s, content, &status);
        return status;
      }
    }
    return Status::kSuccess;
  }
};

Status parseNormalizer(const LoadContext& ctx, const json& object, const std::string& field,
                       Normalizer* out) {
  std::string type;
  REE_RETURN_IF_ERROR(ctx.getType(object, field, &type));
  if (type == "Sequence") {
    out->kind = Normalizer::Kind::kSequence;
    if (!object.contains("normalizers") || !object["normalizers"].is_array()) {
      return ctx.malformed(field + ".normalizers", "expected an array");
    }
    const json& list = object["normalizers"];
    for (size_t i = 0; i < list.size(); ++i) {
      Normalizer child;
      REE_RETURN_IF_ERROR(
          parseNormalizer(ctx, list[i], field + ".normalizers[" + std::to_string(i) + "]", &child));
      out->children.push_back(std::move(child));
    }
    return Status::kSuccess;
  }
  if (type == "Prepend") {
    out->kind = Normalizer::Kind::kPrepend;
    return ctx.getString(object, "prepend", field, &out->content);
  }
  if (type == "Replace") {
    out->kind = Normalizer::Kind::kReplace;
    REE_RETURN_IF_ERROR(ctx.getString(object, "content", field, &out->content));
    if (!object.contains("pattern")) return ctx.malformed(field + ".pattern", "missing");
    return parsePattern(ctx, object["pattern"], field + ".pattern", &out->pattern);
  }
  return ctx.unsupported(field + ".type",
                         "unsupported normalizer '" + type +
                             "' (supported: Sequence, Prepend, Replace; Unicode normalization "
                             "forms such as NFC need tables this build does not carry)");
}

// ---------------------------------------------------------------------------------------------
// Pre-tokenizers: Sequence, Split, ByteLevel, Metaspace.

enum class PrependScheme { kAlways, kFirst, kNever };

struct PreTokenizer {
  enum class Kind { kSequence, kSplit, kByteLevel, kMetaspace } kind = Kind::kSequence;
  std::vector<PreTokenizer> children;
  // Split
  Pattern pattern;
  SplitBehavior behavior = SplitBehavior::kIsolated;
  bool invert = false;
  // ByteLevel
  bool add_prefix_space = false;
  bool use_regex = true;
  std::shared_ptr<const text::Regex> gpt2_regex;
  // Metaspace
  std::string replacement = "\xE2\x96\x81";  // U+2581
  PrependScheme prepend_scheme = PrependScheme::kAlways;
  bool split = true;

  Status apply(std::vector<Piece>* pieces) const {
    if (kind == Kind::kSequence) {
      for (const PreTokenizer& child : children)
        REE_RETURN_IF_ERROR(child.apply(pieces));
      return Status::kSuccess;
    }
    std::vector<Piece> out;
    out.reserve(pieces->size());
    std::vector<Span> matches;
    for (Piece& piece : *pieces) {
      if (piece.added_id >= 0) {
        out.push_back(std::move(piece));
        continue;
      }
      std::vector<Span> spans;
      if (kind == Kind::kSplit) {
        REE_RETURN_IF_ERROR(pattern.findAll(piece.text, &matches));
        spans = splitByMatches(piece.text.size(), matches, behavior, invert);
      } else if (kind == Kind::kByteLevel) {
        if (add_prefix_space && piece.text.rfind(' ', 0) != 0) piece.text.insert(0, " ");
        if (use_regex) {
          REE_RETURN_IF_ERROR(gpt2_regex->findAll(piece.text, &matches));
          spans = splitByMatches(piece.text.size(), matches, SplitBehavior::kIsolated, false);
        } else if (!piece.text.empty()) {
          spans.push_back({0, piece.text.size()});
        }
      } else {  // Metaspace
        std::string replaced;
        for (char c : piece.text) {
          if (c == ' ') {
            replaced += replacement;
          } else {
            replaced += c;
          }
        }
        piece.text = std::move(replaced);
        const bool starts_with_replacement = piece.text.rfind(replacement, 0) == 0;
        if (!starts_with_replacement &&
            (prepend_scheme == PrependScheme::kAlways ||
             (prepend_scheme == PrependScheme::kFirst && piece.at_origin))) {
          piece.text.insert(0, replacement);
        }
        if (split) {
          Pattern literal;
          literal.literal = replacement;
          REE_RETURN_IF_ERROR(literal.findAll(piece.text, &matches));
          spans = splitByMatches(piece.text.size(), matches, SplitBehavior::kMergedWithNext, false);
        } else if (!piece.text.empty()) {
          spans.push_back({0, piece.text.size()});
        }
      }
      for (const Span& span : spans) {
        Piece sub;
        sub.text = piece.text.substr(span.first, span.second - span.first);
        sub.at_origin = piece.at_origin && span.first == 0;
        if (kind == Kind::kByteLevel) {
          std::string mapped;
          mapped.reserve(sub.text.size() * 2);
          for (unsigned char b : sub.text)
            mapped += byteLevelAlphabet().byte_to_utf8[b];
          sub.text = std::move(mapped);
        }
        out.push_back(std::move(sub));
      }
    }
    *pieces = std::move(out);
    return Status::kSuccess;
  }
};

Status parseMetaspaceOptions(const LoadContext& ctx, const json& object, const std::string& field,
                             std::string* replacement, PrependScheme* scheme, bool* split) {
  REE_RETURN_IF_ERROR(ctx.getString(object, "replacement", field, replacement));
  if (replacement->empty() || text::utf8SequenceLength(static_cast<unsigned char>(
                                  (*replacement)[0])) != replacement->size()) {
    return ctx.malformed(field + ".replacement", "expected a single character");
  }
  bool add_prefix_space = true;
  bool has_add_prefix_space = object.contains("add_prefix_space");
  REE_RETURN_IF_ERROR(ctx.getBool(object, "add_prefix_space", field, &add_prefix_space));
  std::string scheme_name;
  bool has_scheme = false;
  REE_RETURN_IF_ERROR(ctx.getString(object, "prepend_scheme", field, &scheme_name, &has_scheme));
  if (has_scheme) {
    if (scheme_name == "always") {
      *scheme = PrependScheme::kAlways;
    } else if (scheme_name == "first") {
      *scheme = PrependScheme::kFirst;
    } else if (scheme_name == "never") {
      *scheme = PrependScheme::kNever;
    } else {
      return ctx.unsupported(field + ".prepend_scheme", "unknown scheme '" + scheme_name + "'");
    }
  } else if (has_add_prefix_space) {
    *scheme = add_prefix_space ? PrependScheme::kAlways : PrependScheme::kNever;
  }
  if (split) REE_RETURN_IF_ERROR(ctx.getBool(object, "split", field, split));
  return Status::kSuccess;
}

Status parsePreTokenizer(const LoadContext& ctx, const json& object, const std::string& field,
                         PreTokenizer* out) {
  std::string type;
  REE_RETURN_IF_ERROR(ctx.getType(object, field, &type));
  if (type == "Sequence") {
    out->kind = PreTokenizer::Kind::kSequence;
    if (!object.contains("pretokenizers") || !object["pretokenizers"].is_array()) {
      return ctx.malformed(field + ".pretokenizers", "expected an array");
    }
    const json& list = object["pretokenizers"];
    for (size_t i = 0; i < list.size(); ++i) {
      PreTokenizer child;
      REE_RETURN_IF_ERROR(parsePreTokenizer(
          ctx, list[i], field + ".pretokenizers[" + std::to_string(i) + "]", &child));
      out->children.push_back(std::move(child));
    }
    return Status::kSuccess;
  }
  if (type == "Split") {
    out->kind = PreTokenizer::Kind::kSplit;
    if (!object.contains("pattern")) return ctx.malformed(field + ".pattern", "missing");
    REE_RETURN_IF_ERROR(parsePattern(ctx, object["pattern"], field + ".pattern", &out->pattern));
    std::string behavior;
    REE_RETURN_IF_ERROR(ctx.getString(object, "behavior", field, &behavior));
    static const std::pair<const char*, SplitBehavior> kBehaviors[] = {
        {"Removed", SplitBehavior::kRemoved},
        {"Isolated", SplitBehavior::kIsolated},
        {"MergedWithPrevious", SplitBehavior::kMergedWithPrevious},
        {"MergedWithNext", SplitBehavior::kMergedWithNext},
        {"Contiguous", SplitBehavior::kContiguous}};
    bool known = false;
    for (const auto& [name, value] : kBehaviors) {
      if (behavior == name) {
        out->behavior = value;
        known = true;
      }
    }
    if (!known) return ctx.unsupported(field + ".behavior", "unknown behavior '" + behavior + "'");
    return ctx.getBool(object, "invert", field, &out->invert);
  }
  if (type == "ByteLevel") {
    out->kind = PreTokenizer::Kind::kByteLevel;
    REE_RETURN_IF_ERROR(ctx.getBool(object, "add_prefix_space", field, &out->add_prefix_space));
    REE_RETURN_IF_ERROR(ctx.getBool(object, "use_regex", field, &out->use_regex));
    if (out->use_regex) {
      std::string error;
      out->gpt2_regex = text::Regex::compile(kGpt2Pattern, &error);
      if (!out->gpt2_regex) return ctx.unsupported(field, "GPT-2 regex: " + error);
    }
    return Status::kSuccess;
  }
  if (type == "Metaspace") {
    out->kind = PreTokenizer::Kind::kMetaspace;
    return parseMetaspaceOptions(ctx, object, field, &out->replacement, &out->prepend_scheme,
                                 &out->split);
  }
  return ctx.unsupported(field + ".type", "unsupported pre-tokenizer '" + type +
                                              "' (supported: Sequence, Split, ByteLevel, "
                                              "Metaspace)");
}

// ---------------------------------------------------------------------------------------------
// Decoders: Sequence, ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace.

struct Decoder {
  enum class Kind {
    kSequence,
    kByteLevel,
    kReplace,
    kByteFallback,
    kFuse,
    kStrip,
    kMetaspace
  } kind = Kind::kSequence;
  std::vector<Decoder> children;
  Pattern pattern;      // Replace
  std::string content;  // Replace: replacement; Strip: the stripped character; Metaspace: ▁
  size_t strip_start = 0, strip_stop = 0;
  PrependScheme prepend_scheme = PrependScheme::kAlways;

  Status apply(std::vector<std::string>* tokens) const {
    switch (kind) {
      case Kind::kSequence:
        for (const Decoder& child : children)
          REE_RETURN_IF_ERROR(child.apply(tokens));
        return Status::kSuccess;
      case Kind::kByteLevel: {
        // A token whose every character is in the byte alphabet gives those bytes; any other
        // token (e.g. an added token with a space) gives its own UTF-8 bytes.
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
        return Status::kSuccess;
      }
      case Kind::kReplace:
        for (std::string& token : *tokens) {
          Status status = Status::kSuccess;
          token = replaceAll(pattern, token, content, &status);
          REE_RETURN_IF_ERROR(status);
        }
        return Status::kSuccess;
      case Kind::kByteFallback: {
        // Runs of <0xNN> tokens become their bytes if valid UTF-8, else one U+FFFD per byte.
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
          int byte = -1;
          if (token.size() == 6 && token.compare(0, 3, "<0x") == 0 && token[5] == '>') {
            unsigned value = 0;
            bool ok = true;
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
                ok = false;
                break;
              }
              value = value * 16 + digit;
            }
            if (ok) byte = static_cast<int>(value);
          }
          if (byte >= 0) {
            pending += static_cast<char>(byte);
          } else {
            flush();
            out.push_back(std::move(token));
          }
        }
        flush();
        *tokens = std::move(out);
        return Status::kSuccess;
      }
      case Kind::kFuse: {
        std::string joined;
        for (const std::string& token : *tokens)
          joined += token;
        *tokens = {joined};
        return Status::kSuccess;
      }
      case Kind::kStrip:
        for (std::string& token : *tokens) {
          std::vector<std::string_view> chars;
          for (size_t i = 0; i < token.size();) {
            const size_t length = text::utf8SequenceLength(static_cast<unsigned char>(token[i]));
            chars.push_back(std::string_view(token).substr(i, length));
            i += length;
          }
          size_t start_cut = 0;
          for (size_t i = 0; i < std::min(strip_start, chars.size()); ++i) {
            if (chars[i] != content) break;
            start_cut = i + 1;
          }
          size_t stop_cut = chars.size();
          for (size_t i = 0; i < std::min(strip_stop, chars.size()); ++i) {
            const size_t index = chars.size() - i - 1;
            if (chars[index] != content) break;
            stop_cut = index;
          }
          std::string stripped;
          for (size_t i = start_cut; i < stop_cut; ++i)
            stripped += chars[i];
          token = std::move(stripped);
        }
        return Status::kSuccess;
      case Kind::kMetaspace:
        // tokenizers drops every replacement character of the first token (unless the prepend
        // scheme is "never") and turns the others into spaces.
        for (size_t t = 0; t < tokens->size(); ++t) {
          std::string& token = (*tokens)[t];
          const bool drop = t == 0 && prepend_scheme != PrependScheme::kNever;
          std::string decoded;
          size_t at = 0, found;
          while ((found = token.find(content, at)) != std::string::npos) {
            decoded.append(token, at, found - at);
            if (!drop) decoded += ' ';
            at = found + content.size();
          }
          decoded.append(token, at, std::string::npos);
          token = std::move(decoded);
        }
        return Status::kSuccess;
    }
    return Status::kSuccess;
  }
};

Status parseDecoder(const LoadContext& ctx, const json& object, const std::string& field,
                    Decoder* out) {
  std::string type;
  REE_RETURN_IF_ERROR(ctx.getType(object, field, &type));
  if (type == "Sequence") {
    out->kind = Decoder::Kind::kSequence;
    if (!object.contains("decoders") || !object["decoders"].is_array()) {
      return ctx.malformed(field + ".decoders", "expected an array");
    }
    const json& list = object["decoders"];
    for (size_t i = 0; i < list.size(); ++i) {
      Decoder child;
      REE_RETURN_IF_ERROR(
          parseDecoder(ctx, list[i], field + ".decoders[" + std::to_string(i) + "]", &child));
      out->children.push_back(std::move(child));
    }
    return Status::kSuccess;
  }
  if (type == "ByteLevel") {
    out->kind = Decoder::Kind::kByteLevel;
    return Status::kSuccess;
  }
  if (type == "Replace") {
    out->kind = Decoder::Kind::kReplace;
    REE_RETURN_IF_ERROR(ctx.getString(object, "content", field, &out->content));
    if (!object.contains("pattern")) return ctx.malformed(field + ".pattern", "missing");
    return parsePattern(ctx, object["pattern"], field + ".pattern", &out->pattern);
  }
  if (type == "ByteFallback") {
    out->kind = Decoder::Kind::kByteFallback;
    return Status::kSuccess;
  }
  if (type == "Fuse") {
    out->kind = Decoder::Kind::kFuse;
    return Status::kSuccess;
  }
  if (type == "Strip") {
    out->kind = Decoder::Kind::kStrip;
    REE_RETURN_IF_ERROR(ctx.getString(object, "content", field, &out->content));
    if (out->content.empty() || text::utf8SequenceLength(static_cast<unsigned char>(
                                    out->content[0])) != out->content.size()) {
      return ctx.malformed(field + ".content", "expected a single character");
    }
    REE_RETURN_IF_ERROR(ctx.getSize(object, "start", field, &out->strip_start));
    return ctx.getSize(object, "stop", field, &out->strip_stop);
  }
  if (type == "Metaspace") {
    out->kind = Decoder::Kind::kMetaspace;
    out->content = "\xE2\x96\x81";
    bool split = true;
    return parseMetaspaceOptions(ctx, object, field, &out->content, &out->prepend_scheme, &split);
  }
  return ctx.unsupported(field + ".type", "unsupported decoder '" + type +
                                              "' (supported: Sequence, ByteLevel, Replace, "
                                              "ByteFallback, Fuse, Strip, Metaspace)");
}

// ---------------------------------------------------------------------------------------------
// Post-processors: Sequence, ByteLevel (offsets only: no ids change), TemplateProcessing.

struct PostProcessor {
  enum class Kind { kSequence, kByteLevel, kTemplate } kind = Kind::kSequence;
  std::vector<PostProcessor> children;
  // Template "single": each item is either the sequence (empty ids, is_sequence) or special ids.
  struct Item {
    bool is_sequence = false;
    std::vector<int32_t> ids;
  };
  std::vector<Item> single;

  void apply(std::vector<int32_t>* ids) const {
    if (kind == Kind::kSequence) {
      for (const PostProcessor& child : children)
        child.apply(ids);
    } else if (kind == Kind::kTemplate) {
      std::vector<int32_t> out;
      for (const Item& item : single) {
        if (item.is_sequence) {
          out.insert(out.end(), ids->begin(), ids->end());
        } else {
          out.insert(out.end(), item.ids.begin(), item.ids.end());
        }
      }
      *ids = std::move(out);
    }
  }
};

Status parsePostProcessor(const LoadContext& ctx, const json& object, const std::string& field,
                          PostProcessor* out) {
  std::string type;
  REE_RETURN_IF_ERROR(ctx.getType(object, field, &type));
  if (type == "Sequence") {
    out->kind = PostProcessor::Kind::kSequence;
    if (!object.contains("processors") || !object["processors"].is_array()) {
      return ctx.malformed(field + ".processors", "expected an array");
    }
    const json& list = object["processors"];
    for (size_t i = 0; i < list.size(); ++i) {
      PostProcessor child;
      REE_RETURN_IF_ERROR(parsePostProcessor(
          ctx, list[i], field + ".processors[" + std::to_string(i) + "]", &child));
      out->children.push_back(std::move(child));
    }
    return Status::kSuccess;
  }
  if (type == "ByteLevel") {
    out->kind = PostProcessor::Kind::kByteLevel;
    return Status::kSuccess;
  }
  if (type == "TemplateProcessing") {
    out->kind = PostProcessor::Kind::kTemplate;
    if (!object.contains("single") || !object["single"].is_array()) {
      return ctx.malformed(field + ".single", "expected an array");
    }
    const json* special_tokens = nullptr;
    if (object.contains("special_tokens") && object["special_tokens"].is_object()) {
      special_tokens = &object["special_tokens"];
    }
    const json& single = object["single"];
    for (size_t i = 0; i < single.size(); ++i) {
      const std::string item_field = field + ".single[" + std::to_string(i) + "]";
      const json& item = single[i];
      PostProcessor::Item parsed;
      if (item.contains("Sequence") && item["Sequence"].is_object()) {
        std::string id;
        REE_RETURN_IF_ERROR(ctx.getString(item["Sequence"], "id", item_field + ".Sequence", &id));
        if (id != "A") {
          return ctx.unsupported(item_field + ".Sequence.id",
                                 "sequence '" + id + "' in a single-sequence template");
        }
        parsed.is_sequence = true;
      } else if (item.contains("SpecialToken") && item["SpecialToken"].is_object()) {
        std::string id;
        REE_RETURN_IF_ERROR(
            ctx.getString(item["SpecialToken"], "id", item_field + ".SpecialToken", &id));
        if (!special_tokens || !special_tokens->contains(id) ||
            !(*special_tokens)[id].contains("ids") || !(*special_tokens)[id]["ids"].is_array()) {
          return ctx.malformed(field + ".special_tokens", "no ids for '" + id + "'");
        }
        for (const json& value : (*special_tokens)[id]["ids"]) {
          if (!value.is_number_unsigned() || value.get<uint64_t>() > INT32_MAX) {
            return ctx.malformed(field + ".special_tokens." + id + ".ids", "expected token ids");
          }
          parsed.ids.push_back(value.get<int32_t>());
        }
      } else {
        return ctx.malformed(item_field, "expected {\"Sequence\": ...} or {\"SpecialToken\": ...}");
      }
      out->single.push_back(std::move(parsed));
    }
    return Status::kSuccess;
  }
  return ctx.unsupported(field + ".type", "unsupported post-processor '" + type +
                                              "' (supported: Sequence, ByteLevel, "
                                              "TemplateProcessing)");
}

// ---------------------------------------------------------------------------------------------
// BPE model.

struct BpeModel {
  std::unordered_map<std::string, int32_t> vocab;
  std::unordered_map<int32_t, std::string> id_to_token;
  struct MergeResult {
    int32_t rank;
    int32_t new_id;
  };
  std::unordered_map<uint64_t, MergeResult> merges;  // key: (left id << 32) | right id
  bool has_unk = false;
  std::string unk_token;
  bool has_prefix = false, has_suffix = false;
  std::string continuing_subword_prefix, end_of_word_suffix;
  bool fuse_unk = false, byte_fallback = false, ignore_merges = false;

  static uint64_t pairKey(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
           static_cast<uint32_t>(right);
  }

  const MergeResult* findMerge(int32_t left, int32_t right) const {
    auto it = merges.find(pairKey(left, right));
    return it == merges.end() ? nullptr : &it->second;
  }

  // tokenizers' Word::merge_all: a priority queue on (rank, position), stale entries skipped
  // when the pair at that position no longer produces the same token.
  Status tokenize(const std::string& word, std::vector<int32_t>* out) const {
    if (word.empty()) return Status::kSuccess;
    if (ignore_merges) {
      auto it = vocab.find(word);
      if (it != vocab.end()) {
        out->push_back(it->second);
        return Status::kSuccess;
      }
    }
    struct Symbol {
      int32_t id;
      ptrdiff_t prev, next;
      size_t length;
    };
    std::vector<Symbol> symbols;
    symbols.reserve(word.size());
    auto add = [&](int32_t id, size_t length) {
      const ptrdiff_t index = static_cast<ptrdiff_t>(symbols.size());
      if (!symbols.empty()) symbols.back().next = index;
      symbols.push_back({id, index - 1, -1, length});
    };
    bool pending_unk = false;
    size_t pending_unk_length = 0;
    int32_t unk_id = -1;
    for (size_t i = 0; i < word.size();) {
      const size_t length = text::utf8SequenceLength(static_cast<unsigned char>(word[i]));
      std::string piece = word.substr(i, length);
      const bool is_first = i == 0;
      const bool is_last = i + length >= word.size();
      i += length;
      if (has_prefix && !is_first) piece = continuing_subword_prefix + piece;
      if (has_suffix && is_last) piece += end_of_word_suffix;
      auto it = vocab.find(piece);
      if (it != vocab.end()) {
        if (pending_unk) {
          add(unk_id, pending_unk_length);
          pending_unk = false;
        }
        add(it->second, length);
        continue;
      }
      if (byte_fallback) {
        std::vector<int32_t> byte_ids;
        for (unsigned char b : piece) {
          char name[8];
          std::snprintf(name, sizeof(name), "<0x%02X>", b);
          auto byte_it = vocab.find(name);
          if (byte_it == vocab.end()) break;
          byte_ids.push_back(byte_it->second);
        }
        if (byte_ids.size() == piece.size()) {
          for (int32_t id : byte_ids)
            add(id, 1);
          continue;
        }
      }
      if (has_unk) {
        auto unk_it = vocab.find(unk_token);
        if (unk_it == vocab.end()) {
          return REE_FAIL(Status::kInvalidArgument,
                          "tokenizer: unk_token '%s' is not in the vocabulary", unk_token.c_str());
        }
        unk_id = unk_it->second;
        if (pending_unk && fuse_unk) {
          pending_unk_length += length;
        } else {
          if (pending_unk) add(unk_id, pending_unk_length);
          pending_unk = true;
          pending_unk_length = length;
        }
      }
      // Without unk_token an unknown character is dropped, as tokenizers does.
    }
    if (pending_unk) add(unk_id, pending_unk_length);

    struct Candidate {
      int32_t rank;
      size_t pos;
      int32_t new_id;
    };
    auto lower_priority = [](const Candidate& a, const Candidate& b) {
      if (a.rank != b.rank) return a.rank > b.rank;
      return a.pos > b.pos;
    };
    std::priority_queue<Candidate, std::vector<Candidate>, decltype(lower_priority)> queue(
        lower_priority);
    for (size_t index = 0; index + 1 < symbols.size(); ++index) {
      if (const MergeResult* m = findMerge(symbols[index].id, symbols[index + 1].id)) {
        queue.push({m->rank, index, m->new_id});
      }
    }
    while (!queue.empty()) {
      const Candidate top = queue.top();
      queue.pop();
      Symbol& current = symbols[top.pos];
      if (current.length == 0 || current.next == -1) continue;
      const size_t next_pos = static_cast<size_t>(current.next);
      const Symbol right = symbols[next_pos];
      const MergeResult* m = findMerge(current.id, right.id);
      if (m == nullptr || m->new_id != top.new_id) continue;
      current.id = top.new_id;
      current.length += right.length;
      current.next = right.next;
      symbols[next_pos].length = 0;
      if (right.next > -1 && static_cast<size_t>(right.next) < symbols.size()) {
        symbols[static_cast<size_t>(right.next)].prev = static_cast<ptrdiff_t>(top.pos);
      }
      if (current.prev >= 0) {
        const size_t prev = static_cast<size_t>(current.prev);
        if (const MergeResult* pm = findMerge(symbols[prev].id, current.id)) {
          queue.push({pm->rank, prev, pm->new_id});
        }
      }
      if (current.next >= 0 && static_cast<size_t>(current.next) < symbols.size()) {
        if (const MergeResult* nm =
                findMerge(current.id, symbols[static_cast<size_t>(current.next)].id)) {
          queue.push({nm->rank, top.pos, nm->new_id});
        }
      }
    }
    for (const Symbol& s : symbols) {
      if (s.length != 0) out->push_back(s.id);
    }
    return Status::kSuccess;
  }
};

Status parseBpe(const LoadContext& ctx, const json& model, BpeModel* out) {
  const std::string field = "model";
  std::string type = "BPE";
  if (model.contains("type")) REE_RETURN_IF_ERROR(ctx.getString(model, "type", field, &type));
  if (type != "BPE") {
    return ctx.unsupported("model.type", "unsupported model type '" + type + "' (supported: BPE)");
  }
  if (model.contains("dropout") && !model["dropout"].is_null()) {
    if (!model["dropout"].is_number() || model["dropout"].get<double>() != 0.0) {
      return ctx.unsupported("model.dropout", "BPE dropout is random; only null is supported");
    }
  }
  REE_RETURN_IF_ERROR(ctx.getString(model, "unk_token", field, &out->unk_token, &out->has_unk));
  REE_RETURN_IF_ERROR(ctx.getString(model, "continuing_subword_prefix", field,
                                    &out->continuing_subword_prefix, &out->has_prefix));
  REE_RETURN_IF_ERROR(ctx.getString(model, "end_of_word_suffix", field, &out->end_of_word_suffix,
                                    &out->has_suffix));
  REE_RETURN_IF_ERROR(ctx.getBool(model, "fuse_unk", field, &out->fuse_unk));
  REE_RETURN_IF_ERROR(ctx.getBool(model, "byte_fallback", field, &out->byte_fallback));
  REE_RETURN_IF_ERROR(ctx.getBool(model, "ignore_merges", field, &out->ignore_merges));

  if (!model.contains("vocab") || !model["vocab"].is_object()) {
    return ctx.malformed("model.vocab", "expected an object token -> id");
  }
  for (const auto& [token, id] : model["vocab"].items()) {
    if (!id.is_number_unsigned() || id.get<uint64_t>() > INT32_MAX) {
      return ctx.malformed("model.vocab", "id of '" + token + "' is not a token id");
    }
    out->vocab[token] = id.get<int32_t>();
    out->id_to_token[id.get<int32_t>()] = token;
  }

  if (!model.contains("merges") || !model["merges"].is_array()) {
    return ctx.malformed("model.merges", "expected an array");
  }
  const json& merges = model["merges"];
  const size_t prefix_length = out->has_prefix ? out->continuing_subword_prefix.size() : 0;
  out->merges.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const std::string merge_field = "model.merges[" + std::to_string(rank) + "]";
    const json& merge = merges[rank];
    std::string left, right;
    if (merge.is_string()) {  // legacy "a b"
      const std::string line = merge.get<std::string>();
      const size_t space = line.find(' ');
      if (space == std::string::npos) return ctx.malformed(merge_field, "expected \"a b\"");
      left = line.substr(0, space);
      right = line.substr(space + 1);
    } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() &&
               merge[1].is_string()) {
      left = merge[0].get<std::string>();
      right = merge[1].get<std::string>();
    } else {
      return ctx.malformed(merge_field, "expected \"a b\" or [\"a\", \"b\"]");
    }
    auto left_it = out->vocab.find(left);
    auto right_it = out->vocab.find(right);
    if (left_it == out->vocab.end() || right_it == out->vocab.end()) {
      return ctx.malformed(merge_field, "merge token not in the vocabulary");
    }
    if (right.size() < prefix_length) {
      return ctx.malformed(merge_field, "right token shorter than continuing_subword_prefix");
    }
    const std::string merged = left + right.substr(prefix_length);
    auto merged_it = out->vocab.find(merged);
    if (merged_it == out->vocab.end()) {
      return ctx.malformed(merge_field, "merged token '" + merged + "' not in the vocabulary");
    }
    out->merges[BpeModel::pairKey(left_it->second, right_it->second)] = {static_cast<int32_t>(rank),
                                                                         merged_it->second};
  }
  return Status::kSuccess;
}

// ---------------------------------------------------------------------------------------------
// Added tokens: leftmost-longest matching (aho-corasick MatchKind::LeftmostLongest).

struct AddedMatcher {
  struct Entry {
    std::string pattern;
    size_t token_index;
  };
  std::array<std::vector<Entry>, 256> by_first_byte;  // longest first
  bool empty = true;

  void add(std::string pattern, size_t token_index) {
    if (pattern.empty()) return;
    empty = false;
    auto& bucket = by_first_byte[static_cast<unsigned char>(pattern[0])];
    bucket.push_back({std::move(pattern), token_index});
    std::stable_sort(bucket.begin(), bucket.end(), [](const Entry& a, const Entry& b) {
      return a.pattern.size() > b.pattern.size();
    });
  }

  // Leftmost match at or after `from`; false if none.
  bool find(std::string_view s, size_t from, size_t* begin, size_t* end, size_t* index) const {
    for (size_t pos = from; pos < s.size(); ++pos) {
      for (const Entry& e : by_first_byte[static_cast<unsigned char>(s[pos])]) {
        if (s.compare(pos, e.pattern.size(), e.pattern) == 0) {
          *begin = pos;
          *end = pos + e.pattern.size();
          *index = e.token_index;
          return true;
        }
      }
    }
    return false;
  }
};

// Unicode classes of the Rust `regex` crate used by tokenizers for lstrip/rstrip/single_word.
struct CharClasses {
  std::shared_ptr<const text::Regex> word;        // \w
  std::shared_ptr<const text::Regex> whitespace;  // \s

  CharClasses() {
    std::string error;
    word = text::Regex::compile(R"([\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\p{Join_Control}])", &error);
    whitespace = text::Regex::compile(R"(\p{White_Space})", &error);
  }
};

const CharClasses& charClasses() {
  static const CharClasses classes;
  return classes;
}

// Offset of the last character of s[0, end) (end > 0).
size_t previousCharStart(std::string_view s, size_t end) {
  size_t at = end - 1;
  while (at > 0 && (static_cast<unsigned char>(s[at]) & 0xC0) == 0x80)
    --at;
  return at;
}

bool classMatchesAt(const std::shared_ptr<const text::Regex>& regex, std::string_view s,
                    size_t at) {
  return regex && at < s.size() && regex->matchesAt(s, at);
}

}  // namespace

// ---------------------------------------------------------------------------------------------

struct Tokenizer::Impl {
  std::string source;
  BpeModel model;
  std::vector<AddedToken> added;
  std::vector<std::string> added_decode_text;  // per added token: see tokenOf()
  std::unordered_map<int32_t, size_t> added_by_id;
  std::unordered_map<std::string, size_t> added_by_content;
  std::unordered_set<std::string> special_contents;
  AddedMatcher raw_matcher, normalized_matcher;
  bool has_normalizer = false, has_pre_tokenizer = false, has_post_processor = false,
       has_decoder = false;
  Normalizer normalizer;
  PreTokenizer pre_tokenizer;
  PostProcessor post_processor;
  Decoder decoder;
  int32_t vocab_size = 0;

  // tokenizers' AddedVocabulary::find_matches + split on the matches of one piece.
  void splitAdded(const AddedMatcher& matcher, Piece piece, std::vector<Piece>* out) const {
    if (piece.added_id >= 0 || matcher.empty) {
      if (piece.added_id >= 0 || !piece.text.empty()) out->push_back(std::move(piece));
      return;
    }
    const std::string& s = piece.text;
    const CharClasses& classes = charClasses();
    size_t start_offset = 0, search_from = 0;
    size_t match_begin, match_end, index;
    auto emit = [&](size_t begin, size_t end, int32_t id) {
      if (end <= begin) return;
      Piece p;
      p.text = s.substr(begin, end - begin);
      p.added_id = id;
      p.at_origin = piece.at_origin && begin == 0;
      out->push_back(std::move(p));
    };
    while (matcher.find(s, search_from, &match_begin, &match_end, &index)) {
      search_from = match_end;
      const AddedToken& token = added[index];
      size_t start = match_begin, stop = match_end;
      if (token.single_word) {
        const bool start_space =
            start == 0 || !classMatchesAt(classes.word, s, previousCharStart(s, start));
        const bool stop_space = stop == s.size() || !classMatchesAt(classes.word, s, stop);
        if (!start_space || !stop_space) continue;
      }
      if (token.lstrip) {
        size_t new_start = start;
        while (new_start > 0) {
          const size_t prev = previousCharStart(s, new_start);
          if (!classMatchesAt(classes.whitespace, s, prev)) break;
          new_start = prev;
        }
        start = std::max(new_start, start_offset);
      }
      if (token.rstrip) {
        while (stop < s.size() && classMatchesAt(classes.whitespace, s, stop)) {
          stop += text::utf8SequenceLength(static_cast<unsigned char>(s[stop]));
        }
      }
      if (start_offset < start) emit(start_offset, start, -1);
      emit(start, stop, token.id);
      start_offset = stop;
    }
    if (start_offset < s.size()) emit(start_offset, s.size(), -1);
  }

  Status encode(std::string_view input, bool add_special_tokens, std::vector<int32_t>* ids) const {
    ids->clear();
    std::vector<Piece> pieces, next;
    Piece whole;
    whole.text = std::string(input);
    whole.at_origin = true;
    splitAdded(raw_matcher, std::move(whole), &pieces);
    for (Piece& piece : pieces) {
      if (piece.added_id < 0 && has_normalizer) REE_RETURN_IF_ERROR(normalizer.apply(&piece.text));
      splitAdded(normalized_matcher, std::move(piece), &next);
    }
    pieces.swap(next);
    if (has_pre_tokenizer) REE_RETURN_IF_ERROR(pre_tokenizer.apply(&pieces));
    for (const Piece& piece : pieces) {
      if (piece.added_id >= 0) {
        ids->push_back(piece.added_id);
      } else {
        REE_RETURN_IF_ERROR(model.tokenize(piece.text, ids));
      }
    }
    if (add_special_tokens && has_post_processor) post_processor.apply(ids);
    return Status::kSuccess;
  }

  // The token string decode works on. For an added token with normalized=true, tokenizers
  // returns its normalized content (Llama 2: "hello world" decodes from "▁hello▁world").
  const std::string* tokenOf(int32_t id) const {
    auto added_it = added_by_id.find(id);
    if (added_it != added_by_id.end()) return &added_decode_text[added_it->second];
    auto model_it = model.id_to_token.find(id);
    if (model_it != model.id_to_token.end()) return &model_it->second;
    return nullptr;
  }

  Status decode(const int32_t* ids, size_t count, bool skip_special, std::string* out) const {
    std::vector<std::string> tokens;
    tokens.reserve(count);
    for (size_t i = 0; i < count; ++i) {
      const std::string* token = tokenOf(ids[i]);
      if (token == nullptr) continue;
      if (skip_special && special_contents.count(*token)) continue;
      tokens.push_back(*token);
    }
    if (!has_decoder) {
      out->clear();
      for (size_t i = 0; i < tokens.size(); ++i) {
        if (i) *out += ' ';
        *out += tokens[i];
      }
      return Status::kSuccess;
    }
    REE_RETURN_IF_ERROR(decoder.apply(&tokens));
    out->clear();
    for (const std::string& t : tokens)
      *out += t;
    return Status::kSuccess;
  }
};

namespace {

Status parseTokenizer(const std::string& json_text, const std::string& source,
                      std::unique_ptr<Tokenizer::Impl>* out) {
  LoadContext ctx{source};
  json root = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) {
    return REE_FAIL(Status::kIoError, "tokenizer '%s': malformed JSON", source.c_str());
  }
  if (!root.is_object()) return ctx.malformed("(root)", "expected a JSON object");
  auto impl = std::make_unique<Tokenizer::Impl>();
  impl->source = source;

  for (const char* key : {"truncation", "padding"}) {
    if (root.contains(key) && !root[key].is_null()) {
      return ctx.unsupported(key, "must be null (encode returns the whole, unpadded sequence)");
    }
  }
  if (!root.contains("model")) return ctx.malformed("model", "missing");
  REE_RETURN_IF_ERROR(parseBpe(ctx, root["model"], &impl->model));

  auto present = [&](const char* key) { return root.contains(key) && !root[key].is_null(); };
  if (present("normalizer")) {
    impl->has_normalizer = true;
    REE_RETURN_IF_ERROR(parseNormalizer(ctx, root["normalizer"], "normalizer", &impl->normalizer));
  }
  if (present("pre_tokenizer")) {
    impl->has_pre_tokenizer = true;
    REE_RETURN_IF_ERROR(
        parsePreTokenizer(ctx, root["pre_tokenizer"], "pre_tokenizer", &impl->pre_tokenizer));
  }
  if (present("post_processor")) {
    impl->has_post_processor = true;
    REE_RETURN_IF_ERROR(
        parsePostProcessor(ctx, root["post_processor"], "post_processor", &impl->post_processor));
  }
  if (present("decoder")) {
    impl->has_decoder = true;
    REE_RETURN_IF_ERROR(parseDecoder(ctx, root["decoder"], "decoder", &impl->decoder));
  }

  int32_t max_id = -1;
  for (const auto& [id, token] : impl->model.id_to_token)
    max_id = std::max(max_id, id);
  if (present("added_tokens")) {
    if (!root["added_tokens"].is_array()) return ctx.malformed("added_tokens", "expected an array");
    const json& list = root["added_tokens"];
    for (size_t i = 0; i < list.size(); ++i) {
      const std::string field = "added_tokens[" + std::to_string(i) + "]";
      const json& entry = list[i];
      if (!entry.is_object()) return ctx.malformed(field, "expected an object");
      AddedToken token;
      bool has_content = false;
      REE_RETURN_IF_ERROR(ctx.getString(entry, "content", field, &token.content, &has_content));
      if (!has_content || token.content.empty())
        return ctx.malformed(field + ".content", "missing");
      if (!entry.contains("id") || !entry["id"].is_number_unsigned() ||
          entry["id"].get<uint64_t>() > INT32_MAX) {
        return ctx.malformed(field + ".id", "expected a token id");
      }
      // tokenizers re-derives the id: the model's id when the content is in its vocabulary.
      auto vocab_it = impl->model.vocab.find(token.content);
      token.id =
          vocab_it != impl->model.vocab.end() ? vocab_it->second : entry["id"].get<int32_t>();
      REE_RETURN_IF_ERROR(ctx.getBool(entry, "special", field, &token.special));
      REE_RETURN_IF_ERROR(ctx.getBool(entry, "normalized", field, &token.normalized));
      REE_RETURN_IF_ERROR(ctx.getBool(entry, "lstrip", field, &token.lstrip));
      REE_RETURN_IF_ERROR(ctx.getBool(entry, "rstrip", field, &token.rstrip));
      REE_RETURN_IF_ERROR(ctx.getBool(entry, "single_word", field, &token.single_word));
      if ((token.lstrip || token.rstrip || token.single_word) &&
          !(charClasses().word && charClasses().whitespace)) {
        return ctx.unsupported(field,
                               "lstrip/rstrip/single_word need PCRE2 >= 10.40 (Unicode "
                               "binary properties), which this build lacks");
      }
      if (impl->added_by_content.count(token.content)) continue;
      const size_t index = impl->added.size();
      impl->added_by_content[token.content] = index;
      impl->added_by_id[token.id] = index;
      if (token.special) impl->special_contents.insert(token.content);
      if (token.normalized) {
        std::string pattern = token.content;
        if (impl->has_normalizer) REE_RETURN_IF_ERROR(impl->normalizer.apply(&pattern));
        impl->normalized_matcher.add(pattern, index);
        impl->added_decode_text.push_back(pattern);
      } else {
        impl->raw_matcher.add(token.content, index);
        impl->added_decode_text.push_back(token.content);
      }
      max_id = std::max(max_id, token.id);
      impl->added.push_back(std::move(token));
    }
  }
  impl->vocab_size = max_id + 1;
  *out = std::move(impl);
  return Status::kSuccess;
}

}  // namespace

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::~Tokenizer() = default;

Status Tokenizer::loadFromString(const std::string& json_text, const std::string& source_name,
                                 std::unique_ptr<Tokenizer>* tokenizer) {
  REE_CHECK_ARG(tokenizer != nullptr, "tokenizer: output pointer is null");
  try {
    std::unique_ptr<Impl> impl;
    REE_RETURN_IF_ERROR(parseTokenizer(json_text, source_name, &impl));
    tokenizer->reset(new Tokenizer(std::move(impl)));
    return Status::kSuccess;
  } catch (const std::bad_alloc&) {
    return REE_FAIL(Status::kOutOfMemory, "tokenizer '%s': out of memory while loading",
                    source_name.c_str());
  } catch (const std::exception& e) {
    return REE_FAIL(Status::kIoError, "tokenizer '%s': malformed content: %s", source_name.c_str(),
                    e.what());
  }
}

Status Tokenizer::load(const std::string& path, std::unique_ptr<Tokenizer>* tokenizer) {
  REE_CHECK_ARG(tokenizer != nullptr, "tokenizer: output pointer is null");
  std::string content;
  try {
    std::ifstream file(path, std::ios::binary);
    if (!file) {
      return REE_FAIL(Status::kIoError, "tokenizer '%s': cannot open the file", path.c_str());
    }
    std::ostringstream buffer;
    buffer << file.rdbuf();
    if (file.bad()) return REE_FAIL(Status::kIoError, "tokenizer '%s': read error", path.c_str());
    content = buffer.str();
  } catch (const std::exception& e) {
    return REE_FAIL(Status::kIoError, "tokenizer '%s': read error: %s", path.c_str(), e.what());
  }
  return loadFromString(content, path, tokenizer);
}

Status Tokenizer::encode(std::string_view input, bool add_special_tokens,
                         std::vector<int32_t>* ids) const {
  REE_CHECK_ARG(ids != nullptr, "encode: ids is null");
  REE_CHECK_ARG(text::isValidUtf8(input), "encode: text is not valid UTF-8 (%zu bytes)",
                input.size());
  try {
    return impl_->encode(input, add_special_tokens, ids);
  } catch (const std::bad_alloc&) {
    return REE_FAIL(Status::kOutOfMemory, "encode: out of memory (%zu bytes of text)",
                    input.size());
  } catch (const std::exception& e) {
    return REE_FAIL(Status::kInternal, "encode: %s", e.what());
  }
}

Status Tokenizer::decode(const int32_t* ids, size_t count, bool skip_special_tokens,
                         std::string* text_out) const {
  REE_CHECK_ARG(text_out != nullptr, "decode: text is null");
  REE_CHECK_ARG(ids != nullptr || count == 0, "decode: ids is null");
  try {
    return impl_->decode(ids, count, skip_special_tokens, text_out);
  } catch (const std::bad_alloc&) {
    return REE_FAIL(Status::kOutOfMemory, "decode: out of memory (%zu ids)", count);
  } catch (const std::exception& e) {
    return REE_FAIL(Status::kInternal, "decode: %s", e.what());
  }
}

int32_t Tokenizer::tokenToId(std::string_view token) const {
  const std::string key(token);
  auto added_it = impl_->added_by_content.find(key);
  if (added_it != impl_->added_by_content.end()) return impl_->added[added_it->second].id;
  auto it = impl_->model.vocab.find(key);
  return it == impl_->model.vocab.end() ? -1 : it->second;
}

bool Tokenizer::idToToken(int32_t id, std::string* token) const {
  const std::string* found = impl_->tokenOf(id);
  if (found == nullptr) return false;
  if (token) *token = *found;
  return true;
}

int32_t Tokenizer::vocabSize() const {
  return impl_->vocab_size;
}

bool Tokenizer::isSpecialToken(int32_t id) const {
  const std::string* token = impl_->tokenOf(id);
  return token != nullptr && impl_->special_contents.count(*token) != 0;
}

const std::vector<AddedToken>& Tokenizer::addedTokens() const {
  return impl_->added;
}
const std::string& Tokenizer::sourceName() const {
  return impl_->source;
}

// ---------------------------------------------------------------------------------------------
// DecodeStream: tokenizers' step_decode_stream, including its re-anchoring of the prefix.

DecodeStream::DecodeStream(const Tokenizer& tokenizer, bool skip_special_tokens)
    : tokenizer_(&tokenizer), skip_special_tokens_(skip_special_tokens) {}

void DecodeStream::reset() {
  ids_.clear();
  prefix_.clear();
  prefix_index_ = 0;
}

Status DecodeStream::step(int32_t id, std::string* chunk, bool* emitted) {
  REE_CHECK_ARG(chunk != nullptr, "DecodeStream::step: chunk is null");
  chunk->clear();
  if (emitted) *emitted = false;
  try {
    if (prefix_.empty() && !ids_.empty()) {
      std::string new_prefix;
      REE_RETURN_IF_ERROR(tokenizer_->decode(ids_, skip_special_tokens_, &new_prefix));
      if (!text::endsWithReplacementChar(new_prefix)) {
        prefix_ = std::move(new_prefix);
        prefix_index_ = ids_.size();
      }
    }
    ids_.push_back(id);
    std::string decoded;
    REE_RETURN_IF_ERROR(tokenizer_->decode(ids_, skip_special_tokens_, &decoded));
    if (decoded.size() > prefix_.size() && !text::endsWithReplacementChar(decoded)) {
      if (decoded.compare(0, prefix_.size(), prefix_) != 0) {
        return REE_FAIL(Status::kInternal,
                        "DecodeStream '%s': token %d changed the text decoded before it",
                        tokenizer_->sourceName().c_str(), id);
      }
      *chunk = decoded.substr(prefix_.size());
      const size_t new_prefix_index = ids_.size() - prefix_index_;
      ids_.erase(ids_.begin(), ids_.begin() + static_cast<ptrdiff_t>(prefix_index_));
      REE_RETURN_IF_ERROR(tokenizer_->decode(ids_, skip_special_tokens_, &prefix_));
      prefix_index_ = new_prefix_index;
      if (emitted) *emitted = true;
    }
    return Status::kSuccess;
  } catch (const std::exception& e) {
    return REE_FAIL(Status::kInternal, "DecodeStream::step: %s", e.what());
  }
}

Status DecodeStream::finish(std::string* chunk) {
  REE_CHECK_ARG(chunk != nullptr, "DecodeStream::finish: chunk is null");
  chunk->clear();
  if (!ids_.empty()) {
    std::string decoded;
    REE_RETURN_IF_ERROR(tokenizer_->decode(ids_, skip_special_tokens_, &decoded));
    if (decoded.size() > prefix_.size() && decoded.compare(0, prefix_.size(), prefix_) == 0) {
      *chunk = decoded.substr(prefix_.size());
    }
  }
  reset();
  return Status::kSuccess;
}

}  // namespace ree::models
