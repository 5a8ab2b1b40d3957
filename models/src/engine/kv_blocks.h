// The scheduler's view of the paged KV cache: which of the pool's blocks are free, and the block
// table of each sequence (runtime/operation_set.h StepBatch). Every stage of a pipeline holds a
// pool of the same number of blocks and follows the tables that travel with each step, so one
// allocator on rank 0 decides for all of them. Pure bookkeeping: no device memory is touched.
//
// Prefix cache: a full block is keyed by the SHA-256 chain of every token id up to its end, so
// two sequences whose first n x block_size tokens agree hold the same K/V rows there (a position's
// K/V depends only on the tokens up to it). Such blocks are shared, counted by references and
// never written (a sequence appends only past its cached positions); an unreferenced cached block
// stays matchable until the pool needs it (least recently released first).
#pragma once

#include <array>
#include <cstdint>
#include <list>
#include <map>
#include <vector>

namespace ree::models {

using BlockKey = std::array<uint8_t, 32>;

class KvBlockAllocator {
 public:
  KvBlockAllocator() = default;
  KvBlockAllocator(int num_blocks, int block_size);

  int blockSize() const { return block_size_; }
  int numBlocks() const { return num_blocks_; }
  // Blocks a sequence can take: never used, or cached but unreferenced.
  int freeBlocks() const { return static_cast<int>(free_.size() + evictable_.size()); }
  // Blocks referenced by some sequence.
  int usedBlocks() const { return num_blocks_ - freeBlocks(); }
  // Blocks that hold `tokens` positions.
  int64_t blocksFor(int64_t tokens) const { return (tokens + block_size_ - 1) / block_size_; }

  // Extends `table` to cover positions 0..tokens-1, all or nothing: false (and `table` unchanged)
  // when the pool has too few free blocks.
  bool grow(std::vector<int32_t>* table, int64_t tokens);
  // Drops the references of `table` to its blocks and empties it.
  void release(std::vector<int32_t>* table);

  // Appends to the empty `table` the cached blocks that hold tokens[0, n x block_size) for the
  // largest such n with n x block_size <= limit, with a reference each, and their keys to `keys`.
  // Returns the positions they cover.
  int64_t matchPrefix(const std::vector<int32_t>& tokens, int64_t limit,
                      std::vector<int32_t>* table, std::vector<BlockKey>* keys);
  // Registers the blocks of `table` that positions 0..filled-1 (tokens[0, filled)) fill, past the
  // `keys` already computed (extended here), so later sequences can match them.
  void registerFull(const std::vector<int32_t>& tokens, int64_t filled,
                    const std::vector<int32_t>& table, std::vector<BlockKey>* keys);
  // Forgets every cached block and every reference: the whole pool is free.
  void reset();

 private:
  BlockKey keyOf(const BlockKey* previous, const int32_t* tokens) const;
  int32_t take();
  void forget(int32_t block);

  int num_blocks_ = 0;
  int block_size_ = 1;
  std::vector<int32_t> refs_;
  // Unreferenced blocks holding nothing cached, taken from the back (a freed block is reused
  // first).
  std::vector<int32_t> free_;
  // Unreferenced cached blocks, least recently released first, and where each sits.
  std::list<int32_t> evictable_;
  std::vector<std::list<int32_t>::iterator> evictable_at_;
  std::map<BlockKey, int32_t> cached_;
  std::vector<const BlockKey*> key_of_;  // the cached_ key of each block, or nullptr
};

}  // namespace ree::models
