// StageTransport with GPU-to-GPU activations over NCCL. Each pipeline link (stage r -> r+1) has a
// two-rank communicator of its own, so a stage's receive from upstream and its send downstream
// never queue behind each other; host messages and collectives go over MPI (MpiLink).
#include "ree/comm/transports.h"

#if defined(REE_WITH_NCCL)
#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <list>
#include <string>
#include <thread>

#include "mpi_transport.h"
#include "ree/core/cuda_check.h"
#endif

namespace ree::comm {

#if !defined(REE_WITH_NCCL)

bool ncclTransportAvailable() {
  return false;
}

Status createNcclTransport(const MpiWorld&, int, double, std::unique_ptr<StageTransport>*) {
  return REE_FAIL(Status::kUnsupported,
                  "--transport nccl: this build has no NCCL (use --transport mpi)");
}

#else

bool ncclTransportAvailable() {
  return true;
}

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kUniqueIdTag = 1000;  // a link's NCCL unique id, stage r -> r+1, over MPI

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

class NcclTransport : public StageTransport {
 public:
  NcclTransport(const MpiWorld& world, int gpu, double timeout_s)
      : link_(world, timeout_s), gpu_(gpu) {
    link_.setSpinLimit(MpiLink::kGpuSpinLimit);  // a GPU stage's host thread is otherwise idle
  }

  ~NcclTransport() override {
    if (!link_.aborted() && !nccl_aborted_) flush();
    destroyComm(&send_comm_);
    destroyComm(&recv_comm_);
    for (Pending& p : pending_)
      cudaEventDestroy(p.done);
    for (Pending& p : receiving_)
      cudaEventDestroy(p.done);
    if (send_stream_ != nullptr) cudaStreamDestroy(send_stream_);
    if (recv_stream_ != nullptr) cudaStreamDestroy(recv_stream_);
    if (legacy_done_ != nullptr) cudaEventDestroy(legacy_done_);
  }

  Status init() {
    REE_RETURN_IF_ERROR(link_.init());
    REE_RETURN_IF_ERROR(cuda(cudaSetDevice(gpu_), "cudaSetDevice"));
    REE_RETURN_IF_ERROR(
        cuda(cudaStreamCreateWithFlags(&send_stream_, cudaStreamNonBlocking), "cudaStreamCreate"));
    REE_RETURN_IF_ERROR(
        cuda(cudaStreamCreateWithFlags(&recv_stream_, cudaStreamNonBlocking), "cudaStreamCreate"));
    REE_RETURN_IF_ERROR(
        cuda(cudaEventCreateWithFlags(&legacy_done_, cudaEventDisableTiming), "cudaEventCreate"));
    int r = rank(), n = size();
    // Link r -> r+1: this rank creates its id and hands it downstream over MPI.
    ncclUniqueId send_id{}, recv_id{};
    if (r + 1 < n) {
      REE_RETURN_IF_ERROR(nccl(ncclGetUniqueId(&send_id), "ncclGetUniqueId"));
      std::vector<uint8_t> bytes(sizeof(send_id));
      std::memcpy(bytes.data(), &send_id, sizeof(send_id));
      REE_RETURN_IF_ERROR(link_.sendMessage(r + 1, kUniqueIdTag, std::move(bytes)));
    }
    if (r > 0) {
      std::vector<uint8_t> bytes;
      REE_RETURN_IF_ERROR(link_.recvMessage(r - 1, kUniqueIdTag, &bytes));
      if (bytes.size() != sizeof(recv_id)) {
        return REE_FAIL(Status::kCommError, "rank %d: bad NCCL id from rank %d", r, r - 1);
      }
      std::memcpy(&recv_id, bytes.data(), sizeof(recv_id));
    }
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;  // init and operations return at once; we poll against the deadline
    ncclGroupStart();
    if (r > 0) {
      ncclResult_t rc = ncclCommInitRankConfig(&recv_comm_, 2, recv_id, 1, &config);
      if (rc != ncclSuccess && rc != ncclInProgress) {
        ncclGroupEnd();
        return ncclFailure(rc, "ncclCommInitRankConfig (link from rank %d)", r - 1);
      }
    }
    if (r + 1 < n) {
      ncclResult_t rc = ncclCommInitRankConfig(&send_comm_, 2, send_id, 0, &config);
      if (rc != ncclSuccess && rc != ncclInProgress) {
        ncclGroupEnd();
        return ncclFailure(rc, "ncclCommInitRankConfig (link to rank %d)", r + 1);
      }
    }
    ncclResult_t rc = ncclGroupEnd();
    if (rc != ncclSuccess && rc != ncclInProgress) return ncclFailure(rc, "ncclGroupEnd (init)");
    REE_RETURN_IF_ERROR(settle(recv_comm_, r - 1, "initialising the NCCL link from"));
    REE_RETURN_IF_ERROR(settle(send_comm_, r + 1, "initialising the NCCL link to"));
    // Warm-up: connect every link now (NCCL connects lazily on the first transfer).
    // Separate buffers: the send and the receive run concurrently on two streams.
    Tensor outgoing, incoming;
    REE_RETURN_IF_ERROR(Tensor::zeros(Device::cuda(gpu_), DType::kF32, {256}, &outgoing));
    REE_RETURN_IF_ERROR(Tensor::zeros(Device::cuda(gpu_), DType::kF32, {256}, &incoming));
    if (r + 1 < n) REE_RETURN_IF_ERROR(sendTensor(r + 1, outgoing));
    if (r > 0) REE_RETURN_IF_ERROR(recvTensor(r - 1, incoming));
    REE_RETURN_IF_ERROR(flush());
    return link_.agree(Status::kSuccess, "");
  }

  int rank() const override { return link_.rank(); }
  int size() const override { return link_.size(); }
  const char* name() const override { return "nccl"; }
  Device device() const override { return Device::cuda(gpu_); }
  double timeoutSeconds() const override { return link_.timeoutSeconds(); }

  Status sendMessage(int peer, int tag, std::vector<uint8_t> bytes) override {
    reap();
    return link_.sendMessage(peer, tag, std::move(bytes));
  }
  Status recvMessage(int peer, int tag, std::vector<uint8_t>* bytes) override {
    reap();
    return link_.recvMessage(peer, tag, bytes);
  }

  Status sendTensor(int peer, const Tensor& tensor) override {
    REE_RETURN_IF_ERROR(checkTensor(tensor, peer, rank() + 1, "sendTensor"));
    reap();
    REE_RETURN_IF_ERROR(afterLegacyStream(send_stream_));
    REE_RETURN_IF_ERROR(
        nccl(ncclSend(tensor.data(), tensor.nbytes(), ncclUint8, 1, send_comm_, send_stream_),
             "ncclSend"));
    REE_RETURN_IF_ERROR(settle(send_comm_, peer, "enqueueing a send to"));
    Pending pending;
    pending.tensor = tensor;
    REE_RETURN_IF_ERROR(
        cuda(cudaEventCreateWithFlags(&pending.done, cudaEventDisableTiming), "cudaEventCreate"));
    REE_RETURN_IF_ERROR(cuda(cudaEventRecord(pending.done, send_stream_), "cudaEventRecord"));
    pending_.push_back(std::move(pending));
    return Status::kSuccess;
  }

  Status recvTensor(int peer, const Tensor& tensor) override {
    REE_RETURN_IF_ERROR(recvTensorQueued(peer, tensor));
    return awaitReceives();
  }

  // The receive runs on the transport's stream; the legacy stream waits for it, and with it every
  // blocking stream's later work (an operation set's kernels), so the host can queue the stage's
  // compute right away instead of waiting for the bytes and then for its first kernel to launch.
  Status recvTensorQueued(int peer, const Tensor& tensor) override {
    REE_RETURN_IF_ERROR(checkTensor(tensor, peer, rank() - 1, "recvTensor"));
    reap();
    REE_RETURN_IF_ERROR(afterLegacyStream(recv_stream_));
    REE_RETURN_IF_ERROR(
        nccl(ncclRecv(tensor.data(), tensor.nbytes(), ncclUint8, 0, recv_comm_, recv_stream_),
             "ncclRecv"));
    REE_RETURN_IF_ERROR(settle(recv_comm_, peer, "enqueueing a receive from"));
    Pending pending;
    pending.tensor = tensor;
    REE_RETURN_IF_ERROR(
        cuda(cudaEventCreateWithFlags(&pending.done, cudaEventDisableTiming), "cudaEventCreate"));
    Status status = cuda(cudaEventRecord(pending.done, recv_stream_), "cudaEventRecord");
    if (status == Status::kSuccess) {
      status = cuda(cudaStreamWaitEvent(cudaStreamLegacy, pending.done, 0), "cudaStreamWaitEvent");
    }
    if (status != Status::kSuccess) {
      cudaEventDestroy(pending.done);
      return status;
    }
    receiving_.push_back(std::move(pending));
    return Status::kSuccess;
  }

  bool queuesReceives() const override { return true; }

  Status awaitReceives() override {
    const int peer = rank() - 1;
    auto start = Clock::now();
    int spins = 0;
    while (!receiving_.empty()) {
      cudaError_t query = cudaEventQuery(receiving_.front().done);
      if (query == cudaSuccess) {
        cudaEventDestroy(receiving_.front().done);
        receiving_.pop_front();
        continue;
      }
      if (query != cudaErrorNotReady) return cuda(query, "receiving activations");
      REE_RETURN_IF_ERROR(asyncError(recv_comm_, peer));
      if (secondsSince(start) > timeoutSeconds()) {
        abort();
        return REE_FAIL(Status::kTimeout,
                        "rank %d: no activations from rank %d (stage %d) within %.1f s over NCCL "
                        "(--comm-timeout); the peer is lost or stalled",
                        rank(), peer, peer, timeoutSeconds());
      }
      idle(&spins);
    }
    return Status::kSuccess;
  }

  Status agree(Status local, const std::string& message) override {
    return link_.agree(local, message);
  }
  Status allGather(const std::vector<uint8_t>& mine,
                   std::vector<std::vector<uint8_t>>* all) override {
    return link_.allGather(mine, all);
  }

  Status flush() override {
    auto start = Clock::now();
    int spins = 0;
    while (!pending_.empty()) {
      cudaError_t query = cudaEventQuery(pending_.front().done);
      if (query == cudaSuccess) {
        cudaEventDestroy(pending_.front().done);
        pending_.pop_front();
        continue;
      }
      if (query != cudaErrorNotReady) return cuda(query, "completing a send");
      REE_RETURN_IF_ERROR(asyncError(send_comm_, rank() + 1));
      if (secondsSince(start) > timeoutSeconds()) {
        abort();
        return REE_FAIL(Status::kTimeout,
                        "rank %d: rank %d (stage %d) did not take the activations sent to it "
                        "within %.1f s (--comm-timeout); the peer is lost or stalled",
                        rank(), rank() + 1, rank() + 1, timeoutSeconds());
      }
      idle(&spins);
    }
    return link_.flush();
  }

  void abort() override {
    abortNccl();
    link_.abort();
  }

  // After an NCCL error: the NCCL links are gone (tensor calls fail fast) but MPI still works,
  // so that the error can be relayed to the other ranks with agree().
  void abortNccl() {
    if (send_comm_ != nullptr) ncclCommAbort(send_comm_);
    if (recv_comm_ != nullptr) ncclCommAbort(recv_comm_);
    send_comm_ = nullptr;
    recv_comm_ = nullptr;
    nccl_aborted_ = true;
  }

 private:
  struct Pending {
    Tensor tensor;  // keeps the storage alive until the transfer completes
    cudaEvent_t done = nullptr;
  };

  Status checkTensor(const Tensor& tensor, int peer, int expected, const char* what) const {
    if (link_.aborted() || nccl_aborted_) {
      return REE_FAIL(Status::kCommError, "rank %d: %s after the transport was aborted", rank(),
                      what);
    }
    if (peer != expected || peer < 0 || peer >= size()) {
      return REE_FAIL(Status::kInvalidArgument,
                      "rank %d: %s with rank %d; the NCCL transport links neighbouring stages only",
                      rank(), what, peer);
    }
    if (tensor.device() != Device::cuda(gpu_)) {
      return REE_FAIL(Status::kInvalidArgument, "rank %d: %s: %s is not on cuda:%d", rank(), what,
                      tensor.describe().c_str(), gpu_);
    }
    return Status::kSuccess;
  }

  // Orders `stream` after the work queued so far on the legacy default stream: tensors are
  // allocated in that stream's order (Tensor::empty), and the compute that produced or last read
  // a tensor is ordered with it, so the transfer never touches memory before it is ready or while
  // an earlier user of the same pool block still reads it.
  Status afterLegacyStream(cudaStream_t stream) {
    REE_RETURN_IF_ERROR(cuda(cudaEventRecord(legacy_done_, cudaStreamLegacy), "cudaEventRecord"));
    return cuda(cudaStreamWaitEvent(stream, legacy_done_, 0), "cudaStreamWaitEvent");
  }

  // Reaps completed sends and queued receives (their tensors' references are dropped).
  void reap() {
    for (std::list<Pending>* list : {&pending_, &receiving_}) {
      while (!list->empty() && cudaEventQuery(list->front().done) == cudaSuccess) {
        cudaEventDestroy(list->front().done);
        list->pop_front();
      }
    }
  }

  // A non-blocking communicator's call may still be in progress: poll until it is not.
  Status settle(ncclComm_t comm, int peer, const char* what) {
    if (comm == nullptr) return Status::kSuccess;
    auto start = Clock::now();
    int spins = 0;
    for (;;) {
      ncclResult_t state = ncclSuccess;
      ncclCommGetAsyncError(comm, &state);
      if (state == ncclSuccess) return Status::kSuccess;
      if (state != ncclInProgress) {
        abortNccl();
        return REE_FAIL(Status::kCommError, "rank %d: %s rank %d: NCCL error %s", rank(), what,
                        peer, ncclGetErrorString(state));
      }
      if (secondsSince(start) > timeoutSeconds()) {
        abort();
        return REE_FAIL(Status::kTimeout,
                        "rank %d: %s rank %d (stage %d) did not finish within %.1f s "
                        "(--comm-timeout); the peer is lost or stalled",
                        rank(), what, peer, peer, timeoutSeconds());
      }
      idle(&spins);
    }
  }

  Status asyncError(ncclComm_t comm, int peer) {
    if (comm == nullptr) return Status::kSuccess;
    ncclResult_t state = ncclSuccess;
    ncclCommGetAsyncError(comm, &state);
    if (state != ncclSuccess && state != ncclInProgress) {
      abortNccl();
      return REE_FAIL(Status::kCommError, "rank %d: NCCL link with rank %d failed: %s", rank(),
                      peer, ncclGetErrorString(state));
    }
    return Status::kSuccess;
  }

  static void idle(int* spins) {
    if (++*spins < MpiLink::kGpuSpinLimit) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  Status cuda(cudaError_t rc, const char* what) {
    REE_CUDA_CHECK_MSG(rc, "rank %d: %s", rank(), what);
    return Status::kSuccess;
  }
  Status nccl(ncclResult_t rc, const char* what) {
    if (rc == ncclSuccess || rc == ncclInProgress) return Status::kSuccess;
    return ncclFailure(rc, "%s", what);
  }
  template <typename... Args>
  Status ncclFailure(ncclResult_t rc, const char* format, Args... args) {
    char what[256];
    std::snprintf(what, sizeof(what), format, args...);
    abortNccl();
    return REE_FAIL(Status::kCommError, "rank %d: %s failed: %s", rank(), what,
                    ncclGetErrorString(rc));
  }

  void destroyComm(ncclComm_t* comm) {
    if (*comm == nullptr) return;
    ncclCommFinalize(*comm);
    auto start = Clock::now();
    ncclResult_t state = ncclInProgress;
    while (state == ncclInProgress && secondsSince(start) < timeoutSeconds()) {
      ncclCommGetAsyncError(*comm, &state);
      std::this_thread::yield();
    }
    if (state == ncclSuccess) {
      ncclCommDestroy(*comm);
    } else {
      ncclCommAbort(*comm);
    }
    *comm = nullptr;
  }

  MpiLink link_;
  int gpu_ = 0;
  ncclComm_t send_comm_ = nullptr;  // link rank -> rank + 1 (this rank is 0 in it)
  ncclComm_t recv_comm_ = nullptr;  // link rank - 1 -> rank (this rank is 1 in it)
  cudaStream_t send_stream_ = nullptr;
  cudaStream_t recv_stream_ = nullptr;
  cudaEvent_t legacy_done_ = nullptr;
  std::list<Pending> pending_;    // sends not yet known to be complete
  std::list<Pending> receiving_;  // receives queued by recvTensorQueued, same
  bool nccl_aborted_ = false;
};

}  // namespace

Status createNcclTransport(const MpiWorld& world, int gpu, double timeout_s,
                           std::unique_ptr<StageTransport>* out) {
  REE_CHECK_ARG(out != nullptr, "createNcclTransport: out is null");
  REE_CHECK_ARG(timeout_s > 0, "createNcclTransport: timeout %g s", timeout_s);
  auto transport = std::make_unique<NcclTransport>(world, gpu, timeout_s);
  Status status = transport->init();
  // Every rank learns whether every link came up, so none is left waiting for a broken one.
  if (status != Status::kSuccess && status != Status::kTimeout) {
    std::string message = lastErrorMessage();
    REE_RETURN_IF_ERROR(transport->agree(status, message));
  }
  REE_RETURN_IF_ERROR(status);
  *out = std::move(transport);
  return Status::kSuccess;
}

#endif

}  // namespace ree::comm
