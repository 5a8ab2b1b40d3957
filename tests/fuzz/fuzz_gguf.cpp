// Fuzz target: a whole GGUF file opened by GgufFile::open; on success every tensor it lists must
// lie inside the input at its offset, every metadata key must give a typed read or a one-line
// error, and every dequantizable tensor (up to a size cap) is dequantized. Then the same file as a
// GgufSource (names, un-permutation, values), as a model config and as a tokenizer (encoding and
// decoding a fixed text when its tokenizer.ggml.* metadata is accepted).
#include <cstring>
#include <memory>

#include "fuzz_util.h"
#include "ree/models/gguf.h"
#include "ree/models/gguf_config.h"
#include "ree/models/gguf_dequant.h"
#include "ree/models/gguf_source.h"
#include "ree/models/gguf_tokenizer.h"

using namespace ree;
using namespace ree::models;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::quietLogs();
  return 0;
}

namespace {

// Elements dequantized per input at most (a 64-byte file may declare a large F32 tensor only if
// it holds its bytes, but blocks expand up to 64x).
constexpr uint64_t kMaxElements = uint64_t{1} << 20;

void checkTensors(const GgufFile& file, const uint8_t* data, size_t size) {
  for (const GgufTensorInfo& tensor : file.tensors()) {
    fuzz::require(file.findTensor(tensor.name) == &tensor, "findTensor() misses a listed tensor",
                  tensor.name);
    const uint64_t begin = file.dataOffset() + tensor.offset;
    fuzz::require(begin <= size && tensor.bytes <= size - begin,
                  "an accepted tensor lies outside the file", tensor.name);
    const GgmlTypeTraits* traits = ggmlTypeTraits(static_cast<uint32_t>(tensor.type));
    fuzz::require(traits != nullptr && tensor.elements % traits->block_elems == 0 &&
                      tensor.elements / traits->block_elems * traits->block_bytes == tensor.bytes,
                  "an accepted tensor's size disagrees with its type", tensor.name);
    fuzz::require(std::memcmp(file.tensorData(tensor), data + begin, tensor.bytes) == 0,
                  "tensorData() is not the input at the tensor's offset", tensor.name);
    if (!isDequantizableGgmlType(tensor.type) || tensor.elements > kMaxElements) continue;
    std::vector<float> values(tensor.elements);
    dequantizeGgml(tensor.type, file.tensorData(tensor), static_cast<int64_t>(tensor.elements),
                   values.data());
  }
}

void checkMetadata(const GgufFile& file) {
  for (const std::string& key : file.keys()) {
    fuzz::require(file.find(key) != nullptr, "find() misses a listed key", key);
    int64_t integer = 0;
    double number = 0.0;
    std::string text;
    fuzz::checkStatus(file.integer(key, &integer), "GgufFile::integer");
    fuzz::checkStatus(file.number(key, &number), "GgufFile::number");
    fuzz::checkStatus(file.string(key, &text), "GgufFile::string");
  }
}

void checkAsSource(const std::string& path) {
  fuzz::beginInput();
  std::unique_ptr<GgufSource> source;
  const Status status = GgufSource::open(path, &source);
  fuzz::checkStatus(status, "GgufSource::open");
  if (status != Status::kSuccess) return;
  for (const std::string& name : source->tensorNames()) {
    TensorInfo info;
    fuzz::checkStatus(source->info(name, &info), "GgufSource::info");
    if (static_cast<uint64_t>(info.numel()) > kMaxElements) continue;
    TensorView view;
    const Status viewed = source->bytes(name, &view);
    fuzz::require(viewed == Status::kSuccess && view.bytes == info.bytes(),
                  "bytes() refused a listed tensor or gave another size", name);
  }
  source->metadata();
}

void checkAsTokenizer(const std::string& path) {
  fuzz::beginInput();
  std::unique_ptr<Tokenizer> tokenizer;
  const Status status = loadGgufTokenizer(path, &tokenizer);
  fuzz::checkStatus(status, "loadGgufTokenizer");
  if (status != Status::kSuccess || tokenizer == nullptr) return;
  std::vector<int32_t> ids;
  fuzz::checkStatus(tokenizer->encode("Hello, world! 123 \xE2\x96\x81<s>", true, &ids),
                    "Tokenizer::encode");
  std::string text;
  fuzz::checkStatus(tokenizer->decode(ids, false, &text), "Tokenizer::decode");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::beginInput();
  static const std::string path = fuzz::scratchDirectory() + "/model.gguf";
  fuzz::writeFile(path, data, size);
  std::unique_ptr<GgufFile> file;
  const Status status = GgufFile::open(path, &file);
  fuzz::checkStatus(status, "GgufFile::open");
  if (status != Status::kSuccess) {
    fuzz::require(file == nullptr, "a failed open() handed out a file");
    return 0;
  }
  fuzz::require(file->fileBytes() == size, "fileBytes() is not the input's size");
  checkTensors(*file, data, size);
  checkMetadata(*file);
  file.reset();
  checkAsSource(path);
  fuzz::beginInput();
  ModelConfig config;
  fuzz::checkStatus(loadGgufModelConfig(path, &config, nullptr), "loadGgufModelConfig");
  checkAsTokenizer(path);
  return 0;
}
