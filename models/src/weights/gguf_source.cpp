#include "ree/models/gguf_source.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <new>

#include "ree/core/text.h"
#include "ree/models/gguf_dequant.h"
#include "ree/models/model_limits.h"

namespace ree::models {

struct GgufSource::Entry {
  const GgufTensorInfo* tensor = nullptr;
  std::vector<int64_t> shape;   // HF order: the GGUF dimensions reversed
  int64_t unpermute_heads = 0;  // > 0: undo llama.cpp's q/k row permutation over this many heads
};

struct GgufSource::Slot {
  std::mutex mutex;
  bool ready = false;
  std::vector<float> values;
};

namespace {

bool endsWith(const std::string& text, const char* suffix) {
  const size_t n = std::strlen(suffix);
  return text.size() >= n && text.compare(text.size() - n, n, suffix) == 0;
}

// Rows of `values` ([rows, cols]) back in Hugging Face order: HF row h*D + a*D/2 + i is GGUF row
// h*D + 2i + a (D = rows / heads).
void unpermuteRows(std::vector<float>* values, int64_t rows, int64_t heads) {
  const int64_t cols = static_cast<int64_t>(values->size()) / rows;
  const int64_t head_rows = rows / heads, half = head_rows / 2;
  std::vector<float> out(values->size());
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t h = r / head_rows, a = (r % head_rows) / half, i = r % half;
    const int64_t source = h * head_rows + 2 * i + a;
    std::memcpy(&out[r * cols], &(*values)[source * cols], sizeof(float) * cols);
  }
  values->swap(out);
}

// Heads of the q (key "attention.head_count") or k ("attention.head_count_kv", default the
// former) projections of a llama-architecture file.
Status llamaHeads(const GgufFile& file, bool keys, int64_t* heads) {
  REE_RETURN_IF_ERROR(file.integer("llama.attention.head_count", heads));
  if (keys && file.find("llama.attention.head_count_kv") != nullptr) {
    REE_RETURN_IF_ERROR(file.integer("llama.attention.head_count_kv", heads));
  }
  if (*heads < 1 || *heads > limits::kMaxHeads) {
    return REE_FAIL(Status::kIoError,
                    "GGUF file '%s': metadata key 'llama.attention.%s' is %lld, "
                    "not within [1, %lld]",
                    printableText(file.path(), 400).c_str(), keys ? "head_count_kv" : "head_count",
                    static_cast<long long>(*heads), static_cast<long long>(limits::kMaxHeads));
  }
  return Status::kSuccess;
}

}  // namespace

bool isGgufPath(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return false;
  return endsWith(path, ".gguf") || endsWith(path, ".GGUF");
}

GgufSource::GgufSource() = default;
GgufSource::~GgufSource() = default;

Status GgufSource::open(const std::string& path, std::unique_ptr<GgufSource>* out) {
  REE_CHECK_ARG(out != nullptr, "GgufSource::open: out is null");
  out->reset();
  std::unique_ptr<GgufSource> source(new GgufSource());
  REE_RETURN_IF_ERROR(GgufFile::open(path, &source->file_));
  source->path_ = path;
  const size_t slash = path.rfind('/');
  source->directory_ = slash == std::string::npos ? "." : path.substr(0, slash);
  source->files_ = {slash == std::string::npos ? path : path.substr(slash + 1)};
  REE_RETURN_IF_ERROR(source->addTensors());
  *out = std::move(source);
  return Status::kSuccess;
}

// One entry per GGUF tensor under its HF name, each checked: a dequantizable type, within the
// parameter limit, a name no other tensor maps to, and (llama q/k) rows divisible into heads.
Status GgufSource::addTensors() {
  const std::string shown = printableText(path_, 400);
  std::string architecture;
  if (file_->find("general.architecture") != nullptr) {
    REE_RETURN_IF_ERROR(file_->string("general.architecture", &architecture));
  }
  for (const GgufTensorInfo& tensor : file_->tensors()) {
    const std::string what = "tensor '" + printableText(tensor.name) + "'";
    if (!isDequantizableGgmlType(tensor.type)) {
      return REE_FAIL(Status::kUnsupported, "GGUF file '%s': %s has type %s, unsupported (%s are)",
                      shown.c_str(), what.c_str(), ggmlTypeName(tensor.type),
                      dequantizableGgmlTypeNames());
    }
    if (tensor.elements > static_cast<uint64_t>(limits::kMaxParameters)) {
      return REE_FAIL(Status::kIoError,
                      "GGUF file '%s': %s has %llu elements, above the limit %lld", shown.c_str(),
                      what.c_str(), static_cast<unsigned long long>(tensor.elements),
                      static_cast<long long>(limits::kMaxParameters));
    }
    Entry entry;
    entry.tensor = &tensor;
    for (auto d = tensor.dims.rbegin(); d != tensor.dims.rend(); ++d)
      entry.shape.push_back(static_cast<int64_t>(*d));
    const std::string name = ggufTensorHfName(tensor.name);
    const bool is_q = name.find(".self_attn.q_proj.") != std::string::npos;
    const bool is_k = name.find(".self_attn.k_proj.") != std::string::npos;
    if (architecture == "llama" && (is_q || is_k)) {
      REE_RETURN_IF_ERROR(llamaHeads(*file_, is_k, &entry.unpermute_heads));
      if (entry.shape[0] % (2 * entry.unpermute_heads) != 0) {
        return REE_FAIL(Status::kIoError,
                        "GGUF file '%s': %s has %lld rows, not a multiple of 2 x %lld heads",
                        shown.c_str(), what.c_str(), static_cast<long long>(entry.shape[0]),
                        static_cast<long long>(entry.unpermute_heads));
      }
    }
    if (!index_.emplace(name, entries_.size()).second) {
      return REE_FAIL(Status::kIoError, "GGUF file '%s': %s maps to '%s', as another tensor does",
                      shown.c_str(), what.c_str(), printableText(name).c_str());
    }
    entries_.push_back(std::move(entry));
    names_.push_back(name);
    slots_.push_back(std::make_unique<Slot>());
  }
  std::sort(names_.begin(), names_.end());
  return Status::kSuccess;
}

Status GgufSource::find(const std::string& name, const Entry** entry) const {
  auto it = index_.find(name);
  if (it == index_.end()) {
    return REE_FAIL(Status::kInvalidArgument, "GGUF file '%s': no tensor '%s'",
                    printableText(path_, 400).c_str(), printableText(name).c_str());
  }
  *entry = &entries_[it->second];
  return Status::kSuccess;
}

Status GgufSource::fileOf(const std::string& name, std::string* file) const {
  REE_CHECK_ARG(file != nullptr, "GgufSource::fileOf: file is null");
  const Entry* entry = nullptr;
  REE_RETURN_IF_ERROR(find(name, &entry));
  *file = files_[0];
  return Status::kSuccess;
}

Status GgufSource::info(const std::string& name, TensorInfo* out) const {
  REE_CHECK_ARG(out != nullptr, "GgufSource::info: out is null");
  const Entry* entry = nullptr;
  REE_RETURN_IF_ERROR(find(name, &entry));
  out->name = name;
  out->dtype = DType::kF32;
  out->shape = entry->shape;
  out->data_begin = 0;  // the dequantized values, not the file's bytes
  out->data_end = entry->tensor->elements * sizeof(float);
  return Status::kSuccess;
}

Status GgufSource::dequantize(const Entry& entry, std::vector<float>* values) const {
  const GgufTensorInfo& tensor = *entry.tensor;
  try {
    values->resize(tensor.elements);
    dequantizeGgml(tensor.type, file_->tensorData(tensor), static_cast<int64_t>(tensor.elements),
                   values->data());
    if (entry.unpermute_heads > 0) unpermuteRows(values, entry.shape[0], entry.unpermute_heads);
  } catch (const std::bad_alloc&) {
    values->clear();
    return REE_FAIL(Status::kOutOfMemory,
                    "GGUF file '%s': tensor '%s': no memory for its %llu dequantized values",
                    printableText(path_, 400).c_str(), printableText(tensor.name).c_str(),
                    static_cast<unsigned long long>(tensor.elements));
  }
  return Status::kSuccess;
}

Status GgufSource::bytes(const std::string& name, TensorView* out) const {
  REE_CHECK_ARG(out != nullptr, "GgufSource::bytes: out is null");
  const Entry* entry = nullptr;
  REE_RETURN_IF_ERROR(find(name, &entry));
  Slot& slot = *slots_[entry - entries_.data()];
  std::lock_guard<std::mutex> lock(slot.mutex);
  if (!slot.ready) {
    REE_RETURN_IF_ERROR(dequantize(*entry, &slot.values));
    slot.ready = true;
  }
  *out =
      TensorView{slot.values.data(), DType::kF32, entry->shape, slot.values.size() * sizeof(float)};
  return Status::kSuccess;
}

void GgufSource::releaseDequantized() const {
  for (const std::unique_ptr<Slot>& slot : slots_) {
    std::lock_guard<std::mutex> lock(slot->mutex);
    slot->ready = false;
    std::vector<float>().swap(slot->values);
  }
}

void GgufSource::releaseDequantized(const std::string& name) const {
  auto it = index_.find(name);
  if (it == index_.end()) return;
  Slot& slot = *slots_[it->second];
  std::lock_guard<std::mutex> lock(slot.mutex);
  slot.ready = false;
  std::vector<float>().swap(slot.values);
}

bool GgufSource::quantType(const std::string& name, repops::QuantType* type) const {
  auto it = index_.find(name);
  if (it == index_.end()) return false;
  const Entry& entry = entries_[it->second];
  return entry.shape.size() == 2 && ggmlQuantType(entry.tensor->type, type);
}

Status GgufSource::copyQuantizedRows(const std::string& name, void* out, size_t bytes) const {
  const Entry* entry = nullptr;
  REE_RETURN_IF_ERROR(find(name, &entry));
  repops::QuantType type;
  REE_CHECK_ARG(entry->shape.size() == 2 && ggmlQuantType(entry->tensor->type, &type),
                "GGUF file '%s': tensor '%s' is not a 2-D block-quantised tensor",
                printableText(path_, 400).c_str(), printableText(name).c_str());
  const int64_t rows = entry->shape[0];
  const auto row_bytes = static_cast<size_t>(entry->shape[1] / repops::quantBlockElems(type) *
                                             repops::quantBlockBytes(type));
  REE_CHECK_ARG(bytes == row_bytes * static_cast<size_t>(rows),
                "GGUF file '%s': tensor '%s' has %lld rows of %zu bytes, not %zu bytes",
                printableText(path_, 400).c_str(), printableText(name).c_str(),
                static_cast<long long>(rows), row_bytes, bytes);
  const auto* data = file_->tensorData(*entry->tensor);
  auto* dst = static_cast<unsigned char*>(out);
  const int64_t heads = entry->unpermute_heads;
  const int64_t head_rows = heads > 0 ? rows / heads : 1, half = head_rows / 2;
  for (int64_t r = 0; r < rows; ++r) {
    int64_t source = r;  // the row permutation of unpermuteRows, on whole rows of blocks
    if (heads > 0) {
      const int64_t h = r / head_rows, a = (r % head_rows) / half, i = r % half;
      source = h * head_rows + 2 * i + a;
    }
    std::memcpy(dst + r * row_bytes, data + source * row_bytes, row_bytes);
  }
  return Status::kSuccess;
}

std::map<std::string, std::string> GgufSource::metadata() const {
  std::map<std::string, std::string> out;
  for (const std::string& key : file_->keys()) {
    const GgufValue& value = *file_->find(key);
    if (value.type == GgufValueType::kArray) continue;
    if (value.type == GgufValueType::kString) {
      out[key] = std::string(value.text);
      continue;
    }
    double number = 0.0;
    int64_t integer = 0;
    if (value.type == GgufValueType::kBool) {
      out[key] = value.scalar != 0 ? "true" : "false";
    } else if (file_->integer(key, &integer) == Status::kSuccess) {
      out[key] = std::to_string(integer);
    } else if (file_->number(key, &number) == Status::kSuccess) {
      char text[40];
      std::snprintf(text, sizeof(text), "%.17g", number);
      out[key] = text;
    }
  }
  return out;
}

}  // namespace ree::models
