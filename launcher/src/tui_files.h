// Files the TUI offers: Tab completion of paths, the recently used models (a small file under
// $XDG_STATE_HOME/ree or ~/.local/state/ree), and the receipts of a directory.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ree::launcher::tui {

// Completes the last path component of `text`: the longest common prefix of the entries that
// start with it ('/' appended to a single directory). `candidates`: the matching names (sorted,
// at most 200), for the status line.
std::string completePath(const std::string& text, std::vector<std::string>* candidates);

// The state directory ($XDG_STATE_HOME/ree, else ~/.local/state/ree; "" when neither is known).
std::string stateDirectory();

// Where library messages go while the TUI owns the terminal: tui.log in the state directory
// (created when missing); "" when there is none.
std::string logFilePath();

// The recently used models, most recent first (at most kMaxRecentModels; none when the file is
// missing or unreadable: a fresh start is no error).
inline constexpr size_t kMaxRecentModels = 10;
std::vector<std::string> loadRecentModels();
// Puts `model` first in the list and writes it back (best effort: a read-only home is no error).
void rememberModel(const std::string& model);

struct ReceiptFile {
  std::string name;  // in the directory
  int64_t bytes = 0;
  int64_t modified = 0;  // seconds since the epoch
};
// The *.json regular files of `directory`, newest first (at most 1000). Empty on any error, with
// `error` saying why.
std::vector<ReceiptFile> listReceipts(const std::string& directory, std::string* error);

}  // namespace ree::launcher::tui
