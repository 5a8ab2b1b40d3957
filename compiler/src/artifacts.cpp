#include "artifacts.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "ops.h"
#include "ree/core/text.h"

namespace ree::compiler {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

json dimsJson(const ValueType& info) {
  if (!info.rank_known) return nullptr;
  json dims = json::array();
  for (const Dim& d : info.dims) {
    if (d.known()) {
      dims.push_back(d.value);
    } else {
      dims.push_back(d.symbol.empty() ? json(nullptr) : json(printableText(d.symbol, 80)));
    }
  }
  return dims;
}

json valueJson(const Graph& graph, int id) {
  const Value& value = graph.values[id];
  return json{{"name", printableText(value.name, 200)},
              {"type", value.info.type_known ? elementTypeName(value.info.type) : "unknown"},
              {"dims", dimsJson(value.info)}};
}

json nodesJson(const Graph& graph) {
  json nodes = json::array();
  for (const Node& node : graph.nodes) {
    json inputs = json::array(), outputs = json::array();
    for (int id : node.inputs)
      inputs.push_back(id >= 0 ? json(printableText(graph.values[id].name, 200)) : json(nullptr));
    for (int id : node.outputs)
      outputs.push_back(id >= 0 ? valueJson(graph, id) : json(nullptr));
    const OpDef* def = findOp(node.op_type, node.domain);
    nodes.push_back({{"name", printableText(node.name, 200)},
                     {"op", node.op_type},
                     {"lowering", def != nullptr ? def->lowering : "?"},
                     {"inputs", inputs},
                     {"outputs", outputs}});
  }
  return nodes;
}

Status writeConstants(const std::string& dir, const Graph& graph, json* table) {
  std::ofstream out(dir + "/constants.bin", std::ios::binary | std::ios::trunc);
  uint64_t offset = 0;
  *table = json::array();
  for (const auto& [id, tensor] : graph.constants) {
    const uint64_t aligned = (offset + 63) / 64 * 64;
    const std::string padding(aligned - offset, '\0');
    out.write(padding.data(), static_cast<std::streamsize>(padding.size()));
    out.write(static_cast<const char*>(tensor.data()),
              static_cast<std::streamsize>(tensor.nbytes()));
    table->push_back({{"name", printableText(graph.values[id].name, 200)},
                      {"type", elementTypeName(tensor.type)},
                      {"shape", tensor.shape},
                      {"offset", aligned},
                      {"bytes", tensor.nbytes()}});
    offset = aligned + tensor.nbytes();
  }
  out.close();
  if (!out)
    return REE_FAIL(Status::kIoError, "artifacts: cannot write %s/constants.bin",
                    printableText(dir, 120).c_str());
  return Status::kSuccess;
}

Status placeExternalFiles(const std::string& dir, const std::vector<std::string>& files, bool copy,
                          json* table) {
  *table = json::array();
  if (files.empty()) return Status::kSuccess;
  std::error_code error;
  fs::create_directories(dir + "/external", error);
  for (size_t i = 0; i < files.size(); ++i) {
    // A numbered name: two files of the same base name in different subdirectories stay apart.
    const std::string target =
        dir + "/external/" + std::to_string(i) + "_" + fs::path(files[i]).filename().string();
    fs::remove(target, error);
    if (copy) {
      fs::copy_file(files[i], target, error);
    } else {
      fs::create_symlink(files[i], target, error);
    }
    if (error) {
      return REE_FAIL(Status::kIoError, "artifacts: cannot %s '%s' to '%s': %s",
                      copy ? "copy" : "symlink", printableText(files[i], 120).c_str(),
                      printableText(target, 120).c_str(), error.message().c_str());
    }
    table->push_back({{"source", printableText(files[i], 400)},
                      {"artifact", fs::path(target).lexically_relative(dir).string()},
                      {"mode", copy ? "copy" : "symlink"}});
  }
  return Status::kSuccess;
}

}  // namespace

Status writeArtifacts(const std::string& dir, const ArtifactsInput& input) {
  std::error_code error;
  fs::create_directories(dir, error);
  if (error || !fs::is_directory(dir)) {
    return REE_FAIL(Status::kIoError, "artifacts_dir '%s': cannot create the directory",
                    printableText(dir, 120).c_str());
  }
  const Graph& graph = *input.graph;
  json plan;
  plan["format"] = "ree-onnx-plan-1";
  plan["operation_set"] = operationSetName(input.operation_set);
  plan["repops_spec"] = repOpsSpecName(input.options->repops_spec);
  plan["opset"] = graph.opset;
  plan["folded_nodes"] = input.folded_nodes;
  for (int id : graph.inputs)
    plan["inputs"].push_back(valueJson(graph, id));
  for (int id : graph.outputs)
    plan["outputs"].push_back(valueJson(graph, id));
  plan["nodes"] = nodesJson(graph);
  REE_RETURN_IF_ERROR(writeConstants(dir, graph, &plan["constants"]));
  REE_RETURN_IF_ERROR(placeExternalFiles(dir, input.external_files, input.options->colocate_tensors,
                                         &plan["external_files"]));
  std::ofstream out(dir + "/plan.json", std::ios::trunc);
  out << plan.dump(1) << "\n";
  out.close();
  if (!out)
    return REE_FAIL(Status::kIoError, "artifacts: cannot write %s/plan.json",
                    printableText(dir, 120).c_str());
  return Status::kSuccess;
}

}  // namespace ree::compiler
