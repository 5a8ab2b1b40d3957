// The help and license screens: scrollable text.
#include <curses.h>
#include <unistd.h>

#include <algorithm>

#include "ree/core/file.h"
#include "ree/models/engine.h"
#include "tui_app.h"
#include "tui_draw.h"
#include "tui_terminal.h"
#include "tui_text.h"

namespace ree::launcher::tui {
namespace {

constexpr uint64_t kMaxLicenseBytes = 1 << 20;

// Where a LICENSE file may be: the source tree this binary was built from, then an install's
// share/doc/ree next to bin/.
std::vector<std::string> licenseCandidates() {
  std::vector<std::string> paths;
#ifdef REE_SOURCE_DIR
  paths.push_back(std::string(REE_SOURCE_DIR) + "/LICENSE");
#endif
  char exe[4096];
  ssize_t n = ::readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n > 0) {
    std::string bin(exe, static_cast<size_t>(n));
    bin = bin.substr(0, bin.find_last_of('/'));
    paths.push_back(bin + "/../share/doc/ree/LICENSE");
  }
  return paths;
}

}  // namespace

std::string helpText() {
  return std::string("ree-launch tui ") + kRuntimeVersion +
         ": a terminal face over the library calls of\n"
         "ree-launch run, validate and verify (docs/tui.md).\n"
         "\n"
         "Screens\n"
         "  F1 Help       this page\n"
         "  F2 Configure  model, prompt, sampling, operation set, partitions,\n"
         "                device, receipt. The line under the form is the same run\n"
         "                as a ree-launch command: both give the same bits.\n"
         "  F3 Run        streamed text, progress, tokens/s, stages, output hash\n"
         "  F4 Receipts   a directory's receipts: v validates (hashes only),\n"
         "                Enter verifies (re-runs the model) and names the first\n"
         "                divergent step, layer and stage\n"
         "  F5 License\n"
         "\n"
         "Keys\n"
         "  Up/Down, Shift-Tab  move        Left/Right, Space  change a choice\n"
         "  Tab                 complete a path (model, prompt file, receipt)\n"
         "  Ctrl-O              recent models (on the model field)\n"
         "  Ctrl-U              clear a field     Ctrl-R  run\n"
         "  Ctrl-C              cancel the run between two tokens (back to\n"
         "                      Configure); with nothing running, quit\n"
         "  F10, Ctrl-Q         quit\n"
         "\n"
         "Files\n"
         "  Recent models: $XDG_STATE_HOME/ree/tui-recent-models (default\n"
         "  ~/.local/state/ree); library messages go to tui.log there.\n";
}

std::string licenseText() {
  for (const std::string& path : licenseCandidates()) {
    std::string text;
    if (readRegularFile(path, kMaxLicenseBytes, "LICENSE", &text) == Status::kSuccess) {
      return path + "\n\n" + text;
    }
  }
  return "No LICENSE file ships with this build of REE (none in its source tree\n"
         "or in share/doc/ree), so it grants no license: its authors keep their\n"
         "rights until a LICENSE file says otherwise.\n"
         "\n"
         "The components it uses keep their own licenses:\n"
         "  ncurses (this screen)     X11 (MIT-style)\n"
         "  nlohmann/json, fmt, cxxopts, cpp-httplib, utf8proc   MIT\n"
         "  OpenSSL 3 (SHA-256)       Apache-2.0\n"
         "  PCRE2                     BSD-3-Clause\n"
         "  GoogleTest (tests only)   BSD-3-Clause\n"
         "\n"
         "Models come under their own terms: builtin:tiny-llama has random\n"
         "weights that REE generates; a checkpoint or GGUF file carries its\n"
         "publisher's license (SmolLM2, for example: Apache-2.0).\n";
}

void App::drawTextScreen(const std::string& title, const std::string& text) {
  drawFrame("Up/Down/PgUp/PgDn scroll  F2 configure  F10 quit");
  putText(1, 0, title, COLS, A_BOLD);
  std::vector<std::string> lines = wrapText(text, COLS - 2);
  int rows = LINES - 4;
  text_scroll_ = std::max(0, std::min(text_scroll_, static_cast<int>(lines.size()) - rows));
  for (int i = 0; i < rows && text_scroll_ + i < static_cast<int>(lines.size()); ++i) {
    putText(2 + i, 1, lines[text_scroll_ + i], COLS - 2);
  }
}

void App::handleTextKey(int key) {
  if (key == KEY_UP) text_scroll_ = std::max(0, text_scroll_ - 1);
  if (key == KEY_DOWN) ++text_scroll_;
  if (key == KEY_PPAGE) text_scroll_ = std::max(0, text_scroll_ - (LINES - 5));
  if (key == KEY_NPAGE) text_scroll_ += LINES - 5;
  if (key == KEY_HOME) text_scroll_ = 0;
  if (key == 'q') quit();
}

}  // namespace ree::launcher::tui
