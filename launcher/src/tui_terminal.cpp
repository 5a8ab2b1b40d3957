#include "tui_terminal.h"

#include <curses.h>
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <clocale>
#include <csignal>

namespace ree::launcher::tui {
namespace {

std::atomic<bool> g_interrupt{false};
std::atomic<bool> g_quit{false};

struct sigaction g_old_int, g_old_term, g_old_hup;

void onSignal(int signal) {
  if (signal == SIGINT) {
    g_interrupt = true;
  } else {
    g_quit = true;
  }
}

void installHandlers() {
  struct sigaction action {};
  action.sa_handler = onSignal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, &g_old_int);
  sigaction(SIGTERM, &action, &g_old_term);
  sigaction(SIGHUP, &action, &g_old_hup);
}

void restoreHandlers() {
  sigaction(SIGINT, &g_old_int, nullptr);
  sigaction(SIGTERM, &g_old_term, nullptr);
  sigaction(SIGHUP, &g_old_hup, nullptr);
}

void startColors() {
  if (!has_colors()) return;
  start_color();
  use_default_colors();
  init_pair(kTitle, COLOR_BLACK, COLOR_CYAN);
  init_pair(kSelected, COLOR_BLACK, COLOR_YELLOW);
  init_pair(kError, COLOR_RED, -1);
  init_pair(kGood, COLOR_GREEN, -1);
  init_pair(kDim, COLOR_BLUE, -1);
  init_pair(kBar, COLOR_CYAN, -1);
}

}  // namespace

TerminalSession::TerminalSession(const std::string& log_path) {
  std::setlocale(LC_ALL, "");
  // Redirect stderr before curses owns the screen; the original comes back in the destructor.
  int log = log_path.empty()
                ? -1
                : ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (log < 0) log = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (log >= 0) {
    saved_stderr_ = ::dup(STDERR_FILENO);
    ::dup2(log, STDERR_FILENO);
    ::close(log);
  }
  installHandlers();
  set_escdelay(25);
  // newterm, not initscr: initscr exits the process when the terminal is unknown.
  screen_ = newterm(nullptr, stdout, stdin);
  if (screen_ == nullptr) return;
  set_term(screen_);
  started_ = true;
  raw();  // Ctrl-C, Ctrl-Q, Ctrl-S... arrive as keys
  noecho();
  keypad(stdscr, TRUE);
  nonl();
  curs_set(0);
  timeout(50);  // getch() returns ERR every 50 ms so the screen follows the worker
  startColors();
}

TerminalSession::~TerminalSession() {
  if (started_) {
    endwin();
    delscreen(screen_);
  }
  restoreHandlers();
  if (saved_stderr_ >= 0) {
    ::dup2(saved_stderr_, STDERR_FILENO);
    ::close(saved_stderr_);
  }
}

int colorAttr(ColorPair pair) {
  if (has_colors()) return COLOR_PAIR(pair);
  return pair == kTitle || pair == kSelected || pair == kBar ? A_REVERSE : A_BOLD;
}

bool takeInterruptSignal() {
  return g_interrupt.exchange(false);
}

bool quitSignalled() {
  return g_quit.load();
}

}  // namespace ree::launcher::tui
