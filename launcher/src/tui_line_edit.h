// One editable line of text (a form field): insert, delete, move by UTF-8 character.
#pragma once

#include <string>

namespace ree::launcher::tui {

struct LineEdit {
  std::string text;
  size_t cursor = 0;  // byte offset, always at a character boundary

  void set(const std::string& value) {
    text = value;
    cursor = text.size();
  }
  // Applies an editing key (printable byte, Backspace, Delete, Left, Right, Home, End, Ctrl-U,
  // Ctrl-A/E). Returns false when the key is not an editing key.
  bool handleKey(int key);
};

}  // namespace ree::launcher::tui
