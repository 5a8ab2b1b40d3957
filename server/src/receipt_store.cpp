#include "receipt_store.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <mutex>
#include <random>

#include "ree/core/file.h"
#include "ree/core/text.h"

namespace ree::server {

bool isReceiptId(const std::string& id) {
  if (id.size() != 37 || id.compare(0, 5, "cmpl-") != 0) return false;
  for (size_t i = 5; i < id.size(); ++i) {
    char c = id[i];
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

std::string newReceiptId() {
  static std::mutex mutex;
  static std::random_device device;
  std::lock_guard<std::mutex> lock(mutex);
  std::string id = "cmpl-";
  for (int word = 0; word < 4; ++word) {
    char hex[9];
    std::snprintf(hex, sizeof(hex), "%08x", static_cast<unsigned>(device()));
    id += hex;
  }
  return id;
}

Status ReceiptStore::open(const std::string& dir) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error || !std::filesystem::is_directory(dir)) {
    return REE_FAIL(Status::kIoError, "--receipt-dir '%s': cannot create the directory (%s)",
                    printableText(dir).c_str(),
                    error ? error.message().c_str() : "not a directory");
  }
  dir_ = dir;
  return Status::kSuccess;
}

Status ReceiptStore::write(const std::string& id, const Receipt& receipt) {
  REE_CHECK_ARG(isReceiptId(id), "receipt id '%s' is not one this server makes",
                printableText(id, 60).c_str());
  std::string text;
  REE_RETURN_IF_ERROR(receiptFileText(receipt, &text));
  const std::string path = dir_ + "/" + id + ".json";
  const std::string temporary = path + ".tmp";
  int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return REE_FAIL(Status::kIoError, "cannot create '%s'", temporary.c_str());
  size_t written = 0;
  while (written < text.size()) {
    ssize_t n = ::write(fd, text.data() + written, text.size() - written);
    if (n <= 0) break;
    written += static_cast<size_t>(n);
  }
  bool ok = written == text.size() && ::fsync(fd) == 0;
  ok = ::close(fd) == 0 && ok;
  if (!ok || std::rename(temporary.c_str(), path.c_str()) != 0) {
    ::unlink(temporary.c_str());
    return REE_FAIL(Status::kIoError, "cannot write the receipt '%s'", path.c_str());
  }
  return Status::kSuccess;
}

Status ReceiptStore::read(const std::string& id, std::string* text) const {
  REE_CHECK_ARG(isReceiptId(id), "no receipt '%s'", printableText(id, 60).c_str());
  return readRegularFile(dir_ + "/" + id + ".json", kMaxReceiptBytes, "receipt", text);
}

}  // namespace ree::server
