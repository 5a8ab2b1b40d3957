// The merges of a SentencePiece-style GGUF vocabulary that has scores but no merges, exactly as
// transformers' GGUFTokenizerSkeleton derives them (integrations/ggml.py); see tokenizer_gguf.h.
#include <algorithm>
#include <string>
#include <unordered_map>

#include "tokenizer_gguf.h"
#include "tokenizer_text.h"

namespace ree::models::tokenizer_internal {
namespace {

struct ScoredMerge {
  std::string_view left, right;
  float left_score, right_score;  // vocab[left], vocab[right]
  float score;                    // the merged token's
};

}  // namespace

std::vector<std::pair<std::string, std::string>> mergesFromScores(
    const std::vector<std::string_view>& tokens, const std::vector<float>& scores) {
  // The Python dict {token: score}: first occurrence order, last score.
  std::unordered_map<std::string_view, float> score_of;
  std::vector<std::string_view> distinct;
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (score_of.find(tokens[i]) == score_of.end()) distinct.push_back(tokens[i]);
    score_of[tokens[i]] = scores[i];
  }
  std::vector<ScoredMerge> merges, local;
  for (std::string_view token : distinct) {
    if (token.empty()) continue;
    const float score = score_of[token];
    local.clear();
    // Every split between two code points (Python slices str by code point).
    for (size_t cut = text::utf8SequenceLength(static_cast<unsigned char>(token[0]));
         cut < token.size();
         cut += text::utf8SequenceLength(static_cast<unsigned char>(token[cut]))) {
      const std::string_view left = token.substr(0, cut), right = token.substr(cut);
      const auto l = score_of.find(left), r = score_of.find(right);
      if (l != score_of.end() && r != score_of.end()) {
        local.push_back({left, right, l->second, r->second, score});
      }
    }
    // sorted(key=(vocab[l], vocab[r]), reverse=True): descending, stable.
    std::stable_sort(local.begin(), local.end(), [](const ScoredMerge& a, const ScoredMerge& b) {
      if (a.left_score != b.left_score) return a.left_score > b.left_score;
      return a.right_score > b.right_score;
    });
    merges.insert(merges.end(), local.begin(), local.end());
  }
  std::stable_sort(merges.begin(), merges.end(),
                   [](const ScoredMerge& a, const ScoredMerge& b) { return a.score > b.score; });
  std::vector<std::pair<std::string, std::string>> out;
  out.reserve(merges.size());
  for (const ScoredMerge& merge : merges)
    out.emplace_back(std::string(merge.left), std::string(merge.right));
  return out;
}

}  // namespace ree::models::tokenizer_internal
