// Graph capture for the ATen sets on CUDA (OperationSet::beginGraphCapture): ATen's own
// at::cuda::CUDAGraph, so that the tensors ATen allocates while recording come from a private
// memory pool that stays reserved for the graph (a plain stream capture would record addresses
// that the caching allocator hands out again). Every graph of a set shares one pool: the graphs
// of a step replay one after the other on one stream, and a tensor ATen allocates inside a graph
// never outlives it (operators write their results into the caller's tensors).
#if defined(REE_WITH_TORCH)

#include "aten_operation_set.h"

#if defined(REE_WITH_CUDA)
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>

#include <optional>
#endif

namespace ree {
namespace aten_ops {

#if defined(REE_WITH_CUDA)

struct GraphRecorder {
  at::cuda::MempoolId_t pool = at::cuda::graph_pool_handle();
  // The capture in progress and the stream it records on (ATen refuses the default stream).
  std::unique_ptr<at::cuda::CUDAGraph> graph;
  std::optional<c10::cuda::CUDAStreamGuard> stream_guard;
};

namespace {

class AtenGraph final : public OperationGraph {
 public:
  AtenGraph(std::unique_ptr<at::cuda::CUDAGraph> graph, const char* set_name)
      : graph_(std::move(graph)), set_name_(set_name) {}

  // Replays on the current stream: the legacy default stream, where the set queues its work.
  Status launch() override {
    try {
      graph_->replay();
      return Status::kSuccess;
    } catch (const c10::Error& e) {
      return REE_FAIL(Status::kCudaError, "%s set: launching a recorded graph: %s", set_name_,
                      e.what_without_backtrace());
    }
  }

 private:
  std::unique_ptr<at::cuda::CUDAGraph> graph_;
  const char* set_name_;
};

}  // namespace

bool AtenOperationSet::capturesGraphs() const {
  return device_.isCuda();
}

Status AtenOperationSet::beginGraphCapture() {
  REE_CHECK_ARG(device_.isCuda(), "the %s set on %s does not record graphs", name(),
                device_.str().c_str());
  REE_CHECK_ARG(recorder_ == nullptr || recorder_->graph == nullptr,
                "%s set: a graph capture is already in progress", name());
  return run("beginGraphCapture", [&] {
    if (recorder_ == nullptr) recorder_ = std::make_unique<GraphRecorder>();
    recorder_->stream_guard.emplace(at::cuda::getStreamFromPool(false, aten_device_.index()));
    recorder_->graph = std::make_unique<at::cuda::CUDAGraph>();
    try {
      recorder_->graph->capture_begin(recorder_->pool, cudaStreamCaptureModeThreadLocal);
    } catch (...) {
      recorder_->graph.reset();
      recorder_->stream_guard.reset();
      throw;
    }
  });
}

Status AtenOperationSet::endGraphCapture(std::unique_ptr<OperationGraph>* out) {
  REE_CHECK_ARG(recorder_ != nullptr && recorder_->graph != nullptr,
                "%s set: endGraphCapture without beginGraphCapture", name());
  std::unique_ptr<at::cuda::CUDAGraph> graph = std::move(recorder_->graph);
  Status status = run("endGraphCapture", [&] { graph->capture_end(); });
  recorder_->stream_guard.reset();  // back to the stream the set's other work runs on
  REE_RETURN_IF_ERROR(status);
  *out = std::make_unique<AtenGraph>(std::move(graph), name());
  return Status::kSuccess;
}

#else  // a build without CUDA: no graphs

struct GraphRecorder {};

bool AtenOperationSet::capturesGraphs() const {
  return false;
}
Status AtenOperationSet::beginGraphCapture() {
  return OperationSet::beginGraphCapture();
}
Status AtenOperationSet::endGraphCapture(std::unique_ptr<OperationGraph>* out) {
  return OperationSet::endGraphCapture(out);
}

#endif  // REE_WITH_CUDA

AtenOperationSet::AtenOperationSet(OperationSetKind kind, Device device)
    : kind_(kind),
      device_(device),
      aten_device_(device.isCuda() ? at::Device(at::kCUDA, static_cast<int8_t>(device.index))
                                   : at::Device(at::kCPU)) {}

AtenOperationSet::~AtenOperationSet() = default;

}  // namespace aten_ops
}  // namespace ree

#endif  // REE_WITH_TORCH
