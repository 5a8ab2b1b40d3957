// Hugging Face config.json and generation_config.json for the architectures REE runs: Llama
// (2, 3, 3.1, 3.2), Mistral, Qwen2 (2.5), Qwen3 and GPT-2.
//
// Both spellings transformers has used are read: the 4.x one ("torch_dtype", "rope_theta" and
// "rope_scaling" with "rope_type" or the older "type") and the 5.x one ("dtype", "rope_parameters"
// holding "rope_theta" and the scaling fields). A field that is absent takes the default of the
// transformers config class for that architecture (e.g. num_key_value_heads = num_attention_heads,
// Qwen3's head_dim = 128, Mistral's sliding_window = 4096), except the model's dimensions, which
// are required. Which keys and defaults apply is the architecture table's (architecture.h).
//
// Everything is validated before it is used: files must be regular files of bounded size, JSON
// must not repeat a key, and every size lies within model_limits.h, so that nothing derived from
// a config can overflow or allocate without bound. An error is one line naming the file and the
// field (and the limit it broke).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ree/core/status.h"
#include "ree/models/architecture.h"
#include "ree/models/safetensors.h"

namespace ree::models {

// kSilu: "silu"/"swish". kGeluTanh: "gelu_new", "gelu_pytorch_tanh" (the tanh approximation).
// kGelu: "gelu" (erf form). Other activations are refused as unsupported.
enum class Activation { kSilu, kGeluTanh, kGelu };

// kNone: no rotary embedding (GPT-2 learns absolute positions). kDefault: plain RoPE with
// rope_theta. kLlama3: Llama 3.1's frequency-dependent scaling (the four llama3_* fields).
enum class RopeType { kNone, kDefault, kLlama3 };

struct ModelConfig {
  Architecture architecture = Architecture::kLlama;
  std::string architecture_class;  // architectures[0], e.g. "LlamaForCausalLM" ("" if absent)
  std::string model_type;          // e.g. "llama"

  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;  // GPT-2: n_inner, or 4 * n_embd when null
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;  // == num_heads for GPT-2
  int64_t head_dim = 0;      // explicit, or hidden_size / num_heads
  int64_t vocab_size = 0;
  int64_t max_position_embeddings = 0;  // GPT-2: n_positions

  NormKind norm = NormKind::kRmsNorm;
  double norm_eps = 0.0;  // rms_norm_eps or layer_norm_epsilon
  Activation activation = Activation::kSilu;
  std::string hidden_act;  // as written (hidden_act or activation_function)

  RopeType rope_type = RopeType::kDefault;
  double rope_theta = 0.0;  // 0 for GPT-2
  double llama3_factor = 0.0;
  double llama3_low_freq_factor = 0.0;
  double llama3_high_freq_factor = 0.0;
  int64_t llama3_original_max_position_embeddings = 0;

  bool tie_word_embeddings = false;
  std::optional<DType> dtype;  // torch_dtype / dtype: F32, F16 or BF16; empty if absent or null

  std::optional<int64_t> bos_token_id;
  std::vector<int64_t> eos_token_ids;  // an int or a list in the file; empty if absent or null

  // Which optional tensors exist (derived from the architecture and attention_bias/mlp_bias):
  bool qkv_bias = false;     // q/k/v projections have a bias (Qwen2 always, Llama/Qwen3 with
                             // attention_bias; GPT-2's c_attn always)
  bool o_proj_bias = false;  // output projection has a bias (attention_bias; GPT-2 always)
  bool mlp_bias = false;     // MLP projections have biases (Llama mlp_bias; GPT-2 always)
  bool qk_norm = false;      // per-head RMSNorm of q and k before RoPE (Qwen3)
  // Attention window in tokens of the layers that have one (Mistral: all; Qwen: those from
  // max_window_layers on), 0 when attention is full. REE runs full attention only: see
  // checkContextAgainstSlidingWindow.
  int64_t sliding_window = 0;
};

struct GenerationConfig {
  std::optional<int64_t> bos_token_id;
  std::vector<int64_t> eos_token_ids;  // empty if absent or null
  std::optional<int64_t> pad_token_id;
};

// Parses config.json text; `source` names the file in error messages.
Status parseModelConfig(const std::string& json_text, const std::string& source, ModelConfig* out);

// Reads and parses the file at `path`.
Status loadModelConfig(const std::string& path, ModelConfig* out);

// Parses generation_config.json text; token ids are checked against `vocab_size` when it is > 0.
Status parseGenerationConfig(const std::string& json_text, const std::string& source,
                             int64_t vocab_size, GenerationConfig* out);

// Loads <directory>/config.json and, if present, <directory>/generation_config.json (otherwise
// *generation is left default-constructed). `generation` may be null.
Status loadModelDirectoryConfigs(const std::string& directory, ModelConfig* config,
                                 GenerationConfig* generation);

// Sliding-window attention is not implemented. A window changes nothing while a sequence is no
// longer than the window (every key is inside it), so a run whose context (tokens per sequence)
// is at most `sliding_window` is exact; a longer one fails (kUnsupported) naming the field, its
// value and the context.
Status checkContextAgainstSlidingWindow(const ModelConfig& config, int64_t context);

// The ids that end generation: generation_config's eos_token_id when it has one (that is what
// transformers' generate() uses), else config.json's.
std::vector<int64_t> effectiveEosTokenIds(const ModelConfig& config,
                                          const GenerationConfig& generation);

}  // namespace ree::models
