// Engines for the tests of the scheduler (kv_paging_test, generation_stop_test, engine_feed_test):
// the builtin tiny Llama on the CPU with a given batch and KV pool, and each request's solo run,
// the bits a request must get in any batch.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "ree/models/engine.h"
#include "test_util.h"

namespace ree::test {

// builtin:tiny-llama on the CPU: `blocks` KV blocks of `block_size` tokens (0: sized from memory).
inline EngineOptions tinyEngineOptions(int max_batch, int block_size, int64_t blocks,
                                       int max_context = 128) {
  EngineOptions options;
  options.model = "builtin:tiny-llama";
  options.device = Device::cpu();
  options.max_batch = max_batch;
  options.max_context = max_context;
  options.kv_block_size = block_size;
  options.kv_blocks = blocks;
  return options;
}

inline std::unique_ptr<Engine> makeEngine(const EngineOptions& options) {
  std::unique_ptr<Engine> engine;
  EXPECT_EQ(Engine::create(options, &engine), Status::kSuccess) << lastErrorMessage();
  return engine;
}

// Each request alone on an engine of `options` (max_batch 1), in order; request r's sampler key
// is sampling_keys[r] when given (empty: each request's own).
inline std::vector<GenerationResult> soloResults(const EngineOptions& options,
                                                 const std::vector<GenerationRequest>& requests,
                                                 const std::vector<uint64_t>& sampling_keys = {}) {
  std::unique_ptr<Engine> engine = makeEngine(options);
  std::vector<GenerationResult> solo;
  if (!engine) return solo;
  for (size_t r = 0; r < requests.size(); ++r) {
    GenerationRequest request = requests[r];
    if (!sampling_keys.empty()) request.sampling_index = sampling_keys[r];
    std::vector<GenerationResult> one;
    EXPECT_EQ(engine->generate({request}, &one), Status::kSuccess) << lastErrorMessage();
    solo.push_back(one.at(0));
  }
  return solo;
}

}  // namespace ree::test
