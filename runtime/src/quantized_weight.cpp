// The registry of quantised weights (ree/runtime/quantized_weight.h): address ranges of tensors
// holding GGUF block rows, with their type and K, and the operation sets that compute from them.
#include "ree/runtime/quantized_weight.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <set>

namespace ree {
namespace {

struct Entry {
  Tensor blocks;  // keeps the storage (and so the address range) alive while registered
  QuantizedWeightInfo info;
  uintptr_t end = 0;
};

struct Registry {
  std::mutex mutex;
  std::map<uintptr_t, Entry> entries;  // by first byte
  std::set<const OperationSet*> keeping_sets;
  bool enabled = true;
};

Registry& registry() {
  static Registry* instance = new Registry();  // never destroyed: models may outlive statics
  return *instance;
}

}  // namespace

int64_t quantizedRowBytes(repops::QuantType type, int64_t k) {
  return k / repops::quantBlockElems(type) * repops::quantBlockBytes(type);
}

bool findQuantizedWeight(const Tensor& weight, QuantizedWeightInfo* out) {
  if (!weight.defined() || weight.dtype() != DType::kF16 || weight.rank() != 2) return false;
  const auto begin = reinterpret_cast<uintptr_t>(weight.data());
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto it = r.entries.upper_bound(begin);
  if (it == r.entries.begin()) return false;
  --it;
  const Entry& e = it->second;
  const int64_t row_bytes = e.info.row_bytes;
  const uintptr_t offset = begin - it->first;
  if (begin >= e.end || weight.dim(1) * 2 != row_bytes || offset % row_bytes != 0 ||
      begin + static_cast<uintptr_t>(weight.dim(0) * row_bytes) > e.end) {
    return false;
  }
  if (out != nullptr) *out = e.info;
  return true;
}

int64_t registeredQuantizedBytes() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  int64_t total = 0;
  for (const auto& [begin, entry] : r.entries)
    total += static_cast<int64_t>(entry.end - begin);
  return total;
}

bool keepsQuantizedWeights(const OperationSet& ops) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  return r.enabled && r.keeping_sets.count(&ops) != 0;
}

void setKeepQuantizedWeights(bool enabled) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.enabled = enabled;
}

bool keepQuantizedWeightsEnabled() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  return r.enabled;
}

void setKeepsQuantizedWeights(const OperationSet* ops, bool keeps) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (keeps) {
    r.keeping_sets.insert(ops);
  } else {
    r.keeping_sets.erase(ops);
  }
}

Status QuantizedWeights::add(const Tensor& blocks, const QuantizedWeightInfo& info) {
  REE_CHECK_ARG(blocks.defined() && blocks.dtype() == DType::kF16 && blocks.rank() == 2 &&
                    blocks.dim(1) * 2 == info.row_bytes &&
                    info.row_bytes == quantizedRowBytes(info.type, info.k) && info.k > 0,
                "quantised weight: %s does not hold rows of %lld %s elements (%lld bytes)",
                blocks.describe().c_str(), static_cast<long long>(info.k),
                repops::quantTypeName(info.type), static_cast<long long>(info.row_bytes));
  const auto begin = reinterpret_cast<uintptr_t>(blocks.data());
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  Entry entry{blocks, info, begin + blocks.nbytes()};
  r.entries[begin] = std::move(entry);
  owned_.push_back(blocks.data());
  return Status::kSuccess;
}

void QuantizedWeights::remove(const Tensor& blocks) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.entries.erase(reinterpret_cast<uintptr_t>(blocks.data()));
  owned_.erase(std::remove(owned_.begin(), owned_.end(), blocks.data()), owned_.end());
}

void QuantizedWeights::release() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  for (const void* data : owned_)
    r.entries.erase(reinterpret_cast<uintptr_t>(data));
  owned_.clear();
}

}  // namespace ree
