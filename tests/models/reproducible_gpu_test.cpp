// Cross-hardware identity of whole models in reproducible mode: the CPU and the GPU produce
// identical output ids and identical SHA-256 hashes of every step's logits, for the built-in
// model and for transformers-made models of every architecture (scripts/reference/hf_reference.py),
// greedy and sampled, under every RepOps spec version (repops-1, repops-2, repops-3); on the GPU, a
// prompt alone equals the prompt inside a mixed batch.
#include <tuple>

#include "architectures.h"
#include "ree/models/engine.h"
#include "reference_model_dir.h"
#include "test_util.h"

namespace ree {
namespace {

std::vector<GenerationResult> run(const std::string& model, RepOpsSpec spec, Device device,
                                  const std::vector<GenerationRequest>& requests, int max_batch) {
  EngineOptions options;
  options.model = test::referenceModelDir(model);
  options.repops_spec = spec;
  options.device = device;
  options.max_batch = max_batch;
  options.max_context = 200;
  std::unique_ptr<Engine> engine;
  EXPECT_EQ(Engine::create(options, &engine), Status::kSuccess) << lastErrorMessage();
  std::vector<GenerationResult> results;
  if (engine) {
    EXPECT_EQ(engine->generate(requests, &results), Status::kSuccess) << lastErrorMessage();
  }
  return results;
}

std::vector<GenerationRequest> requests(bool ids) {
  std::vector<GenerationRequest> out;
  for (int i = 0; i < 8; ++i) {
    GenerationRequest r;
    if (ids) {
      for (int j = 0; j < 3 + 7 * i; ++j)
        r.prompt_ids.push_back((j * 37 + i * 11) % 300 + 3);
    } else {
      r.prompt_text = std::string("Prompt number ") + std::to_string(i) + std::string(i * 5, '!');
    }
    r.max_new_tokens = 24;
    if (i % 3 == 1) {
      r.sampling.temperature = 0.7f;
      r.sampling.top_k = 50;
      r.sampling.top_p = 0.9f;
      r.sampling.seed = 42 + i;
    }
    out.push_back(r);
  }
  return out;
}

class GpuIdentity : public ::testing::TestWithParam<std::tuple<std::string, RepOpsSpec>> {};

TEST_P(GpuIdentity, CpuAndGpuGiveIdenticalBits) {
  REE_SKIP_WITHOUT_GPU();
  const std::string model = std::get<0>(GetParam());
  const RepOpsSpec spec = std::get<1>(GetParam());
  bool builtin = model.rfind("builtin:", 0) == 0;
  std::vector<GenerationRequest> reqs = requests(!builtin);
  auto cpu = run(model, spec, Device::cpu(), reqs, 8);
  auto gpu = run(model, spec, Device::cuda(0), reqs, 8);
  auto gpu_narrow = run(model, spec, Device::cuda(0), reqs, 3);
  ASSERT_EQ(cpu.size(), reqs.size());
  ASSERT_EQ(gpu.size(), reqs.size());
  for (size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_EQ(cpu[i].output_ids, gpu[i].output_ids) << model << " prompt " << i;
    EXPECT_EQ(cpu[i].step_logits_sha256, gpu[i].step_logits_sha256) << model << " prompt " << i;
    EXPECT_EQ(gpu_narrow[i].step_logits_sha256, gpu[i].step_logits_sha256) << model << " " << i;
  }
  std::printf(
      "%s %s: 8 prompts x %zu+ steps, CPU == GPU bitwise; output ids sha256 of prompt 0: %s\n",
      model.c_str(), repOpsSpecName(spec), gpu[0].output_ids.size(),
      gpu[0].output_ids_sha256.c_str());
}

// The built-in model, then every architecture's reference model (architectures.h).
std::vector<std::string> gpuIdentityModels() {
  std::vector<std::string> models = {"builtin:tiny-llama"};
  for (const std::string& name : test::referenceModelNames())
    models.push_back(name);
  return models;
}

INSTANTIATE_TEST_SUITE_P(Models, GpuIdentity,
                         ::testing::Combine(::testing::ValuesIn(gpuIdentityModels()),
                                            ::testing::Values(RepOpsSpec::kRepOps1,
                                                              RepOpsSpec::kRepOps2,
                                                              RepOpsSpec::kRepOps3)),
                         [](const auto& info) {
                           std::string name = std::get<0>(info.param);
                           for (char& c : name) {
                             if (!isalnum(static_cast<unsigned char>(c))) c = '_';
                           }
                           std::string spec =
                               repOpsSpecName(std::get<1>(info.param));  // "repops-N"
                           return name + "_" + spec.erase(spec.find('-'), 1);
                         });

}  // namespace
}  // namespace ree
