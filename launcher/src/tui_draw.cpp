#include "tui_draw.h"

#include <curses.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "tui_terminal.h"
#include "tui_text.h"

namespace ree::launcher::tui {

void putText(int y, int x, const std::string& text, int width, int attr, bool fill) {
  if (width <= 0 || y < 0 || y >= LINES || x >= COLS) return;
  width = std::min(width, COLS - x);
  std::string shown = fitText(text, width);
  if (fill) shown += std::string(std::max(0, width - textColumns(shown)), ' ');
  attron(attr);
  mvaddstr(y, x, shown.c_str());
  attroff(attr);
}

void drawBar(int y, int x, int width, double fraction) {
  if (width < 3) return;
  fraction = std::max(0.0, std::min(1.0, fraction));
  int inner = width - 2;
  int filled = static_cast<int>(fraction * inner + 0.5);
  mvaddch(y, x, '[');
  attron(colorAttr(kBar));
  for (int i = 0; i < inner; ++i)
    mvaddch(y, x + 1 + i, i < filled ? '#' : ' ');
  attroff(colorAttr(kBar));
  mvaddch(y, x + width - 1, ']');
}

std::string visibleSlice(const std::string& text, size_t cursor, int width, int* cursor_x) {
  // One entry per character (wrapText at width 1), with the byte offset where it starts.
  std::vector<std::string> characters =
      text.empty() ? std::vector<std::string>() : wrapText(text, 1);
  size_t cursor_index = 0;
  for (size_t i = 0, at = 0; i < characters.size() && at < cursor; ++i) {
    at += characters[i].size();  // a replaced byte shows as one "?": sizes match the input
    cursor_index = i + 1;
  }
  size_t first = 0;
  int columns = 0;
  for (size_t i = cursor_index; i-- > 0;) {  // walk back from the cursor while it fits
    columns += textColumns(characters[i]);
    if (columns >= width) break;
    first = i;
  }
  if (cursor_index == 0) first = 0;
  std::string shown;
  int used = 0;
  *cursor_x = 0;
  for (size_t i = first; i < characters.size(); ++i) {
    if (i == cursor_index) *cursor_x = used;
    int w = textColumns(characters[i]);
    if (used + w > width) break;
    shown += characters[i];
    used += w;
  }
  if (cursor_index >= characters.size()) *cursor_x = std::min(used, width - 1);
  return shown;
}

std::string formatBytes(int64_t bytes) {
  char text[32];
  if (bytes >= (int64_t{1} << 30)) {
    std::snprintf(text, sizeof(text), "%.1f GiB", bytes / 1073741824.0);
  } else if (bytes >= (int64_t{1} << 20)) {
    std::snprintf(text, sizeof(text), "%.1f MiB", bytes / 1048576.0);
  } else {
    std::snprintf(text, sizeof(text), "%.1f KiB", bytes / 1024.0);
  }
  return text;
}

}  // namespace ree::launcher::tui
