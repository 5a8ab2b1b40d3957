#include "ree/models/builtin.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "ree/kernels/numeric.h"

namespace ree::models {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Bumped whenever the generated files change, so stale caches are never reused.
constexpr const char* kTinyLlamaVersion = "tiny-llama-v2";

struct TinyLlamaShape {
  int hidden = 256;
  int layers = 4;
  int heads = 8;
  int kv_heads = 4;
  int head_dim = 32;
  int intermediate = 688;
  int vocab = 258;  // 256 byte tokens + <|begin_of_text|> + <|end_of_text|>
  int max_positions = 2048;
};

// SplitMix64: integer-only, so the weights are the same bits on every machine.
struct SplitMix64 {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in [-1, 1): 24 random bits scaled exactly.
  float uniform() {
    return static_cast<float>(static_cast<int32_t>(next() >> 40) - (1 << 23)) / (1 << 23);
  }
};

// GPT-2's byte -> printable unicode mapping used by byte-level BPE vocabularies.
std::string byteToken(int byte) {
  int code;
  if ((byte >= 33 && byte <= 126) || (byte >= 161 && byte <= 172) || (byte >= 174 && byte <= 255)) {
    code = byte;
  } else {
    int n = 0;
    for (int b = 0; b < byte; ++b) {
      if (!((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255))) ++n;
    }
    code = 256 + n;
  }
  std::string out;
  if (code < 0x80) {
    out += static_cast<char>(code);
  } else {
    out += static_cast<char>(0xc0 | (code >> 6));
    out += static_cast<char>(0x80 | (code & 0x3f));
  }
  return out;
}

Status writeText(const fs::path& path, const std::string& text) {
  std::ofstream file(path, std::ios::binary);
  file << text;
  if (!file) return REE_FAIL(Status::kIoError, "cannot write %s", path.string().c_str());
  return Status::kSuccess;
}

json tinyLlamaConfig(const TinyLlamaShape& s) {
  return {{"architectures", {"LlamaForCausalLM"}},
          {"model_type", "llama"},
          {"hidden_size", s.hidden},
          {"intermediate_size", s.intermediate},
          {"num_hidden_layers", s.layers},
          {"num_attention_heads", s.heads},
          {"num_key_value_heads", s.kv_heads},
          {"head_dim", s.head_dim},
          {"vocab_size", s.vocab},
          {"max_position_embeddings", s.max_positions},
          {"rms_norm_eps", 1e-5},
          {"rope_theta", 500000.0},
          {"rope_scaling",
           {{"rope_type", "llama3"},
            {"factor", 8.0},
            {"low_freq_factor", 1.0},
            {"high_freq_factor", 4.0},
            {"original_max_position_embeddings", 512}}},
          {"hidden_act", "silu"},
          {"tie_word_embeddings", false},
          {"torch_dtype", "bfloat16"},
          {"bos_token_id", 256},
          {"eos_token_id", 257},
          {"attention_bias", false},
          {"mlp_bias", false},
          {"_ree_note", "REE built-in model: RANDOM weights generated from a fixed seed"}};
}

// Byte-level BPE tokenizer: the 256 byte tokens and two special tokens, no merges.
json byteLevelTokenizer() {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b)
    vocab[byteToken(b)] = b;
  return {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens",
       {{{"id", 256},
         {"content", "<|begin_of_text|>"},
         {"single_word", false},
         {"lstrip", false},
         {"rstrip", false},
         {"normalized", false},
         {"special", true}},
        {{"id", 257},
         {"content", "<|end_of_text|>"},
         {"single_word", false},
         {"lstrip", false},
         {"rstrip", false},
         {"normalized", false},
         {"special", true}}}},
      {"normalizer", nullptr},
      {"pre_tokenizer",
       {{"type", "ByteLevel"},
        {"add_prefix_space", false},
        {"trim_offsets", true},
        {"use_regex", true}}},
      {"post_processor",
       {{"type", "TemplateProcessing"},
        {"single",
         {{{"SpecialToken", {{"id", "<|begin_of_text|>"}, {"type_id", 0}}}},
          {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
        {"pair",
         {{{"SpecialToken", {{"id", "<|begin_of_text|>"}, {"type_id", 0}}}},
          {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
          {{"SpecialToken", {{"id", "<|begin_of_text|>"}, {"type_id", 1}}}},
          {{"Sequence", {{"id", "B"}, {"type_id", 1}}}}}},
        {"special_tokens",
         {{"<|begin_of_text|>",
           {{"id", "<|begin_of_text|>"}, {"ids", {256}}, {"tokens", {"<|begin_of_text|>"}}}}}}}},
      {"decoder",
       {{"type", "ByteLevel"},
        {"add_prefix_space", true},
        {"trim_offsets", true},
        {"use_regex", true}}},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", nullptr},
        {"continuing_subword_prefix", nullptr},
        {"end_of_word_suffix", nullptr},
        {"fuse_unk", false},
        {"byte_fallback", false},
        {"ignore_merges", false},
        {"vocab", vocab},
        {"merges", json::array()}}}};
}

// Weights: bf16, uniform in [-a, a] with a = 1/sqrt(fan_in) (sqrt is exact IEEE), norms at 1; the
// whole model.safetensors file.
std::string tinyLlamaSafetensors(const TinyLlamaShape& s) {
  struct Spec {
    std::string name;
    std::vector<int64_t> shape;
    bool ones;
  };
  std::vector<Spec> specs;
  specs.push_back({"model.embed_tokens.weight", {s.vocab, s.hidden}, false});
  for (int l = 0; l < s.layers; ++l) {
    std::string p = "model.layers." + std::to_string(l) + ".";
    specs.push_back({p + "input_layernorm.weight", {s.hidden}, true});
    specs.push_back({p + "self_attn.q_proj.weight", {s.heads * s.head_dim, s.hidden}, false});
    specs.push_back({p + "self_attn.k_proj.weight", {s.kv_heads * s.head_dim, s.hidden}, false});
    specs.push_back({p + "self_attn.v_proj.weight", {s.kv_heads * s.head_dim, s.hidden}, false});
    specs.push_back({p + "self_attn.o_proj.weight", {s.hidden, s.heads * s.head_dim}, false});
    specs.push_back({p + "post_attention_layernorm.weight", {s.hidden}, true});
    specs.push_back({p + "mlp.gate_proj.weight", {s.intermediate, s.hidden}, false});
    specs.push_back({p + "mlp.up_proj.weight", {s.intermediate, s.hidden}, false});
    specs.push_back({p + "mlp.down_proj.weight", {s.hidden, s.intermediate}, false});
  }
  specs.push_back({"model.norm.weight", {s.hidden}, true});
  specs.push_back({"lm_head.weight", {s.vocab, s.hidden}, false});

  json header = json::object();
  header["__metadata__"] = {{"format", "pt"}, {"ree_builtin", kTinyLlamaVersion}};
  std::string data;
  SplitMix64 rng{0x5245452d74696e79ull};  // "REE-tiny"
  for (const Spec& spec : specs) {
    int64_t n = 1;
    for (int64_t d : spec.shape)
      n *= d;
    float bound = spec.ones ? 0.0f : 1.0f / std::sqrt(static_cast<float>(spec.shape.back()));
    size_t begin = data.size();
    int64_t row_length = spec.shape.back();
    for (int64_t i = 0; i < n; ++i) {
      float value = spec.ones ? 1.0f : rng.uniform() * bound;
      // lm_head rows of non-printable bytes and of <|begin_of_text|> are zero, so the random model
      // tends to emit printable ASCII (still meaningless) instead of broken UTF-8.
      if (spec.name == "lm_head.weight") {
        int64_t token = i / row_length;
        bool printable = (token >= 32 && token < 127) || token == 10 || token == 257;
        if (!printable) value = 0.0f;
      }
      uint16_t bits = toBF16(value).bits;
      data.push_back(static_cast<char>(bits & 0xff));
      data.push_back(static_cast<char>(bits >> 8));
    }
    header[spec.name] = {
        {"dtype", "BF16"}, {"shape", spec.shape}, {"data_offsets", {begin, data.size()}}};
  }
  std::string header_text = header.dump();
  while (header_text.size() % 8 != 0)
    header_text += ' ';
  std::string file;
  uint64_t length = header_text.size();
  for (int i = 0; i < 8; ++i)
    file.push_back(static_cast<char>((length >> (8 * i)) & 0xff));
  file += header_text;
  file += data;
  return file;
}

Status writeTinyLlama(const fs::path& dir) {
  TinyLlamaShape s;
  REE_RETURN_IF_ERROR(writeText(dir / "config.json", tinyLlamaConfig(s).dump(2)));
  json generation = {{"bos_token_id", 256}, {"eos_token_id", 257}};
  REE_RETURN_IF_ERROR(writeText(dir / "generation_config.json", generation.dump(2)));
  REE_RETURN_IF_ERROR(writeText(dir / "tokenizer.json", byteLevelTokenizer().dump(2)));
  json tokenizer_config = {{"bos_token", "<|begin_of_text|>"},
                           {"eos_token", "<|end_of_text|>"},
                           {"model_max_length", s.max_positions}};
  REE_RETURN_IF_ERROR(writeText(dir / "tokenizer_config.json", tokenizer_config.dump(2)));
  return writeText(dir / "model.safetensors", tinyLlamaSafetensors(s));
}

fs::path cacheRoot() {
  if (const char* dir = std::getenv("REE_CACHE_DIR")) return fs::path(dir);
  if (const char* xdg = std::getenv("XDG_CACHE_HOME")) return fs::path(xdg) / "ree";
  if (const char* home = std::getenv("HOME")) return fs::path(home) / ".cache" / "ree";
  return fs::temp_directory_path() / "ree-cache";
}

}  // namespace

std::vector<std::string> builtinModelNames() {
  return {"tiny-llama"};
}

bool isBuiltinModel(const std::string& model) {
  return model.rfind("builtin:", 0) == 0 || isPackagedModel(model);
}

Status writeBuiltinModel(const std::string& name, const std::string& directory) {
  if (name != "tiny-llama") {
    return REE_FAIL(Status::kInvalidArgument,
                    "--model builtin:%s: no such built-in model "
                    "(available: builtin:tiny-llama)",
                    name.c_str());
  }
  std::error_code ec;
  fs::create_directories(directory, ec);
  if (ec) {
    return REE_FAIL(Status::kIoError, "cannot create %s: %s", directory.c_str(),
                    ec.message().c_str());
  }
  return writeTinyLlama(directory);
}

Status materializeBuiltinModel(const std::string& model, std::string* directory) {
  REE_CHECK_ARG(isBuiltinModel(model), "'%s' is not a builtin: model", model.c_str());
  if (isPackagedModel(model)) return findPackagedModel(model, directory);
  std::string name = model.substr(8);
  if (name != "tiny-llama") {
    return REE_FAIL(Status::kInvalidArgument,
                    "--model %s: no such built-in model "
                    "(available: builtin:tiny-llama)",
                    model.c_str());
  }
  fs::path dir = cacheRoot() / "builtin" / kTinyLlamaVersion;
  if (fs::exists(dir / "model.safetensors")) {
    *directory = dir.string();
    return Status::kSuccess;
  }
  // Write into a private temporary directory, then rename: concurrent ranks never see half a model.
  fs::path tmp = dir.string() + ".tmp." + std::to_string(std::rand()) + std::to_string(::getpid());
  REE_RETURN_IF_ERROR(writeBuiltinModel(name, tmp.string()));
  std::error_code ec;
  fs::rename(tmp, dir, ec);
  if (ec && !fs::exists(dir / "model.safetensors")) {
    return REE_FAIL(Status::kIoError, "cannot move %s to %s: %s", tmp.string().c_str(),
                    dir.string().c_str(), ec.message().c_str());
  }
  if (ec) fs::remove_all(tmp);
  *directory = dir.string();
  return Status::kSuccess;
}

}  // namespace ree::models
