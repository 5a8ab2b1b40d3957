// The run screen: phase, progress bar, tokens/s, the stages of an in-process pipeline, the
// streamed text, and at the end each request's finish reason and output hash.
#include <curses.h>

#include <algorithm>
#include <cstdio>

#include "tui_app.h"
#include "tui_draw.h"
#include "tui_terminal.h"
#include "tui_text.h"

namespace ree::launcher::tui {
namespace {

constexpr int kMaxStageRows = 4;

bool finished(RunPhase phase) {
  return phase == RunPhase::kDone || phase == RunPhase::kFailed || phase == RunPhase::kCancelled;
}

int64_t maxTokens(const RunSnapshot& run) {
  int64_t total = 0;
  for (const RequestProgress& request : run.requests)
    total += request.max_new_tokens;
  return std::max<int64_t>(total, 1);
}

std::string outputText(const RunSnapshot& run) {
  if (run.requests.size() == 1) return run.requests.front().text;
  std::string text;
  for (size_t r = 0; r < run.requests.size(); ++r) {
    if (run.requests[r].tokens == 0) continue;
    text += "=== prompt " + std::to_string(r) + "\n" + run.requests[r].text + "\n";
  }
  return text;
}

}  // namespace

int App::drawRunHeader(const RunSnapshot& run, int y) {
  int phase_attr = run.phase == RunPhase::kFailed ? colorAttr(kError) | A_BOLD
                   : run.phase == RunPhase::kDone ? colorAttr(kGood) | A_BOLD
                                                  : A_BOLD;
  putText(y, 0, std::string("Run: ") + runPhaseName(run.phase), 30, phase_attr);
  putText(y, 30, "model " + fitTail(run.model, COLS - 37), COLS - 30);
  ++y;
  double fraction =
      run.phase == RunPhase::kDone ? 1.0 : static_cast<double>(run.tokens) / maxTokens(run);
  int bar_width = std::max(10, COLS / 3);
  drawBar(y, 0, bar_width, fraction);
  char info[160];
  double rate = run.generate_seconds > 0 ? run.tokens / run.generate_seconds : 0.0;
  std::snprintf(info, sizeof(info), " %lld/%lld tokens  %.1f tokens/s  %.2f s (load %.2f s)",
                static_cast<long long>(run.tokens), static_cast<long long>(maxTokens(run)), rate,
                run.generate_seconds, run.load_seconds);
  putText(y, bar_width, info, COLS - bar_width);
  return y + 1;
}

// In one process the stages run one after another within every step: each token has crossed
// every stage, so a stage's count is the run's (the engine reports tokens, not stage events).
int App::drawStages(const RunSnapshot& run, int y) {
  if (run.stages.size() < 2) return y;
  bool active = run.phase == RunPhase::kGenerating;
  int rows = std::min<int>(kMaxStageRows, static_cast<int>(run.stages.size()));
  for (int s = 0; s < rows; ++s) {
    const StageInfo& stage = run.stages[s];
    char line[200];
    std::string layers =
        std::to_string(stage.first_layer) + "-" + std::to_string(stage.end_layer - 1);
    std::snprintf(line, sizeof(line), "stage %-2d layers %-9s %-8s %10s  %s %lld tokens", s,
                  layers.c_str(), stage.device.c_str(), formatBytes(stage.parameter_bytes).c_str(),
                  active ? "busy" : "idle", static_cast<long long>(run.tokens));
    putText(y++, 2, line, COLS - 2, active ? colorAttr(kBar) : 0);
  }
  if (static_cast<int>(run.stages.size()) > rows) {
    putText(y++, 2, "... " + std::to_string(run.stages.size() - rows) + " more stages", COLS - 2);
  }
  return y;
}

// The output's last lines in [top, bottom), then the results.
void App::drawRunResults(const RunSnapshot& run, int top, int bottom) {
  std::vector<std::string> results;
  if (run.phase == RunPhase::kDone) {
    for (size_t r = 0; r < run.requests.size(); ++r) {
      const RequestProgress& request = run.requests[r];
      std::string prefix = run.requests.size() > 1 ? "[" + std::to_string(r) + "] " : "";
      results.push_back(prefix + "finish: " + request.finish_reason + ", " +
                        std::to_string(request.tokens) + " tokens");
      results.push_back(prefix + "ids sha256 " + request.output_ids_sha256);
    }
  }
  if (!run.message.empty()) {
    std::string message =
        run.phase == RunPhase::kFailed ? withoutSourceLocation(run.message) : run.message;
    for (const std::string& line : wrapText(message, COLS))
      results.push_back(line);
  }
  int result_rows =
      std::min<int>(static_cast<int>(results.size()), std::max(1, (bottom - top) / 3));
  int text_bottom = bottom - result_rows - (result_rows > 0 ? 1 : 0);
  std::vector<std::string> lines = wrapText(outputText(run), COLS - 2);
  int rows = std::max(0, text_bottom - top);
  int max_scroll = std::max(0, static_cast<int>(lines.size()) - rows);
  output_scroll_ = std::min(output_scroll_, max_scroll);
  int first = std::max(0, static_cast<int>(lines.size()) - rows - output_scroll_);
  for (int i = 0; i < rows && first + i < static_cast<int>(lines.size()); ++i) {
    putText(top + i, 1, lines[first + i], COLS - 2);
  }
  int attr = run.phase == RunPhase::kFailed ? colorAttr(kError) | A_BOLD : colorAttr(kGood);
  for (int i = 0; i < result_rows; ++i) {
    const std::string& line = results[results.size() - result_rows + i];
    putText(bottom - result_rows + i, 0, line, COLS, attr);
  }
}

void App::drawRun() {
  RunSnapshot run = run_.snapshot();
  if (status_ == "running; Ctrl-C cancels" && finished(run.phase)) setStatus("");
  drawFrame("^C cancel  PgUp/PgDn scroll  F2 configure  F4 receipts  ^R run again  F10 quit");
  if (run.phase == RunPhase::kIdle) {
    putText(2, 1, "No run yet: configure one (F2) and press Ctrl-R.", COLS - 2);
    return;
  }
  int y = drawRunHeader(run, 1);
  y = drawStages(run, y);
  mvhline(y, 0, ACS_HLINE | colorAttr(kDim), COLS);
  drawRunResults(run, y + 1, LINES - 2);
}

void App::handleRunKey(int key) {
  if (key == KEY_PPAGE || key == KEY_UP) output_scroll_ += key == KEY_UP ? 1 : LINES / 2;
  if (key == KEY_NPAGE || key == KEY_DOWN) {
    output_scroll_ = std::max(0, output_scroll_ - (key == KEY_DOWN ? 1 : LINES / 2));
  }
  if (key == KEY_END) output_scroll_ = 0;
  if (key == kKeyCtrlR) startRun();
  if (key == 'q') quit();
}

}  // namespace ree::launcher::tui
