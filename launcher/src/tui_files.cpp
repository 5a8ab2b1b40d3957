#include "tui_files.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "ree/core/file.h"

namespace ree::launcher::tui {
namespace {

constexpr size_t kMaxListed = 1000;
constexpr uint64_t kMaxRecentFileBytes = 64 * 1024;

bool isDirectory(const std::string& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode);
}

std::string commonPrefix(const std::vector<std::string>& names) {
  if (names.empty()) return "";
  std::string prefix = names.front();
  for (const std::string& name : names) {
    size_t n = 0;
    while (n < prefix.size() && n < name.size() && prefix[n] == name[n])
      ++n;
    prefix.resize(n);
  }
  return prefix;
}

std::string recentModelsFile() {
  std::string dir = stateDirectory();
  return dir.empty() ? "" : dir + "/tui-recent-models";
}

bool makeDirectories(const std::string& path) {
  for (size_t at = 1; at <= path.size(); ++at) {
    if (at != path.size() && path[at] != '/') continue;
    std::string part = path.substr(0, at);
    if (::mkdir(part.c_str(), 0700) != 0 && errno != EEXIST) return false;
  }
  return isDirectory(path);
}

}  // namespace

std::string completePath(const std::string& text, std::vector<std::string>* candidates) {
  candidates->clear();
  size_t slash = text.find_last_of('/');
  std::string directory = slash == std::string::npos ? "." : text.substr(0, slash + 1);
  std::string stem = slash == std::string::npos ? text : text.substr(slash + 1);
  std::string kept = slash == std::string::npos ? "" : directory;
  if (directory.size() > 1 && directory[0] == '~' && directory[1] == '/' && std::getenv("HOME")) {
    directory = std::getenv("HOME") + directory.substr(1);
  }
  DIR* dir = ::opendir(directory.c_str());
  if (dir == nullptr) return text;
  while (dirent* entry = ::readdir(dir)) {
    std::string name = entry->d_name;
    if (name == "." || name == "..") continue;
    if (name.compare(0, stem.size(), stem) != 0) continue;
    if (stem.empty() && name[0] == '.') continue;  // hidden files only when asked for
    candidates->push_back(name);
    if (candidates->size() >= 200) break;
  }
  ::closedir(dir);
  std::sort(candidates->begin(), candidates->end());
  if (candidates->empty()) return text;
  std::string completed = kept + commonPrefix(*candidates);
  if (candidates->size() == 1 && isDirectory(directory + candidates->front())) completed += "/";
  return completed;
}

std::string stateDirectory() {
  const char* state = std::getenv("XDG_STATE_HOME");
  if (state != nullptr && state[0] == '/') return std::string(state) + "/ree";
  const char* home = std::getenv("HOME");
  if (home != nullptr && home[0] == '/') return std::string(home) + "/.local/state/ree";
  return "";
}

std::string logFilePath() {
  std::string dir = stateDirectory();
  if (dir.empty() || !makeDirectories(dir)) return "";
  return dir + "/tui.log";
}

std::vector<std::string> loadRecentModels() {
  std::vector<std::string> models;
  std::string path = recentModelsFile();
  std::string text;
  if (path.empty() ||
      readRegularFile(path, kMaxRecentFileBytes, "recent models", &text) != Status::kSuccess) {
    return models;
  }
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line) && models.size() < kMaxRecentModels) {
    if (!line.empty() && std::find(models.begin(), models.end(), line) == models.end()) {
      models.push_back(line);
    }
  }
  return models;
}

void rememberModel(const std::string& model) {
  std::string path = recentModelsFile();
  if (path.empty() || model.empty() || model.find('\n') != std::string::npos) return;
  if (!makeDirectories(stateDirectory())) return;
  std::vector<std::string> models = loadRecentModels();
  models.erase(std::remove(models.begin(), models.end(), model), models.end());
  models.insert(models.begin(), model);
  if (models.size() > kMaxRecentModels) models.resize(kMaxRecentModels);
  // Written aside and renamed, so that two TUIs never leave a half-written list.
  std::string temporary = path + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream out(temporary, std::ios::trunc);
    for (const std::string& item : models)
      out << item << '\n';
    if (!out) {
      std::remove(temporary.c_str());
      return;
    }
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) std::remove(temporary.c_str());
}

std::vector<ReceiptFile> listReceipts(const std::string& directory, std::string* error) {
  std::vector<ReceiptFile> files;
  DIR* dir = ::opendir(directory.empty() ? "." : directory.c_str());
  if (dir == nullptr) {
    *error = std::string("cannot list '") + directory + "': " + std::strerror(errno);
    return files;
  }
  while (dirent* entry = ::readdir(dir)) {
    std::string name = entry->d_name;
    if (name.size() < 6 || name.compare(name.size() - 5, 5, ".json") != 0) continue;
    struct stat info {};
    std::string path = (directory.empty() ? "." : directory) + "/" + name;
    if (::stat(path.c_str(), &info) != 0 || !S_ISREG(info.st_mode)) continue;
    files.push_back(
        {name, static_cast<int64_t>(info.st_size), static_cast<int64_t>(info.st_mtime)});
    if (files.size() >= kMaxListed) break;
  }
  ::closedir(dir);
  std::sort(files.begin(), files.end(), [](const ReceiptFile& a, const ReceiptFile& b) {
    return a.modified != b.modified ? a.modified > b.modified : a.name < b.name;
  });
  error->clear();
  return files;
}

}  // namespace ree::launcher::tui
