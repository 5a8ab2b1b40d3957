// Added/special tokens (see tokenizer_added.h).
#include "tokenizer_added.h"

#include <algorithm>
#include <memory>

#include "tokenizer_text.h"

namespace ree::models::tokenizer_internal {
namespace {

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

// single_word: the match must not touch a word character on either side.
bool isSingleWord(std::string_view s, size_t start, size_t stop) {
  const CharClasses& classes = charClasses();
  const bool start_space =
      start == 0 || !classMatchesAt(classes.word, s, previousCharStart(s, start));
  const bool stop_space = stop == s.size() || !classMatchesAt(classes.word, s, stop);
  return start_space && stop_space;
}

// lstrip: extend left over whitespace, not before `floor` (the end of the previous match).
size_t stripLeft(std::string_view s, size_t start, size_t floor) {
  size_t new_start = start;
  while (new_start > 0) {
    const size_t prev = previousCharStart(s, new_start);
    if (!classMatchesAt(charClasses().whitespace, s, prev)) break;
    new_start = prev;
  }
  return std::max(new_start, floor);
}

size_t stripRight(std::string_view s, size_t stop) {
  while (stop < s.size() && classMatchesAt(charClasses().whitespace, s, stop))
    stop += text::utf8SequenceLength(static_cast<unsigned char>(s[stop]));
  return stop;
}

Status parseFlags(const LoadContext& ctx, const json& entry, const std::string& field,
                  AddedToken* token) {
  REE_RETURN_IF_ERROR(ctx.getRequiredBool(entry, "special", field, &token->special));
  REE_RETURN_IF_ERROR(ctx.getRequiredBool(entry, "normalized", field, &token->normalized));
  REE_RETURN_IF_ERROR(ctx.getRequiredBool(entry, "lstrip", field, &token->lstrip));
  REE_RETURN_IF_ERROR(ctx.getRequiredBool(entry, "rstrip", field, &token->rstrip));
  REE_RETURN_IF_ERROR(ctx.getRequiredBool(entry, "single_word", field, &token->single_word));
  if ((token->lstrip || token->rstrip || token->single_word) &&
      !(charClasses().word && charClasses().whitespace)) {
    return ctx.unsupported(field,
                           "lstrip/rstrip/single_word need PCRE2 >= 10.40 (Unicode "
                           "binary properties), which this build lacks");
  }
  return Status::kSuccess;
}

int32_t maxModelId(const Model& model) {
  int32_t max_id = -1;
  for (const auto& [id, token] : model.idToToken())
    max_id = std::max(max_id, id);
  return max_id;
}

// Names the largest model id when the vocabulary has gaps, the usual cause of a renumbering.
std::string gapNote(const Model& model) {
  const int32_t max_id = maxModelId(model);
  if (static_cast<size_t>(max_id) + 1 == model.vocab().size()) return "";
  return "; the model vocabulary has gaps: model token '" + model.idToToken().at(max_id) +
         "' has id " + std::to_string(max_id);
}

// The id tokenizers gives an added token (it ignores the id written in the file): the model id
// of its content, else `next_new_id`. A file whose id says otherwise is refused rather than
// guessing which one its author meant, and so is a derived id that is already a model id.
Status deriveId(const LoadContext& ctx, const std::string& field, const Model& model,
                const std::string& content, int32_t file_id, int32_t next_new_id, int32_t* id) {
  auto vocab_it = model.vocab().find(content);
  const bool in_model = vocab_it != model.vocab().end();
  *id = in_model ? vocab_it->second : next_new_id;
  const std::string model_size = std::to_string(model.vocab().size());
  if (!in_model) {
    auto taken = model.idToToken().find(*id);
    if (taken != model.idToToken().end()) {
      const std::string owner = "model token '" + taken->second + "'";
      return ctx.malformed(field, "tokenizers numbers token '" + content + "' " +
                                      std::to_string(*id) + " (after the " + model_size +
                                      " model tokens), but that is already the id of " + owner);
    }
  }
  if (file_id == *id) return Status::kSuccess;
  const std::string why =
      in_model ? "the model vocabulary gives it id " + std::to_string(*id)
               : "it is not in the model vocabulary of " + model_size +
                     " tokens, so tokenizers numbers it " + std::to_string(*id) +
                     " (added tokens not in the model follow its vocabulary, in file order)" +
                     gapNote(model);
  return ctx.malformed(
      field, "token '" + content + "' has id " + std::to_string(file_id) + ", but " + why);
}

// One entry of added_tokens. `next_new_id` is the id tokenizers gives the next token that is not
// in the model vocabulary.
Status parseAddedToken(const LoadContext& ctx, const json& entry, const std::string& field,
                       const Model& model, const AddedVocabulary& before, int32_t next_new_id,
                       AddedToken* token) {
  if (!entry.is_object()) return ctx.malformed(field, "expected an object");
  bool has_content = false;
  REE_RETURN_IF_ERROR(
      ctx.getString(entry, "content", field, &token->content, &has_content, kMaxTokenBytes));
  if (!has_content || token->content.empty()) return ctx.malformed(field + ".content", "missing");
  // tokenizers lets a repeated entry replace the flags of the first: refuse the ambiguity.
  auto repeated = before.by_content.find(token->content);
  if (repeated != before.by_content.end()) {
    return ctx.malformed(field + ".content", "token '" + token->content +
                                                 "' is already added_tokens[" +
                                                 std::to_string(repeated->second) + "]");
  }
  if (!entry.contains("id") || !entry["id"].is_number_unsigned() ||
      entry["id"].get<uint64_t>() > INT32_MAX) {
    return ctx.malformed(field + ".id", "expected a token id");
  }
  REE_RETURN_IF_ERROR(deriveId(ctx, field + ".id", model, token->content,
                               entry["id"].get<int32_t>(), next_new_id, &token->id));
  return parseFlags(ctx, entry, field, token);
}

}  // namespace

void AddedMatcher::add(std::string pattern, size_t token_index) {
  if (pattern.empty()) return;
  empty_ = false;
  by_first_byte_[static_cast<unsigned char>(pattern[0])].push_back(
      {std::move(pattern), token_index});
}

void AddedMatcher::finish() {
  for (auto& bucket : by_first_byte_) {
    std::stable_sort(bucket.begin(), bucket.end(), [](const Entry& a, const Entry& b) {
      return a.pattern.size() > b.pattern.size();
    });
  }
}

bool AddedMatcher::find(std::string_view s, size_t from, size_t* begin, size_t* end,
                        size_t* index) const {
  for (size_t pos = from; pos < s.size(); ++pos) {
    for (const Entry& e : by_first_byte_[static_cast<unsigned char>(s[pos])]) {
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

void AddedVocabulary::split(const AddedMatcher& matcher, Piece piece,
                            std::vector<Piece>* out) const {
  if (piece.added_id >= 0 || matcher.empty()) {
    if (piece.added_id >= 0 || !piece.text.empty()) out->push_back(std::move(piece));
    return;
  }
  const std::string& s = piece.text;
  auto emit = [&](size_t begin, size_t end, int32_t id) {
    if (end <= begin) return;
    Piece p;
    p.text = s.substr(begin, end - begin);
    p.added_id = id;
    p.at_origin = piece.at_origin && begin == 0;
    out->push_back(std::move(p));
  };
  size_t start_offset = 0, search_from = 0;
  size_t match_begin, match_end, index;
  while (matcher.find(s, search_from, &match_begin, &match_end, &index)) {
    search_from = match_end;
    const AddedToken& token = tokens[index];
    size_t start = match_begin, stop = match_end;
    if (token.single_word && !isSingleWord(s, start, stop)) continue;
    if (token.lstrip) start = stripLeft(s, start, start_offset);
    if (token.rstrip) stop = stripRight(s, stop);
    if (start_offset < start) emit(start_offset, start, -1);
    emit(start, stop, token.id);
    start_offset = stop;
  }
  if (start_offset < s.size()) emit(start_offset, s.size(), -1);
}

Status parseAddedTokens(const LoadContext& ctx, const json& list, const Model& model,
                        const Normalizer* normalizer, AddedVocabulary* out, int32_t* vocab_size) {
  auto next_new_id = static_cast<int32_t>(model.vocab().size());
  if (!list.is_null()) {
    if (!list.is_array()) return ctx.malformed("added_tokens", "expected an array");
    if (list.size() > kMaxAddedTokens) {
      return ctx.overLimit("added_tokens", list.size(), kMaxAddedTokens, "tokens");
    }
  }
  int32_t max_id = maxModelId(model);
  for (size_t i = 0; list.is_array() && i < list.size(); ++i) {
    const std::string field = elementField("added_tokens", i);
    AddedToken token;
    REE_RETURN_IF_ERROR(parseAddedToken(ctx, list[i], field, model, *out, next_new_id, &token));
    if (model.vocab().count(token.content) == 0) ++next_new_id;
    max_id = std::max(max_id, token.id);
    const size_t index = out->tokens.size();
    out->by_content[token.content] = index;
    out->by_id[token.id] = index;
    if (token.special) out->special_contents.insert(token.content);
    // Decode works on the normalized content of a normalized=true token, as tokenizers'
    // id_to_token returns it (Llama 2: "hello world" decodes from "▁hello▁world").
    std::string pattern = token.content;
    if (token.normalized && normalizer) REE_RETURN_IF_ERROR(normalizer->apply(&pattern));
    (token.normalized ? out->normalized_matcher : out->raw_matcher).add(pattern, index);
    out->decode_text.push_back(std::move(pattern));
    out->tokens.push_back(std::move(token));
  }
  out->raw_matcher.finish();
  out->normalized_matcher.finish();
  *vocab_size = max_id + 1;
  return Status::kSuccess;
}

}  // namespace ree::models::tokenizer_internal
