// Text for the terminal: generated text and file names can hold anything (control bytes, invalid
// UTF-8, wide characters), so every string is cut and wrapped by display columns and made
// printable before curses draws it.
#pragma once

#include <string>
#include <vector>

namespace ree::launcher::tui {

// `text` wrapped into lines of at most `width` columns. '\n' ends a line; other control bytes
// and invalid UTF-8 show as '?'; outside a UTF-8 locale every non-ASCII byte does.
std::vector<std::string> wrapText(const std::string& text, int width);

// The first line of wrapText(text, width), '\n' shown as a space: one row of a table or field.
std::string fitText(const std::string& text, int width);

// The same, keeping the end (a long path's file name) behind a leading "..".
std::string fitTail(const std::string& text, int width);

// A library error message without its source location: "x (models/src/a.cpp:28) [kind]" becomes
// "x [kind]" (the screen has one line for it; the log keeps the whole message).
std::string withoutSourceLocation(const std::string& message);

// Display columns of `text` (as wrapText counts them).
int textColumns(const std::string& text);

}  // namespace ree::launcher::tui
