#include "ree/models/weight_source.h"

namespace ree::models {
namespace {

struct DTypeEntry {
  DType dtype;
  const char* name;
  size_t size;
};

constexpr DTypeEntry kDTypes[] = {
    {DType::kF32, "F32", 4},        {DType::kF16, "F16", 2},        {DType::kBF16, "BF16", 2},
    {DType::kF64, "F64", 8},        {DType::kI64, "I64", 8},        {DType::kI32, "I32", 4},
    {DType::kI16, "I16", 2},        {DType::kI8, "I8", 1},          {DType::kU64, "U64", 8},
    {DType::kU32, "U32", 4},        {DType::kU16, "U16", 2},        {DType::kU8, "U8", 1},
    {DType::kBool, "BOOL", 1},      {DType::kF8E4M3, "F8_E4M3", 1}, {DType::kF8E5M2, "F8_E5M2", 1},
    {DType::kF8E8M0, "F8_E8M0", 1},
};

int64_t shapeNumel(const std::vector<int64_t>& shape) {
  int64_t numel = 1;
  for (int64_t extent : shape)
    numel *= extent;
  return numel;
}

}  // namespace

const char* dtypeName(DType dtype) {
  for (const DTypeEntry& entry : kDTypes) {
    if (entry.dtype == dtype) return entry.name;
  }
  return "?";
}

size_t dtypeSize(DType dtype) {
  for (const DTypeEntry& entry : kDTypes) {
    if (entry.dtype == dtype) return entry.size;
  }
  return 0;
}

bool isComputeDType(DType dtype) {
  return dtype == DType::kF32 || dtype == DType::kF16 || dtype == DType::kBF16;
}

bool parseDTypeName(const std::string& name, DType* out) {
  for (const DTypeEntry& entry : kDTypes) {
    if (name == entry.name) {
      *out = entry.dtype;
      return true;
    }
  }
  return false;
}

int64_t TensorInfo::numel() const {
  return shapeNumel(shape);
}
int64_t TensorView::numel() const {
  return shapeNumel(shape);
}

}  // namespace ree::models
