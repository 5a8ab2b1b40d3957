// The BPE model (see tokenizer_bpe.h).
#include "tokenizer_bpe.h"

#include <cstdio>
#include <queue>

#include "tokenizer_text.h"

namespace ree::models::tokenizer_internal {

std::vector<BpeModel::Symbol> BpeModel::initialSymbols(const std::string& word) const {
  std::vector<Symbol> symbols;
  symbols.reserve(word.size());
  auto add = [&](int32_t id, size_t length) {
    const auto index = static_cast<ptrdiff_t>(symbols.size());
    if (!symbols.empty()) symbols.back().next = index;
    symbols.push_back({id, index - 1, -1, length});
  };
  bool pending_unk = false;
  size_t pending_unk_length = 0;
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
    if (!has_unk) continue;  // without unk_token an unknown character is dropped, as tokenizers
    if (pending_unk && fuse_unk) {
      pending_unk_length += length;
    } else {
      if (pending_unk) add(unk_id, pending_unk_length);
      pending_unk = true;
      pending_unk_length = length;
    }
  }
  if (pending_unk) add(unk_id, pending_unk_length);
  return symbols;
}

// A priority queue on (rank, position), lowest first; an entry is stale (skipped) when the pair
// at its position no longer produces the same token.
void BpeModel::mergeAll(std::vector<Symbol>* symbols_ptr) const {
  std::vector<Symbol>& symbols = *symbols_ptr;
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
    const auto next_pos = static_cast<size_t>(current.next);
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
      const auto prev = static_cast<size_t>(current.prev);
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
}

void BpeModel::tokenize(const std::string& word, std::vector<int32_t>* out) const {
  if (word.empty()) return;
  if (ignore_merges) {
    auto it = vocab.find(word);
    if (it != vocab.end()) {
      out->push_back(it->second);
      return;
    }
  }
  std::vector<Symbol> symbols = initialSymbols(word);
  mergeAll(&symbols);
  for (const Symbol& s : symbols) {
    if (s.length != 0) out->push_back(s.id);
  }
}

namespace {

Status parseOptions(const LoadContext& ctx, const json& model, BpeModel* out) {
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
  REE_RETURN_IF_ERROR(
      ctx.getString(model, "unk_token", field, &out->unk_token, &out->has_unk, kMaxTokenBytes));
  REE_RETURN_IF_ERROR(ctx.getString(model, "continuing_subword_prefix", field,
                                    &out->continuing_subword_prefix, &out->has_prefix));
  REE_RETURN_IF_ERROR(ctx.getString(model, "end_of_word_suffix", field, &out->end_of_word_suffix,
                                    &out->has_suffix));
  REE_RETURN_IF_ERROR(ctx.getBool(model, "fuse_unk", field, &out->fuse_unk));
  REE_RETURN_IF_ERROR(ctx.getBool(model, "byte_fallback", field, &out->byte_fallback));
  return ctx.getBool(model, "ignore_merges", field, &out->ignore_merges);
}

// Each id at most once (tokenizers would decode a shared id to either token, depending on hash
// order) and below the vocabulary limit. Gaps are allowed, as in tokenizers; added tokens that
// would land on a model id are refused in tokenizer_added.cpp.
Status parseVocab(const LoadContext& ctx, const json& model, BpeModel* out) {
  if (!model.contains("vocab") || !model["vocab"].is_object()) {
    return ctx.malformed("model.vocab", "expected an object token -> id");
  }
  const json& vocab = model["vocab"];
  if (vocab.size() > kMaxVocabEntries) {
    return ctx.overLimit("model.vocab", vocab.size(), kMaxVocabEntries, "tokens");
  }
  out->vocab.reserve(vocab.size());
  out->id_to_token.reserve(vocab.size());
  for (const auto& [token, id] : vocab.items()) {
    if (token.size() > kMaxTokenBytes) {
      return ctx.malformed("model.vocab", "a token of " + std::to_string(token.size()) +
                                              " bytes is over the limit of " +
                                              std::to_string(kMaxTokenBytes) + " bytes");
    }
    if (!id.is_number_unsigned() || id.get<uint64_t>() > INT32_MAX) {
      return ctx.malformed("model.vocab", "id of '" + token + "' is not a token id");
    }
    const auto value = id.get<int32_t>();
    if (static_cast<size_t>(value) >= kMaxVocabEntries) {
      return ctx.malformed("model.vocab", "token '" + token + "' has id " + std::to_string(value) +
                                              ", over the limit of " +
                                              std::to_string(kMaxVocabEntries - 1));
    }
    auto [it, inserted] = out->id_to_token.emplace(value, token);
    if (!inserted) {
      return ctx.malformed("model.vocab", "tokens '" + it->second + "' and '" + token +
                                              "' both have id " + std::to_string(value));
    }
    out->vocab[token] = value;
  }
  if (out->has_unk) {
    auto unk = out->vocab.find(out->unk_token);
    if (unk == out->vocab.end()) {
      return ctx.malformed("model.unk_token", "'" + out->unk_token + "' is not in the vocabulary");
    }
    out->unk_id = unk->second;
  }
  return Status::kSuccess;
}

// One merge: "a b" (legacy) or ["a", "b"].
Status mergePair(const LoadContext& ctx, const json& merge, const std::string& field,
                 std::string* left, std::string* right) {
  if (merge.is_string()) {
    const std::string& line = merge.get_ref<const std::string&>();
    const size_t space = line.find(' ');
    if (space == std::string::npos) return ctx.malformed(field, "expected \"a b\"");
    *left = line.substr(0, space);
    *right = line.substr(space + 1);
    return Status::kSuccess;
  }
  if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string()) {
    *left = merge[0].get<std::string>();
    *right = merge[1].get<std::string>();
    return Status::kSuccess;
  }
  return ctx.malformed(field, "expected \"a b\" or [\"a\", \"b\"]");
}

Status parseMerges(const LoadContext& ctx, const json& model, BpeModel* out) {
  const json* merges = nullptr;
  REE_RETURN_IF_ERROR(ctx.getArray(model, "merges", "model", kMaxMerges, &merges));
  const size_t prefix_length = out->has_prefix ? out->continuing_subword_prefix.size() : 0;
  out->merges.reserve(merges->size());
  for (size_t rank = 0; rank < merges->size(); ++rank) {
    const std::string merge_field = elementField("model.merges", rank);
    std::string left, right;
    REE_RETURN_IF_ERROR(mergePair(ctx, (*merges)[rank], merge_field, &left, &right));
    auto left_it = out->vocab.find(left);
    auto right_it = out->vocab.find(right);
    if (left_it == out->vocab.end() || right_it == out->vocab.end()) {
      const std::string& missing = left_it == out->vocab.end() ? left : right;
      return ctx.malformed(merge_field, "merge token '" + missing + "' is not in the vocabulary");
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

}  // namespace

Status parseBpe(const LoadContext& ctx, const json& model, BpeModel* out) {
  if (!model.is_object()) return ctx.malformed("model", "expected an object");
  REE_RETURN_IF_ERROR(parseOptions(ctx, model, out));
  REE_RETURN_IF_ERROR(parseVocab(ctx, model, out));
  return parseMerges(ctx, model, out);
}

}  // namespace ree::models::tokenizer_internal
