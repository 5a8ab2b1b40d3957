// `ree-launch tui`: the screens (configure, run, receipts, help, license), the keys, and the loop
// that draws them every 50 ms from the workers' snapshots. One class; its screens live in
// tui_screen_*.cpp.
#pragma once

#include <string>
#include <vector>

#include "tui_files.h"
#include "tui_form.h"
#include "tui_line_edit.h"
#include "tui_receipt_check.h"
#include "tui_run.h"

namespace ree::launcher::tui {

enum class Screen { kHelp, kConfigure, kRun, kReceipts, kLicense };

struct AppOptions {
  std::string model;         // --model: the form's first model (default: defaultModel())
  std::string receipts_dir;  // --receipts-dir (default: the current directory)
};

class App {
 public:
  explicit App(const AppOptions& options);
  // Runs until the user quits or SIGTERM/SIGHUP; returns the exit status (0).
  int loop();

 private:
  // tui_app.cpp: the frame, global keys, runs.
  void draw();
  void drawFrame(const char* keys);
  bool handleGlobalKey(int key);
  void interrupt();
  void startRun();
  void followWorkers();
  void setStatus(const std::string& text, bool error = false);
  void quit();

  // tui_screen_configure.cpp
  void drawConfigure();
  void drawField(int id, int y, bool selected);
  void handleConfigureKey(int key);
  void moveSelection(int delta);
  void completeField(LineEdit* edit);
  void openModelPicker();
  void drawModelPicker();
  void handlePickerKey(int key);

  // tui_screen_run.cpp
  void drawRun();
  int drawRunHeader(const RunSnapshot& run, int y);
  int drawStages(const RunSnapshot& run, int y);
  void drawRunResults(const RunSnapshot& run, int top, int bottom);
  void handleRunKey(int key);

  // tui_screen_receipts.cpp
  void enterReceipts();
  void rescanReceipts(const std::string& select);
  void drawReceipts();
  void drawReceiptList(int top, int rows);
  void drawCheckResult(int top, int bottom);
  void handleReceiptsKey(int key);
  void checkSelected(bool verify);

  // tui_screen_text.cpp: help and license.
  void drawTextScreen(const std::string& title, const std::string& text);
  void handleTextKey(int key);

  Screen screen_ = Screen::kConfigure;
  bool quit_ = false;
  std::string status_;
  bool status_error_ = false;

  ConfigForm form_;
  int selected_ = 0;  // a field, or kFieldCount for the Run button
  int form_top_ = 0;  // first field shown when the form does not fit
  bool picker_open_ = false;
  std::vector<std::string> picker_items_;
  int picker_selected_ = 0;

  RunWorker run_;
  bool back_to_configure_on_cancel_ = false;
  int output_scroll_ = 0;  // lines above the end of the output shown

  ReceiptChecker checker_;
  LineEdit receipts_dir_;
  LineEdit verify_model_;
  bool verify_model_edited_ = false;
  int receipts_focus_ = 2;  // 0: directory, 1: model, 2: list
  std::vector<ReceiptFile> receipts_;
  std::string receipts_error_;
  int receipt_selected_ = 0;
  int receipt_top_ = 0;

  int text_scroll_ = 0;
};

// Help and license texts.
std::string helpText();
std::string licenseText();

}  // namespace ree::launcher::tui
