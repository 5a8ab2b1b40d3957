// Token selection where the logits are (CPU or GPU): a GPU engine's next tokens reach the host as
// 4 bytes a row, without waiting for the logits themselves to be copied, and without a host sort
// of the vocabulary for a sampled row (about 9 ms a row at a 128k vocabulary on one core).
#pragma once

#include <cstdint>
#include <vector>

#include "ree/core/status.h"
#include "ree/kernels/sampling.h"
#include "ree/runtime/pending_copy.h"
#include "ree/runtime/tensor.h"

namespace ree {

class TokenSelection {
 public:
  // The index of the best logit of every row of `logits` (fp32 [rows, vocab], dense): the repops
  // argmax (kernels/sampling.h: NaN first, then the larger value, then the lower index), so the
  // CPU and the GPU select the same token. On a GPU the kernel and the copy of the ids to the host
  // are queued on the device's legacy default stream, after the work queued before them, and the
  // call returns at once; on the CPU the ids are computed before it returns.
  Status startArgmax(const Tensor& logits);
  // Row r's token drawn by the repops sampler with params[r] (kernels/sampling.h; temperature 0:
  // the argmax): the same token on the CPU and the GPU. On a GPU the call first waits for the
  // device to reach it (the sampler uploads the parameters from host memory), then queues the
  // sort, the draw and the copy of the ids.
  Status startSample(const Tensor& logits, const std::vector<repops::SamplingParams>& params);
  // Waits for the ids of the last start: (*tokens)[r] is row r's.
  Status wait(std::vector<int32_t>* tokens);
  // The ids of the last start where the logits were (device memory on a GPU, with the kernel
  // that writes them queued; host memory on the CPU), for a next step's embedding to read
  // without waiting (OperationSet::embeddingOfDeviceIds). Valid until the next start; null
  // before the first.
  const int32_t* ids() const;
  int64_t rows() const { return rows_; }

 private:
  // Checks `logits`, waits for the last copy, and makes room for its ids.
  Status prepare(const Tensor& logits);
  // GPU: the copy of the ids just written on the device to the host.
  Status queueCopy(int64_t rows);

  std::vector<int32_t> cpu_ids_;
  // GPU: the ids on the device and their page-locked host copy, grown to the largest batch. Both
  // are 4-byte tensors holding int32 ids (Tensor has no integer dtype).
  Tensor device_ids_, host_ids_;
  PendingCopy copy_;
  int64_t rows_ = 0;  // of the last start; 0: none
  bool on_cpu_ = true;
};

}  // namespace ree
