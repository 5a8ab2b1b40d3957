// The configure screen's form: one field per run setting, each turned into the ree-launch flag it
// stands for, so that a TUI run is parsed, checked and built by the same code as the command line
// (parseCommandLine) and equals `ree-launch run` with those flags, bit for bit.
#pragma once

#include <string>
#include <vector>

#include "cli.h"
#include "ree/core/status.h"
#include "tui_line_edit.h"

namespace ree::launcher::tui {

// The model a fresh form starts with: kPreferredModel when it is there (a packaged model's Python
// package installed, models/builtin.h), else the embedded kFallbackModel, which always is.
// Switching the default is changing kPreferredModel.
inline constexpr const char* kPreferredModel = "smollm2";
inline constexpr const char* kFallbackModel = "builtin:tiny-llama";
std::string defaultModel();

enum FieldId {
  kFieldModel,
  kFieldPromptKind,
  kFieldPrompt,
  kFieldSystem,
  kFieldMaxNewTokens,
  kFieldOperationSet,
  kFieldRepOpsSpec,
  kFieldTemperature,
  kFieldTopP,
  kFieldTopK,
  kFieldSeed,
  kFieldPartitions,
  kFieldDevice,
  kFieldReceiptPath,
  kFieldTraceHashes,
  kFieldCount
};

struct FormField {
  const char* label;
  const char* hint;                  // shown on the status line while the field is selected
  std::vector<std::string> choices;  // a choice field when not empty (Left/Right/Space cycle)
  bool path = false;                 // Tab completes a path
  LineEdit edit;
  size_t choice = 0;
};

class ConfigForm {
 public:
  ConfigForm();

  FormField& field(int id) { return fields_[id]; }
  const FormField& field(int id) const { return fields_[id]; }
  std::string value(int id) const;
  void setValue(int id, const std::string& value);
  // Whether the field applies to the settings as they are (e.g. the system message to chats).
  bool applies(int id) const;

  // The flags the form stands for, as `ree-launch run` takes them (argv[0] included).
  std::vector<std::string> arguments() const;
  // One line: the command line a user could paste to run the same thing.
  std::string commandLine() const;
  // parseCommandLine(arguments()): the one-line error names the flag, as on the command line.
  Status launchOptions(LaunchOptions* out) const;

 private:
  std::vector<FormField> fields_;
};

}  // namespace ree::launcher::tui
