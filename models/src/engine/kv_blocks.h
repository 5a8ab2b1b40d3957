// The scheduler's view of the paged KV cache: which of the pool's blocks are free, and the block
// table of each sequence (runtime/operation_set.h StepBatch). Every stage of a pipeline holds a
// pool of the same number of blocks and follows the tables that travel with each step, so one
// allocator on rank 0 decides for all of them. Pure bookkeeping: no device memory is touched.
#pragma once

#include <cstdint>
#include <vector>

namespace ree::models {

class KvBlockAllocator {
 public:
  KvBlockAllocator() = default;
  KvBlockAllocator(int num_blocks, int block_size);

  int blockSize() const { return block_size_; }
  int numBlocks() const { return num_blocks_; }
  int freeBlocks() const { return static_cast<int>(free_.size()); }
  // Blocks that hold `tokens` positions.
  int64_t blocksFor(int64_t tokens) const { return (tokens + block_size_ - 1) / block_size_; }

  // Extends `table` to cover positions 0..tokens-1, all or nothing: false (and `table` unchanged)
  // when the pool has too few free blocks.
  bool grow(std::vector<int32_t>* table, int64_t tokens);
  // Returns every block of `table` to the pool and empties it.
  void release(std::vector<int32_t>* table);

 private:
  int num_blocks_ = 0;
  int block_size_ = 1;
  // Free blocks, taken from the back: a freed block is the next one reused.
  std::vector<int32_t> free_;
};

}  // namespace ree::models
