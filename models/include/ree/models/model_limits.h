// The limits REE puts on a model's config.json, in one place. They are checked as each field is
// read, before anything is multiplied or allocated, so that no size product can overflow 64 bits
// (the largest, vocabulary x hidden x 4 bytes, stays below 2^43) and no count is cast to `int`
// out of range. Each is far above any published model's (e.g. Llama 3.1 405B: 126 layers, hidden
// 16384, intermediate 53248, 128 heads, head_dim 128, vocabulary 128256, 131072 positions).
// docs/usage.md "Limits" lists them for users; keep the two in step.
#pragma once

#include <cstdint>

namespace ree::models::limits {

constexpr int64_t kMaxLayers = 4096;                        // num_hidden_layers / n_layer
constexpr int64_t kMaxHiddenSize = int64_t{1} << 16;        // hidden_size / n_embd
constexpr int64_t kMaxIntermediateSize = int64_t{1} << 18;  // intermediate_size / n_inner
constexpr int64_t kMaxHeads = 1024;                         // num_attention_heads, key/value heads
constexpr int64_t kMaxHeadDim = 256;  // head_dim: the attention kernels' limit (attention.h)
constexpr int64_t kMaxVocabSize = int64_t{1} << 24;  // token ids are int32 everywhere
constexpr int64_t kMaxPositions = int64_t{1} << 24;  // max_position_embeddings / n_positions
constexpr double kMaxRopeTheta = 1e12;               // rope_theta (> 1); float on the device
constexpr double kMaxRopeFactor = 1e6;               // llama3 factor, low/high_freq_factor
constexpr double kMinNormEps = 1e-30;  // rms_norm_eps / layer_norm_epsilon: a normal float > 0
constexpr double kMaxNormEps = 1.0;
// config.json and generation_config.json: a few kilobytes in practice.
constexpr uint64_t kMaxConfigFileBytes = uint64_t{16} << 20;
// All weights together, in parameters (a 64-bit byte count at 8 bytes each cannot overflow).
constexpr int64_t kMaxParameters = int64_t{1} << 42;

}  // namespace ree::models::limits
