// KvBlockAllocator (kv_blocks.h): a free list of the pool's blocks.
#include "kv_blocks.h"

#include <cstddef>

namespace ree::models {

KvBlockAllocator::KvBlockAllocator(int num_blocks, int block_size)
    : num_blocks_(num_blocks), block_size_(block_size) {
  free_.reserve(static_cast<size_t>(num_blocks));
  for (int b = num_blocks - 1; b >= 0; --b)
    free_.push_back(b);  // block 0 is taken first
}

bool KvBlockAllocator::grow(std::vector<int32_t>* table, int64_t tokens) {
  const int64_t needed = blocksFor(tokens) - static_cast<int64_t>(table->size());
  if (needed <= 0) return true;
  if (needed > static_cast<int64_t>(free_.size())) return false;
  for (int64_t i = 0; i < needed; ++i) {
    table->push_back(free_.back());
    free_.pop_back();
  }
  return true;
}

void KvBlockAllocator::release(std::vector<int32_t>* table) {
  // In reverse, so the sequence's first block is the next one taken.
  for (auto it = table->rbegin(); it != table->rend(); ++it)
    free_.push_back(*it);
  table->clear();
}

}  // namespace ree::models
