// The link between the stages of a multi-process pipeline: host messages (step headers, sampled
// tokens, hashes) and activation tensors, between ranks 0..size-1 (rank r runs stage r).
//
// The runtime only sees this interface; comm/ implements it over MPI (host tensors, CPU stages)
// and NCCL (device tensors, GPU stages). Transport is bitwise: bytes arrive exactly as sent.
//
// Every call that waits has a deadline (the transport's timeout). When it passes, or a peer
// fails, the call returns Status::kTimeout / kCommError with a one-line message naming this rank,
// the peer rank and the operation, and the transport aborts its communicators so that peers
// blocked on this rank fail too instead of hanging.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ree/core/status.h"
#include "ree/runtime/tensor.h"

namespace ree {

class StageTransport {
 public:
  virtual ~StageTransport() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual const char* name() const = 0;  // "mpi" or "nccl"
  // The device this rank's stage computes on (tensors passed in and out live there).
  virtual Device device() const = 0;

  // Sends a host message to `peer` under `tag` (0..1023). Returns once the bytes are handed to
  // the transport: it never waits for the receiver, so a pipeline cannot deadlock on sends.
  virtual Status sendMessage(int peer, int tag, std::vector<uint8_t> bytes) = 0;
  // Waits, until the deadline, for the next message from `peer` under `tag` (any length).
  virtual Status recvMessage(int peer, int tag, std::vector<uint8_t>* bytes) = 0;

  // Sends all bytes of `tensor` (on device()) to `peer`. On a CUDA device the tensor may still be
  // being written by work queued on the legacy default stream or on blocking streams (operation
  // sets queue there): the transfer is ordered after that work, so the caller need not wait for
  // it. The transport keeps the storage alive until the send completes. Messages and tensors to
  // one peer arrive in the order they were sent.
  virtual Status sendTensor(int peer, const Tensor& tensor) = 0;
  // Receives the next tensor from `peer` into `tensor` (allocated by the caller on device() with
  // the size the sender used). Returns when the bytes are in place.
  virtual Status recvTensor(int peer, const Tensor& tensor) = 0;
  // Like recvTensor, but may return as soon as the receive is queued: device work queued after
  // the call on the legacy default stream or on blocking streams sees the bytes. Before the host
  // waits for such work (or reads the tensor), it calls awaitReceives(), which applies the
  // deadline; the host never blocks on a receive without one. Default: recvTensor.
  virtual Status recvTensorQueued(int peer, const Tensor& tensor) {
    return recvTensor(peer, tensor);
  }
  // Waits, until the deadline, for every receive queued by recvTensorQueued to complete.
  virtual Status awaitReceives() { return Status::kSuccess; }
  // True when recvTensorQueued really returns before the bytes arrive (the next stage can then
  // queue its work early, so the step header is worth sending before a stage's own work).
  virtual bool queuesReceives() const { return false; }

  // Collective, every rank: each passes its local outcome; every rank returns the status of the
  // lowest failing rank, and lastErrorMessage() is that rank's message prefixed "rank R: ". All
  // ranks succeed only if every rank did. Used so a failure on one rank stops all with one message.
  virtual Status agree(Status local, const std::string& message) = 0;
  // Collective, every rank: gathers each rank's bytes (any length) on every rank, in rank order.
  virtual Status allGather(const std::vector<uint8_t>& mine,
                           std::vector<std::vector<uint8_t>>* all) = 0;

  // Waits until every send of this rank has completed (deadline).
  virtual Status flush() = 0;
  // Aborts the communicators (idempotent); later calls fail fast.
  virtual void abort() = 0;

  // Seconds any single wait may last before the peer is declared lost.
  virtual double timeoutSeconds() const = 0;
};

}  // namespace ree
