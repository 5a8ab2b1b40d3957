#include "tui_text.h"

#include <langinfo.h>

#include <cstring>
#include <cwchar>

namespace ree::launcher::tui {
namespace {

bool utf8Locale() {
  const char* codeset = nl_langinfo(CODESET);
  return codeset != nullptr && std::strcmp(codeset, "UTF-8") == 0;
}

// The next character of `text` at `*at`: its printable bytes and its columns.
void nextCharacter(const std::string& text, size_t* at, std::string* shown, int* columns) {
  unsigned char byte = static_cast<unsigned char>(text[*at]);
  if (byte < 0x80) {
    *shown = (byte < 0x20 || byte == 0x7f) ? "?" : std::string(1, static_cast<char>(byte));
    *columns = 1;
    *at += 1;
    return;
  }
  std::mbstate_t state{};
  wchar_t wide = 0;
  size_t length = utf8Locale() ? std::mbrtowc(&wide, text.data() + *at, text.size() - *at, &state)
                               : static_cast<size_t>(-1);
  int width = length == 0 || length > 4 ? -1 : ::wcwidth(wide);
  if (width < 0) {
    *shown = "?";
    *columns = 1;
    *at += 1;
    return;
  }
  *shown = text.substr(*at, length);
  *columns = width;
  *at += length;
}

}  // namespace

std::vector<std::string> wrapText(const std::string& text, int width) {
  std::vector<std::string> lines(1);
  if (width < 1) width = 1;
  int used = 0;
  size_t at = 0;
  std::string shown;
  int columns = 0;
  while (at < text.size()) {
    if (text[at] == '\n') {
      lines.emplace_back();
      used = 0;
      ++at;
      continue;
    }
    nextCharacter(text, &at, &shown, &columns);
    if (used > 0 && used + columns > width) {
      lines.emplace_back();
      used = 0;
    }
    lines.back() += shown;
    used += columns;
  }
  return lines;
}

std::string fitText(const std::string& text, int width) {
  std::string flat = text;
  for (char& c : flat) {
    if (c == '\n') c = ' ';
  }
  return wrapText(flat, width).front();
}

std::string fitTail(const std::string& text, int width) {
  if (textColumns(text) <= width || width < 3) return fitText(text, width);
  std::vector<std::string> lines = wrapText(text, 1);  // one character a line
  std::string tail;
  int used = 2;
  for (size_t i = lines.size(); i-- > 0;) {
    int columns = textColumns(lines[i]);
    if (used + columns > width) break;
    tail.insert(0, lines[i]);
    used += columns;
  }
  return ".." + tail;
}

std::string withoutSourceLocation(const std::string& message) {
  size_t open = message.rfind(" (");
  if (open == std::string::npos) return message;
  size_t close = message.find(')', open);
  std::string inside = message.substr(open + 2, close == std::string::npos ? 0 : close - open - 2);
  bool location =
      inside.find(".cpp:") != std::string::npos || inside.find(".h:") != std::string::npos;
  if (!location || inside.find(' ') != std::string::npos) return message;
  return message.substr(0, open) + message.substr(close + 1);
}

int textColumns(const std::string& text) {
  int total = 0;
  size_t at = 0;
  std::string shown;
  int columns = 0;
  while (at < text.size()) {
    if (text[at] == '\n') {
      ++at;
      ++total;
      continue;
    }
    nextCharacter(text, &at, &shown, &columns);
    total += columns;
  }
  return total;
}

}  // namespace ree::launcher::tui
