// Fuzz target: model.safetensors.index.json, read by Checkpoint::open on a directory that also
// holds two small valid shards (written once at start-up). Every tensor the accepted index names is
// then looked up (info, which maps its shard, and view), so index/shard disagreements are reached.
#include <memory>
#include <string>

#include "fuzz_util.h"
#include "ree/models/checkpoint.h"

using namespace ree;
using namespace ree::models;

namespace {

// At most this many tensors are looked up per input, to keep each run fast.
constexpr size_t kMaxLookups = 64;

std::string directory() {
  return fuzz::scratchDirectory() + "/model";
}

// A safetensors file holding F32 tensors of 2 elements each, named `names`.
void writeShard(const std::string& path, const std::vector<std::string>& names) {
  std::string header = "{";
  size_t offset = 0;
  for (const std::string& name : names) {
    if (header.size() > 1) header += ",";
    header += "\"" + name + "\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[" +
              std::to_string(offset) + "," + std::to_string(offset + 8) + "]}";
    offset += 8;
  }
  header += "}";
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i)
    bytes[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  bytes += header;
  bytes += std::string(offset, '\x3f');
  fuzz::writeFile(path, reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::quietLogs();
  std::error_code error;
  std::filesystem::create_directories(directory(), error);
  if (error) std::abort();
  writeShard(directory() + "/model-00001-of-00002.safetensors",
             {"model.embed_tokens.weight", "model.layers.0.input_layernorm.weight"});
  writeShard(directory() + "/model-00002-of-00002.safetensors",
             {"model.norm.weight", "lm_head.weight"});
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::beginInput();
  fuzz::writeFile(directory() + "/model.safetensors.index.json", data, size);
  std::unique_ptr<Checkpoint> checkpoint;
  Status status = Checkpoint::open(directory(), &checkpoint);
  fuzz::checkStatus(status, "Checkpoint::open");
  if (status != Status::kSuccess) {
    fuzz::require(checkpoint == nullptr, "a failed open() handed out a checkpoint");
    return 0;
  }
  fuzz::require(checkpoint->sharded(), "a directory with only an index is not sharded");
  size_t looked_up = 0;
  for (const std::string& name : checkpoint->tensorNames()) {
    if (++looked_up > kMaxLookups) break;
    std::string shard;
    fuzz::checkStatus(checkpoint->shardOf(name, &shard), "Checkpoint::shardOf");
    TensorInfo info;
    fuzz::checkStatus(checkpoint->info(name, &info), "Checkpoint::info");
    TensorView view;
    Status view_status = checkpoint->view(name, &view);
    fuzz::checkStatus(view_status, "Checkpoint::view");
    if (view_status == Status::kSuccess && view.bytes > 0) {
      volatile uint8_t last = static_cast<const uint8_t*>(view.data)[view.bytes - 1];
      (void)last;
    }
  }
  return 0;
}
