// Step graphs (CausalLM::setStepGraphs) on the CPU, against an operation set that records the way
// a CUDA graph does: while recording, each operator call is kept as a closure with the arguments
// it was given (tensors by address, host arrays by value: what a recorded kernel bakes in), and a
// launch runs the closures again. Rope and attention read the step's host metadata, so a model
// that recorded them in a graph without binding the step (OperationSet::bindStep) would replay a
// stale step and these tests would see other bits. Both graph forms are covered: pieces with
// eager attention between them, and whole steps over a bound step. The model runs the same steps
// with and without graphs, through ten step sizes (more than the eight sets kept, so sets are
// evicted and made again), and every step's logits must match bitwise.
#include <cstring>
#include <functional>
#include <memory>
#include <vector>

#include "ree/models/causal_lm.h"
#include "ree/models/checkpoint.h"
#include "ree/models/model_config.h"
#include "test_util.h"

namespace ree {
namespace {

using models::CausalLM;
using models::ModelConfig;
using models::parseModelConfig;

constexpr const char* kConfig = R"({
  "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
  "intermediate_size": 96, "num_hidden_layers": 3, "num_attention_heads": 4,
  "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 120, "max_position_embeddings": 512,
  "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "tie_word_embeddings": false,
  "torch_dtype": "float32", "hidden_act": "silu"})";

using Closure = std::function<Status()>;

class RecordedGraph final : public OperationGraph {
 public:
  RecordedGraph(std::vector<Closure> work, int* launches)
      : work_(std::move(work)), launches_(launches) {}
  Status launch() override {
    ++*launches_;
    for (const Closure& c : work_)
      REE_RETURN_IF_ERROR(c());
    return Status::kSuccess;
  }

 private:
  std::vector<Closure> work_;
  int* launches_;
};

// The CPU reproducible set, recording like a CUDA graph (see the file comment).
class RecordingOps final : public OperationSet {
 public:
  RecordingOps(std::unique_ptr<OperationSet> inner, bool binds)
      : inner_(std::move(inner)), binds_(binds) {}
  int launches = 0;
  int recorded_rope_or_attention = 0;

  OperationSetKind kind() const override { return inner_->kind(); }
  Device device() const override { return inner_->device(); }
  DType activationDType(DType w) const override { return inner_->activationDType(w); }
  DType kvCacheDType(DType w) const override { return inner_->kvCacheDType(w); }
  int64_t fusedProjectionMaxTokens() const override { return inner_->fusedProjectionMaxTokens(); }
  Status prepareLinearWeight(const Tensor& w) override { return inner_->prepareLinearWeight(w); }
  Status synchronize() override { return inner_->synchronize(); }

  Status embedding(const std::vector<int32_t>& ids, const Tensor& table, Tensor& out) override {
    return queue([=, this]() mutable { return inner_->embedding(ids, table, out); });
  }
  Status addInPlace(Tensor& acc, const Tensor& x) override {
    return queue([=, this]() mutable { return inner_->addInPlace(acc, x); });
  }
  Status rmsNorm(const Tensor& x, const Tensor& w, float eps, Tensor& out) override {
    return queue([=, this]() mutable { return inner_->rmsNorm(x, w, eps, out); });
  }
  Status layerNorm(const Tensor& x, const Tensor& w, const Tensor& b, float eps,
                   Tensor& out) override {
    return queue([=, this]() mutable { return inner_->layerNorm(x, w, b, eps, out); });
  }
  Status linear(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& out) override {
    Tensor b = bias ? *bias : Tensor();
    return queue(
        [=, this]() mutable { return inner_->linear(x, w, b.defined() ? &b : nullptr, out); });
  }
  Status linearAccumulate(const Tensor& x, const Tensor& w, const Tensor* bias,
                          Tensor& acc) override {
    Tensor b = bias ? *bias : Tensor();
    return queue([=, this]() mutable {
      return inner_->linearAccumulate(x, w, b.defined() ? &b : nullptr, acc);
    });
  }
  Status gatedActivation(ActivationKind act, const Tensor& gate, const Tensor& up,
                         Tensor& out) override {
    return queue([=, this]() mutable { return inner_->gatedActivation(act, gate, up, out); });
  }
  Status activation(ActivationKind act, const Tensor& x, Tensor& out) override {
    return queue([=, this]() mutable { return inner_->activation(act, x, out); });
  }
  Status copyColumns(const Tensor& src, int64_t col, Tensor& dst) override {
    return queue([=, this]() mutable { return inner_->copyColumns(src, col, dst); });
  }
  // A bound step's metadata is read when the work runs (device buffers); otherwise the values
  // of the call are baked in.
  Status rope(Tensor& x, const std::vector<int32_t>& positions, const RopeSpec& spec) override {
    if (recording_ != nullptr) ++recorded_rope_or_attention;
    if (bound_) {
      return queue([=, this]() mutable { return inner_->rope(x, bound_batch_.positions, spec); });
    }
    return queue([=, this]() mutable { return inner_->rope(x, positions, spec); });
  }
  Status attention(const Tensor& q, const Tensor& k, const Tensor& v, LayerKvCache& cache,
                   const StepBatch& batch, Tensor& out) override {
    if (recording_ != nullptr) ++recorded_rope_or_attention;
    LayerKvCache* c = &cache;
    if (bound_) {
      return queue(
          [=, this]() mutable { return inner_->attention(q, k, v, *c, bound_batch_, out); });
    }
    return queue([=, this]() mutable { return inner_->attention(q, k, v, *c, batch, out); });
  }

  bool capturesGraphs() const override { return true; }
  bool graphsPayAt(int64_t) const override { return true; }
  bool bindsSteps() const override { return binds_; }
  Status bindStep(const StepBatch& batch, const RopeSpec*, const LayerKvCache&,
                  uint64_t* key) override {
    bound_batch_ = batch;
    bound_ = true;
    int max_q = 0;
    for (int s = 0; s < batch.batch(); ++s)
      max_q = std::max(max_q, batch.query_offsets[s + 1] - batch.query_offsets[s]);
    *key = static_cast<uint64_t>(batch.batch()) * 1000 + static_cast<uint64_t>(max_q);
    return Status::kSuccess;
  }
  void unbindStep() override { bound_ = false; }
  Status beginGraphCapture() override {
    recording_ = std::make_unique<std::vector<Closure>>();
    return Status::kSuccess;
  }
  Status endGraphCapture(std::unique_ptr<OperationGraph>* out) override {
    *out = std::make_unique<RecordedGraph>(std::move(*recording_), &launches);
    recording_.reset();
    return Status::kSuccess;
  }

 private:
  Status queue(Closure work) {
    if (recording_ == nullptr) return work();
    recording_->push_back(std::move(work));
    return Status::kSuccess;
  }

  std::unique_ptr<OperationSet> inner_;
  bool binds_;
  std::unique_ptr<std::vector<Closure>> recording_;
  bool bound_ = false;
  StepBatch bound_batch_;
};

struct Model {
  std::unique_ptr<OperationSet> ops;
  std::unique_ptr<CausalLM> lm;
};

constexpr int kBlockSize = 16, kBlocksPerSeq = 8, kSequences = 10;

Model makeModel(const ModelConfig& config, const models::Checkpoint& checkpoint, bool graphs,
                bool binds) {
  Model m;
  std::unique_ptr<OperationSet> inner;
  EXPECT_EQ(createOperationSet(OperationSetKind::kReproducible, Device::cpu(), &inner),
            Status::kSuccess);
  m.ops = graphs ? std::make_unique<RecordingOps>(std::move(inner), binds) : std::move(inner);
  EXPECT_EQ(CausalLM::load(config, checkpoint, *m.ops, models::LayerRange(), &m.lm),
            Status::kSuccess)
      << lastErrorMessage();
  EXPECT_EQ(m.lm->allocateCache(kSequences * kBlocksPerSeq, kBlockSize, kBlockSize * kBlocksPerSeq),
            Status::kSuccess);
  m.lm->setStepGraphs(graphs);
  return m;
}

// One step of sequences `seqs` (their new ids), returning the logits of each one's last row.
std::vector<float> step(Model& m, const std::vector<int>& seqs,
                        const std::vector<std::vector<int32_t>>& new_ids,
                        std::vector<int32_t>* cached) {
  StepBatch batch;
  batch.query_offsets = {0};
  std::vector<int32_t> ids, last_rows;
  for (size_t i = 0; i < seqs.size(); ++i) {
    const int s = seqs[i];
    batch.cached_lens.push_back((*cached)[s]);
    for (int j = 0; j < kBlocksPerSeq; ++j)
      batch.block_tables.push_back(s * kBlocksPerSeq + j);
    ids.insert(ids.end(), new_ids[i].begin(), new_ids[i].end());
    batch.query_offsets.push_back(static_cast<int32_t>(ids.size()));
    last_rows.push_back(static_cast<int32_t>(ids.size()) - 1);
  }
  batch.blocks_per_seq = kBlocksPerSeq;
  EXPECT_EQ(batch.finalize(), Status::kSuccess);
  Tensor hidden, logits;
  EXPECT_EQ(m.lm->embed(ids, batch, &hidden), Status::kSuccess) << lastErrorMessage();
  EXPECT_EQ(m.lm->runLayers(hidden, batch), Status::kSuccess) << lastErrorMessage();
  EXPECT_EQ(m.lm->logits(hidden, last_rows, &logits), Status::kSuccess) << lastErrorMessage();
  for (size_t i = 0; i < seqs.size(); ++i)
    (*cached)[seqs[i]] += static_cast<int32_t>(new_ids[i].size());
  const float* data = logits.as<float>();
  return std::vector<float>(data, data + logits.numel());
}

int32_t argmaxRow(const std::vector<float>& logits, size_t row, int64_t vocab) {
  const float* r = logits.data() + row * vocab;
  int32_t best = 0;
  for (int64_t j = 1; j < vocab; ++j)
    if (r[j] > r[best]) best = static_cast<int32_t>(j);
  return best;
}

// Prompts of 2..11 tokens, then three decode steps for each step size from ten sequences down to
// one; the graphed model and the plain one take the same tokens and must give the same logits.
void runAndCompare(bool binds) {
  ModelConfig config;
  ASSERT_EQ(parseModelConfig(kConfig, "step_graphs_test", &config), Status::kSuccess)
      << lastErrorMessage();
  std::unique_ptr<models::Checkpoint> checkpoint;
  ASSERT_EQ(models::Checkpoint::synthetic(config, 11, &checkpoint), Status::kSuccess);
  Model graphed = makeModel(config, *checkpoint, true, binds);
  Model plain = makeModel(config, *checkpoint, false, false);
  std::vector<int32_t> cached_g(kSequences, 0), cached_p(kSequences, 0);
  std::vector<int32_t> next(kSequences);
  for (int s = 0; s < kSequences; ++s) {
    std::vector<int32_t> prompt;
    for (int j = 0; j < 2 + s; ++j)
      prompt.push_back((s * 31 + j * 7) % 100 + 3);
    const std::vector<float> a = step(graphed, {s}, {prompt}, &cached_g);
    const std::vector<float> b = step(plain, {s}, {prompt}, &cached_p);
    ASSERT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float))) << "prompt " << s;
    next[s] = argmaxRow(a, 0, config.vocab_size);
  }
  for (int active = kSequences; active >= 1; --active) {
    for (int repeat = 0; repeat < 3; ++repeat) {
      std::vector<int> seqs;
      std::vector<std::vector<int32_t>> ids;
      for (int s = 0; s < active; ++s) {
        seqs.push_back(s);
        ids.push_back({next[s]});
      }
      const std::vector<float> a = step(graphed, seqs, ids, &cached_g);
      const std::vector<float> b = step(plain, seqs, ids, &cached_p);
      ASSERT_EQ(a.size(), b.size());
      ASSERT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)))
          << active << " sequences, repeat " << repeat;
      for (int s = 0; s < active; ++s)
        next[s] = argmaxRow(a, static_cast<size_t>(s), config.vocab_size);
    }
  }
  auto* recorder = static_cast<RecordingOps*>(graphed.ops.get());
  // Every step size was replayed at its third step (recorded at the second, sized by the first).
  EXPECT_GE(graphed.lm->graphReplayedSteps(), kSequences);
  EXPECT_GT(recorder->launches, 0);
  // Pieces never record rope or attention; whole steps record them over the bound step.
  if (binds) {
    EXPECT_GT(recorder->recorded_rope_or_attention, 0);
  } else {
    EXPECT_EQ(recorder->recorded_rope_or_attention, 0);
  }
}

TEST(StepGraphs, PiecesGiveTheBitsOfEagerSteps) {
  runAndCompare(/*binds=*/false);
}

TEST(StepGraphs, WholeBoundStepsGiveTheBitsOfEagerSteps) {
  runAndCompare(/*binds=*/true);
}

}  // namespace
}  // namespace ree
