// Internal: MPI machinery shared by the MPI and NCCL stage transports. Host messages are sent
// without waiting for the receiver (MPI_Isend on an owned copy, completed later), and every wait
// polls against the transport's deadline, so a lost or stalled peer becomes an error naming it.
#pragma once

#include <mpi.h>

#include <list>
#include <memory>
#include <string>
#include <vector>

#include "ree/comm/mpi_world.h"
#include "ree/core/status.h"

namespace ree::comm {

class MpiLink {
 public:
  MpiLink(const MpiWorld& world, double timeout_s);
  // Leaks, on purpose, what an aborted link still has in flight (see abandon()).
  ~MpiLink();
  MpiLink(const MpiLink&) = delete;
  MpiLink& operator=(const MpiLink&) = delete;

  // Collective: duplicates MPI_COMM_WORLD (non-blocking, within the deadline).
  Status init();

  int rank() const { return rank_; }
  int size() const { return size_; }
  double timeoutSeconds() const { return timeout_s_; }
  MPI_Comm comm() const { return comm_; }

  Status sendMessage(int peer, int tag, std::vector<uint8_t> bytes);
  Status recvMessage(int peer, int tag, std::vector<uint8_t>* bytes);
  // Raw bytes on the tensor channel; `keep_alive` owns `data` until the send completes.
  Status sendBytes(int peer, const void* data, size_t bytes,
                   std::shared_ptr<const void> keep_alive);
  // `keep_alive` owns `data` should a timed-out receive not be cancellable.
  Status recvBytes(int peer, void* data, size_t bytes, std::shared_ptr<void> keep_alive);
  Status agree(Status local, const std::string& message);
  Status allGather(const std::vector<uint8_t>& mine, std::vector<std::vector<uint8_t>>* all);
  Status flush();
  void abort() { aborted_ = true; }
  bool aborted() const { return aborted_; }

  // Polls per wait before a waiting rank starts sleeping 100 us between polls. CPU stages keep the
  // default (their cores compute); GPU stages use kGpuSpinLimit (tens of ms of yielding).
  static constexpr int kGpuSpinLimit = 100000;
  void setSpinLimit(int polls) { spin_limit_ = polls; }

  // Polls `request` until it completes or the deadline passes (then: kTimeout naming `peer`, or
  // "a peer" when peer < 0, for collectives). On failure the request is still active.
  Status wait(MPI_Request* request, int peer, const char* what);

 private:
  struct Pending {
    MPI_Request request = MPI_REQUEST_NULL;
    int peer = -1;
    std::shared_ptr<const void> keep_alive;
  };
  // Largest piece of one MPI message (MPI counts are ints). A message whose piece is exactly
  // this long continues in the next piece, so a message of any length needs no extra header.
  static constexpr size_t kChunkBytes = size_t{1} << 30;

  // A request that timed out cannot be cancelled (sends, collectives): MPI may still write or
  // read its buffers, so they are kept (and leaked at destruction) instead of freed.
  void abandon(MPI_Request* request, std::shared_ptr<void> buffers);
  Status receiveMessagePiece(int peer, int tag, std::vector<uint8_t>* bytes, size_t* piece);
  Status checkUsable(int peer, const char* what) const;
  Status isend(int peer, int tag, const void* data, size_t bytes,
               std::shared_ptr<const void> keep_alive);
  void reap();
  void idle(int* spins) const;

  int rank_ = 0;
  int size_ = 1;
  double timeout_s_ = 20.0;
  MPI_Comm comm_ = MPI_COMM_NULL;
  bool aborted_ = false;
  int spin_limit_ = 200;
  std::list<Pending> pending_;
  std::list<std::shared_ptr<void>> abandoned_;
};

}  // namespace ree::comm
