// Fuzz target: receipt text (docs/receipt.md), as `ree-launch validate` reads it: parseReceipt,
// then validateReceipt. A receipt that parses must also survive being written again: its file
// text parses back, and writing that gives the same bytes (the format is canonical).
#include <string>

#include "fuzz_util.h"
#include "ree/core/text.h"
#include "ree/models/receipt.h"

using namespace ree;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::quietLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::beginInput();
  Receipt receipt;
  Status status = parseReceipt(std::string(fuzz::asText(data, size)), "receipt.json", &receipt);
  fuzz::checkStatus(status, "parseReceipt");
  if (status != Status::kSuccess) return 0;

  fuzz::beginInput();
  std::string summary;
  status = validateReceipt(receipt, &summary);
  fuzz::checkStatus(status, "validateReceipt");
  fuzz::require(summary.find('\n') == std::string::npos, "a validate summary of several lines");

  std::string written;
  fuzz::beginInput();
  status = receiptFileText(receipt, &written);
  fuzz::checkStatus(status, "receiptFileText");
  fuzz::require(status == Status::kSuccess, "a parsed receipt cannot be written",
                lastErrorMessage());
  Receipt again;
  status = parseReceipt(written, "written receipt", &again);
  fuzz::require(status == Status::kSuccess, "a written receipt does not parse back",
                lastErrorMessage());
  std::string rewritten;
  fuzz::require(receiptFileText(again, &rewritten) == Status::kSuccess && rewritten == written,
                "writing a receipt twice gives different bytes", printableText(written, 300));
  return 0;
}
