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
#include "ree/kernels/status.h"

namespace ree::comm {

class MpiLink {
 public:
  MpiLink(const MpiWorld& world, double timeout_s);
  ~MpiLink();
  MpiLink(const MpiLink&) = delete;
  MpiLink& operator=(const MpiLink&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  double timeoutSeconds() const { return timeout_s_; }
  MPI_Comm comm() const { return comm_; }

  Status sendMessage(int peer, int tag, std::vector<uint8_t> bytes);
  Status recvMessage(int peer, int tag, std::vector<uint8_t>* bytes);
  // Raw bytes on the tensor channel; `keep_alive` owns `data` until the send completes.
  Status sendBytes(int peer, const void* data, size_t bytes,
                   std::shared_ptr<const void> keep_alive);
  Status recvBytes(int peer, void* data, size_t bytes);
  Status agree(Status local, const std::string& message);
  Status allGather(const std::vector<uint8_t>& mine, std::vector<std::vector<uint8_t>>* all);
  Status flush();
  void abort() { aborted_ = true; }
  bool aborted() const { return aborted_; }

  // Polls `request` until it completes or the deadline passes (then: kTimeout naming `peer`).
  Status wait(MPI_Request* request, int peer, const char* what);

 private:
  struct Pending {
    MPI_Request request = MPI_REQUEST_NULL;
    std::shared_ptr<const void> keep_alive;
  };
  Status checkUsable(int peer, const char* what) const;
  Status isend(int peer, int tag, const void* data, size_t bytes,
               std::shared_ptr<const void> keep_alive);
  void reap();
  static void idle(int* spins);

  int rank_ = 0;
  int size_ = 1;
  double timeout_s_ = 20.0;
  MPI_Comm comm_ = MPI_COMM_NULL;
  bool aborted_ = false;
  std::list<Pending> pending_;
};

}  // namespace ree::comm
