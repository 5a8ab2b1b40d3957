// CUDA attention == CPU attention, bitwise, for random shapes (both the split-KV decode path and
// the flash prefill path, mixed in one batch), prefill == decode on the GPU, and appendKv on the
// GPU.
#define REE_ATTENTION_TEST_HELPERS_ONLY 1
#include "../cpu/attention_test.cpp"

#include <cuda_runtime.h>

#include <cstdio>
#include <random>

#include "cuda_test_util.h"

namespace ree {
namespace {

using test::attn::AttentionProblem;
using test::attn::Buffers;
using test::attn::Sequence;

using DeviceBytes = test::DeviceBuffer;

// Runs the problem on the GPU; returns the output bytes.
std::vector<unsigned char> runGpu(const AttentionProblem& prob, Buffers& host) {
  DeviceBytes q(host.q), k(host.k), v(host.v), out(host.out);
  repops::AttentionArgs args = prob.args(host);
  args.q = q.ptr;
  args.out = out.ptr;
  args.cache.k = k.ptr;
  args.cache.v = v.ptr;
  EXPECT_EQ(repops::cuda::attention(args, nullptr), Status::kSuccess) << lastErrorMessage();
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  return out.download(host.out.size());
}

std::vector<unsigned char> runCpuBytes(const AttentionProblem& prob, Buffers& host) {
  repops::AttentionArgs args = prob.args(host);
  EXPECT_EQ(repops::cpu::attention(args), Status::kSuccess) << lastErrorMessage();
  return host.out;
}

TEST(AttentionCuda, MatchesCpuBitwiseOnRandomShapes) {
  REE_SKIP_WITHOUT_GPU();
  std::mt19937 rng(20240611);
  const int head_dims[] = {1, 5, 64, 72, 80, 96, 128, 129, 200, 256};
  const DType dtypes[] = {DType::kF32, DType::kBF16, DType::kF16};
  const int groups[] = {1, 2, 4, 7, 8};
  const int trials = std::getenv("REE_TEST_FULL") ? 120 : 40;
  for (int trial = 0; trial < trials; ++trial) {
    AttentionProblem prob;
    prob.head_dim = head_dims[rng() % 10];
    prob.n_kv_heads = 1 + rng() % 3;
    prob.n_heads = prob.n_kv_heads * groups[rng() % 5];
    prob.kv_dtype = dtypes[rng() % 3];
    prob.q_dtype = dtypes[rng() % 3];
    prob.out_dtype = dtypes[rng() % 3];
    prob.block_size = (rng() % 2) ? 16 : 1 + rng() % 100;
    prob.shuffle_blocks = rng() % 2;
    if (rng() % 4 == 0) prob.scale = 0.05f + float(rng() % 100) / 400.0f;
    const int batch = 1 + rng() % 5;
    for (int s = 0; s < batch; ++s) {
      const int kind = rng() % 3;  // decode, short multi-token, prefill
      const int cached = rng() % 3 == 0 ? 0 : int(rng() % 700);
      const int n_new = kind == 0 ? 1 : kind == 1 ? 1 + rng() % 4 : 1 + rng() % 300;
      prob.seqs.push_back(Sequence{rng(), cached, n_new});
    }
    Buffers host = prob.buildHost();
    const std::vector<unsigned char> gpu = runGpu(prob, host);
    const std::vector<unsigned char> cpu = runCpuBytes(prob, host);
    const long long diff = test::firstBitDifference(gpu, cpu);
    EXPECT_EQ(diff, -1) << "trial " << trial << " head_dim " << prob.head_dim << " heads "
                        << prob.n_heads << "/" << prob.n_kv_heads << " kv "
                        << dtypeName(prob.kv_dtype) << " block_size " << prob.block_size
                        << " first differing byte " << diff;
  }
}

TEST(AttentionCuda, DecodeShapeMatchesCpu) {
  REE_SKIP_WITHOUT_GPU();
  // The benchmark shape (32 q heads / 8 KV heads, head_dim 128, bf16 cache, context 4096).
  AttentionProblem prob;
  prob.n_heads = 32;
  prob.n_kv_heads = 8;
  prob.head_dim = 128;
  prob.kv_dtype = DType::kBF16;
  prob.q_dtype = DType::kBF16;
  prob.out_dtype = DType::kBF16;
  prob.block_size = 16;
  prob.shuffle_blocks = true;
  prob.seqs = {{1, 4095, 1}, {2, 1000, 1}, {3, 63, 1}};
  Buffers host = prob.buildHost();
  EXPECT_EQ(test::firstBitDifference(runGpu(prob, host), runCpuBytes(prob, host)), -1);
}

// Large decode batches make a split-path block compute a run of consecutive chunks: the shortest
// run (1, 2, 4, 8) whose blocks all fit on the GPU at once, else 4. On a 132-SM H100/H200 the
// bf16 batches below take runs of 2, 4, 8 and 4 chunks; DecodeShapeMatchesCpu and the random
// shapes take 1. Ragged contexts leave the last block of a sequence with fewer chunks than the
// others; the multi-token sequence and head_dim 64 cover the 8-rows-per-thread and
// generic-head_dim instantiations.
TEST(AttentionCuda, LargeDecodeBatchesMatchCpu) {
  REE_SKIP_WITHOUT_GPU();
  struct Case {
    int batch, head_dim, n_new_last;
    DType kv_dtype;
  };
  const Case cases[] = {{2, 128, 1, DType::kBF16}, {4, 128, 1, DType::kBF16},
                        {8, 128, 1, DType::kBF16}, {24, 128, 1, DType::kBF16},
                        {24, 128, 3, DType::kF16}, {24, 64, 1, DType::kF32}};
  std::mt19937 rng(7);
  for (const Case& c : cases) {
    AttentionProblem prob;
    prob.n_heads = 32;
    prob.n_kv_heads = 8;
    prob.head_dim = c.head_dim;
    prob.kv_dtype = c.kv_dtype;
    prob.q_dtype = DType::kBF16;
    prob.out_dtype = DType::kBF16;
    prob.block_size = 16;
    prob.shuffle_blocks = true;
    for (int s = 0; s < c.batch; ++s) {
      // Mostly long contexts, some ending inside a chunk group or a chunk.
      const int cached = s % 5 == 4 ? int(rng() % 1500) : 3000 + int(rng() % 1096);
      prob.seqs.push_back({rng(), cached, s + 1 == c.batch ? c.n_new_last : 1});
    }
    Buffers host = prob.buildHost();
    EXPECT_EQ(test::firstBitDifference(runGpu(prob, host), runCpuBytes(prob, host)), -1)
        << "batch " << c.batch << " head_dim " << c.head_dim << " last n_new " << c.n_new_last;
  }
}

// The merge kernel folds a row's chunk states in factor tiles of 128 chunks (8192 positions),
// carrying the running maximum from one tile to the next, and loads the states in tiles of 32
// chunks ahead of the fold. Rows that end exactly at, just before and just after those edges
// (1, 2 and 3 factor tiles; partial load tiles), in one grid with rows of other lengths, for the
// head_dim 128 instantiation, the generic one (72) and two d's per thread (256).
TEST(AttentionCuda, LongContextsMergeAcrossFactorTiles) {
  REE_SKIP_WITHOUT_GPU();
  const int contexts[] = {8191, 8192, 8193, 2047, 16383, 16384, 20000, 8192 + 31 * 64 + 5};
  std::mt19937 rng(11);
  for (int head_dim : {128, 72, 256}) {
    AttentionProblem prob;
    prob.n_heads = 8;
    prob.n_kv_heads = 2;
    prob.head_dim = head_dim;
    prob.kv_dtype = DType::kBF16;
    prob.q_dtype = DType::kF32;
    prob.out_dtype = DType::kF32;
    prob.block_size = 16;
    prob.shuffle_blocks = true;
    for (int context : contexts) {
      // A context of c positions ends at position c - 1; the last sequence also brings 3 tokens.
      const int n_new = context == 20000 ? 3 : 1;
      prob.seqs.push_back({rng(), context - n_new, n_new});
    }
    Buffers host = prob.buildHost();
    EXPECT_EQ(test::firstBitDifference(runGpu(prob, host), runCpuBytes(prob, host)), -1)
        << "head_dim " << head_dim;
  }
}

TEST(AttentionCuda, PrefillEqualsDecodeOnGpu) {
  REE_SKIP_WITHOUT_GPU();
  for (int head_dim : {128, 80, 256}) {
    AttentionProblem whole;
    whole.n_heads = 8;
    whole.n_kv_heads = 2;
    whole.head_dim = head_dim;
    whole.kv_dtype = DType::kBF16;
    const int length = 333;
    whole.seqs = {{99, 0, length}};
    Buffers host = whole.buildHost();
    const std::vector<unsigned char> prefill = runGpu(whole, host);
    for (int piece : {1, 3, 50}) {
      std::vector<unsigned char> stitched;
      for (int start = 0; start < length; start += piece) {
        AttentionProblem part = whole;
        part.seqs = {{99, start, std::min(piece, length - start)}};
        Buffers part_host = part.buildHost();
        const std::vector<unsigned char> out = runGpu(part, part_host);
        stitched.insert(stitched.end(), out.begin(), out.end());
      }
      EXPECT_EQ(test::firstBitDifference(stitched, prefill), -1)
          << "piece " << piece << " head_dim " << head_dim;
    }
  }
}

TEST(AttentionCuda, AppendKvMatchesCpu) {
  REE_SKIP_WITHOUT_GPU();
  AttentionProblem prob;
  prob.n_heads = 4;
  prob.n_kv_heads = 2;
  prob.head_dim = 40;
  prob.kv_dtype = DType::kBF16;
  prob.seqs = {{8, 5, 3}, {9, 0, 20}, {10, 17, 1}};
  prob.block_size = 8;
  prob.shuffle_blocks = true;
  Buffers expected = prob.buildHost();
  Buffers host = prob.buildHost(/*fill_new_tokens=*/false);
  std::vector<float> k_new, v_new;
  prob.newRows(&k_new, &v_new);
  std::vector<unsigned char> k_bytes(k_new.size() * 4), v_bytes(v_new.size() * 4);
  std::memcpy(k_bytes.data(), k_new.data(), k_bytes.size());
  std::memcpy(v_bytes.data(), v_new.data(), v_bytes.size());
  DeviceBytes k_cache(host.k), v_cache(host.v), k_dev(k_bytes), v_dev(v_bytes);
  repops::KvAppendArgs args = prob.appendArgs(host, k_dev.ptr, v_dev.ptr, DType::kF32);
  args.k_cache = k_cache.ptr;
  args.v_cache = v_cache.ptr;
  ASSERT_EQ(repops::cuda::appendKv(args, nullptr), Status::kSuccess) << lastErrorMessage();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(k_cache.download(host.k.size()), expected.k);
  EXPECT_EQ(v_cache.download(host.v.size()), expected.v);
}

}  // namespace
}  // namespace ree
