// Cross-partition-count equivalence in one process (the pipeline's single-process mode), on the
// CPU: for the built-in model (4 layers) and transformers-made models of six architectures
// (scripts/reference/hf_reference.py, 3 layers), output ids, per-step logits hashes and per-layer
// activation hashes are identical for every n and for uneven explicit splits, with any number of
// micro-batches. Replay (one prefill over prompt + outputs, the verification path) re-derives the
// same tokens and hashes on every layout. Plan errors name the flag.
#include <cstdlib>
#include <filesystem>

#include "architectures.h"
#include "ree/models/builtin.h"
#include "ree/models/engine.h"
#include "test_util.h"

namespace ree {
namespace {

namespace fs = std::filesystem;

// transformers-made models, generated once per test process; empty when Python is unavailable.
std::string hfModelsDir() {
  static std::string dir = [] {
    const char* python = std::getenv("REE_PYTHON");
    const char* source = std::getenv("REE_SOURCE_DIR");
    const char* tmp = std::getenv("REE_TEST_TMP");
    if (python == nullptr || *python == '\0' || source == nullptr) return std::string();
    std::string out = std::string(tmp ? tmp : "/tmp/ree_pipeline_test") + "/hf";
    if (!fs::exists(out + "/gpt2/reference.json")) {
      fs::create_directories(out);
      std::string cmd = std::string(python) + " " + source + "/scripts/reference/hf_reference.py " +
                        out + " --steps 2 > " + out + ".log 2>&1";
      if (std::system(cmd.c_str()) != 0) {
        ADD_FAILURE() << "hf_reference.py failed: " << cmd;
        return std::string();
      }
    }
    return out;
  }();
  return dir;
}

struct Layout {
  int n = 1;
  std::vector<int64_t> layers;  // explicit split, or empty
  int micro_batches = 0;
  RepOpsSpec spec = kDefaultRepOpsSpec;
};

std::string describe(const Layout& layout) {
  std::string out = "n=" + std::to_string(layout.n) + " split=";
  for (int64_t l : layout.layers)
    out += std::to_string(l) + ",";
  return out + " micro=" + std::to_string(layout.micro_batches) + " " + repOpsSpecName(layout.spec);
}

std::unique_ptr<Engine> makeEngine(const std::string& model, const Layout& layout, bool trace) {
  EngineOptions options;
  options.model = model;
  options.device = Device::cpu();
  options.max_batch = 4;
  options.max_context = 96;
  options.n_partitions = layout.n;
  options.partition_layers = layout.layers;
  options.micro_batches = layout.micro_batches;
  options.repops_spec = layout.spec;
  options.trace_layer_hashes = trace;
  std::unique_ptr<Engine> engine;
  Status status = Engine::create(options, &engine);
  EXPECT_EQ(status, Status::kSuccess) << describe(layout) << ": " << lastErrorMessage();
  return engine;
}

std::vector<GenerationRequest> requests() {
  std::vector<GenerationRequest> out;
  for (int i = 0; i < 6; ++i) {
    GenerationRequest r;
    for (int j = 0; j < 2 + 5 * i; ++j)
      r.prompt_ids.push_back((j * 37 + i * 11) % 250 + 3);
    r.max_new_tokens = 6 + i;
    if (i % 2 == 1) {
      r.sampling.temperature = 0.9f;
      r.sampling.top_p = 0.95f;
      r.sampling.seed = 77 + i;
    }
    out.push_back(r);
  }
  return out;
}

void checkLayoutsAgree(const std::string& model, const std::vector<Layout>& layouts) {
  std::vector<GenerationRequest> reqs = requests();
  std::vector<GenerationResult> reference;
  for (const Layout& layout : layouts) {
    std::unique_ptr<Engine> engine = makeEngine(model, layout, /*trace=*/true);
    ASSERT_TRUE(engine);
    ASSERT_EQ(static_cast<int>(engine->plan().size()), layout.n);
    std::vector<GenerationResult> results;
    ASSERT_EQ(engine->generate(reqs, &results), Status::kSuccess)
        << model << " " << describe(layout) << ": " << lastErrorMessage();
    for (size_t r = 0; r < results.size(); ++r) {
      ASSERT_EQ(results[r].step_logits_sha256.size(), results[r].output_ids.size());
      ASSERT_EQ(results[r].step_layer_sha256.size(), results[r].output_ids.size());
      ASSERT_EQ(results[r].step_layer_sha256[0].size(),
                static_cast<size_t>(engine->config().num_layers));
    }
    if (reference.empty()) {
      reference = results;
      continue;
    }
    for (size_t r = 0; r < results.size(); ++r) {
      EXPECT_EQ(results[r].output_ids, reference[r].output_ids)
          << model << " " << describe(layout) << " request " << r;
      EXPECT_EQ(results[r].step_logits_sha256, reference[r].step_logits_sha256)
          << model << " " << describe(layout) << " request " << r;
      EXPECT_EQ(results[r].step_layer_sha256, reference[r].step_layer_sha256)
          << model << " " << describe(layout) << " request " << r;
    }
    // The verification path on this layout re-derives what n = 1 generated.
    for (size_t r = 0; r < reqs.size(); r += 3) {
      ReplayRequest replay;
      replay.prompt_ids = reference[r].prompt_ids;
      replay.output_ids = reference[r].output_ids;
      replay.sampling = reqs[r].sampling;
      replay.request_index = r;
      replay.trace_layer_hashes = true;
      ReplayResult again;
      ASSERT_EQ(engine->replay(replay, &again), Status::kSuccess) << lastErrorMessage();
      EXPECT_EQ(again.tokens, reference[r].output_ids) << model << " " << describe(layout);
      EXPECT_EQ(again.step_logits_sha256, reference[r].step_logits_sha256)
          << model << " " << describe(layout);
      EXPECT_EQ(again.step_layer_sha256, reference[r].step_layer_sha256)
          << model << " " << describe(layout);
    }
  }
}

TEST(Pipeline, BuiltinModelIsIdenticalForEveryPartitionCount) {
  checkLayoutsAgree("builtin:tiny-llama", {{1, {}, 0},
                                           {2, {}, 0},
                                           {3, {}, 0},
                                           {4, {}, 0},
                                           {2, {3, 1}, 0},
                                           {2, {1, 3}, 2},
                                           {3, {2, 1, 1}, 3},
                                           {4, {}, 4},
                                           {1, {}, 3}});
}

TEST(Pipeline, EveryArchitectureIsIdenticalForEveryPartitionCount) {
  std::string dir = hfModelsDir();
  if (dir.empty()) GTEST_SKIP() << "REE_PYTHON with torch/transformers is not configured";
  for (const std::string& name : test::referenceModelNames()) {
    SCOPED_TRACE(name);
    checkLayoutsAgree(dir + "/" + name,
                      {{1, {}, 0}, {2, {}, 0}, {3, {}, 3}, {2, {1, 2}, 2}, {2, {2, 1}, 0}});
  }
}

// repops-2 (integer linear layers): the same guarantees for every architecture, n = 1..4.
TEST(Pipeline, EveryArchitectureIsIdenticalForEveryPartitionCountUnderRepOps2) {
  std::string dir = hfModelsDir();
  if (dir.empty()) GTEST_SKIP() << "REE_PYTHON with torch/transformers is not configured";
  const RepOpsSpec two = RepOpsSpec::kRepOps2;
  checkLayoutsAgree("builtin:tiny-llama", {{1, {}, 0, two}, {4, {}, 0, two}, {2, {1, 3}, 2, two}});
  for (const std::string& name : test::referenceModelNames()) {
    SCOPED_TRACE(name);
    checkLayoutsAgree(dir + "/" + name, {{1, {}, 0, two}, {2, {}, 0, two}, {3, {}, 3, two}});
  }
}

// repops-3 (integer linear layers, one exponent per row): the same guarantees, the built-in model
// on n = 1..4 (uneven, micro-batched), every architecture on n = 1..3.
TEST(Pipeline, EveryArchitectureIsIdenticalForEveryPartitionCountUnderRepOps3) {
  const RepOpsSpec three = RepOpsSpec::kRepOps3;
  checkLayoutsAgree("builtin:tiny-llama", {{1, {}, 0, three},
                                           {2, {}, 0, three},
                                           {3, {2, 1, 1}, 3, three},
                                           {4, {}, 0, three},
                                           {2, {1, 3}, 2, three}});
  std::string dir = hfModelsDir();
  if (dir.empty()) GTEST_SKIP() << "REE_PYTHON with torch/transformers is not configured";
  for (const std::string& name : test::referenceModelNames()) {
    SCOPED_TRACE(name);
    checkLayoutsAgree(dir + "/" + name, {{1, {}, 0, three}, {2, {}, 0, three}, {3, {}, 3, three}});
  }
}

// Synthetic weights (benchmarks of large shapes): generated per tensor from the seed, so stages
// that generate only their own tensors agree with one process that generates all of them.
TEST(Pipeline, SyntheticWeightsAreIdenticalForEveryPartitionCount) {
  std::string builtin;
  ASSERT_EQ(models::materializeBuiltinModel("builtin:tiny-llama", &builtin), Status::kSuccess)
      << lastErrorMessage();
  const char* tmp = std::getenv("REE_TEST_TMP");
  std::string dir = std::string(tmp ? tmp : "/tmp/ree_pipeline_test") + "/synthetic";
  fs::create_directories(dir);
  fs::copy_file(builtin + "/config.json", dir + "/config.json",
                fs::copy_options::overwrite_existing);
  checkLayoutsAgree("synthetic:" + dir, {{1, {}, 0}, {2, {}, 2}, {4, {}, 0}, {3, {1, 1, 2}, 3}});
}

TEST(Pipeline, ReplayDetectsAChangedToken) {
  std::unique_ptr<Engine> engine = makeEngine("builtin:tiny-llama", {2, {}, 0}, true);
  ASSERT_TRUE(engine);
  std::vector<GenerationRequest> reqs = requests();
  reqs.resize(1);
  reqs[0].max_new_tokens = 8;
  std::vector<GenerationResult> results;
  ASSERT_EQ(engine->generate(reqs, &results), Status::kSuccess) << lastErrorMessage();
  ReplayRequest replay;
  replay.prompt_ids = results[0].prompt_ids;
  replay.output_ids = results[0].output_ids;
  replay.output_ids[4] = (replay.output_ids[4] + 1) % 256;  // a forged token at step 4
  replay.trace_layer_hashes = true;
  ReplayResult again;
  ASSERT_EQ(engine->replay(replay, &again), Status::kSuccess) << lastErrorMessage();
  // Steps 0..4 see the true context: same logits; the token of step 4 differs from the forgery.
  for (int t = 0; t <= 4; ++t)
    EXPECT_EQ(again.step_logits_sha256[t], results[0].step_logits_sha256[t]) << "step " << t;
  EXPECT_NE(again.tokens[4], replay.output_ids[4]);
  // Step 5 is computed from the forged token: its first layer's activations already differ.
  EXPECT_NE(again.step_layer_sha256[5][0], results[0].step_layer_sha256[5][0]);
}

TEST(Pipeline, PlanErrorsNameTheFlag) {
  EngineOptions options;
  options.model = "builtin:tiny-llama";
  options.device = Device::cpu();
  options.max_context = 64;
  std::vector<partitioner::Stage> stages;
  options.n_partitions = 5;  // 4 layers
  EXPECT_EQ(Engine::planStages(options, &stages), Status::kInvalidArgument);
  EXPECT_NE(std::string(lastErrorMessage()).find("layers"), std::string::npos)
      << lastErrorMessage();
  options.n_partitions = 2;
  options.partition_layers = {3, 2};
  EXPECT_EQ(Engine::planStages(options, &stages), Status::kInvalidArgument);
  options.partition_layers = {4, 0};
  EXPECT_EQ(Engine::planStages(options, &stages), Status::kInvalidArgument);
  options.partition_layers = {};
  options.memory_budget_bytes = 1024;  // nothing fits in 1 KiB
  EXPECT_EQ(Engine::planStages(options, &stages), Status::kOutOfMemory) << lastErrorMessage();
  options.memory_budget_bytes = 0;
  ASSERT_EQ(Engine::planStages(options, &stages), Status::kSuccess) << lastErrorMessage();
  ASSERT_EQ(stages.size(), 2u);
  EXPECT_TRUE(stages[0].embedding && stages[1].head);
  EXPECT_EQ(stages[0].end_layer, stages[1].first_layer);
  options.stage_devices = {Device::cpu()};
  EXPECT_EQ(Engine::planStages(options, &stages), Status::kInvalidArgument);
}

}  // namespace
}  // namespace ree
