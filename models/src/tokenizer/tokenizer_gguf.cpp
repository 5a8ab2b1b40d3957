// A GGUF file's tokenizer as the tokenizer.json transformers' GGUF converter would build from it
// (ree/models/gguf_tokenizer.h), loaded by Tokenizer::loadFromString: one pipeline, one set of
// checks for both formats.
#include "ree/models/gguf_tokenizer.h"

#include <algorithm>
#include <exception>
#include <nlohmann/json.hpp>
#include <unordered_set>

#include "ree/core/text.h"
#include "tokenizer_gguf.h"

namespace ree::models {
namespace {

using Json = nlohmann::json;
using tokenizer_internal::GgufTokenizerMetadata;

const char* const kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kMetaspace = "\xE2\x96\x81";  // U+2581, SentencePiece's space

bool isLlama3Pre(const std::string& pre) {
  return pre == "llama-bpe" || pre == "llama3" || pre == "llama-v3";
}
bool isQwen2Pre(const std::string& pre) {
  return pre == "qwen2" || pre == "deepseek-r1-qwen";
}
// transformers' GGUFQwen2Converter (plain byte-level BPE) serves these; GGUFLlamaConverter llama.
bool qwenFlavour(const GgufTokenizerMetadata& meta) {
  return meta.architecture == "qwen2" || meta.architecture == "qwen3";
}

Json byteLevel(bool use_regex) {
  return {{"type", "ByteLevel"},
          {"add_prefix_space", false},
          {"trim_offsets", true},
          {"use_regex", use_regex}};
}

Json splitIsolated(const char* regex) {
  return {{"type", "Split"},
          {"pattern", {{"Regex", regex}}},
          {"behavior", "Isolated"},
          {"invert", false}};
}

// The pre-tokenizer of the model's original tokenizer.json, by llama.cpp's name for it.
Json preTokenizerOf(const std::string& pre) {
  if (isLlama3Pre(pre)) {
    return {{"type", "Sequence"},
            {"pretokenizers", Json::array({splitIsolated(kLlama3Pattern), byteLevel(false)})}};
  }
  if (isQwen2Pre(pre)) {
    return {{"type", "Sequence"},
            {"pretokenizers", Json::array({splitIsolated(kQwen2Pattern), byteLevel(false)})}};
  }
  if (pre == "smollm" || pre == "starcoder") {
    // Digits(individual_digits) splits off each char::is_numeric character: \p{N}, isolated.
    return {{"type", "Sequence"},
            {"pretokenizers", Json::array({splitIsolated(R"(\p{N})"), byteLevel(true)})}};
  }
  return byteLevel(true);  // gpt-2
}

Json bpeModel(const GgufTokenizerMetadata& meta) {
  Json vocab = Json::object();
  for (size_t i = 0; i < meta.tokens.size(); ++i)
    vocab[std::string(meta.tokens[i])] = i;  // a repeated token keeps its last id (Python dict)
  Json merges = Json::array();
  if (meta.has_merges) {
    for (const auto& [left, right] : meta.merges)
      merges.push_back({std::string(left), std::string(right)});
  } else {
    for (auto& [left, right] : tokenizer_internal::mergesFromScores(meta.tokens, meta.scores))
      merges.push_back({std::move(left), std::move(right)});
  }
  const bool plain = meta.model == "gpt2" && qwenFlavour(meta);
  Json model = {{"type", "BPE"},
                {"dropout", nullptr},
                {"unk_token", nullptr},
                {"continuing_subword_prefix", nullptr},
                {"end_of_word_suffix", nullptr},
                {"fuse_unk", !plain},
                {"byte_fallback", !plain},
                {"ignore_merges", meta.model == "gpt2" && isLlama3Pre(meta.pre)},
                {"vocab", std::move(vocab)},
                {"merges", std::move(merges)}};
  if (!plain && meta.unk_id) model["unk_token"] = std::string(meta.tokens[*meta.unk_id]);
  return model;
}

Json addedToken(std::string_view content, int64_t id, bool special) {
  return {{"id", id},
          {"content", std::string(content)},
          {"single_word", false},
          {"lstrip", false},
          {"rstrip", false},
          {"normalized", false},
          {"special", special}};
}

// CONTROL tokens and the named special tokens (special), USER_DEFINED tokens (not special); each
// content once, under the id the vocabulary gives it.
Json addedTokens(const GgufTokenizerMetadata& meta, const Json& vocab) {
  std::vector<std::pair<int64_t, bool>> wanted;  // (index in tokens, special)
  for (size_t i = 0; i < meta.token_types.size(); ++i) {
    const int32_t type = meta.token_types[i];
    if (type == tokenizer_internal::kGgufTokenControl) wanted.emplace_back(i, true);
    if (type == tokenizer_internal::kGgufTokenUserDefined) wanted.emplace_back(i, false);
  }
  for (const auto& id : {meta.unk_id, meta.bos_id, meta.eos_id, meta.pad_id}) {
    if (id) wanted.emplace_back(*id, true);
  }
  Json list = Json::array();
  std::unordered_set<std::string_view> seen;
  for (const auto& [index, special] : wanted) {
    const std::string_view content = meta.tokens[static_cast<size_t>(index)];
    if (content.empty() || !seen.insert(content).second) continue;
    list.push_back(addedToken(content, vocab.at(std::string(content)).get<int64_t>(), special));
  }
  return list;
}

// TemplateProcessing: BOS and EOS around the sequence as add_bos_token / add_eos_token say
// (absent: BOS for SentencePiece and Llama 3 vocabularies, as llama.cpp).
Status postProcessor(const GgufTokenizerMetadata& meta, Json* out) {
  const bool default_bos = meta.model == "llama" || isLlama3Pre(meta.pre);
  struct Side {
    bool add;
    bool explicit_flag;
    const std::optional<int64_t>& id;
    const char* key;
  };
  const Side sides[] = {
      {meta.add_bos.value_or(default_bos), meta.add_bos.has_value(), meta.bos_id,
       "tokenizer.ggml.bos_token_id"},
      {meta.add_eos.value_or(false), meta.add_eos.has_value(), meta.eos_id,
       "tokenizer.ggml.eos_token_id"},
  };
  Json items[2] = {Json::array(), Json::array()};
  Json specials = Json::object();
  for (int s = 0; s < 2; ++s) {
    if (!sides[s].add) continue;
    if (!sides[s].id) {
      if (!sides[s].explicit_flag) continue;
      return REE_FAIL(Status::kIoError,
                      "GGUF file '%s': metadata key 'tokenizer.ggml.add_%s_token' is true, but "
                      "'%s' is missing",
                      meta.shown_path.c_str(), s == 0 ? "bos" : "eos", sides[s].key);
    }
    const std::string token(meta.tokens[static_cast<size_t>(*sides[s].id)]);
    items[s].push_back({{"SpecialToken", {{"id", token}, {"type_id", 0}}}});
    specials[token] = {
        {"id", token}, {"ids", Json::array({*sides[s].id})}, {"tokens", Json::array({token})}};
  }
  Json single = items[0];
  single.push_back({{"Sequence", {{"id", "A"}, {"type_id", 0}}}});
  for (const Json& item : items[1])
    single.push_back(item);
  Json pair = single;
  pair.push_back({{"Sequence", {{"id", "B"}, {"type_id", 1}}}});
  *out = {{"type", "TemplateProcessing"},
          {"single", std::move(single)},
          {"pair", std::move(pair)},
          {"special_tokens", std::move(specials)}};
  return Status::kSuccess;
}

Json replaceDecoder(const char* from, const char* to) {
  return {{"type", "Replace"}, {"pattern", {{"String", from}}}, {"content", to}};
}

// Normalizer, pre-tokenizer and decoder by tokenizer model and architecture.
void pipelineStages(const GgufTokenizerMetadata& meta, Json* root) {
  Json& r = *root;
  if (meta.model == "llama") {
    const bool prefix_space = meta.add_space_prefix.value_or(true);
    Json normalizers = Json::array();
    if (prefix_space) normalizers.push_back({{"type", "Prepend"}, {"prepend", kMetaspace}});
    normalizers.push_back(
        {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", kMetaspace}});
    r["normalizer"] = {{"type", "Sequence"}, {"normalizers", std::move(normalizers)}};
    r["pre_tokenizer"] = nullptr;
    Json decoders = Json::array(
        {{{"type", "ByteFallback"}}, {{"type", "Fuse"}}, replaceDecoder(kMetaspace, " ")});
    if (prefix_space) {
      decoders.push_back({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}});
    }
    r["decoder"] = {{"type", "Sequence"}, {"decoders", std::move(decoders)}};
    return;
  }
  r["normalizer"] = isQwen2Pre(meta.pre) ? Json{{"type", "NFC"}} : Json(nullptr);
  r["pre_tokenizer"] = preTokenizerOf(meta.pre);
  Json byte_level_decoder = {{"type", "ByteLevel"},
                             {"add_prefix_space", true},
                             {"trim_offsets", true},
                             {"use_regex", true}};
  if (qwenFlavour(meta)) {
    r["decoder"] = std::move(byte_level_decoder);
  } else {
    r["decoder"] = {{"type", "Sequence"},
                    {"decoders", Json::array({{{"type", "ByteFallback"}},
                                              {{"type", "Fuse"}},
                                              replaceDecoder(kMetaspace, " "),
                                              std::move(byte_level_decoder)})}};
  }
}

Status buildTokenizerJson(const GgufTokenizerMetadata& meta, Json* root) {
  Json& r = *root;
  r["version"] = "1.0";
  r["truncation"] = nullptr;
  r["padding"] = nullptr;
  r["model"] = bpeModel(meta);
  r["added_tokens"] = addedTokens(meta, r["model"]["vocab"]);
  pipelineStages(meta, root);
  return postProcessor(meta, &r["post_processor"]);
}

}  // namespace

bool ggufHasTokenizer(const GgufFile& file) {
  return file.find("tokenizer.ggml.model") != nullptr;
}

Status ggufTokenizerJson(const GgufFile& file, std::string* json_text) {
  REE_CHECK_ARG(json_text != nullptr, "ggufTokenizerJson: json_text is null");
  try {
    GgufTokenizerMetadata meta;
    REE_RETURN_IF_ERROR(tokenizer_internal::readGgufTokenizerMetadata(file, &meta));
    Json root = Json::object();
    REE_RETURN_IF_ERROR(buildTokenizerJson(meta, &root));
    *json_text = root.dump();
    return Status::kSuccess;
  } catch (const std::bad_alloc&) {
    return REE_FAIL(Status::kOutOfMemory, "GGUF file '%s': out of memory building its tokenizer",
                    printableText(file.path(), 400).c_str());
  } catch (const std::exception& e) {
    return REE_FAIL(Status::kIoError, "GGUF file '%s': tokenizer metadata: %s",
                    printableText(file.path(), 400).c_str(), e.what());
  }
}

Status loadGgufTokenizer(const GgufFile& file, std::unique_ptr<Tokenizer>* tokenizer) {
  REE_CHECK_ARG(tokenizer != nullptr, "loadGgufTokenizer: tokenizer is null");
  std::string text;
  REE_RETURN_IF_ERROR(ggufTokenizerJson(file, &text));
  return Tokenizer::loadFromString(text, file.path() + " (GGUF tokenizer.ggml.*)", tokenizer);
}

Status loadGgufTokenizer(const std::string& path, std::unique_ptr<Tokenizer>* tokenizer) {
  REE_CHECK_ARG(tokenizer != nullptr, "loadGgufTokenizer: tokenizer is null");
  tokenizer->reset();
  std::unique_ptr<GgufFile> file;
  REE_RETURN_IF_ERROR(GgufFile::open(path, &file));
  if (!ggufHasTokenizer(*file)) return Status::kSuccess;
  return loadGgufTokenizer(*file, tokenizer);
}

Status ggufEndTokenIds(const GgufFile& file, std::vector<int64_t>* ids) {
  REE_CHECK_ARG(ids != nullptr, "ggufEndTokenIds: ids is null");
  ids->clear();
  const GgufValue* tokens = file.find("tokenizer.ggml.tokens");
  for (const char* key : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id",
                          "tokenizer.ggml.eom_token_id"}) {
    if (file.find(key) == nullptr) continue;
    int64_t id = 0;
    REE_RETURN_IF_ERROR(file.integer(key, &id));
    if (tokens != nullptr && static_cast<uint64_t>(id) >= tokens->count) {
      return REE_FAIL(Status::kInvalidArgument,
                      "GGUF file '%s': metadata key '%s' is %lld, outside tokenizer.ggml.tokens' "
                      "[0, %llu)",
                      printableText(file.path(), 400).c_str(), key, static_cast<long long>(id),
                      static_cast<unsigned long long>(tokens->count));
    }
    if (std::find(ids->begin(), ids->end(), id) == ids->end()) ids->push_back(id);
  }
  return Status::kSuccess;
}

}  // namespace ree::models
