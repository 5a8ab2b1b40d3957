// StageTransport over MPI (host messages, collectives, tensors), and the shared MPI machinery the
// NCCL transport uses for its host messages.
#include "mpi_transport.h"

#include "ree/comm/transports.h"

#include <chrono>
#include <climits>
#include <cstring>
#include <thread>

#if defined(REE_WITH_CUDA)
#include <cuda_runtime.h>

#include "ree/core/cuda_check.h"
#endif

namespace ree::comm {
namespace {

using Clock = std::chrono::steady_clock;

// MPI tags: the caller's 0..1023, tensors above.
constexpr int kTensorTag = 4000;

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// "rank R: message", unless the message already starts so (errors relayed from a rank's
// transport name their rank already).
std::string prefixedWithRank(int rank, const std::string& message) {
  std::string prefix = "rank " + std::to_string(rank) + ": ";
  return message.rfind(prefix, 0) == 0 ? message : prefix + message;
}

}  // namespace

MpiLink::MpiLink(const MpiWorld& world, double timeout_s)
    : rank_(world.rank), size_(world.size), timeout_s_(timeout_s) {}

MpiLink::~MpiLink() {
  if (!aborted_) flush();
  if (aborted_) {
    // Sends and collectives that never completed may still touch their buffers and the
    // communicator: leak them rather than free memory MPI may use (the process is ending).
    for (Pending& p : pending_) {
      if (p.request != MPI_REQUEST_NULL) {
        MPI_Request_free(&p.request);
        new std::shared_ptr<const void>(std::move(p.keep_alive));
      }
    }
    if (!abandoned_.empty()) {
      new std::list<std::shared_ptr<void>>(std::move(abandoned_));
      return;
    }
  }
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

Status MpiLink::init() {
  MPI_Request request;
  auto duplicate = std::make_shared<MPI_Comm>(MPI_COMM_NULL);
  if (MPI_Comm_idup(MPI_COMM_WORLD, duplicate.get(), &request) != MPI_SUCCESS) {
    aborted_ = true;
    return REE_FAIL(Status::kCommError, "rank %d: MPI_Comm_idup failed", rank_);
  }
  Status status = wait(&request, -1, "creating the transport's communicator");
  if (status != Status::kSuccess) {
    abandon(&request, duplicate);
    return status;
  }
  comm_ = *duplicate;
  return Status::kSuccess;
}

void MpiLink::abandon(MPI_Request* request, std::shared_ptr<void> buffers) {
  aborted_ = true;
  abandoned_.push_back(std::move(buffers));
  *request = MPI_REQUEST_NULL;  // never waited on again; MPI completes it in the background
}

Status MpiLink::checkUsable(int peer, const char* what) const {
  if (aborted_) {
    return REE_FAIL(Status::kCommError, "rank %d: %s after the transport was aborted", rank_, what);
  }
  if (peer >= size_ || peer < 0 || peer == rank_) {
    return REE_FAIL(Status::kInvalidArgument, "rank %d: %s with bad peer rank %d of %d", rank_,
                    what, peer, size_);
  }
  return Status::kSuccess;
}

Status MpiLink::wait(MPI_Request* request, int peer, const char* what) {
  auto start = Clock::now();
  int spins = 0;
  for (;;) {
    int done = 0;
    if (MPI_Test(request, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
      aborted_ = true;
      return peer < 0 ? REE_FAIL(Status::kCommError, "rank %d: MPI failed while %s", rank_, what)
                      : REE_FAIL(Status::kCommError, "rank %d: MPI failed while %s rank %d", rank_,
                                 what, peer);
    }
    if (done) return Status::kSuccess;
    if (secondsSince(start) > timeout_s_) {
      aborted_ = true;
      if (peer < 0) {
        return REE_FAIL(Status::kTimeout,
                        "rank %d: %s did not complete within %.1f s (--comm-timeout); a peer is "
                        "lost or stalled",
                        rank_, what, timeout_s_);
      }
      return REE_FAIL(Status::kTimeout,
                      "rank %d: %s rank %d (stage %d) did not complete within %.1f s "
                      "(--comm-timeout); the peer is lost or stalled",
                      rank_, what, peer, peer, timeout_s_);
    }
    idle(&spins);
    reap();
  }
}

void MpiLink::idle(int* spins) const {
  // Spin for latency, then sleep so that waiting ranks leave the CPU to computing ones (CPU
  // pipelines often run more ranks than cores; GPU stages spin much longer, see setSpinLimit).
  if (++*spins < spin_limit_) {
    std::this_thread::yield();
  } else {
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

void MpiLink::reap() {
  for (auto it = pending_.begin(); it != pending_.end();) {
    int done = 0;
    MPI_Test(&it->request, &done, MPI_STATUS_IGNORE);
    it = done ? pending_.erase(it) : std::next(it);
  }
}

Status MpiLink::isend(int peer, int tag, const void* data, size_t bytes,
                      std::shared_ptr<const void> keep_alive) {
  // Pieces of kChunkBytes; the receiver knows the total (tensors) or reads on while a piece is
  // full (messages, which therefore end with a shorter piece, possibly empty).
  const char* p = static_cast<const char*>(data);
  size_t offset = 0;
  size_t n = 0;
  do {
    n = std::min(kChunkBytes, bytes - offset);
    Pending pending;
    pending.peer = peer;
    pending.keep_alive = keep_alive;
    if (MPI_Isend(p + offset, static_cast<int>(n), MPI_BYTE, peer, tag, comm_, &pending.request) !=
        MPI_SUCCESS) {
      aborted_ = true;
      return REE_FAIL(Status::kCommError, "rank %d: MPI_Isend of %zu bytes to rank %d failed",
                      rank_, n, peer);
    }
    pending_.push_back(std::move(pending));
    offset += n;
  } while (tag == kTensorTag ? offset < bytes : n == kChunkBytes);
  reap();
  return Status::kSuccess;
}

Status MpiLink::sendMessage(int peer, int tag, std::vector<uint8_t> bytes) {
  REE_RETURN_IF_ERROR(checkUsable(peer, "sendMessage"));
  REE_CHECK_ARG(tag >= 0 && tag < 1024, "sendMessage: tag %d outside 0..1023", tag);
  auto owned = std::make_shared<std::vector<uint8_t>>(std::move(bytes));
  return isend(peer, tag, owned->data(), owned->size(), owned);
}

// Waits for the next piece of a message from `peer` under `tag` and appends it to `bytes`.
Status MpiLink::receiveMessagePiece(int peer, int tag, std::vector<uint8_t>* bytes, size_t* piece) {
  auto start = Clock::now();
  int spins = 0;
  MPI_Message message;
  MPI_Status status;
  for (;;) {
    int ready = 0;
    if (MPI_Improbe(peer, tag, comm_, &ready, &message, &status) != MPI_SUCCESS) {
      aborted_ = true;
      return REE_FAIL(Status::kCommError, "rank %d: MPI_Improbe for rank %d failed", rank_, peer);
    }
    if (ready) break;
    if (secondsSince(start) > timeout_s_) {
      aborted_ = true;
      return REE_FAIL(Status::kTimeout,
                      "rank %d: no message from rank %d (stage %d) within %.1f s (tag %d, "
                      "--comm-timeout); the peer is lost or stalled",
                      rank_, peer, peer, timeout_s_, tag);
    }
    idle(&spins);
    reap();
  }
  int count = 0;
  MPI_Get_count(&status, MPI_BYTE, &count);
  size_t offset = bytes->size();
  bytes->resize(offset + static_cast<size_t>(count));
  // Matched, so no other receive can take it; receiving it non-blocking keeps the deadline even
  // if the sender stalls in the middle of a large (rendezvous) transfer.
  MPI_Request request;
  if (MPI_Imrecv(bytes->data() + offset, count, MPI_BYTE, &message, &request) != MPI_SUCCESS) {
    aborted_ = true;
    return REE_FAIL(Status::kCommError, "rank %d: MPI_Imrecv from rank %d failed", rank_, peer);
  }
  Status waited = wait(&request, peer, "receiving a message from");
  if (waited != Status::kSuccess) {
    // The buffer belongs to the caller: hand MPI a buffer of its own to finish into.
    auto orphan = std::make_shared<std::vector<uint8_t>>(std::move(*bytes));
    abandon(&request, orphan);
    return waited;
  }
  *piece = static_cast<size_t>(count);
  return Status::kSuccess;
}

Status MpiLink::recvMessage(int peer, int tag, std::vector<uint8_t>* bytes) {
  REE_RETURN_IF_ERROR(checkUsable(peer, "recvMessage"));
  REE_CHECK_ARG(bytes != nullptr, "recvMessage: bytes is null");
  REE_CHECK_ARG(tag >= 0 && tag < 1024, "recvMessage: tag %d outside 0..1023", tag);
  bytes->clear();
  size_t piece = 0;
  do {
    REE_RETURN_IF_ERROR(receiveMessagePiece(peer, tag, bytes, &piece));
  } while (piece == kChunkBytes);
  return Status::kSuccess;
}

Status MpiLink::sendBytes(int peer, const void* data, size_t bytes,
                          std::shared_ptr<const void> keep_alive) {
  REE_RETURN_IF_ERROR(checkUsable(peer, "sendTensor"));
  return isend(peer, kTensorTag, data, bytes, std::move(keep_alive));
}

Status MpiLink::recvBytes(int peer, void* data, size_t bytes, std::shared_ptr<void> keep_alive) {
  REE_RETURN_IF_ERROR(checkUsable(peer, "recvTensor"));
  char* p = static_cast<char*>(data);
  size_t offset = 0;
  do {
    size_t n = std::min(kChunkBytes, bytes - offset);
    MPI_Request request;
    if (MPI_Irecv(p + offset, static_cast<int>(n), MPI_BYTE, peer, kTensorTag, comm_, &request) !=
        MPI_SUCCESS) {
      aborted_ = true;
      return REE_FAIL(Status::kCommError, "rank %d: MPI_Irecv from rank %d failed", rank_, peer);
    }
    Status status = wait(&request, peer, "receiving activations from");
    if (status != Status::kSuccess) {
      // Receives can be cancelled unless a transfer has begun; if the cancellation does not
      // complete at once, `keep_alive` keeps the destination valid for MPI.
      MPI_Cancel(&request);
      auto cancelled = Clock::now();
      int done = 0;
      while (!done && secondsSince(cancelled) < 0.1) {
        MPI_Test(&request, &done, MPI_STATUS_IGNORE);
      }
      if (!done) abandon(&request, std::move(keep_alive));
      return status;
    }
    offset += n;
  } while (offset < bytes);
  return Status::kSuccess;
}

Status MpiLink::agree(Status local, const std::string& message) {
  if (aborted_) {
    // No collective after an abort, but a local failure keeps its own message.
    if (local != Status::kSuccess) {
      return setError(local, nullptr, 0, "%s", prefixedWithRank(rank_, message).c_str());
    }
    return REE_FAIL(Status::kCommError, "rank %d: agree after the transport was aborted", rank_);
  }
  struct Buffers {
    int mine = 0;
    std::vector<int> all;
    int length = 0;
    std::string text;
  };
  auto b = std::make_shared<Buffers>();
  b->mine = static_cast<int>(local);
  b->all.resize(size_);
  MPI_Request request;
  MPI_Iallgather(&b->mine, 1, MPI_INT, b->all.data(), 1, MPI_INT, comm_, &request);
  Status status = wait(&request, -1, "agreeing on the outcome of all ranks");
  if (status != Status::kSuccess) {
    abandon(&request, b);
    return status;
  }
  int failing = -1;
  for (int r = 0; r < size_; ++r) {
    if (b->all[r] != 0) {
      failing = r;
      break;
    }
  }
  if (failing < 0) return Status::kSuccess;
  b->text = message;
  b->length = static_cast<int>(b->text.size());
  MPI_Ibcast(&b->length, 1, MPI_INT, failing, comm_, &request);
  status = wait(&request, failing, "receiving the error of");
  if (status == Status::kSuccess) {
    b->text.resize(static_cast<size_t>(b->length));
    MPI_Ibcast(b->text.data(), b->length, MPI_CHAR, failing, comm_, &request);
    status = wait(&request, failing, "receiving the error of");
  }
  if (status != Status::kSuccess) {
    abandon(&request, b);
    return status;
  }
  return setError(static_cast<Status>(b->all[failing]), nullptr, 0, "%s",
                  prefixedWithRank(failing, b->text).c_str());
}

Status MpiLink::allGather(const std::vector<uint8_t>& mine,
                          std::vector<std::vector<uint8_t>>* all) {
  REE_CHECK_ARG(all != nullptr, "allGather: all is null");
  REE_CHECK_ARG(mine.size() <= static_cast<size_t>(INT_MAX), "allGather: %zu bytes (limit 2 GiB)",
                mine.size());
  if (aborted_) return REE_FAIL(Status::kCommError, "rank %d: allGather after abort", rank_);
  struct Buffers {
    std::vector<uint8_t> mine;
    int length = 0;
    std::vector<int> lengths;
    std::vector<int> offsets;
    std::vector<uint8_t> flat;
  };
  auto b = std::make_shared<Buffers>();
  b->mine = mine;
  b->length = static_cast<int>(mine.size());
  b->lengths.resize(size_);
  MPI_Request request;
  MPI_Iallgather(&b->length, 1, MPI_INT, b->lengths.data(), 1, MPI_INT, comm_, &request);
  Status status = wait(&request, -1, "gathering the lengths of all ranks");
  if (status != Status::kSuccess) {
    abandon(&request, b);
    return status;
  }
  b->offsets.resize(size_);
  int64_t total = 0;
  for (int r = 0; r < size_; ++r) {
    b->offsets[r] = static_cast<int>(total);
    total += b->lengths[r];
  }
  if (total > INT_MAX) {
    // Every rank sees the same lengths, so every rank fails here alike.
    return REE_FAIL(Status::kInvalidArgument, "rank %d: allGather of %lld bytes (limit 2 GiB)",
                    rank_, static_cast<long long>(total));
  }
  b->flat.resize(static_cast<size_t>(total));
  MPI_Iallgatherv(b->mine.data(), b->length, MPI_BYTE, b->flat.data(), b->lengths.data(),
                  b->offsets.data(), MPI_BYTE, comm_, &request);
  status = wait(&request, -1, "gathering the bytes of all ranks");
  if (status != Status::kSuccess) {
    abandon(&request, b);
    return status;
  }
  all->assign(size_, {});
  for (int r = 0; r < size_; ++r) {
    auto first = b->flat.begin() + b->offsets[r];
    (*all)[r].assign(first, first + b->lengths[r]);
  }
  return Status::kSuccess;
}

Status MpiLink::flush() {
  // Polls every pending send (any may complete first); the deadline is for the whole flush.
  auto start = Clock::now();
  int spins = 0;
  for (;;) {
    if (aborted_) {
      return REE_FAIL(Status::kCommError, "rank %d: flush after the transport was aborted", rank_);
    }
    reap();
    if (pending_.empty()) return Status::kSuccess;
    if (secondsSince(start) > timeout_s_) {
      aborted_ = true;
      int peer = pending_.front().peer;
      return REE_FAIL(Status::kTimeout,
                      "rank %d: rank %d (stage %d) did not take what this rank sent it within "
                      "%.1f s (--comm-timeout, %zu send(s) pending); the peer is lost or stalled",
                      rank_, peer, peer, timeout_s_, pending_.size());
    }
    idle(&spins);
  }
}

namespace {

class MpiTransport : public StageTransport {
 public:
  MpiTransport(const MpiWorld& world, Device device, double timeout_s)
      : link_(world, timeout_s), device_(device) {
    // A GPU stage's host thread is otherwise idle: poll hard so that a hop costs microseconds.
    if (device.isCuda()) link_.setSpinLimit(MpiLink::kGpuSpinLimit);
  }

  int rank() const override { return link_.rank(); }
  int size() const override { return link_.size(); }
  const char* name() const override { return "mpi"; }
  Device device() const override { return device_; }
  double timeoutSeconds() const override { return link_.timeoutSeconds(); }

  Status sendMessage(int peer, int tag, std::vector<uint8_t> bytes) override {
    return link_.sendMessage(peer, tag, std::move(bytes));
  }
  Status recvMessage(int peer, int tag, std::vector<uint8_t>* bytes) override {
    return link_.recvMessage(peer, tag, bytes);
  }

  Status sendTensor(int peer, const Tensor& tensor) override {
    REE_CHECK_ARG(tensor.device() == device_, "sendTensor: %s is not on this rank's %s",
                  tensor.describe().c_str(), device_.str().c_str());
    if (!device_.isCuda()) {
      auto keep = std::make_shared<Tensor>(tensor);
      return link_.sendBytes(peer, tensor.data(), tensor.nbytes(), keep);
    }
    auto host = std::make_shared<std::vector<uint8_t>>(tensor.nbytes());
    REE_RETURN_IF_ERROR(copyTensor(
        tensor, Tensor::wrap(host->data(), Device::cpu(), tensor.dtype(), tensor.shape())));
    return link_.sendBytes(peer, host->data(), host->size(), host);
  }

  Status recvTensor(int peer, const Tensor& tensor) override {
    REE_CHECK_ARG(tensor.device() == device_, "recvTensor: %s is not on this rank's %s",
                  tensor.describe().c_str(), device_.str().c_str());
    if (!device_.isCuda()) {
      return link_.recvBytes(peer, tensor.data(), tensor.nbytes(),
                             std::make_shared<Tensor>(tensor));
    }
    auto host = std::make_shared<std::vector<uint8_t>>(tensor.nbytes());
    REE_RETURN_IF_ERROR(link_.recvBytes(peer, host->data(), host->size(), host));
    REE_RETURN_IF_ERROR(copyTensor(
        Tensor::wrap(host->data(), Device::cpu(), tensor.dtype(), tensor.shape()), tensor));
#if defined(REE_WITH_CUDA)
    // The copy is ordered on the legacy default stream; the contract is "bytes in place", for
    // callers computing on non-blocking streams too.
    REE_CUDA_CHECK_MSG(cudaStreamSynchronize(nullptr), "rank %d: recvTensor: copy to %s", rank(),
                       tensor.describe().c_str());
#endif
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
    return link_.flush();
  }
  void abort() override {
    link_.abort();
  }

  MpiLink& link() {
    return link_;
  }

 private:
  MpiLink link_;
  Device device_;
};

}  // namespace

Status createMpiTransport(const MpiWorld& world, Device device, double timeout_s,
                          std::unique_ptr<StageTransport>* out) {
  REE_CHECK_ARG(out != nullptr, "createMpiTransport: out is null");
  REE_CHECK_ARG(timeout_s > 0, "createMpiTransport: timeout %g s", timeout_s);
  int initialized = 0;
  MPI_Initialized(&initialized);
  REE_CHECK_ARG(initialized, "createMpiTransport: MPI is not initialised (call initMpi)");
  REE_CHECK_ARG(world.size >= 1 && world.rank >= 0 && world.rank < world.size,
                "createMpiTransport: rank %d of %d", world.rank, world.size);
  auto transport = std::make_unique<MpiTransport>(world, device, timeout_s);
  REE_RETURN_IF_ERROR(transport->link().init());
  *out = std::move(transport);
  return Status::kSuccess;
}

}  // namespace ree::comm
