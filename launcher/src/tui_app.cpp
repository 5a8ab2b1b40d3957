#include "tui_app.h"

#include <curses.h>

#include <cstdio>

#include "tui_draw.h"
#include "tui_terminal.h"
#include "tui_text.h"

namespace ree::launcher::tui {
namespace {

struct Tab {
  Screen screen;
  const char* label;
};
constexpr Tab kTabs[] = {{Screen::kHelp, "F1 Help"},
                         {Screen::kConfigure, "F2 Configure"},
                         {Screen::kRun, "F3 Run"},
                         {Screen::kReceipts, "F4 Receipts"},
                         {Screen::kLicense, "F5 License"}};

constexpr int kMinColumns = 40;
constexpr int kMinLines = 12;

}  // namespace

App::App(const AppOptions& options) {
  if (!options.model.empty()) form_.setValue(kFieldModel, options.model);
  receipts_dir_.set(options.receipts_dir.empty() ? "." : options.receipts_dir);
  setStatus("Up/Down: field, type to edit, Ctrl-R: run, F1: help");
}

int App::loop() {
  while (!quit_) {
    followWorkers();
    draw();
    int key = getch();
    if (quitSignalled()) quit();
    if (takeInterruptSignal()) interrupt();
    if (key == ERR) continue;
    if (picker_open_) {
      handlePickerKey(key);
    } else if (!handleGlobalKey(key)) {
      switch (screen_) {
        case Screen::kConfigure:
          handleConfigureKey(key);
          break;
        case Screen::kRun:
          handleRunKey(key);
          break;
        case Screen::kReceipts:
          handleReceiptsKey(key);
          break;
        case Screen::kHelp:
        case Screen::kLicense:
          handleTextKey(key);
          break;
      }
    }
  }
  return 0;
}

void App::setStatus(const std::string& text, bool error) {
  status_ = error ? withoutSourceLocation(text) : text;
  status_error_ = error;
  if (error) std::fprintf(stderr, "ree-launch tui: %s\n", text.c_str());  // to tui.log
}

void App::quit() {
  run_.cancel();
  if (checker_.busy()) {
    setStatus("waiting for the verification to finish before quitting...");
    draw();
  }
  quit_ = true;
}

// Ctrl-C or SIGINT: cancels the run (back to configure) or quits when nothing runs.
void App::interrupt() {
  if (run_.busy()) {
    run_.cancel();
    back_to_configure_on_cancel_ = true;
    setStatus("cancelling the run at the next token...");
  } else if (checker_.busy()) {
    setStatus("a verification cannot be interrupted (one prefill per request); F10 quits after it",
              true);
  } else {
    quit();
  }
}

bool App::handleGlobalKey(int key) {
  if (key >= KEY_F(1) && key <= KEY_F(5)) setStatus("");
  switch (key) {
    case KEY_F(1):
      screen_ = Screen::kHelp;
      text_scroll_ = 0;
      return true;
    case KEY_F(2):
      screen_ = Screen::kConfigure;
      return true;
    case KEY_F(3):
      screen_ = Screen::kRun;
      return true;
    case KEY_F(4):
      enterReceipts();
      return true;
    case KEY_F(5):
      screen_ = Screen::kLicense;
      text_scroll_ = 0;
      return true;
    case KEY_F(10):
    case kKeyCtrlQ:
      quit();
      return true;
    case kKeyCtrlC:
      interrupt();
      return true;
    case KEY_RESIZE:
      return true;  // curses has the new size; the next draw() uses it
    default:
      return false;
  }
}

void App::startRun() {
  if (run_.busy()) return setStatus("a run is in progress (Ctrl-C cancels it)", true);
  if (checker_.busy()) return setStatus("a verification is in progress; wait for it", true);
  LaunchOptions options;
  if (form_.launchOptions(&options) != Status::kSuccess) {
    return setStatus(lastErrorMessage(), true);
  }
  if (!options.receipt_path.empty()) {
    size_t slash = options.receipt_path.find_last_of('/');
    receipts_dir_.set(slash == std::string::npos ? "." : options.receipt_path.substr(0, slash));
  }
  run_.start(options, form_.commandLine());
  back_to_configure_on_cancel_ = false;
  output_scroll_ = 0;
  screen_ = Screen::kRun;
  setStatus("running; Ctrl-C cancels");
}

// Status changes of the workers that the user should see wherever they are.
void App::followWorkers() {
  if (!back_to_configure_on_cancel_ || run_.busy()) return;
  RunSnapshot run = run_.snapshot();
  back_to_configure_on_cancel_ = false;
  if (run.phase == RunPhase::kCancelled) {
    screen_ = Screen::kConfigure;
    setStatus("run " + run.message);
  }
}

void App::drawFrame(const char* keys) {
  mvhline(0, 0, ' ' | colorAttr(kTitle), COLS);
  putText(0, 0, " REE ", 5, colorAttr(kTitle) | A_BOLD);
  int x = 6;
  for (const Tab& tab : kTabs) {
    int attr = tab.screen == screen_ ? (colorAttr(kSelected) | A_BOLD) : colorAttr(kTitle);
    std::string label = std::string(" ") + tab.label + " ";
    putText(0, x, label, COLS - x, attr);
    x += static_cast<int>(label.size()) + 1;
  }
  int status_attr = status_error_ ? (colorAttr(kError) | A_BOLD) : 0;
  putText(LINES - 2, 0, status_, COLS, status_attr, true);
  putText(LINES - 1, 0, keys, COLS, colorAttr(kDim), true);
}

void App::draw() {
  erase();
  curs_set(0);
  if (COLS < kMinColumns || LINES < kMinLines) {
    putText(0, 0, "The terminal is too small for ree-launch tui (at least 40x12).", COLS);
    putText(1, 0, "Enlarge it, or F10 / Ctrl-Q to quit.", COLS);
    refresh();
    return;
  }
  switch (screen_) {
    case Screen::kConfigure:
      drawConfigure();
      break;
    case Screen::kRun:
      drawRun();
      break;
    case Screen::kReceipts:
      drawReceipts();
      break;
    case Screen::kHelp:
      drawTextScreen("Help", helpText());
      break;
    case Screen::kLicense:
      drawTextScreen("License", licenseText());
      break;
  }
  if (picker_open_) drawModelPicker();
  refresh();
}

}  // namespace ree::launcher::tui
