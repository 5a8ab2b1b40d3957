// Step graphs (causal_lm_impl.h StepGraphSet): CausalLM::runLayers through CUDA graphs recorded
// per token count, so that a decode step queues a few dozen launches instead of hundreds. A graph
// replays the kernels it recorded on the buffers it recorded, so the bits are those of running
// the same operators one by one; rope and attention, which read the step's metadata, run eagerly
// between the pieces.
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

// The set for `tokens` steps, made at the second step of that count (a count seen once, such as
// a prompt's prefill, gets none); null while there is none. A set made right after an eager step
// of its count takes that step's buffer sizes and is recorded at once; otherwise its first step
// runs eagerly to size them.
StepGraphSet* CausalLM::Impl::graphSetFor(int64_t tokens) {
  const uint64_t now = ++graphs.clock;
  for (auto& set : graphs.sets) {
    if (set->tokens != tokens) continue;
    set->last_used = now;
    return set.get();
  }
  if (graphs.seen.size() > 4 * kGraphMaxTokens) graphs.seen.clear();
  if (++graphs.seen[tokens] < 2) return nullptr;
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
  set->tokens = tokens;
  set->last_used = now;
  set->operands.resize(layers.size());
  if (graphs.last_eager_tokens == tokens &&
      set->workspace.reserve(workspace.lastRequests(), device()) == Status::kSuccess) {
    set->state = StepGraphSet::State::kSized;
  }
  graphs.sets.push_back(std::move(set));
  return graphs.sets.back().get();
}

// Piece i: the second half of layer i - 1 (o projection, norm2, MLP), then the first half of
// layer i (norm1, q/k/v projections); piece 0 and the last piece have one half each.
Status CausalLM::Impl::graphPiece(StepGraphSet& set, size_t i) {
  if (i > 0) REE_RETURN_IF_ERROR(attentionOutputAndMlp(i - 1, set.operands[i - 1], set.hidden));
  if (i < layers.size()) REE_RETURN_IF_ERROR(attentionInputs(i, set.hidden, &set.operands[i]));
  return Status::kSuccess;
}

Status CausalLM::Impl::runPiecesEagerly(StepGraphSet& set, const StepBatch& batch, size_t first) {
  for (size_t i = first; i <= layers.size(); ++i) {
    REE_RETURN_IF_ERROR(graphPiece(set, i));
    if (i < layers.size()) REE_RETURN_IF_ERROR(attentionCore(i, set.operands[i], batch));
  }
  return Status::kSuccess;
}

// Records each piece, then launches it (a recording runs nothing) before the eager attention
// that reads its output. A piece that cannot be recorded runs eagerly with the rest of the step,
// and the set is not tried again.
Status CausalLM::Impl::recordPieces(StepGraphSet& set, const StepBatch& batch) {
  set.pieces.clear();
  for (size_t i = 0; i <= layers.size(); ++i) {
    std::unique_ptr<OperationGraph> piece;
    set.workspace.setFrozen(true);
    Status status = ops->beginGraphCapture();
    if (status == Status::kSuccess) {
      status = graphPiece(set, i);
      const Status ended = ops->endGraphCapture(&piece);
      if (status == Status::kSuccess) status = ended;
    }
    set.workspace.setFrozen(false);
    if (status != Status::kSuccess) {
      logMessage(LogLevel::kWarning,
                 "%s set on %s: the layers of %lld-token steps run without CUDA graphs (%s)",
                 ops->name(), device().str().c_str(), static_cast<long long>(set.tokens),
                 lastErrorMessage());
      set.state = StepGraphSet::State::kFailed;
      set.pieces.clear();
      return runPiecesEagerly(set, batch, i);
    }
    REE_RETURN_IF_ERROR(piece->launch());
    set.pieces.push_back(std::move(piece));
    if (i < layers.size()) REE_RETURN_IF_ERROR(attentionCore(i, set.operands[i], batch));
  }
  set.state = StepGraphSet::State::kRecorded;
  return Status::kSuccess;
}

Status CausalLM::Impl::replayPieces(StepGraphSet& set, const StepBatch& batch) {
  for (size_t i = 0; i <= layers.size(); ++i) {
    REE_RETURN_IF_ERROR(set.pieces[i]->launch());
    if (i < layers.size()) REE_RETURN_IF_ERROR(attentionCore(i, set.operands[i], batch));
  }
  graphs.replayed_steps += 1;
  return Status::kSuccess;
}

Status CausalLM::Impl::runLayersGraphed(Tensor& hidden, const StepBatch& batch) {
  StepGraphSet* set = graphSetFor(hidden.dim(0));
  if (set == nullptr || set->state == StepGraphSet::State::kFailed) {
    for (size_t i = 0; i < layers.size(); ++i)
      REE_RETURN_IF_ERROR(layer(i, hidden, batch));
    graphs.last_eager_tokens = hidden.dim(0);
    return Status::kSuccess;
  }
  graphs.last_eager_tokens = 0;
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
