// A GGUF file (gguf.h) as a WeightSource: its tensors under the Hugging Face names REE's
// checkpoint rules expect, dequantized to F32 (gguf_dequant.h), so that the load rules
// (checkpoint.h: expected tensors, shapes, finite values) apply unchanged.
//
//   token_embd -> model.embed_tokens         blk.N.attn_norm -> model.layers.N.input_layernorm
//   blk.N.attn_q/k/v -> ...self_attn.q/k/v_proj   blk.N.attn_output -> ...self_attn.o_proj
//   blk.N.attn_q_norm/k_norm -> ...self_attn.q_norm/k_norm (Qwen3)
//   blk.N.ffn_norm -> ...post_attention_layernorm  blk.N.ffn_gate/up/down -> ...mlp.*_proj
//   output_norm -> model.norm                output -> lm_head (absent: tied embeddings)
// (".weight" / ".bias" kept). Other names are listed unchanged, so that the load rules refuse
// them by name (e.g. rope_freqs.weight).
//
// Shapes are the GGUF dimensions reversed (ne[0], the fastest axis, last). For
// general.architecture "llama", llama.cpp's converter permuted the rows of attn_q and attn_k
// (weights and biases) within each head (convert_hf_to_gguf.py LlamaModel.permute); the source
// undoes it (HF row h*D + a*D/2 + i is GGUF row h*D + 2i + a, D = rows / heads, heads =
// llama.attention.head_count for q and head_count_kv for k), as transformers' GGUF loader does.
//
// Every tensor must have a dequantizable type (checked at open). A tensor is dequantized the
// first time its bytes are asked for and kept until releaseDequantized(); info() needs no
// dequantization. Thread-safe.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "ree/core/status.h"
#include "ree/kernels/quant_blocks.h"
#include "ree/models/gguf.h"
#include "ree/models/weight_source.h"

namespace ree::models {

// True when `path` names a GGUF file: it ends in ".gguf" and is not a directory.
bool isGgufPath(const std::string& path);

// The Hugging Face name of GGUF tensor `gguf_name` (unchanged when it has none).
std::string ggufTensorHfName(const std::string& gguf_name);

class GgufSource final : public WeightSource {
 public:
  static Status open(const std::string& path, std::unique_ptr<GgufSource>* out);
  ~GgufSource() override;
  GgufSource(const GgufSource&) = delete;
  GgufSource& operator=(const GgufSource&) = delete;

  const GgufFile& file() const { return *file_; }
  // Frees the dequantized values (views handed out become invalid); later bytes() redo them.
  void releaseDequantized() const;
  // The same for one tensor (after a model took its blocks instead of its values).
  void releaseDequantized(const std::string& name) const;

  // Tensors kept in their blocks (docs/gguf.md): true when `name` is a 2-D tensor of a block type
  // (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K), with *type set.
  bool quantType(const std::string& name, repops::QuantType* type) const;
  // Its rows as blocks (rows x K / B blocks, `bytes` in all), with llama's q/k rows moved back as
  // for bytes(): row r of the result holds exactly the blocks whose dequantization is row r.
  Status copyQuantizedRows(const std::string& name, void* out, size_t bytes) const;

  const char* formatName() const override { return "gguf"; }
  const std::string& path() const override { return path_; }
  const std::string& directory() const override { return directory_; }
  const std::vector<std::string>& files() const override { return files_; }
  Status fileOf(const std::string& name, std::string* file) const override;
  const std::vector<std::string>& tensorNames() const override { return names_; }
  bool contains(const std::string& name) const override { return index_.count(name) != 0; }
  Status info(const std::string& name, TensorInfo* out) const override;
  // The dequantized F32 values (what the model loads; the weights' identity hashes them).
  Status bytes(const std::string& name, TensorView* out) const override;
  // Scalar metadata as text (arrays are left out: the tokenizer's run to megabytes).
  std::map<std::string, std::string> metadata() const override;
  size_t mappedFileCount() const override { return 1; }

 private:
  struct Entry;
  struct Slot;
  GgufSource();
  Status addTensors();
  Status find(const std::string& name, const Entry** entry) const;
  Status dequantize(const Entry& entry, std::vector<float>* values) const;

  std::unique_ptr<GgufFile> file_;
  std::string path_;
  std::string directory_;
  std::vector<std::string> files_;
  std::vector<std::string> names_;  // sorted
  std::vector<Entry> entries_;
  std::unordered_map<std::string, size_t> index_;  // HF name -> entries_
  mutable std::vector<std::unique_ptr<Slot>> slots_;
};

}  // namespace ree::models
