// GGUF tensor names -> Hugging Face names (ree/models/gguf_source.h lists the table).
#include <cstring>
#include <string>

#include "ree/models/gguf_source.h"

namespace ree::models {
namespace {

struct Rename {
  const char* gguf;
  const char* hf;
};

constexpr Rename kModelTensors[] = {
    {"token_embd", "model.embed_tokens"}, {"output_norm", "model.norm"}, {"output", "lm_head"}};

constexpr Rename kLayerTensors[] = {
    {"attn_norm", "input_layernorm"},    {"attn_q", "self_attn.q_proj"},
    {"attn_k", "self_attn.k_proj"},      {"attn_v", "self_attn.v_proj"},
    {"attn_output", "self_attn.o_proj"}, {"attn_q_norm", "self_attn.q_norm"},
    {"attn_k_norm", "self_attn.k_norm"}, {"ffn_norm", "post_attention_layernorm"},
    {"ffn_gate", "mlp.gate_proj"},       {"ffn_up", "mlp.up_proj"},
    {"ffn_down", "mlp.down_proj"},
};

const char* lookup(const Rename* table, size_t size, const std::string& stem) {
  for (size_t i = 0; i < size; ++i) {
    if (stem == table[i].gguf) return table[i].hf;
  }
  return nullptr;
}

// "blk.<N>.<rest>" with N a decimal layer index without leading zeros: N and rest.
bool splitLayer(const std::string& stem, std::string* layer, std::string* rest) {
  constexpr const char* kPrefix = "blk.";
  if (stem.rfind(kPrefix, 0) != 0) return false;
  const size_t begin = std::strlen(kPrefix);
  size_t end = begin;
  while (end < stem.size() && end - begin < 9 && stem[end] >= '0' && stem[end] <= '9')
    ++end;
  if (end == begin || end >= stem.size() || stem[end] != '.') return false;
  if (stem[begin] == '0' && end - begin > 1) return false;
  *layer = stem.substr(begin, end - begin);
  *rest = stem.substr(end + 1);
  return true;
}

}  // namespace

std::string ggufTensorHfName(const std::string& gguf_name) {
  std::string suffix;
  for (const char* candidate : {".weight", ".bias"}) {
    const size_t n = std::strlen(candidate);
    if (gguf_name.size() > n && gguf_name.compare(gguf_name.size() - n, n, candidate) == 0) {
      suffix = candidate;
    }
  }
  if (suffix.empty()) return gguf_name;
  const std::string stem = gguf_name.substr(0, gguf_name.size() - suffix.size());
  if (const char* hf = lookup(kModelTensors, std::size(kModelTensors), stem)) return hf + suffix;
  std::string layer, rest;
  if (!splitLayer(stem, &layer, &rest)) return gguf_name;
  const char* hf = lookup(kLayerTensors, std::size(kLayerTensors), rest);
  if (hf == nullptr) return gguf_name;
  return "model.layers." + layer + "." + hf + suffix;
}

}  // namespace ree::models
