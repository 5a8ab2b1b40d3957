// ATen's scaled_dot_product_attention as the attention bench's baseline (the `default` operation
// set's kernel family), behind an interface free of LibTorch headers so that the bench's CUDA
// source never includes them. Built only when LibTorch is found (REE_BENCH_HAVE_ATEN).
#pragma once

#include <memory>
#include <string>

namespace bench {

struct AtenSdpaShape {
  int batch = 1;
  int n_heads = 32;
  int n_kv_heads = 8;
  int head_dim = 128;
  int q_len = 1;      // queries per sequence
  int kv_len = 4096;  // keys per sequence; q_len == kv_len is causal prefill
  int sets = 1;       // independent K/V sets, so that calls rotating over them miss the L2 cache
};

class AtenSdpa {
 public:
  // Allocates bf16 q, k, v (random normal) on CUDA device 0. On failure returns null and sets
  // *error to ATen's message (first line).
  static std::unique_ptr<AtenSdpa> create(const AtenSdpaShape& shape, std::string* error);
  virtual ~AtenSdpa() = default;
  // Enqueues one call on the current (legacy default) stream, reading K/V set `index % sets`.
  // Returns false and sets *error if ATen throws.
  virtual bool run(int index, std::string* error) = 0;
  // The backend ATen picks for this shape ("flash", "efficient", "cudnn", "math"), as far as
  // ATen's selection API tells.
  virtual std::string backend() const = 0;
};

}  // namespace bench
