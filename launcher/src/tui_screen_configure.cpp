// The configure screen: the form, the model picker (Ctrl-O) and Tab completion.
#include <curses.h>

#include <algorithm>

#include "tui_app.h"
#include "tui_draw.h"
#include "tui_terminal.h"
#include "tui_text.h"

namespace ree::launcher::tui {
namespace {

constexpr int kLabelWidth = 16;
constexpr int kFormTop = 2;

// Rows the form may use: the fields, the Run button, then two rows for the command line.
int formRows() {
  return std::max(3, LINES - 2 - kFormTop - 3);
}

bool isChoice(const FormField& field) {
  return !field.choices.empty();
}

}  // namespace

void App::drawField(int id, int y, bool selected) {
  const FormField& field = form_.field(id);
  int dim = form_.applies(id) ? 0 : colorAttr(kDim);
  putText(y, 2, field.label, kLabelWidth, dim | (selected ? A_BOLD : 0));
  int x = 2 + kLabelWidth + 1;
  int width = COLS - x - 1;
  int attr = selected ? colorAttr(kSelected) : dim;
  if (isChoice(field)) {
    std::string shown = selected ? "< " + form_.value(id) + " >" : "  " + form_.value(id);
    putText(y, x, shown, width, attr);
    return;
  }
  int cursor_x = 0;
  std::string shown = visibleSlice(field.edit.text, field.edit.cursor, width, &cursor_x);
  putText(y, x, shown, width, attr, selected);
  if (selected) {
    move(y, x + cursor_x);
    curs_set(1);
  }
}

void App::drawConfigure() {
  drawFrame("Up/Down field  Left/Right choice  Tab complete  ^O models  ^R run  F10 quit");
  putText(1, 0, "Configure a run (the same flags as ree-launch run)", COLS, A_BOLD);
  int rows = formRows();
  int total = kFieldCount + 1;  // + the Run button
  if (selected_ < form_top_) form_top_ = selected_;
  if (selected_ >= form_top_ + rows) form_top_ = selected_ - rows + 1;
  form_top_ = std::max(0, std::min(form_top_, std::max(0, total - rows)));
  int cursor_y = -1, cursor_x = -1;
  for (int i = form_top_; i < total && i < form_top_ + rows; ++i) {
    int y = kFormTop + i - form_top_;
    if (i == kFieldCount) {
      putText(y, 2 + kLabelWidth + 1, "[ Run ]", 7,
              selected_ == kFieldCount ? colorAttr(kSelected) | A_BOLD : A_BOLD);
      continue;
    }
    drawField(i, y, i == selected_);
    if (i == selected_) getyx(stdscr, cursor_y, cursor_x);
  }
  std::vector<std::string> command = wrapText("$ " + form_.commandLine(), COLS - 2);
  int command_y = kFormTop + rows + 1;
  for (size_t i = 0; i < command.size() && i < 2; ++i) {
    putText(command_y + static_cast<int>(i), 1, command[i], COLS - 2, colorAttr(kDim));
  }
  // The frame's status line shows the selected field's hint unless a message is pending.
  if (status_.empty() && selected_ < kFieldCount) {
    putText(LINES - 2, 0, form_.field(selected_).hint, COLS, colorAttr(kDim), true);
  }
  if (selected_ < kFieldCount && !isChoice(form_.field(selected_)) && cursor_y >= 0) {
    move(cursor_y, cursor_x);
    curs_set(1);
  }
}

void App::moveSelection(int delta) {
  selected_ = std::max(0, std::min(static_cast<int>(kFieldCount), selected_ + delta));
  setStatus("");
}

void App::completeField(LineEdit* edit) {
  std::vector<std::string> candidates;
  edit->set(completePath(edit->text, &candidates));
  if (candidates.empty()) return setStatus("no completion", true);
  if (candidates.size() == 1) return setStatus("");
  std::string list;
  for (const std::string& name : candidates)
    list += name + "  ";
  setStatus(std::to_string(candidates.size()) + " matches: " + list);
}

void App::handleConfigureKey(int key) {
  if (key == kKeyCtrlR) return startRun();
  if (key == KEY_UP || key == KEY_BTAB) return moveSelection(-1);
  if (key == KEY_DOWN) return moveSelection(1);
  if (key == KEY_PPAGE) return moveSelection(-formRows());
  if (key == KEY_NPAGE) return moveSelection(formRows());
  if (key == '\r' || key == '\n' || key == KEY_ENTER) {
    return selected_ == kFieldCount ? startRun() : moveSelection(1);
  }
  if (selected_ == kFieldCount) return;
  if (key == kKeyCtrlO && selected_ == kFieldModel) return openModelPicker();
  FormField& field = form_.field(selected_);
  if (isChoice(field)) {
    size_t n = field.choices.size();
    if (key == KEY_LEFT) form_.setValue(selected_, field.choices[(field.choice + n - 1) % n]);
    if (key == KEY_RIGHT || key == ' ') {
      form_.setValue(selected_, field.choices[(field.choice + 1) % n]);
    }
    if (key == kKeyTab) moveSelection(1);
    return;
  }
  if (key == kKeyTab) return field.path ? completeField(&field.edit) : moveSelection(1);
  if (field.edit.handleKey(key)) setStatus("");
}

void App::openModelPicker() {
  picker_items_ = {defaultModel()};
  if (picker_items_.front() != kFallbackModel) picker_items_.push_back(kFallbackModel);
  for (const std::string& model : loadRecentModels()) {
    if (std::find(picker_items_.begin(), picker_items_.end(), model) == picker_items_.end()) {
      picker_items_.push_back(model);
    }
  }
  picker_selected_ = 0;
  picker_open_ = true;
}

void App::drawModelPicker() {
  int width = std::min(COLS - 4, 70);
  int height = std::min(LINES - 4, static_cast<int>(picker_items_.size()) + 3);
  int top = 3, left = 2;
  for (int y = top; y < top + height; ++y)
    mvhline(y, left, ' ' | colorAttr(kTitle), width);
  putText(top, left + 1, "Models: the defaults, then recently used (Enter picks, Esc)", width - 2,
          colorAttr(kTitle) | A_BOLD);
  int rows = height - 3;
  int first = std::max(0, picker_selected_ - rows + 1);
  for (int i = 0; i < rows && first + i < static_cast<int>(picker_items_.size()); ++i) {
    int index = first + i;
    std::string label = picker_items_[index] + (index == 0 ? "  (default)" : "");
    int attr = index == picker_selected_ ? colorAttr(kSelected) : colorAttr(kTitle);
    putText(top + 2 + i, left + 2, fitTail(label, width - 4), width - 4, attr, true);
  }
}

void App::handlePickerKey(int key) {
  int n = static_cast<int>(picker_items_.size());
  if (key == KEY_UP) picker_selected_ = std::max(0, picker_selected_ - 1);
  if (key == KEY_DOWN) picker_selected_ = std::min(n - 1, picker_selected_ + 1);
  if (key == '\r' || key == '\n' || key == KEY_ENTER) {
    form_.setValue(kFieldModel, picker_items_[picker_selected_]);
    picker_open_ = false;
  }
  if (key == kKeyEscape || key == kKeyCtrlO || key == kKeyCtrlC) picker_open_ = false;
  if (key == KEY_F(10) || key == kKeyCtrlQ) quit();
}

}  // namespace ree::launcher::tui
