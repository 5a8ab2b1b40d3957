// ree::compile: import, passes (folding, shape inference), artifacts, then an Executor on the
// operation set the options choose.
#include <stdlib.h>

#include <filesystem>

#include "artifacts.h"
#include "device_ops.h"
#include "executor.h"
#include "graph_passes.h"
#include "onnx_import.h"
#include "ree/compiler/compile.h"
#include "ree/core/file.h"
#include "ree/core/log.h"
#include "ree/core/text.h"
#include "tensor_limit.h"

namespace ree {

namespace {

using compiler::Executor;
using compiler::Graph;

class CompiledGraph final : public CompiledModel {
 public:
  CompiledGraph(std::unique_ptr<Executor> executor, std::string artifacts_dir, bool remove_dir)
      : executor_(std::move(executor)),
        artifacts_dir_(std::move(artifacts_dir)),
        remove_dir_(remove_dir) {
    inputs_ = describe(executor_->graph().inputs);
    outputs_ = describe(executor_->graph().outputs);
  }
  ~CompiledGraph() override {
    if (remove_dir_) {
      std::error_code ignored;
      std::filesystem::remove_all(artifacts_dir_, ignored);
    }
  }
  const std::vector<GraphValueInfo>& inputs() const override { return inputs_; }
  const std::vector<GraphValueInfo>& outputs() const override { return outputs_; }
  const std::string& artifactsDir() const override { return artifacts_dir_; }
  OperationSetKind operationSet() const override { return executor_->ops()->kind(); }
  Status run(const std::vector<GraphTensor>& inputs, std::vector<GraphTensor>* outputs) override {
    return executor_->run(inputs, outputs);
  }
  Status planStages(int n, int max_cut_values,
                    std::vector<partitioner::GraphStage>* stages) const override {
    const Graph& graph = executor_->graph();
    std::vector<partitioner::GraphNode> nodes;
    for (const compiler::Node& node : graph.nodes) {
      partitioner::GraphNode entry;
      entry.cost = 4096;
      for (int id : node.inputs) {
        if (id >= 0 && graph.isConstant(id))
          entry.cost += static_cast<int64_t>(graph.constants.at(id).nbytes());
      }
      entry.inputs = node.inputs;
      entry.outputs = node.outputs;
      nodes.push_back(std::move(entry));
    }
    std::vector<int> available = graph.inputs;
    for (const auto& constant : graph.constants)
      available.push_back(constant.first);
    return partitioner::partitionGraph(nodes, available, graph.outputs, {n, max_cut_values},
                                       stages);
  }
  Status runStage(const std::vector<GraphTensor>& inputs, const partitioner::GraphStage& stage,
                  const std::vector<GraphTensor>& incoming,
                  std::vector<GraphTensor>* outgoing) override {
    const bool last = static_cast<size_t>(stage.end) == executor_->graph().nodes.size();
    REE_CHECK_ARG(stage.begin >= 0 && stage.begin <= stage.end,
                  "run stage: nodes [%lld, %lld) are not a stage",
                  static_cast<long long>(stage.begin), static_cast<long long>(stage.end));
    return executor_->runRange(inputs, static_cast<size_t>(stage.begin),
                               static_cast<size_t>(stage.end), stage.incoming, incoming,
                               last ? nullptr : &stage.outgoing, outgoing);
  }

 private:
  std::vector<GraphValueInfo> describe(const std::vector<int>& ids) const {
    std::vector<GraphValueInfo> result;
    for (int id : ids) {
      const compiler::Value& value = executor_->graph().values[id];
      GraphValueInfo info;
      info.name = value.name;
      info.type = value.info.type;
      info.has_shape = value.info.rank_known;
      for (const compiler::Dim& d : value.info.dims) {
        info.dims.push_back(d.value);
        info.symbols.push_back(d.symbol);
      }
      result.push_back(std::move(info));
    }
    return result;
  }

  std::unique_ptr<Executor> executor_;
  std::string artifacts_dir_;
  bool remove_dir_;
  std::vector<GraphValueInfo> inputs_, outputs_;
};

// A new temporary directory (TMPDIR or /tmp).
Status makeTemporaryDir(std::string* out) {
  const char* tmp = getenv("TMPDIR");
  std::string pattern = std::string(tmp != nullptr && *tmp ? tmp : "/tmp") + "/ree-compile-XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) {
    return REE_FAIL(Status::kIoError, "cannot create a temporary artifacts directory %s",
                    printableText(pattern, 120).c_str());
  }
  *out = pattern;
  return Status::kSuccess;
}

Status createRunOps(const CompileOptions& options, std::unique_ptr<OperationSet>* out) {
  const OperationSetKind kind = options.requires_reproducibility ? OperationSetKind::kReproducible
                                                                 : options.non_reproducible_set;
  REE_CHECK_ARG(options.requires_reproducibility || kind != OperationSetKind::kReproducible,
                "compile: non_reproducible_set must be default or deterministic");
  return createOperationSet(kind, options.device, options.repops_spec, out);
}

}  // namespace

Status CompiledModel::planStages(int, int, std::vector<partitioner::GraphStage>*) const {
  return REE_FAIL(Status::kUnsupported, "this compiled model cannot be split into stages");
}

Status CompiledModel::runStage(const std::vector<GraphTensor>&, const partitioner::GraphStage&,
                               const std::vector<GraphTensor>&, std::vector<GraphTensor>*) {
  return REE_FAIL(Status::kUnsupported, "this compiled model cannot run a stage");
}

Status copyToCpu(const GraphTensor& in, GraphTensor* out) {
  return compiler::moveTo(in, Device::cpu(), out);
}

Status compileBytes(const std::string& bytes, const std::string& base_dir,
                    const CompileOptions& options, std::unique_ptr<CompiledModel>* out) {
  REE_CHECK_ARG(out != nullptr, "compile: null output");
  REE_CHECK_ARG(bytes.size() <= options.max_model_bytes,
                "model: %zu bytes exceed max_model_bytes = %llu", bytes.size(),
                static_cast<unsigned long long>(options.max_model_bytes));
  compiler::ScopedTensorByteLimit limit(options.max_tensor_bytes);
  compiler::ImportResult imported;
  compiler::ImportLimits limits{base_dir, options.max_external_bytes};
  REE_RETURN_IF_ERROR(compiler::importOnnx(bytes, limits, &imported));
  std::unique_ptr<OperationSet> fold_ops, run_ops;
  REE_RETURN_IF_ERROR(createOperationSet(OperationSetKind::kReproducible, Device::cpu(),
                                         options.repops_spec, &fold_ops));
  REE_RETURN_IF_ERROR(createRunOps(options, &run_ops));
  compiler::PassStats stats;
  // Fusions lower exported patterns to the RepOps the native models call: reproducible set only.
  REE_RETURN_IF_ERROR(compiler::runGraphPasses(&imported.graph, fold_ops.get(),
                                               options.requires_reproducibility, &stats));
  std::string dir = options.artifacts_dir;
  const bool temporary = dir.empty();
  if (temporary) REE_RETURN_IF_ERROR(makeTemporaryDir(&dir));
  compiler::ArtifactsInput artifacts{&imported.graph, &options, run_ops->kind(), stats.folded_nodes,
                                     imported.external_files};
  Status status = compiler::writeArtifacts(dir, artifacts);
  const bool keep = !temporary || getenv("REE_DEBUG") != nullptr;
  if (temporary && keep)
    logMessage(LogLevel::kInfo, "compile: artifacts kept in %s (REE_DEBUG)", dir.c_str());
  if (status != Status::kSuccess) {
    if (!keep) std::filesystem::remove_all(dir);
    return status;
  }
  auto executor = std::make_unique<Executor>(std::move(imported.graph), std::move(run_ops),
                                             options.max_tensor_bytes);
  *out = std::make_unique<CompiledGraph>(std::move(executor), dir, !keep);
  return Status::kSuccess;
}

Status compile(const std::string& path, const CompileOptions& options,
               std::unique_ptr<CompiledModel>* out) {
  std::string bytes;
  REE_RETURN_IF_ERROR(readRegularFile(path, options.max_model_bytes, "ONNX model", &bytes));
  std::string base_dir = std::filesystem::path(path).parent_path().string();
  return compileBytes(bytes, base_dir.empty() ? "." : base_dir, options, out);
}

}  // namespace ree
