// The receipts screen: a directory's receipts, validate (v) and verify (Enter) the selected one,
// and the verdict with where a divergence was found (request, step, layer, stage).
#include <curses.h>

#include <algorithm>
#include <cstdio>
#include <ctime>

#include "flag_values.h"
#include "ree/core/device.h"
#include "tui_app.h"
#include "tui_draw.h"
#include "tui_terminal.h"
#include "tui_text.h"

namespace ree::launcher::tui {
namespace {

constexpr int kLabelWidth = 11;
constexpr int kResultRows = 7;

std::string joinPath(const std::string& directory, const std::string& name) {
  if (directory.empty()) return name;
  return directory.back() == '/' ? directory + name : directory + "/" + name;
}

std::string modifiedText(int64_t seconds) {
  std::time_t time = static_cast<std::time_t>(seconds);
  std::tm local{};
  localtime_r(&time, &local);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%d %H:%M", &local);
  return text;
}

std::string where(const ReceiptCheckResult& result) {
  std::string text;
  auto add = [&](const char* name, int64_t value) {
    if (value >= 0)
      text += std::string(text.empty() ? "" : ", ") + name + " " + std::to_string(value);
  };
  add("request", result.request);
  add("step", result.step);
  add("layer", result.layer);
  add("stage", result.stage);
  return text;
}

}  // namespace

void App::enterReceipts() {
  screen_ = Screen::kReceipts;
  if (!verify_model_edited_) verify_model_.set(form_.value(kFieldModel));
  std::string select = receipt_selected_ < static_cast<int>(receipts_.size())
                           ? receipts_[receipt_selected_].name
                           : "";
  std::string receipt = form_.value(kFieldReceiptPath);
  if (!receipt.empty()) select = receipt.substr(receipt.find_last_of('/') + 1);
  rescanReceipts(select);
}

void App::rescanReceipts(const std::string& select) {
  receipts_ = listReceipts(receipts_dir_.text, &receipts_error_);
  receipt_selected_ = 0;
  for (size_t i = 0; i < receipts_.size(); ++i) {
    if (receipts_[i].name == select) receipt_selected_ = static_cast<int>(i);
  }
}

void App::drawReceiptList(int top, int rows) {
  if (!receipts_error_.empty())
    return putText(top, 2, receipts_error_, COLS - 2, colorAttr(kError));
  if (receipts_.empty()) return putText(top, 2, "no *.json files here", COLS - 2, colorAttr(kDim));
  if (receipt_selected_ < receipt_top_) receipt_top_ = receipt_selected_;
  if (receipt_selected_ >= receipt_top_ + rows) receipt_top_ = receipt_selected_ - rows + 1;
  int name_width = std::max(10, COLS - 32);
  for (int i = 0; i < rows && receipt_top_ + i < static_cast<int>(receipts_.size()); ++i) {
    const ReceiptFile& file = receipts_[receipt_top_ + i];
    bool selected = receipt_top_ + i == receipt_selected_;
    int attr = selected ? (receipts_focus_ == 2 ? colorAttr(kSelected) : A_BOLD) : 0;
    putText(top + i, 2, fitTail(file.name, name_width), name_width, attr, true);
    putText(top + i, 3 + name_width, formatBytes(file.bytes), 10, attr);
    putText(top + i, 14 + name_width, modifiedText(file.modified), 17, attr);
  }
}

void App::drawCheckResult(int top, int bottom) {
  ReceiptCheckResult result = checker_.result();
  if (result.action.empty()) {
    putText(
        top, 1,
        "v validates the selected receipt (hashes only); Enter verifies it (re-runs the model).",
        COLS - 2, colorAttr(kDim));
    return;
  }
  std::string name = fitTail(result.path, COLS / 2);
  if (result.running) {
    putText(top, 1, result.action + " " + name + ": running...", COLS - 2, A_BOLD);
    return;
  }
  char timing[48];
  std::snprintf(timing, sizeof(timing), " (%.2f s)", result.seconds);
  int attr = (result.good ? colorAttr(kGood) : colorAttr(kError)) | A_BOLD;
  putText(top, 1, result.action + " " + name + ": " + result.verdict + timing, COLS - 2, attr);
  int y = top + 1;
  if (!result.field.empty() && y < bottom) {
    putText(y++, 3,
            "field: " + result.field + (where(result).empty() ? "" : "  at " + where(result)),
            COLS - 4, A_BOLD);
  }
  std::vector<std::string> lines = wrapText(result.summary, COLS - 4);
  if (!result.note.empty()) {
    std::vector<std::string> note = wrapText("note: " + result.note, COLS - 4);
    lines.insert(lines.end(), note.begin(), note.end());
  }
  for (size_t i = 0; i < lines.size() && y < bottom; ++i)
    putText(y++, 3, lines[i], COLS - 4);
}

void App::drawReceipts() {
  drawFrame("Up/Down move  Enter verify  v validate  r rescan  Tab complete  F10 quit");
  LineEdit* boxes[2] = {&receipts_dir_, &verify_model_};
  const char* labels[2] = {"Directory", "Model"};
  int cursor_y = -1, cursor_x = 0;
  for (int i = 0; i < 2; ++i) {
    putText(1 + i, 1, labels[i], kLabelWidth, receipts_focus_ == i ? A_BOLD : 0);
    int x = 1 + kLabelWidth, width = COLS - x - 1;
    std::string shown = visibleSlice(boxes[i]->text, boxes[i]->cursor, width, &cursor_x);
    putText(1 + i, x, shown, width, receipts_focus_ == i ? colorAttr(kSelected) : 0, true);
    if (receipts_focus_ == i) cursor_y = 1 + i, cursor_x += x;
  }
  putText(3, 1, "Enter verifies with this model on Configure's device and partitions", COLS - 2,
          colorAttr(kDim));
  int list_top = 4;
  int result_top = std::max(list_top + 2, LINES - 2 - kResultRows);
  drawReceiptList(list_top, result_top - list_top - 1);
  mvhline(result_top - 1, 0, ACS_HLINE | colorAttr(kDim), COLS);
  drawCheckResult(result_top, LINES - 2);
  if (cursor_y >= 0) {
    move(cursor_y, cursor_x);
    curs_set(1);
  }
}

void App::checkSelected(bool verify) {
  if (receipts_.empty()) return setStatus("no receipt selected", true);
  if (checker_.busy() || run_.busy())
    return setStatus("wait for the run or check in progress", true);
  std::string path = joinPath(receipts_dir_.text, receipts_[receipt_selected_].name);
  if (!verify) return checker_.validate(path);
  EngineOptions options;
  options.model = verify_model_.text;
  std::string device = form_.value(kFieldDevice);
  if (device == "auto") {
    options.device = cudaDeviceCount() > 0 ? Device::cuda(0) : Device::cpu();
  } else if (parseDevice(device, &options.device) != Status::kSuccess) {
    return setStatus(std::string("Configure's device: ") + lastErrorMessage(), true);
  }
  if (parseIntFlag("Configure's partitions", form_.value(kFieldPartitions), 1, 4096,
                   &options.n_partitions) != Status::kSuccess) {
    return setStatus(lastErrorMessage(), true);
  }
  setStatus("");
  checker_.verify(path, options);
}

void App::handleReceiptsKey(int key) {
  if (key == kKeyTab) {
    if (receipts_focus_ == 2) return void(receipts_focus_ = 0);
    return completeField(receipts_focus_ == 0 ? &receipts_dir_ : &verify_model_);
  }
  if (key == KEY_BTAB) return void(receipts_focus_ = (receipts_focus_ + 2) % 3);
  if (key == KEY_UP) {
    if (receipts_focus_ == 2 && receipt_selected_ > 0) return void(--receipt_selected_);
    receipts_focus_ = std::max(0, receipts_focus_ - 1);
    return;
  }
  if (key == KEY_DOWN) {
    if (receipts_focus_ < 2) return void(++receipts_focus_);
    receipt_selected_ = std::min(static_cast<int>(receipts_.size()) - 1, receipt_selected_ + 1);
    receipt_selected_ = std::max(0, receipt_selected_);
    return;
  }
  bool enter = key == '\r' || key == '\n' || key == KEY_ENTER;
  if (receipts_focus_ < 2) {
    if (enter) {
      rescanReceipts("");
      receipts_focus_ = 2;
    } else if ((receipts_focus_ == 0 ? receipts_dir_ : verify_model_).handleKey(key)) {
      if (receipts_focus_ == 1) verify_model_edited_ = true;
    }
    return;
  }
  if (enter) checkSelected(true);
  if (key == 'v') checkSelected(false);
  if (key == 'r') rescanReceipts("");
  if (key == 'q') quit();
}

}  // namespace ree::launcher::tui
