// Tokenizer tests for Unicode normalization forms, the Unigram model and byte fallback: the C++
// tokenizer must give exactly the ids, texts and streaming chunks of Hugging Face `tokenizers`.
//
// scripts/reference/make_unicode_tokenizers.py trains small Unigram and BPE tokenizers (NFC, NFD,
// NFKC, NFKD, Lowercase, Strip, StripAccents, Nmt normalizers; Metaspace and WhitespaceSplit
// pre-tokenizers; byte fallback) into REE_TEST_TMP and writes what `tokenizers` gives on a
// multilingual corpus (combining characters, Hangul jamo, ligatures, full-width forms, Arabic
// presentation forms, CJK, emoji ZWJ sequences, code with tabs). Hand-written files check the
// Viterbi ties, serde_json's score parsing and the refusal of malformed Unigram models.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ree/models/tokenizer.h"
#include "subprocess_util.h"

namespace {

using json = nlohmann::json;
using ree::Status;
using ree::models::DecodeStream;
using ree::models::Tokenizer;
using ree::test::formatIds;
using ree::test::runCommand;
using ree::test::shellQuote;

const char* const kFiles[] = {
    "unigram_nfkc.json",        "unigram_byte_fallback.json",  "unigram_whitespace.json",
    "unigram_precompiled.json", "unigram_precompiled_cf.json", "bpe_nfc_byte_fallback.json",
    "qwen2_nfc.json",           "bytelevel_nfkd_lower.json",   "bytelevel_nfd.json",
    "unigram_first.json"};

std::string envOrEmpty(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

struct Reference {
  bool ok = false;
  std::string error, dir;
  json data;
};

// Generated once per run of this executable.
const Reference& reference() {
  static const Reference ref = [] {
    Reference r;
    const std::string python = envOrEmpty("REE_PYTHON");
    const std::string source = envOrEmpty("REE_SOURCE_DIR");
    r.dir = envOrEmpty("REE_TEST_TMP");
    if (python.empty() || source.empty() || r.dir.empty()) {
      r.error = "REE_PYTHON, REE_SOURCE_DIR and REE_TEST_TMP must be set (run through ctest)";
      return r;
    }
    std::error_code ec;
    std::filesystem::create_directories(r.dir, ec);
    std::string output;
    const std::string script = source + "/scripts/reference/make_unicode_tokenizers.py";
    if (runCommand(shellQuote(python) + " " + shellQuote(script) + " " + shellQuote(r.dir),
                   &output) != 0) {
      r.error = "make_unicode_tokenizers.py failed: " + output;
      return r;
    }
    std::ifstream in(r.dir + "/reference.json");
    r.data = json::parse(in, nullptr, false);
    r.ok = !r.data.is_discarded();
    if (!r.ok) r.error = "cannot parse " + r.dir + "/reference.json";
    return r;
  }();
  return ref;
}

#define REQUIRE_REFERENCE()           \
  const Reference& ref = reference(); \
  ASSERT_TRUE(ref.ok) << "reference generation failed: " << ref.error

std::unique_ptr<Tokenizer> loadOrFail(const std::string& path) {
  std::unique_ptr<Tokenizer> tokenizer;
  EXPECT_EQ(Tokenizer::load(path, &tokenizer), Status::kSuccess) << ree::lastErrorMessage();
  return tokenizer;
}

std::vector<int32_t> idsOf(const json& array) {
  return array.get<std::vector<int32_t>>();
}

TEST(TokenizerUnicodeReference, EncodeMatchesTokenizers) {
  REQUIRE_REFERENCE();
  size_t compared = 0;
  for (const char* file : kFiles) {
    auto tokenizer = loadOrFail(ref.dir + "/" + file);
    ASSERT_TRUE(tokenizer) << file;
    EXPECT_EQ(tokenizer->vocabSize(), ref.data[file]["vocab_size"].get<int32_t>()) << file;
    for (const json& entry : ref.data[file]["texts"]) {
      const std::string text = entry["text"].get<std::string>();
      for (const bool special : {true, false}) {
        const json& expected = entry[special ? "ids" : "ids_no_special"];
        std::vector<int32_t> ids;
        ASSERT_EQ(tokenizer->encode(text, special, &ids), Status::kSuccess)
            << file << ": " << ree::lastErrorMessage();
        EXPECT_EQ(ids, idsOf(expected))
            << file << (special ? "" : " (no special)") << " text " << json(text).dump()
            << "\n ours " << formatIds(ids) << "\n ref  " << formatIds(idsOf(expected));
        ++compared;
      }
    }
  }
  EXPECT_GT(compared, 800u);
}

// 20,000 random pieces over a small alphabet, a 100 kB random text: many overlapping candidates
// at every position, and (unigram_ties.json) many equal path scores.
TEST(TokenizerUnicodeReference, RandomUnigramsMatchTokenizersOnALongText) {
  REQUIRE_REFERENCE();
  for (const char* file : {"unigram_random.json", "unigram_ties.json"}) {
    auto tokenizer = loadOrFail(ref.dir + "/" + file);
    ASSERT_TRUE(tokenizer) << file;
    const json& entry = ref.data[file];
    std::vector<int32_t> ids;
    ASSERT_EQ(tokenizer->encode(entry["long_text"].get<std::string>(), false, &ids),
              Status::kSuccess)
        << ree::lastErrorMessage();
    const std::vector<int32_t> expected = idsOf(entry["long_ids"]);
    ASSERT_EQ(ids.size(), expected.size()) << file;
    size_t first_difference = 0;
    while (first_difference < ids.size() && ids[first_difference] == expected[first_difference])
      ++first_difference;
    EXPECT_EQ(first_difference, ids.size())
        << file << ": ids differ from index " << first_difference;
    EXPECT_GT(ids.size(), 50000u);
  }
}

// decode (both skip modes) and DecodeStream chunk by chunk on one id sequence.
void checkDecoding(const Tokenizer& tokenizer, const std::string& what, const json& entry) {
  const std::vector<int32_t> ids = idsOf(entry["ids"]);
  for (const bool skip : {false, true}) {
    const std::string label = what + (skip ? " skip_special" : "") + " ids " + formatIds(ids);
    std::string decoded;
    ASSERT_EQ(tokenizer.decode(ids, skip, &decoded), Status::kSuccess) << ree::lastErrorMessage();
    EXPECT_EQ(decoded, entry[skip ? "decoded_skip" : "decoded"].get<std::string>()) << label;
    const json& steps = entry[skip ? "stream_skip" : "stream"];
    DecodeStream stream(tokenizer, skip);
    for (size_t i = 0; i < ids.size() && i < steps.size(); ++i) {
      std::string chunk;
      bool emitted = false;
      const Status status = stream.step(ids[i], &chunk, &emitted);
      if (steps[i].is_object()) {  // tokenizers raised here
        EXPECT_NE(status, Status::kSuccess) << label << " step " << i;
        break;
      }
      ASSERT_EQ(status, Status::kSuccess) << label << " step " << i;
      EXPECT_EQ(emitted, !steps[i].is_null()) << label << " step " << i;
      if (!steps[i].is_null()) {
        EXPECT_EQ(chunk, steps[i].get<std::string>()) << label;
      }
    }
  }
}

TEST(TokenizerUnicodeReference, DecodeAndStreamMatchTokenizers) {
  REQUIRE_REFERENCE();
  size_t compared = 0;
  for (const char* file : kFiles) {
    auto tokenizer = loadOrFail(ref.dir + "/" + file);
    ASSERT_TRUE(tokenizer) << file;
    for (const char* group : {"texts", "random_ids"}) {
      for (const json& entry : ref.data[file][group]) {
        checkDecoding(*tokenizer, std::string(file) + " " + group, entry);
        ++compared;
      }
    }
  }
  EXPECT_GT(compared, 600u);
}

// The corpus really exercises the new code: normalization changes texts, Unigram pieces are
// chosen by score, bytes fall back, and the serde_json score reading matters.
TEST(TokenizerUnicodeReference, CorpusReachesTheNewPaths) {
  REQUIRE_REFERENCE();
  auto tokenizer = loadOrFail(ref.dir + "/unigram_byte_fallback.json");
  ASSERT_TRUE(tokenizer);
  const int32_t byte_a = tokenizer->tokenToId("<0xE2>");
  ASSERT_GE(byte_a, 0);
  size_t byte_tokens = 0;
  for (const json& entry : ref.data["unigram_byte_fallback.json"]["texts"]) {
    for (int32_t id : idsOf(entry["ids"])) {
      std::string token;
      if (tokenizer->idToToken(id, &token) && token.rfind("<0x", 0) == 0) ++byte_tokens;
    }
  }
  EXPECT_GT(byte_tokens, 50u);
  size_t off_by_serde = 0;
  for (const char* file : kFiles)
    off_by_serde += ref.data[file]["scores_off_by_serde"].get<size_t>();
  off_by_serde += ref.data["unigram_random.json"]["scores_off_by_serde"].get<size_t>();
  EXPECT_GT(off_by_serde, 0u) << "no Unigram score where serde_json and strtod differ";
}

// ---------------------------------------------------------------------------------------------
// Hand-written Unigram files.

json unigram(const json& vocab, const json& unk_id = 0, bool byte_fallback = false) {
  return json{{"version", "1.0"},
              {"truncation", nullptr},
              {"padding", nullptr},
              {"added_tokens", json::array()},
              {"normalizer", nullptr},
              {"pre_tokenizer", nullptr},
              {"post_processor", nullptr},
              {"decoder", nullptr},
              {"model",
               {{"type", "Unigram"},
                {"unk_id", unk_id},
                {"vocab", vocab},
                {"byte_fallback", byte_fallback}}}};
}

Status loadText(const std::string& text, std::unique_ptr<Tokenizer>* tokenizer) {
  return Tokenizer::loadFromString(text, "inline.json", tokenizer);
}

std::vector<int32_t> encodeOrFail(const Tokenizer& tokenizer, const std::string& text) {
  std::vector<int32_t> ids;
  EXPECT_EQ(tokenizer.encode(text, false, &ids), Status::kSuccess) << ree::lastErrorMessage();
  return ids;
}

TEST(TokenizerUnigram, ViterbiPicksTheBestScoreAndFusesUnknowns) {
  std::unique_ptr<Tokenizer> tokenizer;
  const json vocab = json::parse(
      R"([["<unk>", 0.0], ["a", -1.0], ["b", -1.0], ["ab", -1.5], ["abc", -4.0], ["c", -1.0]])");
  ASSERT_EQ(loadText(unigram(vocab).dump(), &tokenizer), Status::kSuccess)
      << ree::lastErrorMessage();
  EXPECT_EQ(encodeOrFail(*tokenizer, "ab"), (std::vector<int32_t>{3}));      // -1.5 > -2
  EXPECT_EQ(encodeOrFail(*tokenizer, "abc"), (std::vector<int32_t>{3, 5}));  // -2.5 > -4
  // x, y, z have no piece: one fused unk (score min - 10 each), as tokenizers.
  EXPECT_EQ(encodeOrFail(*tokenizer, "xyzab€"), (std::vector<int32_t>{0, 3, 0}));
}

// serde_json reads -3.7252536130581317 one ulp below strtod, so that "ab" (written as the
// shortest form of that double) ties with "a" + "b" and the earlier path, "ab", stays: tokenizers
// gives [3] here, a correctly rounded reader [1, 2].
TEST(TokenizerUnigram, ScoresAreReadAsSerdeJsonReadsThem) {
  const std::string text = R"({"version": "1.0", "truncation": null, "padding": null,
    "added_tokens": [], "normalizer": null, "pre_tokenizer": null, "post_processor": null,
    "decoder": null, "model": {"type": "Unigram", "unk_id": 0, "byte_fallback": false,
    "vocab": [["<unk>", 0.0], ["a", 0.0], ["b", -3.7252536130581317],
              ["ab", -3.725253613058132]]}})";
  std::unique_ptr<Tokenizer> tokenizer;
  ASSERT_EQ(loadText(text, &tokenizer), Status::kSuccess) << ree::lastErrorMessage();
  EXPECT_EQ(encodeOrFail(*tokenizer, "ab"), (std::vector<int32_t>{3}));
}

TEST(TokenizerUnigram, ByteFallbackAndMissingUnk) {
  json vocab = json::parse(R"([["<unk>", 0.0], ["a", -1.0]])");
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    vocab.push_back({name, 0.0});
  }
  std::unique_ptr<Tokenizer> tokenizer;
  ASSERT_EQ(loadText(unigram(vocab, 0, true).dump(), &tokenizer), Status::kSuccess);
  // "é" (C3 A9) and "x" fuse into one unknown piece, then fall back to its three bytes.
  EXPECT_EQ(encodeOrFail(*tokenizer, "a\xC3\xA9x"),
            (std::vector<int32_t>{1, 2 + 0xC3, 2 + 0xA9, 2 + 'x'}));
  std::string decoded;
  ASSERT_EQ(loadText(unigram(vocab, nullptr).dump(), &tokenizer), Status::kSuccess);
  std::vector<int32_t> ids;
  EXPECT_EQ(tokenizer->encode("a", false, &ids), Status::kSuccess);
  EXPECT_EQ(tokenizer->encode("ax", false, &ids), Status::kInvalidArgument);
  EXPECT_NE(std::string(ree::lastErrorMessage()).find("unk_id"), std::string::npos)
      << ree::lastErrorMessage();
}

TEST(TokenizerUnigram, MalformedModelsNameTheField) {
  struct Case {
    std::string text;
    const char* field;
  };
  const json ok = json::parse(R"([["<unk>", 0.0], ["a", -1.0]])");
  json without_vocab = unigram(ok);
  without_vocab["model"].erase("vocab");
  auto replaced = [](std::string text, const std::string& from, const std::string& to) {
    return text.replace(text.find(from), from.size(), to);
  };
  auto with_vocab = [&](const char* vocab) { return unigram(json::parse(vocab)).dump(); };
  const Case cases[] = {
      {with_vocab("[]"), "model.vocab"},
      {with_vocab(R"({"a": 0})"), "model.vocab"},
      {with_vocab(R"([["<unk>", 0.0], ["a", "high"]])"), "model.vocab[1]"},
      {with_vocab(R"([["<unk>", 0.0], ["a"]])"), "model.vocab[1]"},
      {with_vocab(R"([["<unk>", 0.0], [7, -1.0]])"), "model.vocab[1]"},
      {with_vocab(R"([["<unk>", 0.0], ["a", -1.0], ["a", -2.0]])"), "model.vocab[2]"},
      // Finite for strtod, out of range for serde_json (tokenizers refuses the file).
      {replaced(unigram(ok).dump(), "-1.0", "1.7976931348623158e308"), "model.vocab[1]"},
      {unigram(ok, 2).dump(), "model.unk_id"},
      {unigram(ok, -1).dump(), "model.unk_id"},
      {unigram(ok, "0").dump(), "model.unk_id"},
      {without_vocab.dump(), "model.vocab"},
  };
  for (const Case& c : cases) {
    std::unique_ptr<Tokenizer> tokenizer;
    EXPECT_NE(loadText(c.text, &tokenizer), Status::kSuccess) << c.text;
    const std::string message = ree::lastErrorMessage();
    EXPECT_NE(message.find("field '" + std::string(c.field) + "'"), std::string::npos)
        << "should name " << c.field << ": " << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    EXPECT_FALSE(tokenizer);
  }
}

// Fields tokenizers requires, found missing by tests/fuzz/tokenizer_differential.py on inputs
// grown from the Unigram seeds: REE refused nothing there and loaded what tokenizers refuses.
TEST(TokenizerStrictness, FieldsTokenizersRequires) {
  struct Case {
    const char* stage;
    const char* value;
    const char* field;
  };
  const Case cases[] = {
      {"normalizer", R"({"type": "Prepend"})", "normalizer.prepend"},
      {"normalizer", R"({"type": "Prepend", "prepend": null})", "normalizer.prepend"},
      {"normalizer", R"({"type": "Replace", "pattern": {"String": "a"}})", "normalizer.content"},
      {"normalizer", R"({"type": "Strip", "strip_left": true})", "normalizer.strip_right"},
      {"decoder", R"({"type": "Replace", "pattern": {"String": "a"}})", "decoder.content"},
      {"decoder", R"({"type": "Strip", "content": " ", "start": 1})", "decoder.stop"},
      {"decoder", R"({"type": "Metaspace"})", "decoder.replacement"},
      {"pre_tokenizer", R"({"type": "Metaspace", "replacement": null})",
       "pre_tokenizer.replacement"},
      {"pre_tokenizer", R"({"type": "Metaspace", "replacement": "_", "add_prefix_space": false})",
       "pre_tokenizer.add_prefix_space"},
      {"pre_tokenizer", R"({"type": "Metaspace", "replacement": "_", "prepend_scheme": null})",
       "pre_tokenizer.prepend_scheme"},
      {"pre_tokenizer", R"({"type": "ByteLevel", "add_prefix_space": false})",
       "pre_tokenizer.trim_offsets"},
  };
  for (const Case& c : cases) {
    json file = unigram(json::parse(R"([["<unk>", 0.0], ["a", -1.0]])"));
    file[c.stage] = json::parse(c.value);
    std::unique_ptr<Tokenizer> tokenizer;
    EXPECT_EQ(loadText(file.dump(), &tokenizer), Status::kIoError) << c.value;
    const std::string message = ree::lastErrorMessage();
    EXPECT_NE(message.find("field '" + std::string(c.field) + "'"), std::string::npos)
        << "should name " << c.field << ": " << message;
  }
  // What tokenizers accepts still loads: a legacy add_prefix_space that agrees with the scheme.
  json file = unigram(json::parse(R"([["<unk>", 0.0], ["a", -1.0]])"));
  file["pre_tokenizer"] = json::parse(
      R"({"type": "Metaspace", "replacement": "_", "add_prefix_space": false,
          "prepend_scheme": "never", "split": null})");
  std::unique_ptr<Tokenizer> tokenizer;
  EXPECT_EQ(loadText(file.dump(), &tokenizer), Status::kSuccess) << ree::lastErrorMessage();
}

std::string base64(const std::string& bytes) {
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (size_t at = 0; at < bytes.size(); at += 3) {
    uint32_t bits = 0;
    for (size_t k = 0; k < 3; ++k)
      bits = bits << 8 | (at + k < bytes.size() ? static_cast<unsigned char>(bytes[at + k]) : 0);
    const size_t chars = std::min<size_t>(4, (bytes.size() - at) * 4 / 3 + 1);
    for (size_t k = 0; k < 4; ++k)
      out += k < chars ? kAlphabet[bits >> (18 - 6 * k) & 63] : '=';
  }
  return out;
}

std::string littleEndian32(uint32_t value) {
  std::string out;
  for (int k = 0; k < 4; ++k)
    out += static_cast<char>(value >> (8 * k) & 0xFF);
  return out;
}

// Charsmaps tokenizers cannot parse (it panics while loading) are refused naming the field; one
// whose trie leads outside itself (tokenizers loads it, then panics in encode) fails encode.
TEST(TokenizerPrecompiled, MalformedCharsmaps) {
  struct Case {
    std::string charsmap;
    Status status;
  };
  const std::string one_unit = littleEndian32(4) + littleEndian32(0);
  const Case cases[] = {
      {"QQ=x", Status::kIoError},                                 // '=' inside
      {"QR==", Status::kIoError},                                 // non-zero trailing bits
      {base64("ab"), Status::kIoError},                           // shorter than the size
      {base64(littleEndian32(40) + "abcd"), Status::kIoError},    // trie past the end
      {base64(one_unit + "\xFF"), Status::kIoError},              // replacements not UTF-8
      {base64(littleEndian32(0) + "abc"), Status::kUnsupported},  // empty trie: panics on use
  };
  for (const Case& c : cases) {
    json file = unigram(json::parse(R"([["<unk>", 0.0], ["a", -1.0]])"));
    file["normalizer"] = {{"type", "Precompiled"}, {"precompiled_charsmap", c.charsmap}};
    std::unique_ptr<Tokenizer> tokenizer;
    EXPECT_EQ(loadText(file.dump(), &tokenizer), c.status) << c.charsmap;
    const std::string message = ree::lastErrorMessage();
    EXPECT_NE(message.find("field 'normalizer.precompiled_charsmap'"), std::string::npos)
        << message;
  }
  json file = unigram(json::parse(R"([["<unk>", 0.0], ["a", -1.0]])"));
  file["normalizer"] = {{"type", "Precompiled"}, {"precompiled_charsmap", base64(one_unit + "x")}};
  std::unique_ptr<Tokenizer> tokenizer;
  ASSERT_EQ(loadText(file.dump(), &tokenizer), Status::kSuccess) << ree::lastErrorMessage();
  std::vector<int32_t> ids;
  EXPECT_EQ(tokenizer->encode("Hello", false, &ids), Status::kInvalidArgument);
  const std::string message = ree::lastErrorMessage();
  EXPECT_NE(message.find("Precompiled"), std::string::npos) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
}

// Normalizers on hand-picked characters (the reference test covers them against tokenizers).
TEST(TokenizerNormalizers, FormsLowercaseAndStrip) {
  json file = unigram(json::parse(R"([["<unk>", 0.0]])"));
  struct Case {
    const char* normalizer;
    const char* input;
    const char* normalized;
  };
  const Case cases[] = {
      {R"({"type": "NFC"})", "e\xCC\x81", "\xC3\xA9"},
      {R"({"type": "NFD"})", "\xC3\xA9", "e\xCC\x81"},
      {R"({"type": "NFKC"})", "\xEF\xAC\x81\xEF\xBC\x91", "fi1"},
      {R"({"type": "NFKD"})", "\xE1\xBA\x9B", "s\xCC\x87"},
      {R"({"type": "Lowercase"})",
       "\xC4\xB0\xCE\xA3"
       "A",
       "i\xCC\x87\xCF\x83"
       "a"},
      {R"({"type": "Strip", "strip_left": true, "strip_right": true})", "\xE3\x80\x80 x \xC2\xA0",
       "x"},
      {R"({"type": "StripAccents"})", "e\xCC\x81", "e"},
  };
  for (const Case& c : cases) {
    file["normalizer"] = json::parse(c.normalizer);
    // The whole normalized text as one piece: its id tells the normalization.
    file["model"]["vocab"] =
        json::array({json::array({"<unk>", 0.0}), json::array({c.normalized, -1.0})});
    std::unique_ptr<Tokenizer> tokenizer;
    ASSERT_EQ(loadText(file.dump(), &tokenizer), Status::kSuccess) << ree::lastErrorMessage();
    EXPECT_EQ(encodeOrFail(*tokenizer, c.input), (std::vector<int32_t>{1})) << c.normalizer;
  }
}

}  // namespace
