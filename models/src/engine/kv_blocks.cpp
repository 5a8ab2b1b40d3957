// KvBlockAllocator (kv_blocks.h): reference counts, a free list and the prefix cache's keys.
#include "kv_blocks.h"

#include <algorithm>
#include <cstddef>

#include "pipeline_step.h"

namespace ree::models {

KvBlockAllocator::KvBlockAllocator(int num_blocks, int block_size)
    : num_blocks_(num_blocks), block_size_(block_size) {
  reset();
}

void KvBlockAllocator::reset() {
  refs_.assign(static_cast<size_t>(num_blocks_), 0);
  free_.clear();
  free_.reserve(static_cast<size_t>(num_blocks_));
  for (int b = num_blocks_ - 1; b >= 0; --b)
    free_.push_back(b);  // block 0 is taken first
  evictable_.clear();
  evictable_at_.assign(static_cast<size_t>(num_blocks_), evictable_.end());
  cached_.clear();
  key_of_.assign(static_cast<size_t>(num_blocks_), nullptr);
}

// A block to write: a never-used one, else the least recently released cached one (forgotten).
int32_t KvBlockAllocator::take() {
  int32_t block = 0;
  if (!free_.empty()) {
    block = free_.back();
    free_.pop_back();
  } else {
    block = evictable_.front();
    evictable_.pop_front();
    evictable_at_[block] = evictable_.end();
    forget(block);
  }
  refs_[block] = 1;
  return block;
}

void KvBlockAllocator::forget(int32_t block) {
  if (key_of_[block] == nullptr) return;
  cached_.erase(*key_of_[block]);
  key_of_[block] = nullptr;
}

bool KvBlockAllocator::grow(std::vector<int32_t>* table, int64_t tokens) {
  const int64_t needed = blocksFor(tokens) - static_cast<int64_t>(table->size());
  if (needed <= 0) return true;
  if (needed > freeBlocks()) return false;
  for (int64_t i = 0; i < needed; ++i)
    table->push_back(take());
  return true;
}

void KvBlockAllocator::release(std::vector<int32_t>* table) {
  // In reverse, so the sequence's first block is the next one taken or evicted last.
  for (auto it = table->rbegin(); it != table->rend(); ++it) {
    const int32_t block = *it;
    if (--refs_[block] > 0) continue;
    if (key_of_[block] != nullptr) {
      evictable_at_[block] = evictable_.insert(evictable_.end(), block);
    } else {
      free_.push_back(block);
    }
  }
  table->clear();
}

BlockKey KvBlockAllocator::keyOf(const BlockKey* previous, const int32_t* tokens) const {
  std::vector<uint8_t> bytes;
  bytes.reserve(32 + static_cast<size_t>(block_size_) * 4);
  if (previous != nullptr) bytes.insert(bytes.end(), previous->begin(), previous->end());
  for (int i = 0; i < block_size_; ++i) {
    const uint32_t id = static_cast<uint32_t>(tokens[i]);
    for (int byte = 0; byte < 4; ++byte)
      bytes.push_back(static_cast<uint8_t>(id >> (8 * byte)));  // little-endian on every host
  }
  return sha256Digest(bytes.data(), bytes.size());
}

int64_t KvBlockAllocator::matchPrefix(const std::vector<int32_t>& tokens, int64_t limit,
                                      std::vector<int32_t>* table, std::vector<BlockKey>* keys) {
  keys->clear();
  const int64_t full = std::min<int64_t>(limit, static_cast<int64_t>(tokens.size())) / block_size_;
  for (int64_t j = 0; j < full; ++j) {
    const BlockKey key = keyOf(j == 0 ? nullptr : &keys->back(), tokens.data() + j * block_size_);
    auto it = cached_.find(key);
    if (it == cached_.end()) break;
    const int32_t block = it->second;
    if (refs_[block]++ == 0) {
      evictable_.erase(evictable_at_[block]);
      evictable_at_[block] = evictable_.end();
    }
    table->push_back(block);
    keys->push_back(key);
  }
  return static_cast<int64_t>(keys->size()) * block_size_;
}

void KvBlockAllocator::registerFull(const std::vector<int32_t>& tokens, int64_t filled,
                                    const std::vector<int32_t>& table,
                                    std::vector<BlockKey>* keys) {
  const int64_t full = std::min<int64_t>(filled, static_cast<int64_t>(tokens.size())) / block_size_;
  for (int64_t j = static_cast<int64_t>(keys->size()); j < full; ++j) {
    const BlockKey key = keyOf(j == 0 ? nullptr : &keys->back(), tokens.data() + j * block_size_);
    keys->push_back(key);
    const int32_t block = table[static_cast<size_t>(j)];
    if (key_of_[block] != nullptr) continue;
    // Another block may hold the same rows already: the first one stays the one matched.
    auto inserted = cached_.emplace(key, block);
    if (inserted.second) key_of_[block] = &inserted.first->first;
  }
}

}  // namespace ree::models
