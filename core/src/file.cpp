#include "ree/core/file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "ree/core/text.h"

namespace ree {
namespace {

const char* kindOf(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

Status notRegular(const std::string& path, const char* what, mode_t mode) {
  return REE_FAIL(Status::kIoError, "%s '%s': is %s, not a regular file", what,
                  printableText(path, 400).c_str(), kindOf(mode));
}

Status cannotOpen(const std::string& path, const char* what, int error) {
  return REE_FAIL(Status::kIoError, "%s '%s': cannot open: %s", what,
                  printableText(path, 400).c_str(), std::strerror(error));
}

// Closes the descriptor on every return path.
struct FileDescriptor {
  int fd = -1;
  ~FileDescriptor() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

Status statRegularFile(const std::string& path, const char* what, uint64_t* size) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) return cannotOpen(path, what, errno);
  if (!S_ISREG(info.st_mode)) return notRegular(path, what, info.st_mode);
  if (size != nullptr) *size = static_cast<uint64_t>(info.st_size);
  return Status::kSuccess;
}

Status readRegularFile(const std::string& path, uint64_t max_bytes, const char* what,
                       std::string* out) {
  REE_CHECK_ARG(out != nullptr, "readRegularFile: out is null");
  out->clear();
  // stat first so that a FIFO is refused without being opened (opening one would be harmless
  // with O_NONBLOCK, but it would wake a writer waiting on it).
  REE_RETURN_IF_ERROR(statRegularFile(path, what, nullptr));
  FileDescriptor file;
  file.fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (file.fd < 0) return cannotOpen(path, what, errno);
  struct stat info {};
  if (::fstat(file.fd, &info) != 0) return cannotOpen(path, what, errno);
  if (!S_ISREG(info.st_mode)) return notRegular(path, what, info.st_mode);  // swapped meanwhile
  const auto size = static_cast<uint64_t>(info.st_size);
  if (size > max_bytes) {
    return REE_FAIL(Status::kIoError, "%s '%s': %llu bytes is larger than the limit of %llu bytes",
                    what, printableText(path, 400).c_str(), static_cast<unsigned long long>(size),
                    static_cast<unsigned long long>(max_bytes));
  }
  out->resize(static_cast<size_t>(size));
  size_t done = 0;
  while (done < out->size()) {
    ssize_t got = ::read(file.fd, &(*out)[done], out->size() - done);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      return REE_FAIL(Status::kIoError, "%s '%s': read failed: %s", what,
                      printableText(path, 400).c_str(), std::strerror(errno));
    }
    if (got == 0) break;  // the file shrank while we read it: keep what is there
    done += static_cast<size_t>(got);
  }
  out->resize(done);
  return Status::kSuccess;
}

}  // namespace ree
