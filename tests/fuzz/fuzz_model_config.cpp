// Fuzz target: config.json and generation_config.json text (the same bytes go to both parsers;
// a generation config is checked against the vocabulary of the model config when that parsed).
// An accepted config must be one a model can be built from: dimensions within the documented
// limits (ree/models/model_limits.h), token ids inside the vocabulary, finite numbers, and tensor
// shapes whose element counts fit 64 bits.
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "fuzz_util.h"
#include "ree/models/checkpoint.h"
#include "ree/models/model_config.h"
#include "ree/models/model_limits.h"

using namespace ree;
using namespace ree::models;

namespace {

// expectedTensors() lists ~10 tensors per layer; past this many layers the harness skips it to
// keep each run fast (a bound of the harness, not a claim about the parser).
constexpr int64_t kMaxLayersToList = 1024;

void checkDimension(int64_t value, int64_t limit, const char* field) {
  fuzz::require(value >= 1 && value <= limit,
                "an accepted config.json has a dimension outside [1, its limit]",
                std::string(field) + " = " + std::to_string(value));
}

void checkTokenIds(const std::optional<int64_t>& bos, const std::vector<int64_t>& eos,
                   int64_t vocab_size, const char* file) {
  if (bos) {
    fuzz::require(*bos >= 0 && *bos < vocab_size, "an accepted bos_token_id outside the vocab",
                  file);
  }
  for (int64_t id : eos) {
    fuzz::require(id >= 0 && id < vocab_size, "an accepted eos_token_id outside the vocab", file);
  }
}

void checkModelConfig(const ModelConfig& config) {
  checkDimension(config.hidden_size, limits::kMaxHiddenSize, "hidden_size");
  checkDimension(config.intermediate_size, limits::kMaxIntermediateSize, "intermediate_size");
  checkDimension(config.num_layers, limits::kMaxLayers, "num_layers");
  checkDimension(config.num_heads, limits::kMaxHeads, "num_heads");
  checkDimension(config.num_kv_heads, limits::kMaxHeads, "num_kv_heads");
  checkDimension(config.head_dim, limits::kMaxHeadDim, "head_dim");
  checkDimension(config.vocab_size, limits::kMaxVocabSize, "vocab_size");
  checkDimension(config.max_position_embeddings, limits::kMaxPositions, "max_position_embeddings");
  fuzz::require(config.num_heads % config.num_kv_heads == 0,
                "accepted num_heads not divisible by num_kv_heads");
  fuzz::require(config.norm_eps >= limits::kMinNormEps && config.norm_eps <= limits::kMaxNormEps,
                "an accepted norm epsilon outside its limits", std::to_string(config.norm_eps));
  fuzz::require(config.rope_theta >= 0.0 && config.rope_theta <= limits::kMaxRopeTheta,
                "an accepted rope_theta outside its limits", std::to_string(config.rope_theta));
  checkTokenIds(config.bos_token_id, config.eos_token_ids, config.vocab_size, "config.json");
  if (config.num_layers <= kMaxLayersToList) {
    for (const ExpectedTensor& tensor : expectedTensors(config, "model.")) {
      int64_t elements = 1;
      for (int64_t extent : tensor.shape) {
        fuzz::require(extent >= 1, "an expected tensor with an empty axis", tensor.name);
        fuzz::require(!__builtin_mul_overflow(elements, extent, &elements),
                      "an expected tensor's element count overflows int64", tensor.name);
      }
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::quietLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::beginInput();
  const std::string text(fuzz::asText(data, size));
  ModelConfig config;
  Status status = parseModelConfig(text, "config.json", &config);
  fuzz::checkStatus(status, "parseModelConfig");
  const bool have_model = status == Status::kSuccess;
  if (have_model) checkModelConfig(config);

  fuzz::beginInput();
  GenerationConfig generation;
  const int64_t vocab_size = have_model ? config.vocab_size : 0;
  status = parseGenerationConfig(text, "generation_config.json", vocab_size, &generation);
  fuzz::checkStatus(status, "parseGenerationConfig");
  if (status == Status::kSuccess && have_model) {
    checkTokenIds(generation.bos_token_id, generation.eos_token_ids, vocab_size,
                  "generation_config.json");
    (void)effectiveEosTokenIds(config, generation);
  }
  return 0;
}
