// NCCL point-to-point between the ranks of an MPI world, one GPU per rank.
//
// NCCL has no operation timeout, so every wait here polls the stream and
// ncclCommGetAsyncError against a deadline and aborts the communicator when it passes; the
// error then names the operation, the peer rank and the deadline.
#pragma once

#include <cstddef>

#include "ree/comm/mpi_world.h"
#include "ree/core/status.h"
#include "ree/kernels/numeric.h"

namespace ree::comm {

class NcclPeer {
 public:
  NcclPeer() = default;
  ~NcclPeer();
  NcclPeer(const NcclPeer&) = delete;
  NcclPeer& operator=(const NcclPeer&) = delete;

  // Collective over MPI_COMM_WORLD: rank 0 creates the unique id, MPI broadcasts it, every rank
  // initialises a non-blocking NCCL communicator on `device` within `timeout_s` seconds.
  Status init(const MpiWorld& world, int device, double timeout_s);

  // Enqueue a send/receive of `bytes` raw bytes on `stream` (bitwise transport).
  Status send(const void* buffer, size_t bytes, int peer, cudaStream_t stream);
  Status recv(void* buffer, size_t bytes, int peer, cudaStream_t stream);

  // Waits until `stream` is idle; aborts the communicator and fails after `timeout_s` seconds or
  // on an asynchronous NCCL error. `what` names the operation in the error message.
  Status wait(cudaStream_t stream, double timeout_s, const char* what);

  // Aborts the communicator (safe to call more than once).
  void abort();

 private:
  void* comm_ = nullptr;  // ncclComm_t, kept opaque so this header needs no nccl.h
  int rank_ = 0;
  int size_ = 0;
};

}  // namespace ree::comm
