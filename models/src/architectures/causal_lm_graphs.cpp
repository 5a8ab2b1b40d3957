// Step graphs (causal_lm_impl.h StepGraphSet): CausalLM::runLayers through CUDA graphs recorded
// per step shape, so that a decode step queues one launch (whole steps) or a few dozen (pieces
// around eager attentions) instead of hundreds. A graph replays the kernels it recorded on the
// buffers it recorded, so the bits are those of running the same operators one by one.
#include <algorithm>

#include "causal_lm_impl.h"
#include "ree/core/log.h"

namespace ree::models {
namespace {

// Steps of more tokens are bound by their arithmetic, not by launches; a set for one of them
// would hold a large workspace of its own.
constexpr int64_t kGraphMaxTokens = 256;
// Token counts with a set at once (least recently used evicted): a decode batch shrinks one
// sequence at a time as requests finish, and each set holds a workspace sized for its count.
constexpr size_t kGraphMaxSets = 8;

// Makes the set's workspace the one the model's operators use (*slot), for one scope.
class WorkspaceScope {
 public:
  WorkspaceScope(Workspace** slot, Workspace* set_workspace) : slot_(slot) {
    *slot_ = set_workspace;
  }
  ~WorkspaceScope() { *slot_ = nullptr; }
  WorkspaceScope(const WorkspaceScope&) = delete;
  WorkspaceScope& operator=(const WorkspaceScope&) = delete;

 private:
  Workspace** slot_;
};

}  // namespace

bool CausalLM::Impl::graphsApply(const Tensor& hidden, bool observed) const {
  return graphs.enabled && !observed && !layers.empty() && hidden.dim(0) >= 1 &&
         hidden.dim(0) <= kGraphMaxTokens && ops->graphsPayAt(hidden.dim(0));
}

// The set for steps of `key`, made at the second step of that key (a key seen once, such as a
// prompt's prefill, gets none); null while there is none. A set made right after an eager step
// of its key takes that step's buffer sizes and is recorded at once; otherwise its first step
// runs eagerly to size them.
StepGraphSet* CausalLM::Impl::graphSetFor(const StepGraphKey& key) {
  const uint64_t now = ++graphs.clock;
  for (auto& set : graphs.sets) {
    if (!(set->key == key)) continue;
    set->last_used = now;
    return set.get();
  }
  if (graphs.seen.size() > 4 * kGraphMaxTokens) graphs.seen.clear();
  if (++graphs.seen[key] < 2) return nullptr;
  if (graphs.sets.size() == kGraphMaxSets) {
    auto oldest =
        std::min_element(graphs.sets.begin(), graphs.sets.end(),
                         [](const auto& a, const auto& b) { return a->last_used < b->last_used; });
    // Safe while its work is still queued: an executable graph destroyed in flight is freed when
    // it completes (cudaGraphExecDestroy), and the set's buffers are freed in the order of the
    // legacy stream, after the work queued before (the reproducible set's stream is blocking).
    graphs.sets.erase(oldest);
  }
  auto set = std::make_unique<StepGraphSet>();
  set->key = key;
  set->last_used = now;
  set->operands.resize(layers.size());
  if (graphs.last_eager_key == key &&
      set->workspace.reserve(workspace.lastRequests(), device()) == Status::kSuccess) {
    set->state = StepGraphSet::State::kSized;
  }
  graphs.sets.push_back(std::move(set));
  return graphs.sets.back().get();
}

size_t CausalLM::Impl::pieceCount(const StepGraphSet& set) const {
  return set.key.whole ? 1 : layers.size() + 1;
}

// Whole steps: every layer. Otherwise piece i is the second half of layer i - 1 (o projection,
// norm2, MLP), then the first half of layer i (norm1, q/k/v projections); piece 0 and the last
// piece have one half each, and afterPiece runs the attention between them.
Status CausalLM::Impl::graphPiece(StepGraphSet& set, size_t i, const StepBatch& batch) {
  if (set.key.whole) {
    for (size_t l = 0; l < layers.size(); ++l)
      REE_RETURN_IF_ERROR(layer(l, set.hidden, batch));
    return Status::kSuccess;
  }
  if (i > 0) REE_RETURN_IF_ERROR(attentionOutputAndMlp(i - 1, set.operands[i - 1], set.hidden));
  if (i < layers.size()) REE_RETURN_IF_ERROR(attentionInputs(i, set.hidden, &set.operands[i]));
  return Status::kSuccess;
}

Status CausalLM::Impl::afterPiece(StepGraphSet& set, size_t i, const StepBatch& batch) {
  if (set.key.whole || i >= layers.size()) return Status::kSuccess;
  return attentionCore(i, set.operands[i], batch);
}

Status CausalLM::Impl::runPiecesEagerly(StepGraphSet& set, const StepBatch& batch, size_t first) {
  for (size_t i = first; i < pieceCount(set); ++i) {
    REE_RETURN_IF_ERROR(graphPiece(set, i, batch));
    REE_RETURN_IF_ERROR(afterPiece(set, i, batch));
  }
  return Status::kSuccess;
}

// Records each piece, then launches it (a recording runs nothing) before the eager attention
// that reads its output. A piece that cannot be recorded runs eagerly with the rest of the step,
// and the set is not tried again.
Status CausalLM::Impl::recordPieces(StepGraphSet& set, const StepBatch& batch) {
  set.pieces.clear();
  for (size_t i = 0; i < pieceCount(set); ++i) {
    std::unique_ptr<OperationGraph> piece;
    set.workspace.setFrozen(true);
    Status status = ops->beginGraphCapture();
    if (status == Status::kSuccess) {
      status = graphPiece(set, i, batch);
      const Status ended = ops->endGraphCapture(&piece);
      if (status == Status::kSuccess) status = ended;
    }
    set.workspace.setFrozen(false);
    if (status != Status::kSuccess) {
      logMessage(LogLevel::kWarning,
                 "%s set on %s: the layers of %lld-token steps run without CUDA graphs (%s)",
                 ops->name(), device().str().c_str(), static_cast<long long>(set.key.tokens),
                 lastErrorMessage());
      set.state = StepGraphSet::State::kFailed;
      set.pieces.clear();
      return runPiecesEagerly(set, batch, i);
    }
    REE_RETURN_IF_ERROR(piece->launch());
    set.pieces.push_back(std::move(piece));
    REE_RETURN_IF_ERROR(afterPiece(set, i, batch));
  }
  set.state = StepGraphSet::State::kRecorded;
  return Status::kSuccess;
}

Status CausalLM::Impl::replayPieces(StepGraphSet& set, const StepBatch& batch) {
  for (size_t i = 0; i < pieceCount(set); ++i) {
    REE_RETURN_IF_ERROR(set.pieces[i]->launch());
    REE_RETURN_IF_ERROR(afterPiece(set, i, batch));
  }
  graphs.replayed_steps += 1;
  return Status::kSuccess;
}

namespace {

// Ends the operation set's bound step (OperationSet::bindStep) with the scope.
class BoundStepScope {
 public:
  BoundStepScope(OperationSet* ops, bool bound) : ops_(bound ? ops : nullptr) {}
  ~BoundStepScope() {
    if (ops_ != nullptr) ops_->unbindStep();
  }
  BoundStepScope(const BoundStepScope&) = delete;
  BoundStepScope& operator=(const BoundStepScope&) = delete;

 private:
  OperationSet* ops_;
};

}  // namespace

// Binds the step's metadata on the device where the set can (then one graph records the whole
// step, rope and attention included); the key of the step's graph set.
StepGraphKey CausalLM::Impl::bindStep(const StepBatch& batch) {
  StepGraphKey key;
  key.tokens = batch.tokens();
  if (!ops->bindsSteps()) return key;
  const RopeSpec* rope_spec = config.rope_type != RopeType::kNone ? &rope : nullptr;
  uint64_t shape = 0;
  if (ops->bindStep(batch, rope_spec, cache[0], &shape) != Status::kSuccess) return key;
  key.whole = true;
  key.shape = shape;
  return key;
}

Status CausalLM::Impl::runLayersGraphed(Tensor& hidden, const StepBatch& batch) {
  const StepGraphKey key = bindStep(batch);
  BoundStepScope bound(ops, key.whole);
  StepGraphSet* set = graphSetFor(key);
  if (set == nullptr || set->state == StepGraphSet::State::kFailed) {
    for (size_t i = 0; i < layers.size(); ++i)
      REE_RETURN_IF_ERROR(layer(i, hidden, batch));
    graphs.last_eager_key = key;
    return Status::kSuccess;
  }
  graphs.last_eager_key = StepGraphKey();
  if (!set->hidden.defined()) {
    REE_RETURN_IF_ERROR(Tensor::empty(device(), hidden.dtype(), hidden.shape(), &set->hidden));
  }
  // In and out of the set's own activations buffer, which its graphs address (the step's hidden
  // is a new tensor every step). Queued in order with the operators' work.
  REE_RETURN_IF_ERROR(ops->copyColumns(hidden, 0, set->hidden));
  {
    WorkspaceScope scope(&graph_workspace, &set->workspace);
    switch (set->state) {
      case StepGraphSet::State::kCold:
        // Sizes the set's workspace: nothing may allocate while a piece is recorded.
        REE_RETURN_IF_ERROR(runPiecesEagerly(*set, batch, 0));
        set->state = StepGraphSet::State::kSized;
        break;
      case StepGraphSet::State::kSized:
        REE_RETURN_IF_ERROR(recordPieces(*set, batch));
        break;
      case StepGraphSet::State::kRecorded:
        REE_RETURN_IF_ERROR(replayPieces(*set, batch));
        break;
      case StepGraphSet::State::kFailed:
        break;
    }
  }
  return ops->copyColumns(set->hidden, 0, hidden);
}

}  // namespace ree::models
