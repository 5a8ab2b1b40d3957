// The KV cache pool (EngineOptions::kv_blocks, kv_memory_fraction): how many blocks every stage
// holds, chosen after the weights are loaded from what the devices have left, agreed by the ranks
// of a pipeline (the smallest stage's count: the scheduler's block tables address every stage's
// pool alike), and allocated.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>

#include "engine_state.h"
#include "ree/core/log.h"

namespace ree::models {
namespace {

constexpr double kDefaultGpuFraction = 0.9;
constexpr double kDefaultHostFraction = 0.5;
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
// Block ids are int32 in the step's tables.
constexpr int64_t kMaxBlocks = INT32_MAX;

// The stages of one device share its memory: the bytes of one block over all of them.
struct DeviceShare {
  Device device;
  int64_t block_bytes = 0;
};

}  // namespace

int EngineState::kvBlockSizeFor(OperationSetKind kind) const {
  // The ATen sets read a sequence's cache rows in place, so each sequence gets one block.
  return kind == OperationSetKind::kReproducible ? options.kv_block_size : max_context;
}

Status EngineState::stageBlockBytes(const LocalStage& stage, int64_t* bytes) const {
  const ::ree::DType kv_dtype = stage.ops->kvCacheDType(stage.model->weightDType());
  const int64_t layers = stage.stage.end_layer - stage.stage.first_layer;
  if (!CausalLM::cacheBlockBytes(config, kv_dtype, layers, kv_block_size, bytes)) {
    return REE_FAIL(Status::kOutOfMemory,
                    "--kv-block-size %d: one KV cache block of layers %lld-%lld needs more than "
                    "2^63 bytes",
                    kv_block_size, static_cast<long long>(stage.stage.first_layer),
                    static_cast<long long>(stage.stage.end_layer - 1));
  }
  return Status::kSuccess;
}

// This process's pool: --kv-blocks checked against the devices, or what their memory allows.
Status EngineState::chooseKvBlocks() {
  REE_CHECK_ARG(options.kv_block_size >= 1 && options.kv_block_size <= (1 << 20),
                "--kv-block-size must be in [1, 1048576] (got %d)", options.kv_block_size);
  REE_CHECK_ARG(options.kv_blocks >= 0 && options.kv_blocks <= kMaxBlocks,
                "%s must be in [0, %lld] (got %lld)", options.names.kv_blocks.c_str(),
                static_cast<long long>(kMaxBlocks), static_cast<long long>(options.kv_blocks));
  REE_CHECK_ARG(options.kv_memory_fraction >= 0.0 && options.kv_memory_fraction <= 1.0,
                "%s must be in (0, 1] (got %g)", options.names.kv_memory_fraction.c_str(),
                options.kv_memory_fraction);
  kv_block_size = kvBlockSizeFor(options.operation_set);
  // More blocks than max_batch sequences of max_context tokens would never be used.
  const int64_t per_sequence = (int64_t{max_context} + kv_block_size - 1) / kv_block_size;
  int64_t blocks = options.kv_blocks > 0
                       ? options.kv_blocks
                       : std::min<int64_t>(kMaxBlocks, per_sequence * options.max_batch);
  std::map<std::string, DeviceShare> by_device;
  for (const LocalStage& stage : stages) {
    int64_t bytes = 0;
    REE_RETURN_IF_ERROR(stageBlockBytes(stage, &bytes));
    DeviceShare& share = by_device[stage.ops->device().str()];
    share.device = stage.ops->device();
    if (__builtin_add_overflow(share.block_bytes, bytes, &share.block_bytes)) {
      share.block_bytes = INT64_MAX;
    }
    if (options.memory_budget_bytes > 0 && bytes > 0) {
      const int64_t room = options.memory_budget_bytes - stage.stage.parameter_bytes;
      REE_RETURN_IF_ERROR(limitKvBlocks(room, bytes, "--memory-budget-gib less the weights",
                                        stage.ops->device(), &blocks));
    }
  }
  for (const auto& [name, share] : by_device) {
    if (share.block_bytes == 0) continue;  // stages without layers
    int64_t free = 0;
    REE_RETURN_IF_ERROR(deviceFreeMemoryBytes(share.device, &free));
    const double fraction = options.kv_memory_fraction > 0.0 ? options.kv_memory_fraction
                            : share.device.isCuda()          ? kDefaultGpuFraction
                                                             : kDefaultHostFraction;
    const int64_t room = options.kv_blocks > 0 ? free : static_cast<int64_t>(free * fraction);
    REE_RETURN_IF_ERROR(
        limitKvBlocks(room, share.block_bytes,
                      share.device.isCuda() ? "free after the weights" : "of host memory available",
                      share.device, &blocks));
  }
  kv_blocks = static_cast<int>(blocks);
  return Status::kSuccess;
}

// Lowers *blocks to what `room` bytes hold at `block_bytes` each; with --kv-blocks given, refuses
// instead, naming the flag; no block at all is an error either way.
Status EngineState::limitKvBlocks(int64_t room, int64_t block_bytes, const char* what,
                                  Device device, int64_t* blocks) const {
  const int64_t fit = room <= 0 ? 0 : room / block_bytes;
  if (fit >= *blocks) return Status::kSuccess;
  if (options.kv_blocks > 0) {
    return REE_FAIL(Status::kOutOfMemory,
                    "%s %lld: the KV cache on %s needs %.2f GiB (%lld blocks of %d tokens), more "
                    "than the %.2f GiB %s; lower it",
                    options.names.kv_blocks.c_str(), static_cast<long long>(options.kv_blocks),
                    device.str().c_str(), static_cast<double>(block_bytes) * *blocks / kGiB,
                    static_cast<long long>(*blocks), kv_block_size,
                    static_cast<double>(room) / kGiB, what);
  }
  if (fit < 1) {
    return REE_FAIL(Status::kOutOfMemory,
                    "the KV cache on %s: not one block of %d tokens (%.3f GiB) fits in the %.2f "
                    "GiB %s (%s); lower %s or give the cache more memory",
                    device.str().c_str(), kv_block_size, static_cast<double>(block_bytes) / kGiB,
                    static_cast<double>(room) / kGiB, what,
                    options.names.kv_memory_fraction.c_str(), options.names.max_context.c_str());
  }
  *blocks = fit;
  return Status::kSuccess;
}

// Multi-process: every rank takes the smallest rank's count.
Status EngineState::agreeKvBlocks() {
  std::vector<uint8_t> mine(sizeof(int32_t));
  const int32_t blocks = kv_blocks;
  std::memcpy(mine.data(), &blocks, sizeof(blocks));
  std::vector<std::vector<uint8_t>> all;
  REE_RETURN_IF_ERROR(transport->allGather(mine, &all));
  for (size_t r = 0; r < all.size(); ++r) {
    if (all[r].size() != sizeof(int32_t)) {
      return REE_FAIL(Status::kCommError, "rank %zu sent a KV block count of %zu bytes", r,
                      all[r].size());
    }
    int32_t theirs = 0;
    std::memcpy(&theirs, all[r].data(), sizeof(theirs));
    kv_blocks = std::min(kv_blocks, static_cast<int>(theirs));
  }
  return Status::kSuccess;
}

// The sizing can be beaten by what it cannot see (an address-space limit, other processes
// allocating meanwhile): a pool sized from memory then halves until it is allocated; a failed
// --kv-blocks names the flags behind it.
Status EngineState::allocateKvCaches() {
  for (;;) {
    Status allocated = Status::kSuccess;
    for (LocalStage& stage : stages) {
      REE_RETURN_IF_ERROR(setCurrentDevice(stage.ops->device()));
      int64_t block_bytes = 0;
      REE_RETURN_IF_ERROR(stageBlockBytes(stage, &block_bytes));
      stage.kv_cache_bytes = block_bytes * kv_blocks;  // fits: checked against the memory
      allocated = stage.model->allocateCache(kv_blocks, kv_block_size, max_context);
      if (allocated != Status::kSuccess) break;
    }
    if (allocated == Status::kSuccess) break;
    if (allocated != Status::kOutOfMemory) return allocated;
    if (options.kv_blocks > 0 || kv_blocks == 1) {
      const std::string cause = lastErrorMessage();
      return REE_FAIL(Status::kOutOfMemory,
                      "the KV cache (%d blocks of %d tokens): %s; lower %s or %s", kv_blocks,
                      kv_block_size, cause.c_str(), options.names.kv_blocks.c_str(),
                      options.names.kv_memory_fraction.c_str());
    }
    for (LocalStage& stage : stages)
      stage.model->releaseCache();
    kv_blocks /= 2;
  }
  logMessage(LogLevel::kInfo, "%s", kvPoolSummary().c_str());
  return Status::kSuccess;
}

KvBlockAllocator& EngineState::generationBlocks() {
  if (kv_allocator.numBlocks() != kv_blocks || kv_allocator.usedBlocks() != 0) {
    kv_allocator = KvBlockAllocator(kv_blocks, kv_block_size);
  }
  return kv_allocator;
}

Status EngineState::soloBlockTable(int tokens, StepBatch* batch) {
  const int64_t needed = (int64_t{tokens} + kv_block_size - 1) / kv_block_size;
  if (needed > kv_blocks) {
    return REE_FAIL(Status::kOutOfMemory,
                    "%d tokens need %lld KV cache blocks of %d tokens, the pool holds %d; raise "
                    "%s or %s",
                    tokens, static_cast<long long>(needed), kv_block_size, kv_blocks,
                    options.names.kv_blocks.c_str(), options.names.kv_memory_fraction.c_str());
  }
  kv_allocator.reset();  // its blocks are overwritten
  batch->block_tables.resize(static_cast<size_t>(needed));
  for (int64_t b = 0; b < needed; ++b)
    batch->block_tables[b] = static_cast<int32_t>(b);
  batch->blocks_per_seq = static_cast<int>(needed);
  return batch->finalize();
}

std::string EngineState::kvPoolSummary() const {
  int64_t bytes = 0;
  for (const LocalStage& stage : stages)
    bytes += stage.kv_cache_bytes;
  char line[160];
  std::snprintf(line, sizeof(line), "KV cache: %d blocks of %d tokens (%lld tokens, %.3f GiB)",
                kv_blocks, kv_block_size, static_cast<long long>(kv_blocks) * kv_block_size,
                static_cast<double>(bytes) / kGiB);
  return line;
}

}  // namespace ree::models
