// A GGUF file's metadata as REE's model config: the config.json that says the same thing, parsed
// by parseModelConfig (model_config.h), so that the same limits and rules apply. Each GGUF key
// is first checked for its type and against model_limits.h, naming the key.
//
//   general.architecture: llama -> LlamaForCausalLM, qwen2 -> Qwen2ForCausalLM,
//     qwen3 -> Qwen3ForCausalLM (Mistral files are written as "llama" by llama.cpp's converter);
//   <arch>.block_count, embedding_length, feed_forward_length, attention.head_count,
//     attention.head_count_kv, context_length, attention.layer_norm_rms_epsilon, rope.freq_base
//     -> the config.json fields of the same meaning;
//   head_dim: <arch>.attention.key_length, else <arch>.rope.dimension_count (which must equal
//     head_dim when present: partial rotary embeddings are unsupported);
//   vocab_size: token_embd.weight's rows (<arch>.vocab_size and tokenizer.ggml.tokens must not
//     disagree); tie_word_embeddings: no output.weight; attention_bias / mlp_bias (llama):
//     blk.0.attn_q.bias / blk.0.ffn_gate.bias present; bos/eos: tokenizer.ggml.bos_token_id /
//     eos_token_id; dtype: float32 (the weights are dequantized to F32).
// Refused as unsupported: other architectures, <arch>.rope.scaling.type other than "none", and a
// rope_freqs.weight tensor (Llama 3.1's scaled RoPE as llama.cpp stores it).
#pragma once

#include <string>

#include "ree/core/status.h"
#include "ree/models/gguf.h"
#include "ree/models/model_config.h"

namespace ree::models {

// The config.json text equivalent to `file`'s metadata.
Status ggufModelConfigJson(const GgufFile& file, std::string* json_text);

// Opens the GGUF file `path` and gives ggufModelConfigJson's text (the run fingerprint's config).
Status readGgufConfigJson(const std::string& path, std::string* json_text);

// Opens the GGUF file `path` and parses its config; *generation (may be null) gets the ids that
// end generation as its eos_token_ids: tokenizer.ggml.eos_token_id, eot_token_id and eom_token_id
// (ggufEndTokenIds, gguf_tokenizer.h), the others default.
Status loadGgufModelConfig(const std::string& path, ModelConfig* config,
                           GenerationConfig* generation);

}  // namespace ree::models
