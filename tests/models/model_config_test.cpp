// config.json / generation_config.json parsing and the expected tensor lists, against what
// transformers derives from the same files (scripts/reference/make_tiny_checkpoints.py): real hub
// configs in transformers 4.x spelling, minimal configs relying on defaults, and configs saved by
// transformers 5. Malformed configs must fail with one-line errors naming the file and the field.
#include <sys/stat.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "checkpoint_reference.h"
#include "ree/models/checkpoint.h"
#include "ree/models/engine.h"
#include "ree/models/model_config.h"
#include "ree/models/model_limits.h"
#include "test_util.h"

namespace ree::models {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

using test::Reference;
using test::testRoot;

// Every model directory and config-only directory of the manifest.
std::vector<std::pair<std::string, const Json*>> allEntries() {
  std::vector<std::pair<std::string, const Json*>> out;
  for (const char* group : {"models", "configs"}) {
    const Json& entries = Reference::get().manifest()[group];
    for (auto it = entries.begin(); it != entries.end(); ++it)
      out.emplace_back(it.key(), &*it);
  }
  return out;
}

const char* ropeTypeName(RopeType type) {
  switch (type) {
    case RopeType::kNone:
      return "none";
    case RopeType::kDefault:
      return "default";
    case RopeType::kLlama3:
      return "llama3";
  }
  return "?";
}

TEST(ModelConfigReference, FieldsMatchTransformers) {
  REQUIRE_REFERENCE();
  auto entries = allEntries();
  ASSERT_GE(entries.size(), 15u);
  for (const auto& [name, entry] : entries) {
    SCOPED_TRACE(name);
    const Json& ref = (*entry)["config"];
    ModelConfig c;
    GenerationConfig g;
    ASSERT_EQ(loadModelDirectoryConfigs((*entry)["dir"], &c, &g), Status::kSuccess)
        << lastErrorMessage();
    EXPECT_EQ(c.model_type, ref["model_type"].get<std::string>());
    EXPECT_STREQ(architectureName(c.architecture), ref["model_type"].get<std::string>().c_str());
    EXPECT_EQ(c.hidden_size, ref["hidden_size"].get<int64_t>());
    EXPECT_EQ(c.intermediate_size, ref["intermediate_size"].get<int64_t>());
    EXPECT_EQ(c.num_layers, ref["num_layers"].get<int64_t>());
    EXPECT_EQ(c.num_heads, ref["num_heads"].get<int64_t>());
    EXPECT_EQ(c.num_kv_heads, ref["num_kv_heads"].get<int64_t>());
    EXPECT_EQ(c.head_dim, ref["head_dim"].get<int64_t>());
    EXPECT_EQ(c.vocab_size, ref["vocab_size"].get<int64_t>());
    EXPECT_EQ(c.max_position_embeddings, ref["max_position_embeddings"].get<int64_t>());
    // Bitwise: both sides parse the same decimal text to the nearest double.
    EXPECT_EQ(c.norm_eps, ref["norm_eps"].get<double>());
    EXPECT_EQ(c.hidden_act, ref["hidden_act"].get<std::string>());
    EXPECT_STREQ(ropeTypeName(c.rope_type), ref["rope_type"].get<std::string>().c_str());
    EXPECT_EQ(c.rope_theta, ref["rope_theta"].get<double>());
    if (c.rope_type == RopeType::kLlama3) {
      EXPECT_EQ(c.llama3_factor, ref["llama3_factor"].get<double>());
      EXPECT_EQ(c.llama3_low_freq_factor, ref["llama3_low_freq_factor"].get<double>());
      EXPECT_EQ(c.llama3_high_freq_factor, ref["llama3_high_freq_factor"].get<double>());
      EXPECT_EQ(c.llama3_original_max_position_embeddings,
                ref["llama3_original_max_position_embeddings"].get<int64_t>());
    }
    EXPECT_EQ(c.sliding_window, ref["sliding_window"].get<int64_t>());
    EXPECT_EQ(c.tie_word_embeddings, ref["tie_word_embeddings"].get<bool>());
    if (ref["dtype"].is_null()) {
      EXPECT_FALSE(c.dtype.has_value());
    } else {
      ASSERT_TRUE(c.dtype.has_value());
      EXPECT_STREQ(dtypeName(*c.dtype), ref["dtype"].get<std::string>().c_str());
    }
    if (ref["bos_token_id"].is_null()) {
      EXPECT_FALSE(c.bos_token_id.has_value());
    } else {
      ASSERT_TRUE(c.bos_token_id.has_value());
      EXPECT_EQ(*c.bos_token_id, ref["bos_token_id"].get<int64_t>());
    }
    EXPECT_EQ(c.eos_token_ids, ref["eos_token_ids"].get<std::vector<int64_t>>());
    const Json& gen_eos = (*entry)["generation_eos"];
    if (gen_eos.is_null()) {
      EXPECT_TRUE(g.eos_token_ids.empty());
      EXPECT_EQ(effectiveEosTokenIds(c, g), c.eos_token_ids);
    } else {
      EXPECT_EQ(g.eos_token_ids, gen_eos.get<std::vector<int64_t>>());
      EXPECT_EQ(effectiveEosTokenIds(c, g), gen_eos.get<std::vector<int64_t>>());
    }
  }
}

// expectedTensors() must list exactly the state_dict transformers builds from the config
// (names and shapes; tied lm_head left out), for tiny and for real-size configs.
TEST(ModelConfigReference, ExpectedTensorsMatchTransformersStateDict) {
  REQUIRE_REFERENCE();
  for (const auto& [name, entry] : allEntries()) {
    SCOPED_TRACE(name);
    ModelConfig config;
    ASSERT_EQ(loadModelConfig((*entry)["dir"].get<std::string>() + "/config.json", &config),
              Status::kSuccess)
        << lastErrorMessage();
    const std::string prefix = architectureFacts(config.architecture).names.base_prefix;
    std::map<std::string, std::vector<int64_t>> ours, theirs;
    for (const ExpectedTensor& t : expectedTensors(config, prefix)) {
      EXPECT_TRUE(ours.emplace(t.name, t.shape).second) << "listed twice: " << t.name;
      if (t.stage == TensorStage::kLayer) {
        EXPECT_NE(t.name.find("." + std::to_string(t.layer) + "."), std::string::npos) << t.name;
      }
    }
    const Json& hf = (*entry)["hf_tensors"];
    for (auto it = hf.begin(); it != hf.end(); ++it) {
      theirs.emplace(it.key(), it.value().get<std::vector<int64_t>>());
    }
    EXPECT_EQ(ours.size(), theirs.size());
    for (const auto& [tensor, shape] : theirs) {
      auto found = ours.find(tensor);
      if (found == ours.end()) {
        ADD_FAILURE() << "transformers has " << tensor << ", expectedTensors() does not";
        continue;
      }
      EXPECT_EQ(found->second, shape) << tensor;
    }
    for (const auto& [tensor, shape] : ours) {
      EXPECT_EQ(theirs.count(tensor), 1u) << "expectedTensors() has extra " << tensor;
    }
  }
}

// The architecture table: each row is found by its model_type and its class name, rows follow
// the enum, and error messages list every architecture.
TEST(ArchitectureTable, LookupsRoundTrip) {
  ASSERT_GE(architectureCount(), 5);
  for (int i = 0; i < architectureCount(); ++i) {
    const ArchitectureFacts& row = architectureTable()[i];
    SCOPED_TRACE(row.model_type);
    EXPECT_EQ(static_cast<int>(row.architecture), i);
    EXPECT_EQ(&architectureFacts(row.architecture), &row);
    EXPECT_EQ(findArchitectureByModelType(row.model_type), &row);
    EXPECT_EQ(findArchitectureByClass(row.class_name), &row);
    EXPECT_STREQ(architectureName(row.architecture), row.model_type);
    EXPECT_NE(supportedModelTypes().find(row.model_type), std::string::npos);
    EXPECT_NE(supportedClassNames().find(row.class_name), std::string::npos);
    ASSERT_NE(row.variant_flags, nullptr);
    // A layout's forward code needs its tensor names.
    const TensorNames& n = row.names;
    EXPECT_TRUE(n.norm1 && n.norm2 && n.o && n.up && n.down && n.token_embedding && n.final_norm);
    if (row.layout == LayerLayout::kLlama) {
      EXPECT_TRUE(n.q && n.k && n.v && n.gate);
    }
    if (row.layout == LayerLayout::kGpt2) {
      EXPECT_TRUE(n.qkv && n.position_embedding);
    }
    if (row.qk_norm) {
      EXPECT_TRUE(n.q_norm && n.k_norm);
    }
  }
  EXPECT_EQ(findArchitectureByModelType("falcon"), nullptr);
  EXPECT_EQ(findArchitectureByClass("llama"), nullptr);
}

// ---- Malformed configs ----------------------------------------------------------------------

const char* kSource = "bad-model/config.json";

// A valid Llama 3.1-style config in transformers 4.x spelling, edited per case.
Json baseLlama() {
  return Json::parse(R"({
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 256,
    "intermediate_size": 512, "num_hidden_layers": 2, "num_attention_heads": 8,
    "num_key_value_heads": 2, "vocab_size": 1000, "max_position_embeddings": 4096,
    "rms_norm_eps": 1e-5, "rope_theta": 500000.0, "torch_dtype": "bfloat16",
    "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                     "high_freq_factor": 4.0, "original_max_position_embeddings": 1024},
    "bos_token_id": 1, "eos_token_id": [2, 3], "tie_word_embeddings": false})");
}

Json baseGpt2() {
  return Json::parse(R"({"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2",
    "n_embd": 64, "n_head": 4, "n_layer": 2, "n_positions": 128, "vocab_size": 300,
    "bos_token_id": 299, "eos_token_id": 299})");
}

void expectConfigError(const std::string& text, Status expected,
                       const std::vector<std::string>& needles) {
  ModelConfig config;
  Status status = parseModelConfig(text, kSource, &config);
  EXPECT_EQ(status, expected) << "got " << statusName(status) << ": " << lastErrorMessage();
  std::string message = lastErrorMessage();
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  EXPECT_NE(message.find(kSource), std::string::npos) << message;
  for (const std::string& needle : needles) {
    EXPECT_NE(message.find(needle), std::string::npos)
        << "message does not name '" << needle << "': " << message;
  }
}

void expectEditError(Json base, const std::function<void(Json&)>& edit, Status expected,
                     const std::vector<std::string>& needles) {
  edit(base);
  expectConfigError(base.dump(), expected, needles);
}

TEST(ModelConfigErrors, BaseConfigsAreValid) {
  ModelConfig config;
  ASSERT_EQ(parseModelConfig(baseLlama().dump(), kSource, &config), Status::kSuccess)
      << lastErrorMessage();
  EXPECT_EQ(config.rope_type, RopeType::kLlama3);
  EXPECT_EQ(config.head_dim, 32);
  EXPECT_EQ(config.eos_token_ids, (std::vector<int64_t>{2, 3}));
  ASSERT_EQ(parseModelConfig(baseGpt2().dump(), kSource, &config), Status::kSuccess)
      << lastErrorMessage();
  EXPECT_EQ(config.intermediate_size, 256);
  EXPECT_TRUE(config.tie_word_embeddings);
  EXPECT_EQ(config.activation, Activation::kGeluTanh);
}

TEST(ModelConfigErrors, EachFailureNamesFileAndField) {
  using J = Json;
  const Status kInvalid = Status::kInvalidArgument;
  const Status kUnsupported = Status::kUnsupported;
  expectConfigError("{\"model_type\": \"llama\",", Status::kIoError, {"not valid JSON"});
  expectConfigError("[1, 2]", Status::kIoError, {"not a JSON object"});
  expectEditError(baseLlama(), [](J& j) { j.erase("hidden_size"); }, kInvalid,
                  {"'hidden_size'", "missing"});
  expectEditError(baseLlama(), [](J& j) { j.erase("intermediate_size"); }, kInvalid,
                  {"'intermediate_size'", "missing"});
  expectEditError(baseLlama(), [](J& j) { j.erase("vocab_size"); }, kInvalid, {"'vocab_size'"});
  expectEditError(baseLlama(), [](J& j) { j["num_hidden_layers"] = -2; }, kInvalid,
                  {"'num_hidden_layers'", "-2"});
  expectEditError(baseLlama(), [](J& j) { j["num_hidden_layers"] = 0; }, kInvalid,
                  {"'num_hidden_layers'"});
  expectEditError(baseLlama(), [](J& j) { j["hidden_size"] = 256.5; }, kInvalid,
                  {"'hidden_size'", "not an integer"});
  expectEditError(baseLlama(), [](J& j) { j["hidden_size"] = "256"; }, kInvalid,
                  {"'hidden_size'", "not an integer"});
  expectEditError(baseLlama(), [](J& j) { j["num_key_value_heads"] = 3; }, kInvalid,
                  {"'num_attention_heads'", "not divisible by num_key_value_heads (3)"});
  expectEditError(baseLlama(), [](J& j) { j["hidden_size"] = 250; }, kInvalid,
                  {"'hidden_size'", "not divisible by num_attention_heads"});
  expectEditError(baseLlama(), [](J& j) { j["head_dim"] = -64; }, kInvalid, {"'head_dim'"});
  expectEditError(baseLlama(), [](J& j) { j["rms_norm_eps"] = 0; }, kInvalid, {"'rms_norm_eps'"});
  expectEditError(baseLlama(), [](J& j) { j["rope_theta"] = -1.0; }, kInvalid, {"'rope_theta'"});
  expectEditError(baseLlama(), [](J& j) { j["architectures"] = {"Gemma2ForCausalLM"}; },
                  kUnsupported, {"'architectures'", "Gemma2ForCausalLM"});
  expectEditError(baseLlama(), [](J& j) { j["architectures"] = J::array(); }, kInvalid,
                  {"'architectures'"});
  expectEditError(baseLlama(),
                  [](J& j) {
                    j.erase("architectures");
                    j["model_type"] = "falcon";
                  },
                  kUnsupported, {"'model_type'", "falcon"});
  expectEditError(baseLlama(), [](J& j) { j["model_type"] = "qwen2"; }, kInvalid,
                  {"'model_type'", "contradicts"});
  expectEditError(baseLlama(),
                  [](J& j) {
                    j.erase("architectures");
                    j.erase("model_type");
                  },
                  kInvalid, {"'architectures'", "'model_type'"});
  expectEditError(baseLlama(), [](J& j) { j["torch_dtype"] = "float64"; }, kUnsupported,
                  {"'torch_dtype'", "float64"});
  expectEditError(baseLlama(), [](J& j) { j["dtype"] = "int8"; }, kUnsupported, {"'dtype'"});
  expectEditError(baseLlama(), [](J& j) { j["hidden_act"] = "relu"; }, kUnsupported,
                  {"'hidden_act'", "relu"});
  expectEditError(baseLlama(), [](J& j) { j["rope_scaling"]["rope_type"] = "yarn"; }, kUnsupported,
                  {"'rope_scaling.rope_type'", "yarn"});
  expectEditError(baseLlama(), [](J& j) { j["rope_scaling"].erase("factor"); }, kInvalid,
                  {"'rope_scaling.factor'", "missing"});
  expectEditError(baseLlama(), [](J& j) { j["rope_scaling"]["high_freq_factor"] = 0.5; }, kInvalid,
                  {"'rope_scaling.high_freq_factor'"});
  expectEditError(baseLlama(), [](J& j) { j["rope_scaling"]["factor"] = 0.5; }, kInvalid,
                  {"'rope_scaling.factor'"});
  expectEditError(baseLlama(), [](J& j) { j["rope_scaling"]["type"] = "linear"; }, kInvalid,
                  {"'rope_scaling.rope_type'", "contradicts"});
  expectEditError(baseLlama(), [](J& j) { j["rope_scaling"] = "llama3"; }, kInvalid,
                  {"'rope_scaling'", "not an object"});
  expectEditError(
      baseLlama(),
      [](J& j) {
        j.erase("rope_scaling");
        j["rope_parameters"] = {{"rope_type", "dynamic"}, {"rope_theta", 1e4}, {"factor", 2.0}};
      },
      kUnsupported, {"'rope_parameters.rope_type'", "dynamic"});
  expectEditError(baseLlama(),
                  [](J& j) {
                    j["eos_token_id"] = {2, 1000};
                  },
                  kInvalid, {"'eos_token_id'", "1000", "outside the vocabulary"});
  expectEditError(baseLlama(), [](J& j) { j["eos_token_id"] = "</s>"; }, kInvalid,
                  {"'eos_token_id'", "non-integer"});
  expectEditError(baseLlama(), [](J& j) { j["eos_token_id"] = J::array(); }, kInvalid,
                  {"'eos_token_id'", "empty"});
  expectEditError(baseLlama(), [](J& j) { j["bos_token_id"] = -1; }, kInvalid, {"'bos_token_id'"});
  expectEditError(baseLlama(), [](J& j) { j["tie_word_embeddings"] = "yes"; }, kInvalid,
                  {"'tie_word_embeddings'"});
  expectEditError(baseGpt2(), [](J& j) { j.erase("n_embd"); }, kInvalid, {"'n_embd'", "missing"});
  expectEditError(baseGpt2(), [](J& j) { j["n_head"] = 5; }, kInvalid,
                  {"'n_embd'", "not divisible by n_head"});
  expectEditError(baseGpt2(), [](J& j) { j["scale_attn_by_inverse_layer_idx"] = true; },
                  kUnsupported, {"'scale_attn_by_inverse_layer_idx'"});
  expectEditError(baseGpt2(), [](J& j) { j["activation_function"] = "quick_gelu"; }, kUnsupported,
                  {"'activation_function'"});
  // GPT-2's default bos/eos (50256) lie outside a 300-token vocabulary.
  expectEditError(baseGpt2(), [](J& j) { j.erase("bos_token_id"); }, kInvalid,
                  {"'bos_token_id'", "default 50256"});
}

TEST(ModelConfigErrors, GenerationConfigAndFiles) {
  GenerationConfig g;
  ASSERT_EQ(parseGenerationConfig(R"({"eos_token_id": [5, 6], "bos_token_id": null,
                                      "temperature": 0.6})",
                                  "gen.json", 100, &g),
            Status::kSuccess)
      << lastErrorMessage();
  EXPECT_EQ(g.eos_token_ids, (std::vector<int64_t>{5, 6}));
  EXPECT_FALSE(g.bos_token_id.has_value());
  ASSERT_EQ(parseGenerationConfig(R"({"eos_token_id": 7})", "gen.json", 100, &g), Status::kSuccess);
  EXPECT_EQ(g.eos_token_ids, (std::vector<int64_t>{7}));

  EXPECT_EQ(parseGenerationConfig(R"({"eos_token_id": [5, "x"]})", "gen.json", 100, &g),
            Status::kInvalidArgument);
  std::string message = lastErrorMessage();
  EXPECT_NE(message.find("gen.json"), std::string::npos) << message;
  EXPECT_NE(message.find("'eos_token_id'"), std::string::npos) << message;
  EXPECT_EQ(parseGenerationConfig(R"({"pad_token_id": 100})", "gen.json", 100, &g),
            Status::kInvalidArgument);
  EXPECT_NE(std::string(lastErrorMessage()).find("'pad_token_id'"), std::string::npos);

  // Files: a missing config.json, and a broken generation_config.json next to a good config.
  std::string dir = testRoot() + "/config_files";
  fs::remove_all(dir);
  fs::create_directories(dir);
  ModelConfig config;
  EXPECT_EQ(loadModelDirectoryConfigs(dir, &config, &g), Status::kIoError);
  EXPECT_NE(std::string(lastErrorMessage()).find(dir + "/config.json"), std::string::npos)
      << lastErrorMessage();
  std::ofstream(dir + "/config.json") << baseLlama().dump();
  ASSERT_EQ(loadModelDirectoryConfigs(dir, &config, &g), Status::kSuccess) << lastErrorMessage();
  EXPECT_TRUE(g.eos_token_ids.empty());
  std::ofstream(dir + "/generation_config.json") << R"({"eos_token_id": 4000})";
  EXPECT_EQ(loadModelDirectoryConfigs(dir, &config, &g), Status::kInvalidArgument);
  message = lastErrorMessage();
  EXPECT_NE(message.find(dir + "/generation_config.json"), std::string::npos) << message;
  EXPECT_NE(message.find("'eos_token_id'"), std::string::npos) << message;
}

// ---- Hostile values (issue 31) --------------------------------------------------------------

// Every size is checked against model_limits.h as it is read, before anything is multiplied or
// allocated; the error names the field, the value and the limit.
TEST(ModelConfigLimits, SizesBeyondTheLimitsNameFieldValueAndLimit) {
  using J = Json;
  const Status kInvalid = Status::kInvalidArgument;
  const int64_t k2to31 = (int64_t{1} << 31) - 1, k2to40 = int64_t{1} << 40;
  const int64_t k2to62 = int64_t{1} << 62;
  expectEditError(baseLlama(), [&](J& j) { j["num_hidden_layers"] = k2to31; }, kInvalid,
                  {"'num_hidden_layers'", "2147483647", "exceeds the limit 4096"});
  expectEditError(baseLlama(), [&](J& j) { j["num_hidden_layers"] = k2to40; }, kInvalid,
                  {"'num_hidden_layers'", "1099511627776", "limit 4096"});
  expectEditError(baseLlama(), [&](J& j) { j["hidden_size"] = k2to62; }, kInvalid,
                  {"'hidden_size'", std::to_string(k2to62), "limit 65536"});
  expectEditError(baseLlama(), [&](J& j) { j["intermediate_size"] = k2to62; }, kInvalid,
                  {"'intermediate_size'", "limit 262144"});
  expectEditError(baseLlama(), [](J& j) { j["intermediate_size"] = UINT64_MAX; }, kInvalid,
                  {"'intermediate_size'", "18446744073709551615", "limit 262144"});
  expectEditError(baseLlama(), [](J& j) { j["num_attention_heads"] = 4096; }, kInvalid,
                  {"'num_attention_heads'", "limit 1024"});
  expectEditError(baseLlama(), [](J& j) { j["num_key_value_heads"] = 2048; }, kInvalid,
                  {"'num_key_value_heads'", "limit 1024"});
  expectEditError(baseLlama(), [](J& j) { j["head_dim"] = 512; }, kInvalid,
                  {"'head_dim'", "512", "limit 256"});
  expectEditError(baseLlama(), [](J& j) { j["head_dim"] = 33; }, kInvalid,
                  {"'head_dim'", "33", "even"});
  expectEditError(baseLlama(),
                  [](J& j) {
                    j["hidden_size"] = 4096;
                    j["num_attention_heads"] = 8;
                  },
                  kInvalid, {"'hidden_size'", "head_dim 512", "limit 256"});
  expectEditError(baseLlama(), [&](J& j) { j["vocab_size"] = k2to31; }, kInvalid,
                  {"'vocab_size'", "limit 16777216"});
  expectEditError(baseLlama(), [&](J& j) { j["max_position_embeddings"] = k2to40; }, kInvalid,
                  {"'max_position_embeddings'", "limit 16777216"});
  expectEditError(baseLlama(), [](J& j) { j["max_position_embeddings"] = -5; }, kInvalid,
                  {"'max_position_embeddings'", "-5", ">= 1"});
  expectEditError(baseLlama(), [](J& j) { j["num_attention_heads"] = 8.0; }, kInvalid,
                  {"'num_attention_heads'", "not an integer"});
  expectEditError(baseLlama(), [](J& j) { j["num_hidden_layers"] = 1e300; }, kInvalid,
                  {"'num_hidden_layers'", "not an integer"});
  // Each size within its limit, all of them together beyond the parameter limit.
  expectEditError(baseLlama(),
                  [](J& j) {
                    j["num_hidden_layers"] = limits::kMaxLayers;
                    j["hidden_size"] = limits::kMaxHiddenSize;
                    j["intermediate_size"] = limits::kMaxIntermediateSize;
                    j["head_dim"] = 128;
                  },
                  kInvalid, {"num_hidden_layers", "limit of 4398046511104 parameters"});
  // GPT-2: n_inner defaults to 4 * n_embd, computed only after n_embd passed its limit.
  expectEditError(baseGpt2(), [&](J& j) { j["n_embd"] = k2to62; }, kInvalid,
                  {"'n_embd'", "limit 65536"});
  expectEditError(baseGpt2(), [&](J& j) { j["n_layer"] = k2to31; }, kInvalid,
                  {"'n_layer'", "limit 4096"});
  expectEditError(baseGpt2(), [&](J& j) { j["n_positions"] = k2to40; }, kInvalid,
                  {"'n_positions'", "limit 16777216"});
  expectEditError(baseGpt2(), [](J& j) { j["n_inner"] = -1; }, kInvalid, {"'n_inner'", "-1"});
}

TEST(ModelConfigLimits, NumbersOutOfRangeNameTheField) {
  using J = Json;
  const Status kInvalid = Status::kInvalidArgument;
  expectEditError(baseLlama(), [](J& j) { j["rope_theta"] = 1e300; }, kInvalid,
                  {"'rope_theta'", "limit 1e+12"});
  expectEditError(baseLlama(), [](J& j) { j["rope_theta"] = 0.5; }, kInvalid,
                  {"'rope_theta'", "0.5", "> 1"});
  expectEditError(baseLlama(), [](J& j) { j["rope_theta"] = "inf"; }, kInvalid,
                  {"'rope_theta'", "not a number"});
  expectEditError(baseLlama(), [](J& j) { j["rms_norm_eps"] = "NaN"; }, kInvalid,
                  {"'rms_norm_eps'", "not a number"});
  expectEditError(baseLlama(), [](J& j) { j["rms_norm_eps"] = 1e-300; }, kInvalid,
                  {"'rms_norm_eps'", ">= 1e-30"});
  expectEditError(baseLlama(), [](J& j) { j["rms_norm_eps"] = 2.0; }, kInvalid,
                  {"'rms_norm_eps'", "limit 1"});
  expectEditError(baseLlama(), [](J& j) { j["rope_scaling"]["factor"] = 1e300; }, kInvalid,
                  {"'rope_scaling.factor'", "limit 1e+06"});
  expectEditError(baseLlama(), [](J& j) { j["rope_scaling"]["low_freq_factor"] = -1.0; }, kInvalid,
                  {"'rope_scaling.low_freq_factor'"});
  expectEditError(
      baseLlama(),
      [](J& j) { j["rope_scaling"]["original_max_position_embeddings"] = int64_t{1} << 40; },
      kInvalid, {"'rope_scaling.original_max_position_embeddings'", "limit 16777216"});
  expectEditError(baseLlama(), [](J& j) { j["attention_bias"] = 1; }, kInvalid,
                  {"'attention_bias'", "not a boolean"});
  expectEditError(baseGpt2(), [](J& j) { j["layer_norm_epsilon"] = -1e-5; }, kInvalid,
                  {"'layer_norm_epsilon'"});
  // JSON has no NaN or Infinity literals: such text is refused before any field is read.
  expectConfigError(R"({"model_type": "llama", "rms_norm_eps": NaN})", Status::kIoError,
                    {"not valid JSON"});
}

// A key written twice could show one JSON reader a value another never checked.
TEST(ModelConfigLimits, RepeatedKeysAreRefused) {
  std::string text = baseLlama().dump();
  text.insert(1, "\"num_hidden_layers\": 9999, ");
  expectConfigError(text, Status::kIoError, {"num_hidden_layers", "repeats"});
  GenerationConfig g;
  EXPECT_EQ(parseGenerationConfig(R"({"eos_token_id": 5, "eos_token_id": 6})", "gen.json", 100, &g),
            Status::kIoError);
  EXPECT_NE(std::string(lastErrorMessage()).find("eos_token_id"), std::string::npos)
      << lastErrorMessage();
}

// Sliding-window attention is not implemented: a window is accepted only where it has no effect
// (a context no longer than the window), and refused with the field, its value and the context.
TEST(ModelConfigSlidingWindow, MistralWindowIsAcceptedOnlyWhereItChangesNothing) {
  Json mistral = baseLlama();
  mistral["architectures"] = {"MistralForCausalLM"};
  mistral["model_type"] = "mistral";
  mistral.erase("rope_scaling");
  ModelConfig config;
  ASSERT_EQ(parseModelConfig(mistral.dump(), kSource, &config), Status::kSuccess)
      << lastErrorMessage();
  EXPECT_EQ(config.sliding_window, 4096);  // MistralConfig's default
  EXPECT_EQ(checkContextAgainstSlidingWindow(config, 4096), Status::kSuccess);
  EXPECT_EQ(checkContextAgainstSlidingWindow(config, 4097), Status::kUnsupported);

  mistral["sliding_window"] = nullptr;
  ASSERT_EQ(parseModelConfig(mistral.dump(), kSource, &config), Status::kSuccess);
  EXPECT_EQ(config.sliding_window, 0);
  EXPECT_EQ(checkContextAgainstSlidingWindow(config, 1 << 20), Status::kSuccess);

  mistral["sliding_window"] = 4;
  ASSERT_EQ(parseModelConfig(mistral.dump(), kSource, &config), Status::kSuccess);
  EXPECT_EQ(config.sliding_window, 4);
  EXPECT_EQ(checkContextAgainstSlidingWindow(config, 4), Status::kSuccess);
  ASSERT_EQ(checkContextAgainstSlidingWindow(config, 12), Status::kUnsupported);
  std::string message = lastErrorMessage();
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  for (const char* needle : {"'sliding_window'", "is 4", "12 tokens", "not implemented"}) {
    EXPECT_NE(message.find(needle), std::string::npos) << needle << ": " << message;
  }

  using J = Json;
  expectEditError(mistral, [](J& j) { j["sliding_window"] = 0; }, Status::kInvalidArgument,
                  {"'sliding_window'", ">= 1"});
  expectEditError(mistral, [](J& j) { j["sliding_window"] = "4096"; }, Status::kInvalidArgument,
                  {"'sliding_window'", "not an integer"});
}

TEST(ModelConfigSlidingWindow, QwenWindowCountsOnlyWhereALayerUsesIt) {
  Json qwen = baseLlama();
  qwen["architectures"] = {"Qwen2ForCausalLM"};
  qwen["model_type"] = "qwen2";
  qwen.erase("rope_scaling");
  qwen["sliding_window"] = 8;
  ModelConfig config;
  ASSERT_EQ(parseModelConfig(qwen.dump(), kSource, &config), Status::kSuccess);
  EXPECT_EQ(config.sliding_window, 0) << "use_sliding_window is false by default";
  qwen["use_sliding_window"] = true;  // max_window_layers defaults to 28 >= the 2 layers
  ASSERT_EQ(parseModelConfig(qwen.dump(), kSource, &config), Status::kSuccess);
  EXPECT_EQ(config.sliding_window, 0);
  qwen["max_window_layers"] = 1;  // layer 1 slides
  ASSERT_EQ(parseModelConfig(qwen.dump(), kSource, &config), Status::kSuccess);
  EXPECT_EQ(config.sliding_window, 8);
  EXPECT_EQ(checkContextAgainstSlidingWindow(config, 9), Status::kUnsupported);
  qwen.erase("max_window_layers");
  qwen["layer_types"] = {"full_attention", "sliding_attention"};
  ASSERT_EQ(parseModelConfig(qwen.dump(), kSource, &config), Status::kSuccess);
  EXPECT_EQ(config.sliding_window, 8);
  qwen["layer_types"] = {"full_attention", "full_attention"};
  ASSERT_EQ(parseModelConfig(qwen.dump(), kSource, &config), Status::kSuccess);
  EXPECT_EQ(config.sliding_window, 0);
  using J = Json;
  expectEditError(qwen, [](J& j) { j["layer_types"] = {"full_attention"}; },
                  Status::kInvalidArgument, {"'layer_types'", "num_hidden_layers (2)"});
  expectEditError(qwen, [](J& j) { j["use_sliding_window"] = "yes"; }, Status::kInvalidArgument,
                  {"'use_sliding_window'", "not a boolean"});
}

// The whole path: a Mistral checkpoint whose window is shorter than the run's context is refused
// (the issue's case: window 4, 12-token prompt), and runs when the context fits in the window.
TEST(ModelConfigSlidingWindow, EngineRefusesAContextBeyondTheWindow) {
  std::string dir = testRoot() + "/sliding_mistral";
  fs::remove_all(dir);
  fs::create_directories(dir);
  Json mistral = Json::parse(R"({"architectures": ["MistralForCausalLM"], "model_type": "mistral",
    "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 300,
    "max_position_embeddings": 64, "sliding_window": 4, "torch_dtype": "float32"})");
  std::ofstream(dir + "/config.json") << mistral.dump();
  EngineOptions options;
  options.model = "synthetic:" + dir;
  options.device = Device::cpu();
  options.max_batch = 1;
  options.max_context = 12;
  std::unique_ptr<Engine> engine;
  ASSERT_EQ(Engine::create(options, &engine), Status::kUnsupported) << lastErrorMessage();
  std::string message = lastErrorMessage();
  EXPECT_NE(message.find("'sliding_window' is 4"), std::string::npos) << message;
  EXPECT_NE(message.find("12 tokens"), std::string::npos) << message;
  options.max_context = 4;
  ASSERT_EQ(Engine::create(options, &engine), Status::kSuccess) << lastErrorMessage();
}

// --model synthetic:DIR reads only config.json: a hostile layer count is refused there too, with
// the field named, instead of aborting while listing 2^31 layers of tensors.
TEST(ModelConfigLimits, SyntheticModelWithHugeLayerCountFailsCleanly) {
  std::string dir = testRoot() + "/huge_layers";
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (int64_t layers : {(int64_t{1} << 31) - 1, int64_t{1} << 40}) {
    Json config = baseLlama();
    config["num_hidden_layers"] = layers;
    std::ofstream(dir + "/config.json", std::ios::trunc) << config.dump();
    EngineOptions options;
    options.model = "synthetic:" + dir;
    options.device = Device::cpu();
    std::unique_ptr<Engine> engine;
    EXPECT_EQ(Engine::create(options, &engine), Status::kInvalidArgument) << lastErrorMessage();
    std::string message = lastErrorMessage();
    EXPECT_NE(message.find("'num_hidden_layers' is " + std::to_string(layers)), std::string::npos)
        << message;
    EXPECT_NE(message.find(dir + "/config.json"), std::string::npos) << message;
  }
}

// config.json and generation_config.json are read only as bounded regular files: a FIFO with no
// writer must not block, and a directory must be named as one.
TEST(ModelConfigFiles, NonRegularFilesAreRefusedWithoutBlocking) {
  std::string dir = testRoot() + "/config_special";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string config_path = dir + "/config.json";
  ASSERT_EQ(mkfifo(config_path.c_str(), 0600), 0);
  ModelConfig config;
  GenerationConfig g;
  auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(loadModelDirectoryConfigs(dir, &config, &g), Status::kIoError);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  std::string message = lastErrorMessage();
  EXPECT_NE(message.find(config_path), std::string::npos) << message;
  EXPECT_NE(message.find("not a regular file"), std::string::npos) << message;

  fs::remove(config_path);
  fs::create_directory(config_path);
  EXPECT_EQ(loadModelDirectoryConfigs(dir, &config, &g), Status::kIoError);
  message = lastErrorMessage();
  EXPECT_NE(message.find("directory"), std::string::npos) << message;
  EXPECT_NE(message.find(config_path), std::string::npos) << message;

  fs::remove(config_path);
  std::ofstream(config_path) << baseLlama().dump();
  const std::string generation_path = dir + "/generation_config.json";
  ASSERT_EQ(mkfifo(generation_path.c_str(), 0600), 0);
  start = std::chrono::steady_clock::now();
  EXPECT_EQ(loadModelDirectoryConfigs(dir, &config, &g), Status::kIoError);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  message = lastErrorMessage();
  EXPECT_NE(message.find(generation_path), std::string::npos) << message;
  EXPECT_NE(message.find("not a regular file"), std::string::npos) << message;
}

}  // namespace
}  // namespace ree::models
