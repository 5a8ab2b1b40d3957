// The architecture table (architecture.h). Every default below is the transformers config
// class's (LlamaConfig, MistralConfig, Qwen2Config, Qwen3Config, GPT2Config), so a config.json
// that leaves a field out means what it means to transformers.
#include "ree/models/architecture.h"

namespace ree::models {
namespace {

constexpr ConfigKeys kLlamaKeys = {
    "hidden_size",         "intermediate_size", "num_hidden_layers",       "num_attention_heads",
    "num_key_value_heads", "head_dim",          "max_position_embeddings", "rms_norm_eps",
    "hidden_act"};

constexpr ConfigKeys kGpt2Keys = {"n_embd",
                                  "n_inner",
                                  "n_layer",
                                  "n_head",
                                  nullptr,
                                  nullptr,
                                  "n_positions",
                                  "layer_norm_epsilon",
                                  "activation_function"};

constexpr TensorNames kLlamaNames = {"model.",
                                     "layers.",
                                     "embed_tokens.weight",
                                     nullptr,
                                     "norm",
                                     "lm_head.weight",
                                     "input_layernorm",
                                     "post_attention_layernorm",
                                     "self_attn.q_proj",
                                     "self_attn.k_proj",
                                     "self_attn.v_proj",
                                     nullptr,
                                     "self_attn.o_proj",
                                     "self_attn.q_norm",
                                     "self_attn.k_norm",
                                     "mlp.gate_proj",
                                     "mlp.up_proj",
                                     "mlp.down_proj"};

constexpr TensorNames kGpt2Names = {
    "transformer.", "h.",    "wte.weight", "wpe.weight", "ln_f",     "lm_head.weight",
    "ln_1",         "ln_2",  nullptr,      nullptr,      nullptr,    "attn.c_attn",
    "attn.c_proj",  nullptr, nullptr,      nullptr,      "mlp.c_fc", "mlp.c_proj"};

constexpr VariantFlag kNoVariantFlags[] = {{nullptr, false, false}};

// GPT2Config switches that change the arithmetic or add tensors.
constexpr VariantFlag kGpt2VariantFlags[] = {{"scale_attn_weights", true, true},
                                             {"scale_attn_by_inverse_layer_idx", false, false},
                                             {"add_cross_attention", false, false},
                                             {nullptr, false, false}};

using B = BiasRule;

// clang-format off
constexpr ArchitectureFacts kTable[] = {
  {Architecture::kLlama, "llama", "LlamaForCausalLM", LayerLayout::kLlama, NormKind::kRmsNorm,
   /*rotary=*/true, B::kAttentionBias, B::kAttentionBias, B::kMlpBias, /*qk_norm=*/false,
   SlidingWindowRule::kNone, kLlamaKeys,
   {/*kv_heads=*/0, /*head_dim=*/0, 0, /*max_positions=*/2048, 1e-6, "silu", false, 1, 2},
   kNoVariantFlags, kLlamaNames},
  {Architecture::kMistral, "mistral", "MistralForCausalLM", LayerLayout::kLlama,
   NormKind::kRmsNorm, true, B::kNever, B::kNever, B::kNever, false,
   SlidingWindowRule::kMistral, kLlamaKeys,
   {8, 0, 0, 4096 * 32, 1e-6, "silu", false, 1, 2},
   kNoVariantFlags, kLlamaNames},
  {Architecture::kQwen2, "qwen2", "Qwen2ForCausalLM", LayerLayout::kLlama, NormKind::kRmsNorm,
   true, /*q/k/v biased, o_proj not*/ B::kAlways, B::kNever, B::kNever, false,
   SlidingWindowRule::kQwen, kLlamaKeys,
   {32, 0, 0, 32768, 1e-6, "silu", false, -1, -1},
   kNoVariantFlags, kLlamaNames},
  {Architecture::kQwen3, "qwen3", "Qwen3ForCausalLM", LayerLayout::kLlama, NormKind::kRmsNorm,
   true, B::kAttentionBias, B::kAttentionBias, B::kNever, /*qk_norm=*/true,
   SlidingWindowRule::kQwen, kLlamaKeys,
   {32, /*head_dim, independent of hidden_size=*/128, 0, 32768, 1e-6, "silu", false, -1, -1},
   kNoVariantFlags, kLlamaNames},
  {Architecture::kGpt2, "gpt2", "GPT2LMHeadModel", LayerLayout::kGpt2, NormKind::kLayerNorm,
   /*rotary=*/false, B::kAlways, B::kAlways, B::kAlways, false, SlidingWindowRule::kNone,
   kGpt2Keys,
   {0, 0, /*n_inner null: 4 * n_embd*/ 4, 1024, 1e-5, "gelu_new", true, 50256, 50256},
   kGpt2VariantFlags, kGpt2Names},
};
// clang-format on

constexpr int kCount = static_cast<int>(sizeof(kTable) / sizeof(kTable[0]));

// The rows must follow the enum, so that architectureFacts() can index.
constexpr bool rowsFollowTheEnum() {
  for (int i = 0; i < kCount; ++i) {
    if (static_cast<int>(kTable[i].architecture) != i) return false;
  }
  return true;
}
static_assert(rowsFollowTheEnum(), "kTable rows must be in Architecture's order");

std::string joined(const char* ArchitectureFacts::*field) {
  std::string out;
  for (const ArchitectureFacts& row : kTable) {
    if (!out.empty()) out += ", ";
    out += row.*field;
  }
  return out;
}

}  // namespace

const ArchitectureFacts& architectureFacts(Architecture architecture) {
  const int index = static_cast<int>(architecture);
  return kTable[index >= 0 && index < kCount ? index : 0];
}

const ArchitectureFacts* architectureTable() {
  return kTable;
}

int architectureCount() {
  return kCount;
}

const ArchitectureFacts* findArchitectureByModelType(const std::string& name) {
  for (const ArchitectureFacts& row : kTable) {
    if (name == row.model_type) return &row;
  }
  return nullptr;
}

const ArchitectureFacts* findArchitectureByClass(const std::string& name) {
  for (const ArchitectureFacts& row : kTable) {
    if (name == row.class_name) return &row;
  }
  return nullptr;
}

std::string supportedModelTypes() {
  return joined(&ArchitectureFacts::model_type);
}

std::string supportedClassNames() {
  return joined(&ArchitectureFacts::class_name);
}

const char* architectureName(Architecture architecture) {
  return architectureFacts(architecture).model_type;
}

}  // namespace ree::models
