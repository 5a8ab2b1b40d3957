// CUDA graphs of the layers (EngineOptions::cuda_graphs, CausalLM::setStepGraphs) never change
// results: for every operation set and every architecture's reference model, a GPU run with
// graphs gives exactly the output ids and per-step logits hashes of the same run without them,
// and the graphs did run (Engine::graphSteps). The requests end at different steps, so a run
// records sets for several token counts: one token (q and k rotated in one launch; the ATen sets
// only), 2-16 (fused projections split by copies recorded in the graphs) and more than 16
// (separate projections).
// In reproducible mode the graphed GPU run also equals the CPU. Skips without a GPU.
#include <tuple>

#include "architectures.h"
#include "ree/models/engine.h"
#include "reference_model_dir.h"
#include "test_util.h"

namespace ree {
namespace {

struct RunResult {
  std::vector<GenerationResult> results;
  int64_t graph_steps = 0;
  int64_t lookahead_steps = 0;
};

struct SetUnderTest {
  const char* name;
  OperationSetKind kind;
  RepOpsSpec spec;
};

const SetUnderTest kSets[] = {
    {"repops1", OperationSetKind::kReproducible, RepOpsSpec::kRepOps1},
    {"repops3", OperationSetKind::kReproducible, RepOpsSpec::kRepOps3},
    {"default", OperationSetKind::kDefault, kDefaultRepOpsSpec},
    {"deterministic", OperationSetKind::kDeterministic, kDefaultRepOpsSpec},
};

RunResult run(const std::string& model, const SetUnderTest& set, Device device, bool graphs,
              const std::vector<GenerationRequest>& requests, int max_batch, int partitions = 1,
              bool lookahead = false) {
  EngineOptions options;
  options.model = test::referenceModelDir(model);
  options.operation_set = set.kind;
  options.repops_spec = set.spec;
  options.device = device;
  options.max_batch = max_batch;
  options.max_context = 160;
  options.cuda_graphs = graphs;
  options.n_partitions = partitions;
  options.decode_lookahead = lookahead;
  std::unique_ptr<Engine> engine;
  RunResult out;
  EXPECT_EQ(Engine::create(options, &engine), Status::kSuccess) << lastErrorMessage();
  if (!engine) return out;
  EXPECT_EQ(engine->generate(requests, &out.results), Status::kSuccess) << lastErrorMessage();
  out.graph_steps = engine->graphSteps();
  out.lookahead_steps = engine->lookaheadSteps();
  return out;
}

// `count` prompts of different lengths that stop after different numbers of tokens (so the decode
// batch shrinks step by step); every third one sampled.
std::vector<GenerationRequest> requests(int count) {
  std::vector<GenerationRequest> out;
  for (int i = 0; i < count; ++i) {
    GenerationRequest r;
    for (int j = 0; j < 2 + 5 * i % 23; ++j)
      r.prompt_ids.push_back((j * 41 + i * 13) % 250 + 3);  // within every model's vocabulary
    r.max_new_tokens = 8 + 3 * (i % 7);
    if (i % 3 == 2) {
      r.sampling.temperature = 0.8f;
      r.sampling.top_k = 40;
      r.sampling.seed = 7 + i;
    }
    out.push_back(r);
  }
  return out;
}

void expectSame(const RunResult& got, const RunResult& want, const std::string& what) {
  ASSERT_EQ(got.results.size(), want.results.size()) << what;
  for (size_t i = 0; i < want.results.size(); ++i) {
    EXPECT_EQ(got.results[i].output_ids, want.results[i].output_ids) << what << ", request " << i;
    EXPECT_EQ(got.results[i].step_logits_sha256, want.results[i].step_logits_sha256)
        << what << ", request " << i;
  }
}

class StepGraphs : public ::testing::TestWithParam<std::string> {};

TEST_P(StepGraphs, GraphsGiveTheBitsOfEagerSteps) {
  REE_SKIP_WITHOUT_GPU();
  const std::string model = GetParam();
  // Batch 1 (one token a step), 8 requests at once (2..8 tokens) and 20 (up to 20).
  const std::vector<std::pair<int, int>> shapes = {{1, 1}, {8, 8}, {20, 20}};
  for (const SetUnderTest& set : kSets) {
    for (const auto& [count, max_batch] : shapes) {
      const std::vector<GenerationRequest> reqs = requests(count);
      const std::string what = model + " " + set.name + " batch " + std::to_string(max_batch);
      const RunResult eager = run(model, set, Device::cuda(0), false, reqs, max_batch);
      const RunResult graphed = run(model, set, Device::cuda(0), true, reqs, max_batch);
      EXPECT_EQ(eager.graph_steps, 0) << what;
      // The reproducible set records no one-token steps (ReproducibleOps::graphsPayAt).
      if (set.kind == OperationSetKind::kReproducible && max_batch == 1) {
        EXPECT_EQ(graphed.graph_steps, 0) << what;
      } else {
        EXPECT_GT(graphed.graph_steps, 0) << what << ": no step ran from graphs";
      }
      expectSame(graphed, eager, what + ", graphs vs none");
      if (set.kind == OperationSetKind::kReproducible) {
        expectSame(graphed, run(model, set, Device::cpu(), false, reqs, max_batch),
                   what + ", GPU graphs vs CPU");
      }
      std::printf("%s: %zu requests, %lld of the steps' layers from graphs, same bits\n",
                  what.c_str(), reqs.size(), static_cast<long long>(graphed.graph_steps));
    }
  }
}

// Two stages in one process on one GPU: each stage records its own graphs.
TEST_P(StepGraphs, PipelineStagesRecordTheirOwnGraphs) {
  REE_SKIP_WITHOUT_GPU();
  const std::string model = GetParam();
  const std::vector<GenerationRequest> reqs = requests(8);
  const RunResult one = run(model, kSets[0], Device::cuda(0), false, reqs, 8);
  const RunResult two = run(model, kSets[0], Device::cuda(0), true, reqs, 8, /*partitions=*/2);
  EXPECT_GT(two.graph_steps, 0) << model;
  expectSame(two, one, model + " repops1, 2 stages with graphs vs 1 without");
}

// Decode lookahead (the next step embeds the ids the device selected) with graphs gives the bits
// of neither: greedy requests, every set.
TEST_P(StepGraphs, LookaheadWithGraphsGivesTheSameBits) {
  REE_SKIP_WITHOUT_GPU();
  const std::string model = GetParam();
  std::vector<GenerationRequest> reqs = requests(8);
  for (GenerationRequest& r : reqs)
    r.sampling = SamplingParams();
  for (const SetUnderTest& set : kSets) {
    const std::string what = model + " " + set.name;
    const RunResult plain = run(model, set, Device::cuda(0), false, reqs, 8);
    const RunResult ahead = run(model, set, Device::cuda(0), true, reqs, 8, 1, /*lookahead=*/true);
    EXPECT_GT(ahead.lookahead_steps, 0) << what;
    EXPECT_GT(ahead.graph_steps, 0) << what;
    expectSame(ahead, plain, what + ", lookahead + graphs vs neither");
  }
}

std::vector<std::string> models() {
  std::vector<std::string> names = {"builtin:tiny-llama"};
  for (const std::string& name : test::referenceModelNames())
    names.push_back(name);
  return names;
}

INSTANTIATE_TEST_SUITE_P(Models, StepGraphs, ::testing::ValuesIn(models()), [](const auto& info) {
  std::string name = info.param;
  for (char& c : name) {
    if (!isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return name;
});

}  // namespace
}  // namespace ree
