// Drawing helpers over curses: every string passes through tui_text.h, so nothing drawn can
// overrun its box or emit a control byte.
#pragma once

#include <string>

namespace ree::launcher::tui {

// `text` at (y, x), cut to `width` columns, with `attr`; the rest of the width cleared when `fill`.
void putText(int y, int x, const std::string& text, int width, int attr = 0, bool fill = false);

// A progress bar "[####....]" of `width` columns for fraction in [0, 1].
void drawBar(int y, int x, int width, double fraction);

// The part of `text` that fits `width` columns with the byte `cursor` visible; `cursor_x`
// receives the cursor's column in that part.
std::string visibleSlice(const std::string& text, size_t cursor, int width, int* cursor_x);

// "12.3 MiB"
std::string formatBytes(int64_t bytes);

}  // namespace ree::launcher::tui
