// The terminal of `ree-launch tui`: curses set up and, on every way out (return, exception,
// SIGTERM/SIGHUP/SIGINT), put back as it was. Ctrl-C arrives as a key (raw mode), so it cancels
// a run instead of killing the process; a SIGINT from elsewhere (kill -INT) is turned into the
// same request, and SIGTERM/SIGHUP into a clean quit.
#pragma once

#include <string>

struct screen;  // curses' SCREEN

namespace ree::launcher::tui {

class TerminalSession {
 public:
  // Starts curses (raw keys, no echo, keypad, colours when the terminal has them). `log_path`:
  // where stderr goes while the screen is curses' (library warnings would scribble over it);
  // empty: /dev/null.
  explicit TerminalSession(const std::string& log_path);
  ~TerminalSession();  // endwin(), stderr and the signal handlers restored
  TerminalSession(const TerminalSession&) = delete;
  TerminalSession& operator=(const TerminalSession&) = delete;

  bool started() const { return started_; }

 private:
  struct screen* screen_ = nullptr;
  bool started_ = false;
  int saved_stderr_ = -1;
};

// Colour pairs (a no-op attribute where the terminal has no colours).
enum ColorPair : short { kTitle = 1, kSelected, kError, kGood, kDim, kBar };
int colorAttr(ColorPair pair);

// Signals noted by the handlers, taken (cleared) by the UI loop.
bool takeInterruptSignal();  // SIGINT
bool quitSignalled();        // SIGTERM or SIGHUP

// Key codes the UI reads (raw mode delivers control keys as their ASCII codes).
inline constexpr int kKeyCtrlC = 3;
inline constexpr int kKeyCtrlO = 15;
inline constexpr int kKeyCtrlQ = 17;
inline constexpr int kKeyCtrlR = 18;
inline constexpr int kKeyCtrlU = 21;
inline constexpr int kKeyEscape = 27;
inline constexpr int kKeyTab = 9;

}  // namespace ree::launcher::tui
