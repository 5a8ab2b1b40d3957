#include "tui_line_edit.h"

#include <curses.h>

#include "tui_terminal.h"

namespace ree::launcher::tui {
namespace {

bool continuationByte(char c) {
  return (static_cast<unsigned char>(c) & 0xC0) == 0x80;
}

size_t previousBoundary(const std::string& text, size_t at) {
  if (at == 0) return 0;
  --at;
  while (at > 0 && continuationByte(text[at]))
    --at;
  return at;
}

size_t nextBoundary(const std::string& text, size_t at) {
  if (at >= text.size()) return text.size();
  ++at;
  while (at < text.size() && continuationByte(text[at]))
    ++at;
  return at;
}

}  // namespace

bool LineEdit::handleKey(int key) {
  if (cursor > text.size()) cursor = text.size();
  switch (key) {
    case KEY_LEFT:
      cursor = previousBoundary(text, cursor);
      return true;
    case KEY_RIGHT:
      cursor = nextBoundary(text, cursor);
      return true;
    case KEY_HOME:
    case 1:  // Ctrl-A
      cursor = 0;
      return true;
    case KEY_END:
    case 5:  // Ctrl-E
      cursor = text.size();
      return true;
    case KEY_BACKSPACE:
    case 127:
    case 8: {
      size_t from = previousBoundary(text, cursor);
      text.erase(from, cursor - from);
      cursor = from;
      return true;
    }
    case KEY_DC:
      text.erase(cursor, nextBoundary(text, cursor) - cursor);
      return true;
    case kKeyCtrlU:
      text.clear();
      cursor = 0;
      return true;
    default:
      break;
  }
  // Printable ASCII and the bytes of UTF-8 characters (curses hands them over one by one).
  if ((key >= 0x20 && key < 0x7f) || (key >= 0x80 && key <= 0xff)) {
    text.insert(cursor, 1, static_cast<char>(key));
    cursor += 1;
    return true;
  }
  return false;
}

}  // namespace ree::launcher::tui
