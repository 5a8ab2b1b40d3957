// The Unigram model (see tokenizer_unigram.h): tokenizers' models/unigram/model.rs, step for step,
// because ties and unknown characters decide ids: pieces are tried shortest first at each start,
// a later candidate replaces the best path to a position only with a strictly higher score, and
// a character that no single piece covers gets unk with the score min_score - 10.
#include "tokenizer_unigram.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "ree/core/text.h"
#include "tokenizer_text.h"

namespace ree::models::tokenizer_internal {
namespace {

constexpr double kUnkPenalty = 10.0;  // tokenizers' K_UNK_PENALTY

Status missingUnk(std::string_view character) {
  return REE_FAIL(Status::kInvalidArgument,
                  "encode: the Unigram model has no unk_id and no piece covers '%s' (tokenizers "
                  "fails here too: MissingUnkId)",
                  printableText(std::string(character), 40).c_str());
}

}  // namespace

// The ids in [lo, hi) of sorted_ids share text[0, depth) and are at least depth bytes long, the
// one exactly depth long (a match already reported) first: each byte narrows the range by binary
// search, so no trie nodes are stored.
template <typename Found>
void UnigramModel::matchPrefixes(std::string_view text, Found found) const {
  size_t lo = 0, hi = sorted_ids.size();
  for (size_t depth = 0; depth < text.size() && lo < hi; ++depth) {
    if (pieces[sorted_ids[lo]].size() == depth) ++lo;
    const auto byte = static_cast<unsigned char>(text[depth]);
    auto byte_of = [&](int32_t id) { return static_cast<unsigned char>(pieces[id][depth]); };
    const auto first = sorted_ids.begin();
    lo = static_cast<size_t>(
        std::lower_bound(first + lo, first + hi, byte,
                         [&](int32_t id, unsigned char b) { return byte_of(id) < b; }) -
        first);
    hi = static_cast<size_t>(
        std::upper_bound(first + lo, first + hi, byte,
                         [&](unsigned char b, int32_t id) { return b < byte_of(id); }) -
        first);
    if (lo < hi && pieces[sorted_ids[lo]].size() == depth + 1) found(sorted_ids[lo], depth + 1);
  }
}

Status UnigramModel::segment(const std::string& word, std::vector<std::string_view>* out) const {
  struct BestPath {
    int32_t id = 0;
    double score = 0.0;
    ptrdiff_t start = -1;  // -1: no path ends here yet
  };
  const std::string_view text(word);
  const double unk_score = min_score - kUnkPenalty;
  std::vector<BestPath> best(text.size() + 1);
  auto offer = [&best](size_t end, size_t start, int32_t id, double score) {
    BestPath& target = best[end];
    if (target.start >= 0 && !(score > target.score)) return false;
    target = {id, score, static_cast<ptrdiff_t>(start)};
    return true;
  };
  for (size_t start = 0; start < text.size();) {
    const double here = best[start].score;
    const size_t char_length = text::utf8SequenceLength(static_cast<unsigned char>(text[start]));
    bool has_single_piece = false;
    matchPrefixes(text.substr(start), [&](int32_t id, size_t length) {
      offer(start + length, start, id, scores[static_cast<size_t>(id)] + here);
      has_single_piece = has_single_piece || length == char_length;
    });
    if (!has_single_piece) {
      const BestPath& target = best[start + char_length];
      const double candidate = unk_score + here;
      if (target.start < 0 || candidate > target.score) {
        if (!has_unk) return missingUnk(text.substr(start, char_length));
        offer(start + char_length, start, unk_id, candidate);
      }
    }
    start += char_length;
  }
  // Back from the end; consecutive unk pieces become one.
  size_t unk_begin = 0, unk_end = 0;
  for (size_t end = text.size(); end > 0;) {
    if (best[end].start < 0) {  // every character boundary is reached; a guard, not a path
      return REE_FAIL(Status::kInternal, "encode: no Unigram path ends at byte %zu", end);
    }
    const auto start = static_cast<size_t>(best[end].start);
    if (has_unk && best[end].id == unk_id) {
      if (unk_end == 0) unk_end = end;
      unk_begin = start;
    } else {
      if (unk_end != 0) out->push_back(text.substr(unk_begin, unk_end - unk_begin));
      unk_end = 0;
      out->push_back(text.substr(start, end - start));
    }
    end = start;
  }
  if (unk_end != 0) out->push_back(text.substr(unk_begin, unk_end - unk_begin));
  std::reverse(out->begin(), out->end());
  return Status::kSuccess;
}

Status UnigramModel::tokenize(const std::string& word, std::vector<int32_t>* out) const {
  if (word.empty()) return Status::kSuccess;
  std::vector<std::string_view> segments;
  REE_RETURN_IF_ERROR(segment(word, &segments));
  for (std::string_view segment : segments) {
    auto it = vocab.find(std::string(segment));
    if (it != vocab.end()) {
      out->push_back(it->second);
      continue;
    }
    if (byte_fallback && std::all_of(segment.begin(), segment.end(), [&](char c) {
          return byte_ids[static_cast<unsigned char>(c)] >= 0;
        })) {
      for (char c : segment)
        out->push_back(byte_ids[static_cast<unsigned char>(c)]);
      continue;
    }
    if (!has_unk) return missingUnk(segment);
    out->push_back(unk_id);
  }
  return Status::kSuccess;
}

}  // namespace ree::models::tokenizer_internal
