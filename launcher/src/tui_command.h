// ree-launch tui [--model M] [--receipts-dir DIR]  (argv[0] == "tui"; docs/tui.md)
#pragma once

namespace ree::launcher {

// Runs the terminal UI until the user quits. Exit: 0, or 2 on a bad flag or without a terminal.
int tuiCommand(int argc, const char* const* argv);

}  // namespace ree::launcher
