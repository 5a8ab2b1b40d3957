// Fuzz target: a whole safetensors file (8-byte header length, JSON header, data section) opened by
// SafetensorsFile::open, then every tensor it lists viewed. An accepted file must describe only
// bytes inside it: each view's bytes are compared with the input at the offset the header gives.
// The same file is then opened as a single-file Checkpoint, whose views scan for non-finite values.
#include <cstring>
#include <memory>

#include "fuzz_util.h"
#include "ree/models/checkpoint.h"
#include "ree/models/safetensors.h"

using namespace ree;
using namespace ree::models;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::quietLogs();
  return 0;
}

namespace {

void checkTensor(const SafetensorsFile& file, const TensorInfo& info, const uint8_t* data,
                 size_t size) {
  fuzz::require(file.find(info.name) == &info, "find() does not return the listed tensor");
  const uint64_t data_section = size - 8 - file.headerBytes();
  fuzz::require(info.data_begin <= info.data_end && info.data_end <= data_section,
                "an accepted tensor lies outside the data section", info.name);
  fuzz::require(static_cast<uint64_t>(info.numel()) * dtypeSize(info.dtype) == info.bytes(),
                "an accepted tensor's size disagrees with its shape", info.name);
  TensorView stored;
  Status status = file.bytes(info.name, &stored);
  fuzz::checkStatus(status, "SafetensorsFile::bytes");
  fuzz::require(status == Status::kSuccess && stored.bytes == info.bytes(),
                "bytes() refused a listed tensor or gave another size", info.name);
  const uint8_t* expected = data + 8 + file.headerBytes() + info.data_begin;
  if (stored.bytes > 0) {
    fuzz::require(std::memcmp(stored.data, expected, stored.bytes) == 0,
                  "a tensor's bytes are not the file's bytes at its offsets", info.name);
  }
  TensorView view;
  status = file.view(info.name, &view);
  fuzz::checkStatus(status, "SafetensorsFile::view");
  if (status != Status::kSuccess) {
    fuzz::require(!isComputeDType(info.dtype), "view() refused a tensor of a compute dtype",
                  info.name);
    return;
  }
  fuzz::require(view.bytes == info.bytes(), "view bytes differ from the header's", info.name);
  fuzz::require(view.data == stored.data, "view() and bytes() point at different bytes", info.name);
}

// The file as a checkpoint: view() also checks that the values are finite.
void checkAsCheckpoint(const std::string& path) {
  fuzz::beginInput();
  std::unique_ptr<Checkpoint> checkpoint;
  Status status = Checkpoint::open(path, &checkpoint);
  fuzz::checkStatus(status, "Checkpoint::open (single file)");
  if (status != Status::kSuccess) return;
  for (const std::string& name : checkpoint->tensorNames()) {
    TensorInfo info;
    fuzz::checkStatus(checkpoint->info(name, &info), "Checkpoint::info");
    TensorView view;
    fuzz::checkStatus(checkpoint->view(name, &view), "Checkpoint::view");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::beginInput();
  static const std::string path = fuzz::scratchDirectory() + "/model.safetensors";
  fuzz::writeFile(path, data, size);
  std::unique_ptr<SafetensorsFile> file;
  Status status = SafetensorsFile::open(path, &file);
  fuzz::checkStatus(status, "SafetensorsFile::open");
  if (status != Status::kSuccess) {
    fuzz::require(file == nullptr, "a failed open() handed out a file");
    return 0;
  }
  fuzz::require(file->fileBytes() == size, "fileBytes() is not the input's size");
  for (const TensorInfo& info : file->tensors())
    checkTensor(*file, info, data, size);
  TensorView view;
  fuzz::checkStatus(file->view("no such tensor", &view), "SafetensorsFile::view (absent)");
  file.reset();
  checkAsCheckpoint(path);
  return 0;
}
