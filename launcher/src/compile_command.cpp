#include "compile_command.h"

#include <cstdio>

#if defined(REE_LAUNCH_WITH_COMPILER)
#include <cxxopts.hpp>
#include <filesystem>

#include "flag_values.h"
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

Status runOnInputs(CompiledModel* model, const cxxopts::ParseResult& parsed) {
  std::vector<GraphTensor> inputs, outputs;
  const std::vector<std::string> paths = parsed.count("run")
                                             ? parsed["run"].as<std::vector<std::string>>()
                                             : std::vector<std::string>();
  for (const std::string& path : paths) {
    inputs.emplace_back();
    REE_RETURN_IF_ERROR(readNpyFile(path, &inputs.back()));
  }
  REE_RETURN_IF_ERROR(model->run(inputs, &outputs));
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

Status compileAndRun(const cxxopts::ParseResult& parsed) {
  REE_CHECK_ARG(parsed.count("model"), "compile: the ONNX model path is required");
  CompileOptions options;
  REE_RETURN_IF_ERROR(readOptions(parsed, &options));
  std::unique_ptr<CompiledModel> model;
  REE_RETURN_IF_ERROR(compile(parsed["model"].as<std::string>(), options, &model));
  std::printf("compiled: operation set %s, artifacts %s\n", operationSetName(model->operationSet()),
              printableText(model->artifactsDir(), 200).c_str());
  for (const GraphValueInfo& info : model->inputs()) {
    std::printf("input '%s': %s%s\n", printableText(info.name, 80).c_str(),
                elementTypeName(info.type), dimsText(info).c_str());
  }
  for (const GraphValueInfo& info : model->outputs()) {
    std::printf("output '%s': %s%s\n", printableText(info.name, 80).c_str(),
                elementTypeName(info.type), dimsText(info).c_str());
  }
  const bool run = parsed.count("run") || parsed.count("output-dir");
  return run ? runOnInputs(model.get(), parsed) : Status::kSuccess;
}

}  // namespace

int compileCommand(int argc, const char* const* argv) {
  cxxopts::ParseResult parsed;
  if (parseFlags(argc, argv, &parsed) != Status::kSuccess) {
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
