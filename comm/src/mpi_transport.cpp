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
#endif

namespace ree::comm {
namespace {

using Clock = std::chrono::steady_clock;

// MPI tags: the caller's 0..1023, tensors above.
constexpr int kTensorTag = 4000;
// MPI counts are ints: large buffers go as several messages.
constexpr size_t kChunkBytes = size_t{1} << 30;

}  // namespace

MpiLink::MpiLink(const MpiWorld& world, double timeout_s)
    : rank_(world.rank), size_(world.size), timeout_s_(timeout_s) {
  MPI_Comm_dup(MPI_COMM_WORLD, &comm_);
}

MpiLink::~MpiLink() {
  if (!aborted_) flush();
  for (Pending& p : pending_) {
    if (p.request != MPI_REQUEST_NULL) {
      MPI_Cancel(&p.request);
      MPI_Request_free(&p.request);
    }
  }
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
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
      return REE_FAIL(Status::kCommError, "rank %d: MPI failed while %s rank %d", rank_, what,
                      peer);
    }
    if (done) return Status::kSuccess;
    double waited = std::chrono::duration<double>(Clock::now() - start).count();
    if (waited > timeout_s_) {
      aborted_ = true;
      return REE_FAIL(Status::kTimeout,
                      "rank %d: %s rank %d (stage %d) did not complete within %.1f s "
                      "(--comm-timeout); the peer is lost or stalled",
                      rank_, what, peer, peer, timeout_s_);
    }
    idle(&spins);
    reap();
  }
}

void MpiLink::idle(int* spins) {
  // Spin briefly for latency, then sleep so that waiting ranks leave the CPU to computing ones
  // (CPU pipelines often run more ranks than cores).
  if (++*spins < 200) {
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
  const char* p = static_cast<const char*>(data);
  size_t offset = 0;
  do {
    size_t n = std::min(kChunkBytes, bytes - offset);
    Pending pending;
    pending.keep_alive = keep_alive;
    if (MPI_Isend(p + offset, static_cast<int>(n), MPI_BYTE, peer, tag, comm_, &pending.request) !=
        MPI_SUCCESS) {
      aborted_ = true;
      return REE_FAIL(Status::kCommError, "rank %d: MPI_Isend of %zu bytes to rank %d failed",
                      rank_, n, peer);
    }
    pending_.push_back(std::move(pending));
    offset += n;
  } while (offset < bytes);
  reap();
  return Status::kSuccess;
}

Status MpiLink::sendMessage(int peer, int tag, std::vector<uint8_t> bytes) {
  REE_RETURN_IF_ERROR(checkUsable(peer, "sendMessage"));
  REE_CHECK_ARG(tag >= 0 && tag < 1024, "sendMessage: tag %d outside 0..1023", tag);
  auto owned = std::make_shared<std::vector<uint8_t>>(std::move(bytes));
  return isend(peer, tag, owned->data(), owned->size(), owned);
}

Status MpiLink::recvMessage(int peer, int tag, std::vector<uint8_t>* bytes) {
  REE_RETURN_IF_ERROR(checkUsable(peer, "recvMessage"));
  REE_CHECK_ARG(bytes != nullptr, "recvMessage: bytes is null");
  auto start = Clock::now();
  int spins = 0;
  MPI_Status status;
  for (;;) {
    int ready = 0;
    if (MPI_Iprobe(peer, tag, comm_, &ready, &status) != MPI_SUCCESS) {
      aborted_ = true;
      return REE_FAIL(Status::kCommError, "rank %d: MPI_Iprobe for rank %d failed", rank_, peer);
    }
    if (ready) break;
    double waited = std::chrono::duration<double>(Clock::now() - start).count();
    if (waited > timeout_s_) {
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
  bytes->resize(static_cast<size_t>(count));
  if (MPI_Recv(bytes->data(), count, MPI_BYTE, peer, tag, comm_, MPI_STATUS_IGNORE) !=
      MPI_SUCCESS) {
    aborted_ = true;
    return REE_FAIL(Status::kCommError, "rank %d: MPI_Recv from rank %d failed", rank_, peer);
  }
  return Status::kSuccess;
}

Status MpiLink::sendBytes(int peer, const void* data, size_t bytes,
                          std::shared_ptr<const void> keep_alive) {
  REE_RETURN_IF_ERROR(checkUsable(peer, "sendTensor"));
  return isend(peer, kTensorTag, data, bytes, std::move(keep_alive));
}

Status MpiLink::recvBytes(int peer, void* data, size_t bytes) {
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
      MPI_Cancel(&request);
      MPI_Request_free(&request);
      return status;
    }
    offset += n;
  } while (offset < bytes);
  return Status::kSuccess;
}

Status MpiLink::agree(Status local, const std::string& message) {
  if (aborted_) return REE_FAIL(Status::kCommError, "rank %d: agree after abort", rank_);
  int mine = static_cast<int>(local);
  std::vector<int> all(size_);
  MPI_Request request;
  MPI_Iallgather(&mine, 1, MPI_INT, all.data(), 1, MPI_INT, comm_, &request);
  REE_RETURN_IF_ERROR(wait(&request, 0, "agreeing on the outcome with"));
  int failing = -1;
  for (int r = 0; r < size_; ++r) {
    if (all[r] != 0) {
      failing = r;
      break;
    }
  }
  if (failing < 0) return Status::kSuccess;
  std::string text = message;
  int length = static_cast<int>(text.size());
  MPI_Ibcast(&length, 1, MPI_INT, failing, comm_, &request);
  REE_RETURN_IF_ERROR(wait(&request, failing, "receiving the error of"));
  text.resize(static_cast<size_t>(length));
  MPI_Ibcast(text.data(), length, MPI_CHAR, failing, comm_, &request);
  REE_RETURN_IF_ERROR(wait(&request, failing, "receiving the error of"));
  // The failing rank's message already names its origin; every rank reports it verbatim.
  return setError(static_cast<Status>(all[failing]), nullptr, 0, "rank %d: %s", failing,
                  text.c_str());
}

Status MpiLink::allGather(const std::vector<uint8_t>& mine,
                          std::vector<std::vector<uint8_t>>* all) {
  REE_CHECK_ARG(all != nullptr, "allGather: all is null");
  if (aborted_) return REE_FAIL(Status::kCommError, "rank %d: allGather after abort", rank_);
  int length = static_cast<int>(mine.size());
  std::vector<int> lengths(size_);
  MPI_Request request;
  MPI_Iallgather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, comm_, &request);
  REE_RETURN_IF_ERROR(wait(&request, 0, "gathering from"));
  std::vector<int> offsets(size_);
  int total = 0;
  for (int r = 0; r < size_; ++r) {
    offsets[r] = total;
    total += lengths[r];
  }
  std::vector<uint8_t> flat(static_cast<size_t>(total));
  MPI_Iallgatherv(mine.data(), length, MPI_BYTE, flat.data(), lengths.data(), offsets.data(),
                  MPI_BYTE, comm_, &request);
  REE_RETURN_IF_ERROR(wait(&request, 0, "gathering from"));
  all->assign(size_, {});
  for (int r = 0; r < size_; ++r)
    (*all)[r].assign(flat.begin() + offsets[r], flat.begin() + offsets[r] + lengths[r]);
  return Status::kSuccess;
}

Status MpiLink::flush() {
  while (!pending_.empty() && !aborted_) {
    Pending& p = pending_.front();
    REE_RETURN_IF_ERROR(wait(&p.request, -1, "flushing sends to"));
    pending_.pop_front();
  }
  return Status::kSuccess;
}

namespace {

class MpiTransport : public StageTransport {
 public:
  MpiTransport(const MpiWorld& world, Device device, double timeout_s)
      : link_(world, timeout_s), device_(device) {}

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
    if (!device_.isCuda()) return link_.recvBytes(peer, tensor.data(), tensor.nbytes());
    std::vector<uint8_t> host(tensor.nbytes());
    REE_RETURN_IF_ERROR(link_.recvBytes(peer, host.data(), host.size()));
    return copyTensor(Tensor::wrap(host.data(), Device::cpu(), tensor.dtype(), tensor.shape()),
                      tensor);
  }

  Status agree(Status local, const std::string& message) override {
    return link_.agree(local, message);
  }
  Status allGather(const std::vector<uint8_t>& mine,
                   std::vector<std::vector<uint8_t>>* all) override {
    return link_.allGather(mine, all);
  }
  Status flush() override { return link_.flush(); }
  void abort() override { link_.abort(); }

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
  out->reset(new MpiTransport(world, device, timeout_s));
  return Status::kSuccess;
}

}  // namespace ree::comm
