// The Python references of the checkpoint tests (scripts/reference/make_tiny_checkpoints.py),
// generated once per test process into REE_TEST_TMP. Skips when no usable Python is configured; a
// configured Python that cannot build the references is a failure, not a skip.
//
// Also hand-made model directories that need no Python: a tiny Llama config and a safetensors
// file of its expected tensors, to which a test adds extra tensors or non-finite values.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ree/models/checkpoint.h"
#include "ree/models/model_config.h"

namespace ree::models::test {

using Json = nlohmann::json;

inline std::string testRoot() {
  const char* tmp = std::getenv("REE_TEST_TMP");
  std::string root = (tmp != nullptr && *tmp != '\0') ? tmp : "/tmp/ree_models_checkpoint_test";
  std::filesystem::create_directories(root);
  return root;
}

class Reference {
 public:
  static Reference& get() {
    static Reference instance;
    return instance;
  }
  bool available() const { return available_; }
  const std::string& why() const { return why_; }
  const Json& manifest() const { return manifest_; }

 private:
  Reference() {
    const char* python = std::getenv("REE_PYTHON");
    const char* source = std::getenv("REE_SOURCE_DIR");
    if (python == nullptr || *python == '\0' || source == nullptr || *source == '\0') {
      why_ = "REE_PYTHON / REE_SOURCE_DIR not set (run through ctest)";
      return;
    }
    if (std::system((std::string("\"") + python +
                     "\" -c 'import torch, transformers, safetensors' >/dev/null 2>&1")
                        .c_str()) != 0) {
      why_ = std::string(python) + " lacks torch/transformers/safetensors";
      return;
    }
    std::string out = testRoot() + "/reference";
    std::filesystem::remove_all(out);
    std::string log = testRoot() + "/make_tiny_checkpoints.log";
    std::string command = std::string("\"") + python + "\" \"" + source +
                          "/scripts/reference/make_tiny_checkpoints.py\" \"" + out + "\" >\"" +
                          log + "\" 2>&1";
    if (std::system(command.c_str()) != 0) {
      ADD_FAILURE() << "make_tiny_checkpoints.py failed; see " << log;
      why_ = "reference generation failed";
      return;
    }
    std::ifstream in(out + "/manifest.json");
    manifest_ = Json::parse(in, nullptr, false);
    if (manifest_.is_discarded()) {
      ADD_FAILURE() << "manifest.json unreadable";
      why_ = "manifest unreadable";
      return;
    }
    available_ = true;
  }
  bool available_ = false;
  std::string why_;
  Json manifest_;
};

// ---- Hand-made safetensors files and model directories ------------------------------------------

struct RawTensor {
  std::string name;
  std::string dtype;  // safetensors spelling: "F32", "BF16", "F16", "I64", ...
  std::vector<int64_t> shape;
  std::string data;  // little-endian element bytes
};

// A safetensors file holding `tensors` back to back in the given order, its header padded with
// spaces to a multiple of 8 bytes as the writers do.
inline std::string safetensorsBytes(const std::vector<RawTensor>& tensors,
                                    const Json& metadata = Json()) {
  Json header = Json::object();
  if (!metadata.is_null()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  std::string data;
  for (const RawTensor& tensor : tensors) {
    header[tensor.name] = {{"dtype", tensor.dtype},
                           {"shape", tensor.shape},
                           {"data_offsets", {offset, offset + tensor.data.size()}}};
    offset += tensor.data.size();
    data += tensor.data;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i)
    bytes[i] = static_cast<char>((text.size() >> (8 * i)) & 0xff);
  return bytes + text + data;
}

inline void writeBytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// config.json of a tiny tied Llama: hidden 8, 2 heads of 4, 1 KV head, intermediate 16, vocab 32.
inline Json tinyLlamaConfig(int64_t layers, const std::string& dtype = "float32") {
  return Json{{"architectures", {"LlamaForCausalLM"}},
              {"model_type", "llama"},
              {"hidden_size", 8},
              {"intermediate_size", 16},
              {"num_hidden_layers", layers},
              {"num_attention_heads", 2},
              {"num_key_value_heads", 1},
              {"vocab_size", 32},
              {"max_position_embeddings", 64},
              {"rms_norm_eps", 1e-5},
              {"tie_word_embeddings", true},
              {"torch_dtype", dtype}};
}

// The bit pattern of 0.25 in `dtype` ("F32", "BF16" or "F16"), little-endian.
inline std::string quarterBits(const std::string& dtype) {
  if (dtype == "F32") return std::string("\x00\x00\x80\x3e", 4);
  if (dtype == "BF16") return std::string("\x80\x3e", 2);
  return std::string("\x00\x34", 2);  // F16
}

// Every tensor `config` expects (prefix "model."), each element 0.25 in `dtype`.
inline std::vector<RawTensor> expectedRawTensors(const models::ModelConfig& config,
                                                 const std::string& dtype) {
  std::vector<RawTensor> tensors;
  const std::string element = quarterBits(dtype);
  for (const models::ExpectedTensor& tensor : models::expectedTensors(config, "model.")) {
    int64_t numel = 1;
    for (int64_t extent : tensor.shape)
      numel *= extent;
    std::string data;
    for (int64_t i = 0; i < numel; ++i)
      data += element;
    tensors.push_back(RawTensor{tensor.name, dtype, tensor.shape, data});
  }
  return tensors;
}

// Overwrites element `index` of `tensor` with the `bits` of its dtype (little-endian).
inline void pokeElement(RawTensor* tensor, int64_t index, uint32_t bits) {
  const size_t size = tensor->dtype == "F32" ? 4 : 2;
  for (size_t b = 0; b < size; ++b)
    tensor->data[index * size + b] = static_cast<char>((bits >> (8 * b)) & 0xff);
}

inline RawTensor* findRaw(std::vector<RawTensor>* tensors, const std::string& name) {
  for (RawTensor& tensor : *tensors) {
    if (tensor.name == name) return &tensor;
  }
  ADD_FAILURE() << "no tensor " << name;
  return nullptr;
}

// A model directory `name` under the test root: config.json of `config_layers` layers and a
// model.safetensors of `tensors`. Returns the directory.
inline std::string writeModelDirectory(const std::string& name, int64_t config_layers,
                                       const std::vector<RawTensor>& tensors,
                                       const std::string& torch_dtype = "float32") {
  const std::string dir = testRoot() + "/models/" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/config.json") << tinyLlamaConfig(config_layers, torch_dtype).dump();
  writeBytes(dir + "/model.safetensors", safetensorsBytes(tensors));
  return dir;
}

// The tensors of a tiny Llama of `layers` layers (parsed from tinyLlamaConfig).
inline std::vector<RawTensor> tinyLlamaTensors(int64_t layers, const std::string& dtype = "F32") {
  models::ModelConfig config;
  const Status status =
      models::parseModelConfig(tinyLlamaConfig(layers).dump(), "tiny llama config", &config);
  EXPECT_EQ(status, Status::kSuccess) << lastErrorMessage();
  return expectedRawTensors(config, dtype);
}

}  // namespace ree::models::test

#define REQUIRE_REFERENCE()                                        \
  do {                                                             \
    if (!::ree::models::test::Reference::get().available())        \
      GTEST_SKIP() << ::ree::models::test::Reference::get().why(); \
  } while (0)
