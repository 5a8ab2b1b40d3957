// Internal to the tokenizer: JSON numbers read as tokenizers reads them. tokenizers parses
// tokenizer.json with serde_json built without its float_roundtrip feature, whose float parser is
// not correctly rounded: about 3% of the 17-digit Unigram scores that Python writes come out one
// ulp away from strtod's (and nlohmann's) value. Unigram segmentation compares sums of scores, so
// REE reads the scores with serde_json's own algorithm.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace ree::models::tokenizer_internal {

// serde_json's f64 from the text of a JSON number (already validated by the JSON parser); false
// where serde_json refuses it (NumberOutOfRange).
bool serdeJsonDouble(std::string_view number, double* out);

// The scores of a Unigram tokenizer.json's model.vocab ([[piece, score], ...]) that are written as
// floats, read by serdeJsonDouble: (index in model.vocab, score) in file order. Integer scores
// are left out (serde_json converts them exactly like a cast). `bad_index` receives the first
// index whose float serde_json refuses, else SIZE_MAX.
bool unigramScoresAsSerdeReadsThem(const std::string& json_text,
                                   std::vector<std::pair<size_t, double>>* scores,
                                   size_t* bad_index);

}  // namespace ree::models::tokenizer_internal
