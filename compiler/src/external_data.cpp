#include "external_data.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>

#include "ree/core/file.h"
#include "ree/core/text.h"

namespace ree::compiler {

namespace {

bool hasParentComponent(const std::string& path) {
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    if (path.compare(start, end - start, "..") == 0 && end - start == 2) return true;
    start = end + 1;
  }
  return false;
}

std::string canonicalOf(const std::string& path) {
  char buffer[PATH_MAX];
  return realpath(path.c_str(), buffer) != nullptr ? std::string(buffer) : std::string();
}

}  // namespace

Status resolveExternalPath(const std::string& base_dir, const std::string& location,
                           const std::string& tensor, std::string* canonical) {
  const std::string name = printableText(tensor, 80);
  if (base_dir.empty()) {
    return REE_FAIL(Status::kInvalidArgument,
                    "%s: external data '%s' but the model was given as bytes without a "
                    "directory",
                    name.c_str(), printableText(location, 80).c_str());
  }
  REE_CHECK_ARG(
      !location.empty() && location.find('\0') == std::string::npos && location.size() < 1024,
      "%s: external data location is empty, too long or holds a NUL byte", name.c_str());
  REE_CHECK_ARG(location[0] != '/' && !hasParentComponent(location),
                "%s: external data location '%s' must be a relative path inside the "
                "model directory (no leading '/', no '..')",
                name.c_str(), printableText(location, 80).c_str());
  std::string base = canonicalOf(base_dir);
  std::string resolved = canonicalOf(base_dir + "/" + location);
  if (resolved.empty()) {
    return REE_FAIL(Status::kIoError, "%s: external data file '%s' does not exist", name.c_str(),
                    printableText(location, 80).c_str());
  }
  REE_CHECK_ARG(!base.empty() && resolved.size() > base.size() + 1 &&
                    resolved.compare(0, base.size() + 1, base + "/") == 0,
                "%s: external data file '%s' resolves outside the model directory", name.c_str(),
                printableText(location, 80).c_str());
  uint64_t size = 0;
  REE_RETURN_IF_ERROR(statRegularFile(resolved, "external data file", &size));
  *canonical = resolved;
  return Status::kSuccess;
}

Status readExternalData(const std::string& canonical, const ExternalDataRef& ref,
                        uint64_t expected_bytes, const std::string& tensor, void* out) {
  const std::string name = printableText(tensor, 80);
  uint64_t size = 0;
  REE_RETURN_IF_ERROR(statRegularFile(canonical, "external data file", &size));
  uint64_t length = ref.length < 0 ? (ref.offset <= size ? size - ref.offset : 0)
                                   : static_cast<uint64_t>(ref.length);
  REE_CHECK_ARG(length == expected_bytes,
                "%s: external data length %llu does not match its shape (%llu bytes)", name.c_str(),
                static_cast<unsigned long long>(length),
                static_cast<unsigned long long>(expected_bytes));
  REE_CHECK_ARG(ref.offset <= size && expected_bytes <= size - ref.offset,
                "%s: external data [%llu, +%llu) lies beyond the end of '%s' (%llu bytes)",
                name.c_str(), static_cast<unsigned long long>(ref.offset),
                static_cast<unsigned long long>(expected_bytes),
                printableText(ref.location, 80).c_str(), static_cast<unsigned long long>(size));
  int fd = open(canonical.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    return REE_FAIL(Status::kIoError, "%s: cannot open external data file '%s'", name.c_str(),
                    printableText(ref.location, 80).c_str());
  }
  uint64_t done = 0;
  char* bytes = static_cast<char*>(out);
  while (done < expected_bytes) {
    ssize_t got =
        pread(fd, bytes + done, expected_bytes - done, static_cast<off_t>(ref.offset + done));
    if (got <= 0) break;
    done += static_cast<uint64_t>(got);
  }
  close(fd);
  if (done != expected_bytes) {
    return REE_FAIL(Status::kIoError, "%s: short read of external data file '%s'", name.c_str(),
                    printableText(ref.location, 80).c_str());
  }
  return Status::kSuccess;
}

}  // namespace ree::compiler
