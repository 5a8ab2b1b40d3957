#include "tui_form.h"

#include <cctype>

#include "ree/models/builtin.h"

namespace ree::launcher::tui {
namespace {

const std::vector<std::string> kPromptKinds = {"text", "file", "chat"};
const std::vector<std::string> kFlagOfPromptKind = {"--prompt-text", "--prompt-file", "--chat"};

std::vector<FormField> makeFields() {
  std::vector<FormField> fields(kFieldCount);
  auto set = [&](int id, const char* label, const char* hint, const std::string& value) {
    fields[id].label = label;
    fields[id].hint = hint;
    fields[id].edit.set(value);
  };
  set(kFieldModel, "Model", "directory, FILE.gguf or builtin:NAME; Tab completes, Ctrl-O: recent",
      defaultModel());
  fields[kFieldModel].path = true;
  set(kFieldPromptKind, "Prompt from", "text, a JSONL prompt file, or a chat message", "");
  fields[kFieldPromptKind].choices = kPromptKinds;
  set(kFieldPrompt, "Prompt", "the prompt text, file (Tab completes) or user message",
      "The capital of France is");
  fields[kFieldPrompt].path = false;
  set(kFieldSystem, "System (chat)", "a system message before the chat message (optional)", "");
  set(kFieldMaxNewTokens, "Max new tokens", "1 to 2147483647", "32");
  set(kFieldOperationSet, "Operation set", "reproducible: the same bits on every device", "");
  fields[kFieldOperationSet].choices = {"reproducible", "deterministic", "default"};
  set(kFieldRepOpsSpec, "RepOps spec", "the reproducible set's arithmetic (docs/repops-spec.md)",
      "");
  fields[kFieldRepOpsSpec].choices = {"repops-1", "repops-2", "repops-3"};
  set(kFieldTemperature, "Temperature", "0 = greedy; up to 10000", "0");
  set(kFieldTopP, "Top-p", "nucleus threshold in (0, 1]", "1");
  set(kFieldTopK, "Top-k", "0 = all tokens", "0");
  set(kFieldSeed, "Seed", "the sampler's seed, 0 to 2^64-1", "0");
  set(kFieldPartitions, "Partitions", "pipeline stages, all in this process", "1");
  set(kFieldDevice, "Device", "auto (cuda:0 when a GPU is visible), cpu, cuda or cuda:N", "auto");
  set(kFieldReceiptPath, "Receipt path",
      "write a receipt of the run here (empty: none); Tab completes", "");
  fields[kFieldReceiptPath].path = true;
  set(kFieldTraceHashes, "Trace hashes", "also hash every layer (a divergence names its layer)",
      "");
  fields[kFieldTraceHashes].choices = {"no", "yes"};
  return fields;
}

// Quotes an argument for a POSIX shell when it needs it.
std::string shellQuoted(const std::string& text) {
  bool plain = !text.empty();
  for (char c : text) {
    if (!(isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' || c == '/' ||
          c == ':' || c == ',' || c == '=')) {
      plain = false;
    }
  }
  if (plain) return text;
  std::string quoted = "'";
  for (char c : text)
    quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

}  // namespace

std::string defaultModel() {
  std::string path;
  if (models::isPackagedModel(kPreferredModel)) {
    return models::findPackagedModel(kPreferredModel, &path) == Status::kSuccess ? kPreferredModel
                                                                                 : kFallbackModel;
  }
  return kPreferredModel;  // a builtin: name or a path: used as it is
}

ConfigForm::ConfigForm() : fields_(makeFields()) {}

std::string ConfigForm::value(int id) const {
  const FormField& f = fields_[id];
  return f.choices.empty() ? f.edit.text : f.choices[f.choice];
}

void ConfigForm::setValue(int id, const std::string& value) {
  FormField& f = fields_[id];
  for (size_t i = 0; i < f.choices.size(); ++i) {
    if (f.choices[i] == value) f.choice = i;
  }
  if (f.choices.empty()) f.edit.set(value);
  if (id == kFieldPromptKind) fields_[kFieldPrompt].path = value == "file";
}

bool ConfigForm::applies(int id) const {
  if (id == kFieldSystem) return value(kFieldPromptKind) == "chat";
  if (id == kFieldRepOpsSpec) return value(kFieldOperationSet) == "reproducible";
  return true;
}

std::vector<std::string> ConfigForm::arguments() const {
  // "--flag=value": a value that starts with "--" stays a value.
  std::vector<std::string> args = {"ree-launch"};
  auto add = [&](const std::string& flag, int id) { args.push_back(flag + "=" + value(id)); };
  add("--model", kFieldModel);
  add(kFlagOfPromptKind[fields_[kFieldPromptKind].choice], kFieldPrompt);
  if (applies(kFieldSystem) && !value(kFieldSystem).empty()) add("--system", kFieldSystem);
  add("--max-new-tokens", kFieldMaxNewTokens);
  add("--operation-set", kFieldOperationSet);
  if (applies(kFieldRepOpsSpec)) add("--repops-spec", kFieldRepOpsSpec);
  add("--temperature", kFieldTemperature);
  add("--top-p", kFieldTopP);
  add("--top-k", kFieldTopK);
  add("--seed", kFieldSeed);
  add("--n-partitions", kFieldPartitions);
  if (value(kFieldDevice) != "auto") add("--device", kFieldDevice);
  if (!value(kFieldReceiptPath).empty()) add("--receipt-path", kFieldReceiptPath);
  if (value(kFieldTraceHashes) == "yes") args.push_back("--trace-hashes");
  return args;
}

std::string ConfigForm::commandLine() const {
  std::string line;
  for (const std::string& arg : arguments()) {
    line += (line.empty() ? "" : " ") + shellQuoted(arg);
  }
  return line;
}

Status ConfigForm::launchOptions(LaunchOptions* out) const {
  std::vector<std::string> args = arguments();
  std::vector<const char*> argv;
  for (const std::string& arg : args)
    argv.push_back(arg.c_str());
  *out = LaunchOptions();
  return parseCommandLine(static_cast<int>(argv.size()), argv.data(), out);
}

}  // namespace ree::launcher::tui
