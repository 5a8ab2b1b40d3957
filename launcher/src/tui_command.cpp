#include "tui_command.h"

#include <unistd.h>

#include <cstdio>
#include <exception>
#include <string>

#include "tui_app.h"
#include "tui_files.h"
#include "tui_terminal.h"

namespace ree::launcher {
namespace {

constexpr const char* kUsage =
    "usage: ree-launch tui [--model M] [--receipts-dir DIR]\n"
    "A terminal UI for run, validate and verify (docs/tui.md): configure a run, watch it stream,\n"
    "check receipts. Keyboard only; F1 in the UI lists the keys.\n"
    "  --model M          the model the form starts with (default: %s when installed,\n"
    "                     else %s)\n"
    "  --receipts-dir D   the directory the receipts screen lists (default: .)\n";

int error(const std::string& what) {
  std::fprintf(stderr, "ree-launch: error: tui: %s\n", what.c_str());
  return 2;
}

// Parses the flags into `options`; returns -1 to go on, else the exit status.
int parseTuiFlags(int argc, const char* const* argv, tui::AppOptions* options) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::printf(kUsage, tui::kPreferredModel, tui::kFallbackModel);
      return 0;
    }
    bool has_value = i + 1 < argc;
    if (arg == "--model" && has_value) {
      options->model = argv[++i];
    } else if (arg == "--receipts-dir" && has_value) {
      options->receipts_dir = argv[++i];
    } else if (arg == "--model" || arg == "--receipts-dir") {
      return error(arg + " needs a value");
    } else {
      return error("unexpected argument '" + arg + "' (see ree-launch tui --help)");
    }
  }
  return -1;
}

}  // namespace

int tuiCommand(int argc, const char* const* argv) {
  tui::AppOptions options;
  if (int code = parseTuiFlags(argc, argv, &options); code >= 0) return code;
  if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO)) {
    return error("needs a terminal on stdin and stdout (use ree-launch run for scripts)");
  }
  std::string failure;
  int code = 0;
  {
    tui::TerminalSession terminal(tui::logFilePath());
    if (!terminal.started()) {
      failure = "cannot start curses on this terminal (is TERM set?)";
      code = 2;
    } else {
      try {
        tui::App app(options);
        code = app.loop();
      } catch (const std::exception& e) {
        failure = e.what();  // reported after endwin(), on the restored terminal
        code = 2;
      }
    }
  }
  if (!failure.empty()) return error(failure);
  return code;
}

}  // namespace ree::launcher
