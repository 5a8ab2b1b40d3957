// Operation sets: the operator interface that model code is written against, once.
//
//   reproducible  RepOps (kernels/): same bits on every CPU and GPU, any batch composition, any
//                 partition count, prefill or decode. Activations fp32.
//   default       LibTorch ATen (cuBLAS, fused SDPA on GPU): fastest, no bitwise promise.
//                 Activations in the model's dtype.
//   deterministic ATen with deterministic algorithms, TF32 and reduced-precision reductions off,
//                 a fixed CPU thread count: same bits run to run on the same hardware and batch.
//
// Metadata (token ids, positions, sequence layout) is passed as host arrays; tensors live on the
// operation set's device.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ree/runtime/tensor.h"

namespace ree {

enum class OperationSetKind : int { kDefault = 0, kDeterministic = 1, kReproducible = 2 };

const char* operationSetName(OperationSetKind kind);
// "default", "deterministic" or "reproducible"; the error names --operation-set.
Status parseOperationSet(const std::string& text, OperationSetKind* out);

// The RepOps spec version the reproducible set computes with (docs/repops-spec.md). Every version
// a release ever shipped stays implemented, so that receipts that name it still verify.
//   repops-1  every matrix product is an fp32 fma chain in a fixed order (linear.md).
//   repops-2  linear layers (and the lm_head) are exact-integer products on int8 digits
//             (linear-int.md); every other operator is repops-1's.
//   repops-3  repops-2's digits with one exponent per row over the whole K, so each output is one
//             exact integer rounded once (linear-int-row.md); every other operator is repops-1's.
enum class RepOpsSpec : int { kRepOps1 = 1, kRepOps2 = 2, kRepOps3 = 3 };
inline constexpr RepOpsSpec kDefaultRepOpsSpec = RepOpsSpec::kRepOps1;

const char* repOpsSpecName(RepOpsSpec spec);
// "repops-1", "repops-2" or "repops-3"; the error names `what` (e.g. "--repops-spec").
Status parseRepOpsSpec(const std::string& text, const char* what, RepOpsSpec* out);

enum class ActivationKind : int { kSilu = 0, kGeluTanh = 1, kGeluErf = 2 };

// Rotary embedding parameters (half-split "rotate_half" layout unless interleaved).
struct RopeSpec {
  int rotary_dim = 0;  // <= head_dim, even
  bool interleaved = false;
  float theta = 10000.0f;
  bool llama3 = false;  // Llama 3.1 frequency scaling
  // The config's numbers as written (doubles); the operators define where each meets fp32.
  double llama3_factor = 0.0;
  double llama3_low_freq_factor = 0.0;
  double llama3_high_freq_factor = 0.0;
  int llama3_original_max_positions = 0;
};

// The sequences of one forward step. Sequence s has new tokens at rows
// query_offsets[s]..query_offsets[s+1]-1 of the activations and cached_lens[s] tokens already in
// the KV cache; new token i of s sits at absolute position cached_lens[s] + i.
//
// The KV cache is paged (LayerKvCache): position p of sequence s lives in the cache block
// block_tables[s * blocks_per_seq + p / block_size], row p % block_size. A sequence's table lists
// the blocks of its positions 0..cached_lens[s] + new - 1 in order (entries past them are
// padding); blocks need not be contiguous or ordered, and no two sequences of a step share one.
// Where a block holds a whole sequence (blocks_per_seq == 1), finalize() also fills cache_slots
// (= the block of each sequence): the slot view that the ATen sets read in place.
struct StepBatch {
  std::vector<int32_t> query_offsets;  // [batch + 1]
  std::vector<int32_t> cached_lens;    // [batch]
  std::vector<int32_t> block_tables;   // [batch * blocks_per_seq]
  int blocks_per_seq = 0;
  std::vector<int32_t> cache_slots;  // [batch]: given alone, one block per sequence (see above)
  std::vector<int32_t> positions;    // [tokens], derived by finalize()
  int batch() const { return static_cast<int>(cached_lens.size()); }
  int tokens() const { return query_offsets.empty() ? 0 : query_offsets.back(); }
  // Fills `positions` from the offsets and cached lengths and derives block_tables from
  // cache_slots or the reverse (see above); checks consistency.
  Status finalize();
};

// One layer's KV cache: a pool of blocks, k and v of shape
// [num_blocks, block_size, n_kv_heads, head_dim]; steps address it through their block tables.
struct LayerKvCache {
  Tensor k;
  Tensor v;
  int numBlocks() const { return static_cast<int>(k.dim(0)); }
  int blockSize() const { return static_cast<int>(k.dim(1)); }
};

// Device work recorded once (a CUDA graph) and launched again with the same arguments: the same
// kernels on the same buffers, so the same bits as queueing that work operator by operator, with
// one launch instead of one per kernel. Made by OperationSet::endGraphCapture.
class OperationGraph {
 public:
  virtual ~OperationGraph() = default;
  // Queues the recorded work after the work queued so far on the operation set.
  virtual Status launch() = 0;
};

class OperationSet {
 public:
  virtual ~OperationSet() = default;

  virtual OperationSetKind kind() const = 0;
  const char* name() const { return operationSetName(kind()); }
  virtual Device device() const = 0;
  // dtype of activations between operators, and of the KV cache, for weights of `weight_dtype`.
  virtual DType activationDType(DType weight_dtype) const = 0;
  virtual DType kvCacheDType(DType weight_dtype) const = 0;

  // out[t, :] = table[ids[t], :]; ids are checked against the table's rows.
  virtual Status embedding(const std::vector<int32_t>& ids, const Tensor& table, Tensor& out) = 0;
  // The same gather of `count` int32 ids already in this set's device memory (host memory for a
  // CPU set): a decode step's tokens selected where the logits were (runtime/token_select.h),
  // queued before the host has them. The caller guarantees ids in [0, table rows) (an argmax over
  // that many logits). Same bits as embedding() of those ids. Default: kUnsupported, and
  // embedsDeviceIds() false.
  virtual bool embedsDeviceIds(const Tensor& table) const;
  virtual Status embeddingOfDeviceIds(const int32_t* ids, int64_t count, const Tensor& table,
                                      Tensor& out);
  // acc += x, elementwise (same shape and dtype).
  virtual Status addInPlace(Tensor& acc, const Tensor& x) = 0;
  // Row-wise over the last dimension of x (as transformers' LlamaRMSNorm / nn.LayerNorm).
  virtual Status rmsNorm(const Tensor& x, const Tensor& weight, float eps, Tensor& out) = 0;
  virtual Status layerNorm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps,
                           Tensor& out) = 0;
  // out[m, n] = x[m, :] . weight[n, :] (+ bias[n]); weight in nn.Linear layout [N, K]. `out` may
  // be fp32 while x has another dtype (logits are always fp32). weight and bias are parameters:
  // no work queued on this operation set writes them (a device kernel may read them early).
  virtual Status linear(const Tensor& x, const Tensor& weight, const Tensor* bias, Tensor& out) = 0;
  // acc += linear(x, weight, bias): the residual connection. The same bits as linear() into a
  // tensor of acc's dtype followed by addInPlace(acc, that tensor), which is what this default
  // does; an operation set may fuse the two (one kernel, no temporary).
  virtual Status linearAccumulate(const Tensor& x, const Tensor& weight, const Tensor* bias,
                                  Tensor& acc);
  // The most tokens of a step for which a model runs the projections that share an input fused
  // (q|k|v and gate|up: one linear over the concatenated weight rows, then the outputs split by
  // columns): one larger product against separate ones plus the split's copies. Never changes
  // results (each output comes from its own weight row and the same K). Default: 16.
  virtual int64_t fusedProjectionMaxTokens() const;
  // Tells the set that `weight` is a linear layer's parameter: it stays alive and unchanged as
  // long as this set, so the set may precompute from it once (the reproducible set under
  // repops-2 or repops-3 on the CPU quantises it into digit planes, within a quarter of the
  // host's available memory; under repops-3 on a GPU it keeps the weight's row exponents on the
  // device). Never changes results. Default: nothing.
  virtual Status prepareLinearWeight(const Tensor& weight);
  // In place on x [tokens, heads, head_dim] with one position per token.
  virtual Status rope(Tensor& x, const std::vector<int32_t>& positions, const RopeSpec& spec) = 0;
  // Appends k_new/v_new ([tokens, n_kv_heads, head_dim]) to `cache` at the batch's positions, then
  // causal GQA attention of q ([tokens, n_heads, head_dim]) over the cache into out.
  virtual Status attention(const Tensor& q, const Tensor& k_new, const Tensor& v_new,
                           LayerKvCache& cache, const StepBatch& batch, Tensor& out) = 0;
  // out = act(gate) * up (SwiGLU with kSilu).
  virtual Status gatedActivation(ActivationKind act, const Tensor& gate, const Tensor& up,
                                 Tensor& out) = 0;
  // out = act(x).
  virtual Status activation(ActivationKind act, const Tensor& x, Tensor& out) = 0;
  // Waits for all work queued by this operation set.
  virtual Status synchronize() = 0;

  // dst = columns [col_begin, col_begin + dst.dim(1)) of src (both [rows, cols], this set's
  // device), queued with this set's work (so it can be recorded in a graph). Default: copyColumns
  // on the device's legacy stream.
  virtual Status copyColumns(const Tensor& src, int64_t col_begin, Tensor& dst);

  // Graph capture (CUDA sets): between beginGraphCapture and endGraphCapture the set records the
  // work of its operators instead of running it, and endGraphCapture returns that work as a
  // graph. Metadata given as host arrays (rope's positions, attention's batch) are read at
  // recording time, so only operators that take none belong in a graph. Nothing else may be
  // queued on the device by the recording thread meanwhile; a failed capture leaves the set as
  // before it. Default: capturesGraphs() false and kUnsupported.
  virtual bool capturesGraphs() const;
  // Step metadata on the device, so that rope and attention can be recorded too: bindStep queues
  // the copy of the step's positions and sequence layout (and what the set derives from them)
  // into buffers at fixed addresses; until unbindStep, rope and attention read them there (the
  // host arrays passed to them must be this step's). A graph that recorded them replays for any
  // step bound with the same token count and *shape_key (the set's summary of what its recorded
  // launches depend on). `rope` is null for a model without rotary embeddings; `cache` is a
  // layer's KV cache (every layer's has its shape). bindsSteps: whether bindStep can succeed at
  // all. Default: false and kUnsupported.
  virtual bool bindsSteps() const;
  virtual Status bindStep(const StepBatch& batch, const RopeSpec* rope, const LayerKvCache& cache,
                          uint64_t* shape_key);
  virtual void unbindStep();
  // Whether a model should record the operators of steps of `tokens` rows as graphs: where it
  // saves more launch work than the graphs' boundaries cost. Default: capturesGraphs().
  virtual bool graphsPayAt(int64_t tokens) const;
  virtual Status beginGraphCapture();
  virtual Status endGraphCapture(std::unique_ptr<OperationGraph>* out);
};

// Creates the operation set `kind` on `device` (kUnsupported when this build lacks LibTorch for
// default/deterministic, or CUDA for a cuda device). `spec` selects the reproducible set's
// arithmetic; the ATen sets ignore it.
Status createOperationSet(OperationSetKind kind, Device device, std::unique_ptr<OperationSet>* out);
Status createOperationSet(OperationSetKind kind, Device device, RepOpsSpec spec,
                          std::unique_ptr<OperationSet>* out);

}  // namespace ree
