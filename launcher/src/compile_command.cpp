#include "compile_command.h"

#include <cstdio>

#if defined(REE_LAUNCH_WITH_COMPILER)
#include <cstring>
#include <cxxopts.hpp>
#include <filesystem>

#include "flag_values.h"
#include "process_role.h"
#include "ree/compiler/compile.h"
#include "ree/compiler/npy.h"
#include "ree/core/parallel.h"
#include "ree/core/text.h"
#endif

namespace ree::launcher {

#if defined(REE_LAUNCH_WITH_COMPILER)
namespace {

cxxopts::Options compileOptions() {
  cxxopts::Options options(
      "ree-launch compile",
      "Compiles an ONNX model to REE operators (docs/compiler.md); with --run, "
      "runs it on .npy inputs.");
  options.custom_help("MODEL.onnx [--artifacts-dir DIR] [--run INPUT.npy ...]");
  options.positional_help("");
  // clang-format off
  options.add_options()
    ("model", "The ONNX model", cxxopts::value<std::string>())
    ("artifacts-dir", "Where plan.json, constants.bin and external/ go (default: a temporary "
                      "directory, removed at exit unless REE_DEBUG is set)", cxxopts::value<std::string>())
    ("colocate-tensors", "Copy external tensor files into the artifacts (default: symlink them)")
    ("operation-set", "reproducible (RepOps), default or deterministic (ATen)",
     cxxopts::value<std::string>()->default_value("reproducible"))
    ("repops-spec", "repops-1, repops-2 or repops-3", cxxopts::value<std::string>()->default_value("repops-1"))
    ("run", "An input .npy file, one per graph input in order (repeat the flag)",
     cxxopts::value<std::vector<std::string>>())
    ("output-dir", "Run (with the --run inputs, if any) and write output_<i>.npy here",
     cxxopts::value<std::string>())
    ("device", "cpu, cuda or cuda:N: where the float operators run",
     cxxopts::value<std::string>()->default_value("cpu"))
    ("threads", "CPU threads; 0 = all, at most 4096", cxxopts::value<std::string>()->default_value("0"))
    ("n-partitions", "Split the graph into N pipeline stages (1..64) where few values cross "
                     "(docs/compiler.md, Pipelines); under mpirun -n N rank r runs stage r, "
                     "otherwise the stages run in turn in this process. Same output bits for every N",
     cxxopts::value<std::string>()->default_value("1"))
    ("max-cut-values", "With --n-partitions: at most this many values may cross a stage "
                       "boundary (1..64)", cxxopts::value<std::string>()->default_value("4"))
    ("comm-timeout", "With mpirun: seconds to wait for a peer stage (1..86400)",
     cxxopts::value<std::string>()->default_value("60"))
    ("h,help", "Print this help");
  // clang-format on
  options.parse_positional({"model"});
  return options;
}

Status parseFlags(int argc, const char* const* argv, cxxopts::ParseResult* parsed) {
  try {
    auto options = compileOptions();
    *parsed = options.parse(argc, argv);
  } catch (const std::exception& error) {
    return REE_FAIL(Status::kInvalidArgument, "%s", printableText(error.what(), 200).c_str());
  }
  return Status::kSuccess;
}

Status readOptions(const cxxopts::ParseResult& parsed, CompileOptions* options) {
  if (parsed.count("artifacts-dir")) {
    options->artifacts_dir = parsed["artifacts-dir"].as<std::string>();
    REE_CHECK_ARG(!options->artifacts_dir.empty(), "--artifacts-dir is empty");
  }
  options->colocate_tensors = parsed.count("colocate-tensors") != 0;
  OperationSetKind kind;
  REE_RETURN_IF_ERROR(parseOperationSet(parsed["operation-set"].as<std::string>(), &kind));
  options->requires_reproducibility = kind == OperationSetKind::kReproducible;
  if (!options->requires_reproducibility) options->non_reproducible_set = kind;
  REE_RETURN_IF_ERROR(parseRepOpsSpec(parsed["repops-spec"].as<std::string>(), "--repops-spec",
                                      &options->repops_spec));
  REE_RETURN_IF_ERROR(parseDevice(parsed["device"].as<std::string>(), &options->device));
  int threads = 0;
  REE_RETURN_IF_ERROR(
      parseIntFlag("--threads", parsed["threads"].as<std::string>(), 0, 4096, &threads));
  if (threads > 0) setCpuThreads(threads);
  return Status::kSuccess;
}

std::string dimsText(const GraphValueInfo& info) {
  if (!info.has_shape) return "?";
  std::string text = "[";
  for (size_t i = 0; i < info.dims.size(); ++i) {
    text += i ? ", " : "";
    text += info.dims[i] >= 0
                ? std::to_string(info.dims[i])
                : (info.symbols[i].empty() ? "?" : printableText(info.symbols[i], 40));
  }
  return text + "]";
}

Status readInputs(const cxxopts::ParseResult& parsed, std::vector<GraphTensor>* inputs) {
  const std::vector<std::string> paths = parsed.count("run")
                                             ? parsed["run"].as<std::vector<std::string>>()
                                             : std::vector<std::string>();
  for (const std::string& path : paths) {
    inputs->emplace_back();
    REE_RETURN_IF_ERROR(readNpyFile(path, &inputs->back()));
  }
  return Status::kSuccess;
}

Status writeOutputs(CompiledModel* model, const cxxopts::ParseResult& parsed,
                    const std::vector<GraphTensor>& outputs) {
  const std::string dir = parsed.count("output-dir") ? parsed["output-dir"].as<std::string>() : "";
  if (!dir.empty()) {
    std::error_code error;
    std::filesystem::create_directories(dir, error);
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    std::printf("output %zu '%s': %s\n", i, printableText(model->outputs()[i].name, 80).c_str(),
                outputs[i].describe().c_str());
    if (!dir.empty()) {
      GraphTensor host;
      REE_RETURN_IF_ERROR(copyToCpu(outputs[i], &host));
      REE_RETURN_IF_ERROR(writeNpyFile(dir + "/output_" + std::to_string(i) + ".npy", host));
    }
  }
  return Status::kSuccess;
}

Status runOnInputs(CompiledModel* model, const cxxopts::ParseResult& parsed) {
  std::vector<GraphTensor> inputs, outputs;
  REE_RETURN_IF_ERROR(readInputs(parsed, &inputs));
  REE_RETURN_IF_ERROR(model->run(inputs, &outputs));
  return writeOutputs(model, parsed, outputs);
}

void printSignature(const CompiledModel& model) {
  std::printf("compiled: operation set %s, artifacts %s\n", operationSetName(model.operationSet()),
              printableText(model.artifactsDir(), 200).c_str());
  for (const GraphValueInfo& info : model.inputs()) {
    std::printf("input '%s': %s%s\n", printableText(info.name, 80).c_str(),
                elementTypeName(info.type), dimsText(info).c_str());
  }
  for (const GraphValueInfo& info : model.outputs()) {
    std::printf("output '%s': %s%s\n", printableText(info.name, 80).c_str(),
                elementTypeName(info.type), dimsText(info).c_str());
  }
}

Status compileAndRun(const cxxopts::ParseResult& parsed) {
  REE_CHECK_ARG(parsed.count("model"), "compile: the ONNX model path is required");
  CompileOptions options;
  REE_RETURN_IF_ERROR(readOptions(parsed, &options));
  std::unique_ptr<CompiledModel> model;
  REE_RETURN_IF_ERROR(compile(parsed["model"].as<std::string>(), options, &model));
  printSignature(*model);
  const bool run = parsed.count("run") || parsed.count("output-dir");
  return run ? runOnInputs(model.get(), parsed) : Status::kSuccess;
}

// Pipelines (--n-partitions): every rank compiles the whole model and reads the --run inputs
// (graph inputs and constants are on every stage); rank r runs the nodes of stage r on what rank
// r - 1 sends, and sends on what crosses its end. The values travel as host messages.
constexpr int kStageTag = 7;

void appendWord(std::vector<uint8_t>* bytes, int64_t word) {
  const auto* p = reinterpret_cast<const uint8_t*>(&word);
  bytes->insert(bytes->end(), p, p + sizeof(word));
}

Status sendStageValues(StageTransport* transport, int peer, const partitioner::GraphStage& stage,
                       const std::vector<GraphTensor>& values) {
  std::vector<uint8_t> header;
  appendWord(&header, stage.end);
  appendWord(&header, static_cast<int64_t>(values.size()));
  REE_RETURN_IF_ERROR(transport->sendMessage(peer, kStageTag, std::move(header)));
  for (const GraphTensor& value : values) {
    GraphTensor host;
    REE_RETURN_IF_ERROR(copyToCpu(value, &host));
    std::vector<uint8_t> bytes;
    appendWord(&bytes, static_cast<int64_t>(host.type));
    appendWord(&bytes, static_cast<int64_t>(host.shape.size()));
    for (int64_t d : host.shape)
      appendWord(&bytes, d);
    const auto* data = static_cast<const uint8_t*>(host.data());
    bytes.insert(bytes.end(), data, data + host.nbytes());
    REE_RETURN_IF_ERROR(transport->sendMessage(peer, kStageTag, std::move(bytes)));
  }
  return Status::kSuccess;
}

Status unpackValue(const std::vector<uint8_t>& bytes, int peer, GraphTensor* out) {
  auto word = [&](size_t i) {
    int64_t w = 0;
    std::memcpy(&w, bytes.data() + i * sizeof(w), sizeof(w));
    return w;
  };
  REE_CHECK_ARG(bytes.size() >= 16, "a value from rank %d is truncated", peer);
  const int64_t type = word(0), rank = word(1);
  REE_CHECK_ARG(type >= 0 && type <= 2 && rank >= 0 && rank <= 64 &&
                    bytes.size() >= static_cast<size_t>(16 + 8 * rank),
                "a value from rank %d has a bad header", peer);
  std::vector<int64_t> shape;
  for (int64_t i = 0; i < rank; ++i)
    shape.push_back(word(static_cast<size_t>(2 + i)));
  REE_RETURN_IF_ERROR(GraphTensor::empty(static_cast<ElementType>(type), shape, out));
  const size_t offset = static_cast<size_t>(16 + 8 * rank);
  REE_CHECK_ARG(bytes.size() - offset == out->nbytes(),
                "a value from rank %d holds %zu bytes for %s", peer, bytes.size() - offset,
                out->describe().c_str());
  if (out->nbytes() > 0) std::memcpy(out->data(), bytes.data() + offset, out->nbytes());
  return Status::kSuccess;
}

Status receiveStageValues(StageTransport* transport, int peer, const partitioner::GraphStage& stage,
                          std::vector<GraphTensor>* values) {
  std::vector<uint8_t> header;
  REE_RETURN_IF_ERROR(transport->recvMessage(peer, kStageTag, &header));
  int64_t cut = -1, count = -1;
  if (header.size() == 16) {
    std::memcpy(&cut, header.data(), 8);
    std::memcpy(&count, header.data() + 8, 8);
  }
  REE_CHECK_ARG(cut == stage.begin && count == static_cast<int64_t>(stage.incoming.size()),
                "rank %d sent %lld value(s) cut before node %lld, this stage expects %zu before "
                "node %lld (give every rank the same model and flags)",
                peer, static_cast<long long>(count), static_cast<long long>(cut),
                stage.incoming.size(), static_cast<long long>(stage.begin));
  values->resize(stage.incoming.size());
  for (GraphTensor& value : *values) {
    std::vector<uint8_t> bytes;
    REE_RETURN_IF_ERROR(transport->recvMessage(peer, kStageTag, &bytes));
    REE_RETURN_IF_ERROR(unpackValue(bytes, peer, &value));
  }
  return Status::kSuccess;
}

Status runStages(const cxxopts::ParseResult& parsed, int n, Device device, ProcessRole* role) {
  REE_CHECK_ARG(parsed.count("model"), "compile: the ONNX model path is required");
  CompileOptions options;
  REE_RETURN_IF_ERROR(readOptions(parsed, &options));
  options.device = device;  // under mpirun, this rank's
  if (role->world_size > 1 && !options.artifacts_dir.empty()) {
    options.artifacts_dir += "/rank" + std::to_string(role->rank);
  }
  int max_cut_values = 4;
  REE_RETURN_IF_ERROR(parseIntFlag("--max-cut-values", parsed["max-cut-values"].as<std::string>(),
                                   1, 64, &max_cut_values));
  std::unique_ptr<CompiledModel> model;
  REE_RETURN_IF_ERROR(compile(parsed["model"].as<std::string>(), options, &model));
  std::vector<partitioner::GraphStage> stages;
  REE_RETURN_IF_ERROR(model->planStages(n, max_cut_values, &stages));
  if (role->rank == 0) {
    printSignature(*model);
    std::printf("plan: %d stage(s), %s\n%s", n,
                role->world_size > 1 ? "one MPI rank per stage" : "in this process",
                partitioner::describeGraphStages(stages).c_str());
  }
  std::vector<GraphTensor> inputs, carried, next;
  REE_RETURN_IF_ERROR(readInputs(parsed, &inputs));
  if (role->world_size == 1) {
    for (const partitioner::GraphStage& stage : stages) {
      REE_RETURN_IF_ERROR(model->runStage(inputs, stage, carried, &next));
      carried = std::move(next);
    }
    return writeOutputs(model.get(), parsed, carried);
  }
  const int r = role->rank;
  StageTransport* transport = role->transport.get();
  if (r > 0) REE_RETURN_IF_ERROR(receiveStageValues(transport, r - 1, stages[r], &carried));
  REE_RETURN_IF_ERROR(model->runStage(inputs, stages[r], carried, &next));
  if (r + 1 < n) return sendStageValues(transport, r + 1, stages[r], next);
  return writeOutputs(model.get(), parsed, next);
}

int pipelineCommand(const cxxopts::ParseResult& parsed, int n) {
  LaunchOptions launch;
  launch.engine.n_partitions = n;
  launch.transport = "mpi";
  int timeout = 60;
  Status flags =
      parseIntFlag("--comm-timeout", parsed["comm-timeout"].as<std::string>(), 1, 86400, &timeout);
  if (flags == Status::kSuccess) {
    flags = parseDevice(parsed["device"].as<std::string>(), &launch.engine.device);
  }
  launch.comm_timeout_s = timeout;
  const std::string refused = flags == Status::kSuccess ? "" : lastErrorMessage();
  ProcessRole role;
  // Start-up failures (flags, world size) are the same on every rank: each reports it.
  Status status = setUpProcess(
      &launch, flags == Status::kSuccess ? RankIntent::kRun : RankIntent::kFailed, refused, &role);
  if (status != Status::kSuccess) {
    std::fprintf(stderr, "ree-launch: error: %s\n", lastErrorMessage());
    finishProcess(&role);
    return 2;
  }
  status = runStages(parsed, n, launch.engine.device, &role);
  if (status != Status::kSuccess && role.world_size > 1) {
    // Peers may wait for this rank: say which rank failed, then end the whole job.
    std::fprintf(stderr, "ree-launch: error: rank %d: %s\n", role.rank, lastErrorMessage());
    std::fflush(stderr);
    abortJob(&role, 2);
  } else if (status != Status::kSuccess) {
    std::fprintf(stderr, "ree-launch: error: %s\n", lastErrorMessage());
  }
  finishProcess(&role);
  return status == Status::kSuccess ? 0 : 2;
}

}  // namespace

int compileCommand(int argc, const char* const* argv) {
  cxxopts::ParseResult parsed;
  Status flags = parseFlags(argc, argv, &parsed);
  int n = 1;
  if (flags == Status::kSuccess && !parsed.count("help")) {
    flags = parseIntFlag("--n-partitions", parsed["n-partitions"].as<std::string>(), 1, 64, &n);
  }
  if (flags == Status::kSuccess && n > 1 && !parsed.count("help")) {
    return pipelineCommand(parsed, n);
  }
  // One process: under mpirun, its peers learn at once that this rank takes no part in a run.
  announceLeaving("it runs `ree-launch compile` without --n-partitions, in one process");
  if (flags != Status::kSuccess) {
    std::fprintf(stderr, "ree-launch: error: %s\n", lastErrorMessage());
    return 2;
  }
  if (parsed.count("help")) {
    std::fputs(compileOptions().help().c_str(), stdout);
    return 0;
  }
  if (compileAndRun(parsed) != Status::kSuccess) {
    std::fprintf(stderr, "ree-launch: error: %s\n", lastErrorMessage());
    return 2;
  }
  return 0;
}

#else

int compileCommand(int, const char* const*) {
  std::fprintf(stderr,
               "ree-launch: error: this build has no ONNX compiler (configure with protobuf and "
               "onnx.proto: apt-get install libprotobuf-dev protobuf-compiler libonnx-dev; "
               "docs/compiler.md)\n");
  return 2;
}

#endif

}  // namespace ree::launcher
