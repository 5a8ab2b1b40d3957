// CUDA graphs recorded from a stream (see stream_graph.h).
#if defined(REE_WITH_CUDA)

#include "stream_graph.h"

#include "ree/core/cuda_check.h"

namespace ree {
namespace {

class StreamGraph final : public OperationGraph {
 public:
  StreamGraph(cudaGraphExec_t exec, cudaStream_t stream) : exec_(exec), stream_(stream) {}
  ~StreamGraph() override { cudaGraphExecDestroy(exec_); }
  StreamGraph(const StreamGraph&) = delete;
  StreamGraph& operator=(const StreamGraph&) = delete;

  Status launch() override {
    REE_CUDA_CHECK(cudaGraphLaunch(exec_, stream_));
    return Status::kSuccess;
  }

 private:
  cudaGraphExec_t exec_;
  cudaStream_t stream_;
};

}  // namespace

Status beginStreamCapture(cudaStream_t stream, const char* owner) {
  REE_CUDA_CHECK_MSG(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal),
                     "%s: starting a graph capture", owner);
  return Status::kSuccess;
}

Status endStreamCapture(cudaStream_t stream, const char* owner,
                        std::unique_ptr<OperationGraph>* out) {
  cudaGraph_t graph = nullptr;
  REE_CUDA_CHECK_MSG(cudaStreamEndCapture(stream, &graph), "%s: ending a graph capture", owner);
  cudaGraphExec_t exec = nullptr;
  const cudaError_t err = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);  // the executable graph keeps what it needs
  REE_CUDA_CHECK_MSG(err, "%s: instantiating a recorded graph", owner);
  *out = std::make_unique<StreamGraph>(exec, stream);
  return Status::kSuccess;
}

}  // namespace ree

#endif  // REE_WITH_CUDA
