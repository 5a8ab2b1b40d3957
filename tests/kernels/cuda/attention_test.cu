// CUDA attention == CPU attention, bitwise, for random shapes (both the split-KV decode path and
// the flash prefill path, mixed in one batch), prefill == decode on the GPU, and appendKv on the
// GPU.
#define REE_ATTENTION_TEST_HELPERS_ONLY 1
#include "../cpu/attention_test.cpp"

#include <cuda_runtime.h>

#include <cstdio>
#include <random>

#include "../../../kernels/src/cuda/attention_variant.h"
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

// Runs `prob` with the given prefill kernel (restores the default afterwards).
std::vector<unsigned char> runGpuWith(repops::cuda::PrefillKernel kernel,
                                      const AttentionProblem& prob, Buffers& host) {
  repops::cuda::setPrefillKernelForBenchmark(kernel);
  std::vector<unsigned char> out = runGpu(prob, host);
  repops::cuda::setPrefillKernelForBenchmark(repops::cuda::PrefillKernel::kTiled);
  return out;
}

// The tiled prefill kernel (also with tiles of at most 64 rows, and the chunk kernel's flash mode
// it replaced) == CPU, bitwise, at its edges: tiles of 128, 64 and 32 rows (8, 4, 2 rows per
// thread: chosen by shared memory and the longest sequence) with the last tile partial, rows whose
// positions cross chunk boundaries inside a tile, cached_lens > 0 (chunked prefill, the first new
// token inside a chunk), head_dim 40..256 (one or two 128-wide parts), G = 1, 4, 8, bf16 / f16 /
// f32 caches, block sizes 16 and 32, shuffled block tables, and a decode-like sequence in the same
// call (split path).
TEST(AttentionCuda, PrefillTilesMatchCpu) {
  REE_SKIP_WITHOUT_GPU();
  struct Case {
    int head_dim, group, n_kv_heads;
    DType kv_dtype;
    int block_size;
    std::vector<Sequence> seqs;  // {seed, cached, n_new}
  };
  const std::vector<Case> cases = {
      // 128-row tiles (bf16, head_dim 128): 3 partial tiles per KV head, chunk edges inside.
      {128, 4, 2, DType::kBF16, 16, {{1, 0, 150}, {2, 37, 1}}},
      {128, 4, 1, DType::kBF16, 32, {{3, 61, 45}, {4, 200, 70}}},
      // f32 cache at head_dim 128: 64-row tiles; f16 at 96 and 80, 128-row tiles.
      {128, 4, 2, DType::kF32, 16, {{5, 5, 77}}},
      {96, 8, 1, DType::kF16, 16, {{6, 130, 33}, {7, 0, 5}}},
      {80, 1, 3, DType::kF16, 32, {{8, 63, 200}}},
      // Fewer rows: 64-row tiles (G = 1, 40..64 tokens), G = 8 with 5 tokens (40 rows).
      {64, 1, 2, DType::kBF16, 16, {{9, 10, 60}, {10, 64, 41}}},
      {40, 8, 1, DType::kF32, 32, {{11, 127, 5}, {12, 0, 1}}},
      {64, 8, 2, DType::kF16, 16, {{13, 1, 90}}},
      // head_dim 256: two 128-wide parts; bf16 64-row tiles, f32 32-row tiles.
      {256, 4, 1, DType::kBF16, 16, {{14, 0, 100}, {15, 250, 9}}},
      {256, 4, 2, DType::kF32, 32, {{16, 70, 40}}},
      {256, 1, 1, DType::kF16, 16, {{17, 3, 66}}},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    AttentionProblem prob;
    prob.head_dim = c.head_dim;
    prob.n_kv_heads = c.n_kv_heads;
    prob.n_heads = c.n_kv_heads * c.group;
    prob.kv_dtype = c.kv_dtype;
    prob.q_dtype = i % 2 ? DType::kF32 : DType::kBF16;
    prob.out_dtype = i % 3 ? DType::kBF16 : DType::kF32;
    prob.block_size = c.block_size;
    prob.shuffle_blocks = true;
    prob.seqs = c.seqs;
    Buffers host = prob.buildHost();
    const std::vector<unsigned char> cpu = runCpuBytes(prob, host);
    for (int kernel = 0; kernel < 3; ++kernel) {  // tiled, chunk, tiled with 64-row tiles
      EXPECT_EQ(test::firstBitDifference(
                    runGpuWith(repops::cuda::PrefillKernel(kernel), prob, host), cpu),
                -1)
          << "case " << i << " head_dim " << c.head_dim << " G " << c.group << " kv "
          << dtypeName(c.kv_dtype) << " prefill kernel " << kernel;
    }
  }
}

// The benchmark's prefill shape (Llama-3-8B: 32/8 heads, head_dim 128, bf16, 1024 tokens, so 32
// full 128-row tiles per KV head over up to 16 chunks): tiled == chunk kernel on the GPU, and a
// slice of the rows == CPU (the whole problem is slow on the CPU).
TEST(AttentionCuda, LlamaPrefillTiledEqualsChunkKernel) {
  REE_SKIP_WITHOUT_GPU();
  AttentionProblem prob;
  prob.n_heads = 32;
  prob.n_kv_heads = 8;
  prob.head_dim = 128;
  prob.kv_dtype = DType::kBF16;
  prob.q_dtype = DType::kBF16;
  prob.out_dtype = DType::kBF16;
  prob.block_size = 16;
  prob.shuffle_blocks = true;
  prob.seqs = {{21, 0, 1024}};
  Buffers host = prob.buildHost();
  const auto tiled = runGpuWith(repops::cuda::PrefillKernel::kTiled, prob, host);
  const auto chunk = runGpuWith(repops::cuda::PrefillKernel::kChunk, prob, host);
  const auto tiled64 = runGpuWith(repops::cuda::PrefillKernel::kTiledRows64, prob, host);
  EXPECT_EQ(test::firstBitDifference(tiled, chunk), -1);
  EXPECT_EQ(test::firstBitDifference(tiled64, chunk), -1);
  // The last 40 tokens alone (cached 984): the same rows, by the CPU.
  AttentionProblem tail = prob;
  tail.seqs = {{21, 984, 40}};
  Buffers tail_host = tail.buildHost();
  const std::vector<unsigned char> cpu = runCpuBytes(tail, tail_host);
  const size_t row_bytes = size_t(prob.n_heads) * prob.head_dim * 2;
  const std::vector<unsigned char> tiled_tail(tiled.end() - 40 * row_bytes, tiled.end());
  EXPECT_EQ(test::firstBitDifference(tiled_tail, cpu), -1);
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
