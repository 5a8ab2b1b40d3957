// The facts REE knows about each model architecture it runs, in one table (architecture.cpp):
// how transformers names it, which config.json keys hold its dimensions and what they default to,
// its norm, activation, biases, q/k norms, position encoding, sliding-window rule and the names
// of its tensors. The config reader (model_config.cpp), the forward code (causal_lm*.cpp) and the
// checkpoint checks read these facts instead of testing for one architecture or another.
//
// Adding an architecture that is laid out like Llama (a Llama-like decoder: RMSNorm, separate
// q/k/v/o projections, a gated MLP, RoPE) means: a value in `Architecture`, a row in the table,
// any config key it spells differently in the config reader, and its name in the tests'
// architecture list (tests/models/architectures.h) with a reference model in
// scripts/reference/hf_reference.py. docs/development.md "Adding an architecture" lists the files.
#pragma once

#include <cstdint>
#include <string>

namespace ree::models {

enum class Architecture { kLlama, kMistral, kQwen2, kQwen3, kGpt2 };

enum class NormKind { kRmsNorm, kLayerNorm };

// The forward code an architecture runs on. kLlama: pre-norm decoder layers with separate
// q/k/v/o nn.Linear projections and a gated MLP (gate, up, down). kGpt2: pre-norm layers whose
// q/k/v sit side by side in one Conv1D weight ([in, out], so transposed on load), an ungated
// MLP (c_fc, c_proj) and learned absolute positions.
enum class LayerLayout { kLlama, kGpt2 };

// Whether a group of projections has biases.
enum class BiasRule {
  kNever,          // whatever the config says
  kAlways,         // whatever the config says
  kAttentionBias,  // config.json's "attention_bias" (default false)
  kMlpBias,        // config.json's "mlp_bias" (default false)
};

// How config.json asks for sliding-window attention (which REE refuses where it would change the
// result: model_config.h checkContextAgainstSlidingWindow).
enum class SlidingWindowRule {
  kNone,     // the architecture has none
  kMistral,  // "sliding_window": absent = 4096, null = full attention, every layer
  kQwen,     // "use_sliding_window" (default false) turns on "sliding_window" (absent = 4096) for
             // the layers >= "max_window_layers" (default 28), or those "layer_types" names
};

// config.json keys holding the model's dimensions; nullptr where the architecture has none (the
// value is then derived: GPT-2's key/value heads = heads, head_dim = hidden / heads).
struct ConfigKeys {
  const char* hidden_size;
  const char* intermediate_size;
  const char* num_layers;
  const char* num_heads;
  const char* num_kv_heads;
  const char* head_dim;
  const char* max_positions;
  const char* norm_eps;
  const char* activation;
};

// The transformers config class's defaults for fields a config.json may leave out.
struct ConfigDefaults {
  int64_t num_kv_heads;             // 0: num_attention_heads
  int64_t head_dim;                 // 0: hidden_size / num_attention_heads
  int64_t intermediate_per_hidden;  // intermediate = this * hidden when absent; 0: required
  int64_t max_positions;
  double norm_eps;
  const char* activation;
  bool tie_word_embeddings;
  int64_t bos_token_id;  // -1: none
  int64_t eos_token_id;  // -1: none
};

// A boolean config field that selects a variant REE does not run: refused unless it holds
// `supported` (absent = `fallback`).
struct VariantFlag {
  const char* key;
  bool fallback;
  bool supported;
};

// Checkpoint tensor names. The full name of a layer tensor is
// base_prefix + layers + "<index>." + <name> + ".weight" / ".bias".
struct TensorNames {
  const char* base_prefix;         // "model." (Llama) / "transformer." (GPT-2; "" also found)
  const char* layers;              // "layers." / "h."
  const char* token_embedding;     // under base_prefix
  const char* position_embedding;  // under base_prefix; nullptr without learned positions
  const char* final_norm;          // under base_prefix, + ".weight" (+ ".bias" for LayerNorm)
  const char* lm_head;             // full name, absent when tied
  // Per layer (nullptr: not in this layout).
  const char* norm1;
  const char* norm2;
  const char* q;
  const char* k;
  const char* v;
  const char* qkv;  // q, k and v side by side (GPT-2's c_attn)
  const char* o;
  const char* q_norm;
  const char* k_norm;
  const char* gate;
  const char* up;
  const char* down;
};

struct ArchitectureFacts {
  Architecture architecture;
  const char* model_type;  // config.json "model_type", e.g. "llama"
  const char* class_name;  // config.json "architectures"[0], e.g. "LlamaForCausalLM"
  LayerLayout layout;
  NormKind norm;
  bool rotary;  // RoPE (rope_theta, rope_scaling); false: learned absolute positions
  BiasRule qkv_bias;
  BiasRule o_proj_bias;
  BiasRule mlp_bias;
  bool qk_norm;  // per-head RMSNorm of q and k before RoPE (Qwen3)
  SlidingWindowRule sliding_window;
  ConfigKeys keys;
  ConfigDefaults defaults;
  const VariantFlag* variant_flags;  // refused variants, ends with {nullptr}
  TensorNames names;
};

// The row of `architecture`.
const ArchitectureFacts& architectureFacts(Architecture architecture);

// Every row, in table order: architectureTable()[0 .. architectureCount()).
const ArchitectureFacts* architectureTable();
int architectureCount();

// The row whose model_type / class_name is `name`; nullptr when none is.
const ArchitectureFacts* findArchitectureByModelType(const std::string& name);
const ArchitectureFacts* findArchitectureByClass(const std::string& name);

// "llama, mistral, ..." / "LlamaForCausalLM, ..." for error messages.
std::string supportedModelTypes();
std::string supportedClassNames();

// "llama", "mistral", "qwen2", "qwen3", "gpt2" (the model_type spelling).
const char* architectureName(Architecture architecture);

}  // namespace ree::models
