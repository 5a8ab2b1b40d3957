// CausalLM's state, shared by its two halves: causal_lm_weights.cpp loads the weights of an
// architecture's layout (architecture.h) from a checkpoint, causal_lm.cpp runs the forward pass.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "ree/models/architecture.h"
#include "ree/models/causal_lm.h"
#include "ree/runtime/quantized_weight.h"

namespace ree::models {

// The runtime's element types (models::DType is the wider safetensors set).
using ComputeDType = ::ree::DType;

// Reusable activation buffers: a step asks for buffer `id` with a shape; the storage grows when a
// step needs more and is reused otherwise (no allocation per operator in steady-state decode).
class Workspace {
 public:
  Status get(int id, Device device, ComputeDType dtype, std::vector<int64_t> shape, Tensor* out);
  // While frozen, a request that needs new storage fails instead of allocating (a graph being
  // recorded must not allocate, and its buffers must keep their addresses).
  void setFrozen(bool frozen) { frozen_ = frozen; }
  // Bytes last requested per buffer, and storage for at least as many in each (a step graph set
  // sized from the eager step of the same token count before it).
  const std::map<int, size_t>& lastRequests() const { return requested_; }
  Status reserve(const std::map<int, size_t>& bytes, Device device);

 private:
  std::map<int, Tensor> buffers_;
  std::map<int, size_t> requested_;
  bool frozen_ = false;
};

enum BufferId {
  kNormed = 1,
  kQ,
  kK,
  kV,
  kAttn,
  kGate,
  kUp,
  kAct,
  kPositions,
  kSelected,
  kFinalNorm,
  kQkv,
  kGateUp
};

struct Linear {
  Tensor weight;  // [N, K]
  Tensor bias;    // [N] or undefined
  const Tensor* biasOrNull() const { return bias.defined() ? &bias : nullptr; }
};

struct Layer {
  Tensor norm1_w, norm1_b, norm2_w, norm2_b;  // RMSNorm: only *_w
  Linear q, k, v, o;
  Tensor q_norm, k_norm;  // Qwen3
  Linear gate, up, down;  // GPT-2: up = c_fc, down = c_proj
  // GPU only: the rows of q, k, v (and gate, up) side by side in one tensor; q.weight etc. are
  // then views into it. Undefined where the projections are not fused.
  Linear qkv, gate_up;
};

// What a layer's attention reads and writes: q, k, v of the new tokens and the attention output
// (buffers of the workspace in use).
struct AttentionOperands {
  Tensor q3, k3, v3;  // [t, heads, head_dim], [t, kv_heads, head_dim] twice
  Tensor attn;        // [t, heads, head_dim]
  // One token of a fused projection: k's heads follow q's, so one rope launch rotates both.
  Tensor qk;
};

// CUDA graphs of the layers for steps of one shape (causal_lm_graphs.cpp). Where the operation
// set can bind a step's metadata on the device (OperationSet::bindStep: the default set on a
// GPU), one graph records the whole step, rope and attention included, and serves every step of
// the same token count and bound shape. Elsewhere a step's layers are recorded as pieces:
// everything between two attentions (o projection and residual, norm, MLP, the next layer's norm
// and q/k/v projections) is one graph, and each layer's rope and attention run eagerly between
// them, because they read the step's positions and sequence layout from the host; such pieces
// depend only on the token count (any batch composition, prefill or decode). A set has its own
// workspace and activations buffer, so the addresses its graphs recorded never move.
// What a step graph set serves: steps of `tokens` rows and, for a whole-step set (the operation
// set bound the step's metadata on the device: OperationSet::bindStep), of that bound shape.
struct StepGraphKey {
  int64_t tokens = 0;
  bool whole = false;
  uint64_t shape = 0;
  bool operator==(const StepGraphKey& o) const {
    return tokens == o.tokens && whole == o.whole && shape == o.shape;
  }
  bool operator<(const StepGraphKey& o) const {
    return std::tie(tokens, whole, shape) < std::tie(o.tokens, o.whole, o.shape);
  }
};

struct StepGraphSet {
  StepGraphKey key;
  enum class State { kCold, kSized, kRecorded, kFailed } state = State::kCold;
  Workspace workspace;
  Tensor hidden;  // [tokens, hidden_size]: the step's activations while its layers run
  std::vector<std::unique_ptr<OperationGraph>> pieces;  // pieceCount() once recorded
  std::vector<AttentionOperands> operands;              // one per layer
  uint64_t last_used = 0;
};

struct StepGraphs {
  bool enabled = false;
  std::map<StepGraphKey, int64_t> seen;  // steps seen per key (a set is made at the second)
  StepGraphKey last_eager_key;           // the key of the last step run without a set
  std::vector<std::unique_ptr<StepGraphSet>> sets;
  uint64_t clock = 0;
  int64_t replayed_steps = 0;  // steps whose layers ran from recorded graphs
};

struct CausalLM::Impl {
  ModelConfig config;
  const ArchitectureFacts* facts = nullptr;
  OperationSet* ops = nullptr;
  LayerRange range;
  ComputeDType checkpoint_dtype = ComputeDType::kBF16;
  ComputeDType weight_dtype = ComputeDType::kBF16;  // after the optional load-time conversion
  ComputeDType act_dtype = ComputeDType::kF32;
  ComputeDType kv_dtype = ComputeDType::kBF16;
  Tensor embed_tokens, embed_positions, final_norm_w, final_norm_b, lm_head;
  std::vector<Layer> layers;
  std::vector<LayerKvCache> cache;
  Workspace workspace;
  // The workspace of the step graph set in use (causal_lm_graphs.cpp), else null: `workspace`.
  Workspace* graph_workspace = nullptr;
  StepGraphs graphs;
  RopeSpec rope;
  std::string prefix;  // the checkpoint's base-model prefix ("model.", "transformer.", "")
  std::vector<std::shared_ptr<void>> host_buffers;  // transposed/owned host weights
  // Weights kept in GGUF blocks (runtime/quantized_weight.h), registered while the model lives;
  // declared last, so unregistered before the tensors above go.
  QuantizedWeights quantized;

  Device device() const { return ops->device(); }

  // ---- Loading (causal_lm_weights.cpp) ----
  // The embedding, head and layers of `range` from `checkpoint`, and the rotary spec.
  Status loadWeights(const Checkpoint& checkpoint);
  // Hands every linear weight (and the lm_head) to ops->prepareLinearWeight once, after loading.
  Status prepareLinearWeights();
  // Host tensor of `view`'s bytes in weight_dtype: zero-copy when no conversion is needed.
  Status hostWeights(const TensorView& view, Tensor* out);
  // Checkpoint tensor `name` as a device tensor (zero-copy on the CPU without conversion).
  Status loadTensor(const Checkpoint& checkpoint, const std::string& name, Tensor* out);
  // A linear weight or the token embedding: kept in its GGUF blocks when the operation set
  // computes from blocks and the weights stay fp32 (the same bits), else loadTensor.
  Status loadMaybeQuantized(const Checkpoint& checkpoint, const std::string& name, Tensor* out);
  // A Conv1D weight [K, N] (GPT-2) as an nn.Linear weight [N, K], optionally only columns
  // [col_begin, col_begin + cols) of the original (c_attn holds q, k and v side by side).
  Status loadTransposed(const Checkpoint& checkpoint, const std::string& name, int64_t col_begin,
                        int64_t cols, Tensor* out);
  // A slice [begin, begin + count) of a 1-D checkpoint tensor (GPT-2's c_attn bias).
  Status loadSlice(const Checkpoint& checkpoint, const std::string& name, int64_t begin,
                   int64_t count, Tensor* out);
  Status loadLlamaLayer(const Checkpoint& checkpoint, int64_t index, Layer* layer);
  Status loadGpt2Layer(const Checkpoint& checkpoint, int64_t index, Layer* layer);
  // Concatenates the weight rows (and biases) of `parts` into `fused` and turns each part into a
  // view of its rows, so the device holds every weight once.
  Status fuseRows(std::initializer_list<Linear*> parts, Linear* fused);

  // ---- Forward (causal_lm.cpp) ----
  Status scratch(int id, std::vector<int64_t> shape, Tensor* out, ComputeDType dtype);
  Status linear(const Linear& l, const Tensor& x, int id, Tensor* out);
  // The column blocks of a fused projection's output [t, sum of widths] as dense [t, width]
  // tensors: views when t == 1 (the blocks are contiguous), else copies into scratch buffers.
  Status split(const Tensor& fused, std::initializer_list<std::pair<int, int64_t>> blocks,
               std::initializer_list<Tensor*> outs);
  Status norm(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& out);
  // Layer `index` of this instance: hidden += attention(norm1(hidden)), then hidden +=
  // mlp(norm2(hidden)).
  Status layer(size_t index, Tensor& hidden, const StepBatch& batch);
  // The three parts of a layer, in order: norm1 and the q/k/v projections (and q/k norms) of
  // hidden; rope and attention (the only part that reads the step's metadata); the o projection
  // into hidden, norm2 and the MLP into hidden.
  Status attentionInputs(size_t index, const Tensor& hidden, AttentionOperands* out);
  Status attentionCore(size_t index, AttentionOperands& a, const StepBatch& batch);
  Status attentionOutputAndMlp(size_t index, const AttentionOperands& a, Tensor& hidden);
  Status mlpBlock(const Layer& l, const Tensor& normed, Tensor& hidden);

  // ---- Step graphs (causal_lm_graphs.cpp) ----
  // Whether runLayers takes the graph path for this step.
  bool graphsApply(const Tensor& hidden, bool observed) const;
  // runLayers through the graph set of hidden's token count: eagerly while the set is new, then
  // recording its pieces, then replaying them.
  Status runLayersGraphed(Tensor& hidden, const StepBatch& batch);
  // Piece `i` of a step (see StepGraphSet) on set.hidden, and the eager work after it.
  size_t pieceCount(const StepGraphSet& set) const;
  Status graphPiece(StepGraphSet& set, size_t i, const StepBatch& batch);
  Status afterPiece(StepGraphSet& set, size_t i, const StepBatch& batch);
  Status runPiecesEagerly(StepGraphSet& set, const StepBatch& batch, size_t first);
  Status recordPieces(StepGraphSet& set, const StepBatch& batch);
  Status replayPieces(StepGraphSet& set, const StepBatch& batch);
  StepGraphSet* graphSetFor(const StepGraphKey& key);
  StepGraphKey bindStep(const StepBatch& batch);
};

}  // namespace ree::models
