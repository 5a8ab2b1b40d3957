#include "ree/comm/nccl_peer.h"

#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <chrono>
#include <thread>

#include "ree/core/cuda_check.h"

namespace ree::comm {
namespace {

using Clock = std::chrono::steady_clock;

ncclComm_t asComm(void* comm) {
  return static_cast<ncclComm_t>(comm);
}

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

// Every NCCL/CUDA failure of a peer names the call and this rank.
#define REE_NCCL_CHECK(call) REE_NCCL_CHECK_MSG(call, "%s on rank %d", #call, rank_)
#define REE_CUDA_CALL(call) REE_CUDA_CHECK_MSG(call, "%s on rank %d", #call, rank_)

NcclPeer::~NcclPeer() {
  if (comm_ != nullptr) {
    ncclCommFinalize(asComm(comm_));
    ncclCommDestroy(asComm(comm_));
    comm_ = nullptr;
  }
}

void NcclPeer::abort() {
  if (comm_ != nullptr) {
    ncclCommAbort(asComm(comm_));
    comm_ = nullptr;
  }
}

Status NcclPeer::init(const MpiWorld& world, int device, double timeout_s) {
  rank_ = world.rank;
  size_ = world.size;
  REE_CHECK_ARG(comm_ == nullptr, "NcclPeer::init called twice on rank %d", rank_);
  REE_CUDA_CALL(cudaSetDevice(device));
  ncclUniqueId id;
  if (world.rank == 0) REE_NCCL_CHECK(ncclGetUniqueId(&id));
  if (MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD) != MPI_SUCCESS) {
    return REE_FAIL(Status::kCommError, "MPI_Bcast of the NCCL unique id failed on rank %d", rank_);
  }
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // lets us poll against a deadline instead of hanging
  ncclComm_t comm = nullptr;
  REE_NCCL_CHECK(ncclCommInitRankConfig(&comm, world.size, id, world.rank, &config));
  comm_ = comm;
  auto start = Clock::now();
  for (;;) {
    ncclResult_t state = ncclSuccess;
    REE_NCCL_CHECK(ncclCommGetAsyncError(comm, &state));
    if (state == ncclSuccess) break;
    if (state != ncclInProgress) {
      abort();
      return REE_FAIL(Status::kCommError, "NCCL communicator init failed on rank %d: %s", rank_,
                      ncclGetErrorString(state));
    }
    if (secondsSince(start) > timeout_s) {
      abort();
      return REE_FAIL(Status::kTimeout,
                      "NCCL communicator init did not finish within %.1f s on rank %d "
                      "(a peer rank is missing or stalled)",
                      timeout_s, rank_);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return Status::kSuccess;
}

Status NcclPeer::send(const void* buffer, size_t bytes, int peer, cudaStream_t stream) {
  REE_CHECK_ARG(comm_ != nullptr, "NcclPeer::send before init on rank %d", rank_);
  REE_CHECK_ARG(peer >= 0 && peer < size_ && peer != rank_,
                "NcclPeer::send: bad peer %d from rank %d of %d", peer, rank_, size_);
  REE_NCCL_CHECK(ncclSend(buffer, bytes, ncclUint8, peer, asComm(comm_), stream));
  return Status::kSuccess;
}

Status NcclPeer::recv(void* buffer, size_t bytes, int peer, cudaStream_t stream) {
  REE_CHECK_ARG(comm_ != nullptr, "NcclPeer::recv before init on rank %d", rank_);
  REE_CHECK_ARG(peer >= 0 && peer < size_ && peer != rank_,
                "NcclPeer::recv: bad peer %d from rank %d of %d", peer, rank_, size_);
  REE_NCCL_CHECK(ncclRecv(buffer, bytes, ncclUint8, peer, asComm(comm_), stream));
  return Status::kSuccess;
}

Status NcclPeer::wait(cudaStream_t stream, double timeout_s, const char* what) {
  REE_CHECK_ARG(comm_ != nullptr, "NcclPeer::wait before init on rank %d", rank_);
  auto start = Clock::now();
  // On a non-blocking communicator ncclSend/ncclRecv may return ncclInProgress: the operation is
  // only on the stream once the async state leaves ncclInProgress, so poll that first.
  for (;;) {
    ncclResult_t state = ncclSuccess;
    ncclCommGetAsyncError(asComm(comm_), &state);
    if (state == ncclSuccess) break;
    if (state != ncclInProgress) {
      abort();
      return REE_FAIL(Status::kCommError, "%s on rank %d: NCCL error %s", what, rank_,
                      ncclGetErrorString(state));
    }
    if (secondsSince(start) > timeout_s) {
      abort();
      return REE_FAIL(Status::kTimeout, "%s on rank %d was not enqueued within %.1f s", what, rank_,
                      timeout_s);
    }
    std::this_thread::yield();
  }
  for (;;) {
    cudaError_t query = cudaStreamQuery(stream);
    if (query == cudaSuccess) return Status::kSuccess;
    if (query != cudaErrorNotReady) {
      abort();
      return REE_FAIL(Status::kCudaError, "%s on rank %d: %s", what, rank_,
                      cudaGetErrorString(query));
    }
    ncclResult_t state = ncclSuccess;
    ncclCommGetAsyncError(asComm(comm_), &state);
    if (state != ncclSuccess && state != ncclInProgress) {
      abort();
      return REE_FAIL(Status::kCommError, "%s on rank %d: NCCL error %s", what, rank_,
                      ncclGetErrorString(state));
    }
    if (secondsSince(start) > timeout_s) {
      abort();
      return REE_FAIL(Status::kTimeout, "%s on rank %d did not complete within %.1f s", what, rank_,
                      timeout_s);
    }
    std::this_thread::yield();
  }
}

}  // namespace ree::comm
