// The last stage's logits buffers: LandingPool hands out reusable host buffers, AsyncDigester
// hashes rows straight from them and lets go of each buffer once its rows are hashed, so the pool
// reuses it; a buffer still held is never handed out twice.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "../../models/src/engine/async_digester.h"
#include "../../models/src/engine/landing_pool.h"
#include "test_util.h"

namespace ree::models {
namespace {

void fill(Tensor& buffer, int64_t floats, float first) {
  float* data = buffer.as<float>();
  for (int64_t i = 0; i < floats; ++i)
    data[i] = first + static_cast<float>(i) * 0.25f;
}

TEST(LandingPool, ReusesABufferOnlyOnceEveryHolderLetGo) {
  LandingPool pool;
  std::shared_ptr<Tensor> a, b;
  ASSERT_EQ(pool.take(1000, false, &a), Status::kSuccess) << lastErrorMessage();
  ASSERT_EQ(pool.take(1000, false, &b), Status::kSuccess);
  EXPECT_NE(a->data(), b->data());  // both held: two buffers
  EXPECT_GE(a->numel(), 1000);
  void* first = a->data();
  std::shared_ptr<Tensor> extra_holder = a;
  a.reset();
  EXPECT_EQ(pool.freeBuffers(), 0u);  // still held elsewhere
  extra_holder.reset();
  EXPECT_EQ(pool.freeBuffers(), 1u);
  std::shared_ptr<Tensor> again;
  ASSERT_EQ(pool.take(600, false, &again), Status::kSuccess);
  EXPECT_EQ(again->data(), first);  // a smaller step reuses the larger buffer
  EXPECT_EQ(pool.freeBuffers(), 0u);
}

TEST(LandingPool, DropsBuffersTooSmallForAGrownStep) {
  LandingPool pool;
  std::shared_ptr<Tensor> small;
  ASSERT_EQ(pool.take(100, false, &small), Status::kSuccess);
  small.reset();
  EXPECT_EQ(pool.freeBuffers(), 1u);
  std::shared_ptr<Tensor> large;
  ASSERT_EQ(pool.take(5000, false, &large), Status::kSuccess);
  EXPECT_GE(large->numel(), 5000);
  EXPECT_EQ(pool.freeBuffers(), 0u);  // the small one was freed, not kept
  EXPECT_EQ(pool.take(0, false, &large), Status::kInvalidArgument);
}

TEST(LandingPool, KeepsAtMostItsLimitBetweenSteps) {
  LandingPool pool(1000 * sizeof(float));
  std::shared_ptr<Tensor> a, b;
  ASSERT_EQ(pool.take(1000, false, &a), Status::kSuccess);
  ASSERT_EQ(pool.take(1000, false, &b), Status::kSuccess);
  a.reset();
  EXPECT_EQ(pool.freeBuffers(), 1u);
  b.reset();
  EXPECT_EQ(pool.freeBuffers(), 1u);  // a second buffer would pass the limit: freed
  std::shared_ptr<Tensor> replay;     // a long replay's rows: more than the limit alone
  ASSERT_EQ(pool.take(2000, false, &replay), Status::kSuccess);
  EXPECT_EQ(pool.freeBuffers(), 0u);  // the small one was dropped
  replay.reset();
  EXPECT_EQ(pool.freeBuffers(), 0u);  // and the large one is not kept either
  ASSERT_EQ(pool.take(1000, false, &a), Status::kSuccess);
  a.reset();
  EXPECT_EQ(pool.freeBuffers(), 1u);  // the pool's count of kept bytes came back to 0 first
}

TEST(LandingPool, HandlesOutliveThePool) {
  std::shared_ptr<Tensor> kept;
  {
    LandingPool pool;
    ASSERT_EQ(pool.take(64, false, &kept), Status::kSuccess);
  }
  fill(*kept, 64, 1.0f);  // still valid memory; released when dropped (ASan checks the rest)
  kept.reset();
}

TEST(AsyncDigester, HashesRowsFromTheBufferThenReturnsItToThePool) {
  const int64_t rows = 5, vocab = 4099;
  LandingPool pool;
  AsyncDigester digester(2);
  std::vector<uint64_t> tickets;
  std::vector<std::vector<float>> copies;
  std::vector<void*> buffers;
  for (int step = 0; step < 6; ++step) {
    std::shared_ptr<Tensor> buffer;
    ASSERT_EQ(pool.take(rows * vocab, false, &buffer), Status::kSuccess);
    fill(*buffer, rows * vocab, static_cast<float>(step));
    buffers.push_back(buffer->data());
    copies.emplace_back(buffer->as<float>(), buffer->as<float>() + rows * vocab);
    tickets.push_back(digester.submit(std::move(buffer), rows, vocab));
  }
  for (size_t step = 0; step < tickets.size(); ++step) {
    std::vector<Digest> digests;
    ASSERT_TRUE(digester.take(tickets[step], &digests));
    ASSERT_EQ(digests.size(), static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) {
      EXPECT_EQ(digests[r], sha256Digest(copies[step].data() + r * vocab, vocab * sizeof(float)))
          << "step " << step << " row " << r;
    }
  }
  // Every buffer went back once its rows were hashed: the next step reuses one of them.
  EXPECT_GE(pool.freeBuffers(), 1u);
  std::shared_ptr<Tensor> next;
  ASSERT_EQ(pool.take(rows * vocab, false, &next), Status::kSuccess);
  EXPECT_NE(std::find(buffers.begin(), buffers.end(), next->data()), buffers.end());
  EXPECT_FALSE(digester.take(tickets[0], nullptr));  // a ticket is taken once
}

}  // namespace
}  // namespace ree::models
