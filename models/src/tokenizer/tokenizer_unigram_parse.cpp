// Reading a Unigram "model" of tokenizer.json (see tokenizer_unigram.h). tokenizers reads vocab,
// unk_id and byte_fallback and ignores other keys; REE also refuses what tokenizers accepts but
// cannot mean anything: an empty vocabulary, a repeated piece (tokenizers would map it to its
// last id but decode both ids), a non-finite score.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "ree/core/text.h"
#include "tokenizer_json_number.h"
#include "tokenizer_unigram.h"

namespace ree::models::tokenizer_internal {
namespace {

using SerdeScores = std::vector<std::pair<size_t, double>>;

// One [piece, score] entry; `serde_scores` from `*next_serde` on holds the float scores of this
// entry and the ones after it, as tokenizers reads them.
Status parseEntry(const LoadContext& ctx, const json& entry, size_t id,
                  const SerdeScores& serde_scores, size_t* next_serde, UnigramModel* out) {
  const std::string field = elementField("model.vocab", id);
  if (!entry.is_array() || entry.size() != 2 || !entry[0].is_string()) {
    return ctx.malformed(field, "expected [piece, score]");
  }
  const auto& piece = entry[0].get_ref<const std::string&>();
  if (piece.size() > kMaxTokenBytes) {
    return ctx.overLimit(field, piece.size(), kMaxTokenBytes, "bytes of piece");
  }
  if (!entry[1].is_number() || !std::isfinite(entry[1].get<double>())) {
    return ctx.malformed(field, "score of '" + printableText(piece, 80) +
                                    "' is not a finite number: " + entry[1].dump());
  }
  double score = entry[1].get<double>();
  if (entry[1].is_number_float()) {
    if (*next_serde >= serde_scores.size() || serde_scores[*next_serde].first != id) {
      return ctx.fail(Status::kInternal, field, "score not found by the serde_json reader");
    }
    score = serde_scores[(*next_serde)++].second;
  }
  auto [it, inserted] = out->vocab.emplace(piece, static_cast<int32_t>(id));
  if (!inserted) {
    return ctx.malformed(field, "piece '" + printableText(piece, 80) +
                                    "' repeats the piece of id " + std::to_string(it->second));
  }
  out->id_to_token.emplace(static_cast<int32_t>(id), piece);
  out->pieces.push_back(piece);
  out->scores.push_back(score);
  return Status::kSuccess;
}

Status parseVocab(const LoadContext& ctx, const json& model, const std::string& json_text,
                  UnigramModel* out) {
  if (!model.contains("vocab")) return ctx.malformed("model.vocab", "missing");
  const json& vocab = model["vocab"];
  if (!vocab.is_array())
    return ctx.malformed("model.vocab", "expected a Unigram vocabulary [[piece, score], ...]");
  if (vocab.empty()) return ctx.malformed("model.vocab", "empty (a Unigram model needs pieces)");
  if (vocab.size() > kMaxVocabEntries) {
    return ctx.overLimit("model.vocab", vocab.size(), kMaxVocabEntries, "pieces");
  }
  out->pieces.reserve(vocab.size());
  out->scores.reserve(vocab.size());
  out->vocab.reserve(vocab.size());
  out->id_to_token.reserve(vocab.size());
  SerdeScores serde_scores;
  size_t bad_index = SIZE_MAX;
  if (!unigramScoresAsSerdeReadsThem(json_text, &serde_scores, &bad_index)) {
    return ctx.malformed("model.vocab", "malformed JSON");
  }
  if (bad_index != SIZE_MAX) {
    return ctx.malformed(elementField("model.vocab", bad_index),
                         "score is out of the range of a double (tokenizers refuses it)");
  }
  size_t next_serde = 0;
  for (size_t id = 0; id < vocab.size(); ++id)
    REE_RETURN_IF_ERROR(parseEntry(ctx, vocab[id], id, serde_scores, &next_serde, out));
  out->min_score = *std::min_element(out->scores.begin(), out->scores.end());
  return Status::kSuccess;
}

Status parseUnkId(const LoadContext& ctx, const json& model, UnigramModel* out) {
  auto it = model.find("unk_id");
  if (it == model.end() || it->is_null()) return Status::kSuccess;
  if (!it->is_number_unsigned()) return ctx.malformed("model.unk_id", "expected a piece index");
  const auto unk_id = it->get<uint64_t>();
  if (unk_id >= out->pieces.size()) {
    return ctx.malformed("model.unk_id", std::to_string(unk_id) + " is not below the " +
                                             std::to_string(out->pieces.size()) +
                                             " pieces of model.vocab");
  }
  out->has_unk = true;
  out->unk_id = static_cast<int32_t>(unk_id);
  return Status::kSuccess;
}

// The prefix search (matchPrefixes) and byte fallback tables.
void buildIndex(UnigramModel* out) {
  out->sorted_ids.resize(out->pieces.size());
  for (size_t id = 0; id < out->pieces.size(); ++id)
    out->sorted_ids[id] = static_cast<int32_t>(id);
  const auto& pieces = out->pieces;
  std::sort(out->sorted_ids.begin(), out->sorted_ids.end(),
            [&pieces](int32_t a, int32_t b) { return pieces[a] < pieces[b]; });
  for (int byte = 0; byte < 256; ++byte) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", byte);
    auto it = out->vocab.find(name);
    out->byte_ids[static_cast<size_t>(byte)] = it == out->vocab.end() ? -1 : it->second;
  }
}

}  // namespace

Status parseUnigram(const LoadContext& ctx, const json& model, const std::string& json_text,
                    UnigramModel* out) {
  REE_RETURN_IF_ERROR(parseVocab(ctx, model, json_text, out));
  REE_RETURN_IF_ERROR(parseUnkId(ctx, model, out));
  REE_RETURN_IF_ERROR(ctx.getBool(model, "byte_fallback", "model", &out->byte_fallback));
  buildIndex(out);
  return Status::kSuccess;
}

}  // namespace ree::models::tokenizer_internal
