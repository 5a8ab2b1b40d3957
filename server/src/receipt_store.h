// Receipts on disk, one file per request: <dir>/<id>.json, written whole (a temporary file renamed
// into place), so a restart keeps every receipt already returned and a reader never sees half.
#pragma once

#include <string>

#include "ree/core/status.h"
#include "ree/models/receipt.h"

namespace ree::server {

// True for ids this server makes ("cmpl-" + 32 lowercase hex digits); others never reach the disk.
bool isReceiptId(const std::string& id);

// A fresh random id (128 bits from std::random_device).
std::string newReceiptId();

class ReceiptStore {
 public:
  // Creates `dir` (and its parents) when missing; fails naming --receipt-dir.
  Status open(const std::string& dir);
  Status write(const std::string& id, const Receipt& receipt);
  // kIoError when there is no such receipt.
  Status read(const std::string& id, std::string* text) const;
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
};

}  // namespace ree::server
