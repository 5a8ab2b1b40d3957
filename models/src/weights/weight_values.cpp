#include "ree/models/weight_values.h"

#include <algorithm>
#include <cstring>

#include "ree/core/parallel.h"
#include "ree/core/text.h"

namespace ree::models {
namespace {

// An element is NaN or infinite when its exponent bits are all ones; comparing the bits needs no
// floating point and vectorises. `Bits` is the element's storage type.
template <typename Bits>
int64_t firstAllOnesExponent(const void* data, int64_t begin, int64_t end, Bits exponent_mask) {
  // One pass that only ORs flags (no early exit, so the compiler vectorises it), then a search
  // for the index only in the rare chunk that has one.
  const auto* values = static_cast<const Bits*>(data);
  constexpr int64_t kBlock = 4096;
  for (int64_t block = begin; block < end; block += kBlock) {
    const int64_t block_end = std::min(end, block + kBlock);
    Bits any = 0;
    for (int64_t i = block; i < block_end; ++i) {
      Bits v;
      std::memcpy(&v, values + i, sizeof(Bits));  // data may be only byte-aligned
      any |= static_cast<Bits>((v & exponent_mask) == exponent_mask);
    }
    if (any == 0) continue;
    for (int64_t i = block; i < block_end; ++i) {
      Bits v;
      std::memcpy(&v, values + i, sizeof(Bits));
      if ((v & exponent_mask) == exponent_mask) return i;
    }
  }
  return -1;
}

int64_t firstNonFiniteIn(const TensorView& view, int64_t begin, int64_t end) {
  switch (view.dtype) {
    case DType::kF32:
      return firstAllOnesExponent<uint32_t>(view.data, begin, end, 0x7f800000u);
    case DType::kBF16:
      return firstAllOnesExponent<uint16_t>(view.data, begin, end, 0x7f80u);
    case DType::kF16:
      return firstAllOnesExponent<uint16_t>(view.data, begin, end, 0x7c00u);
    default:
      return -1;
  }
}

const char* kindOfNonFinite(const TensorView& view, int64_t index) {
  uint32_t bits = 0;
  bool nan = false;
  const auto* bytes = static_cast<const unsigned char*>(view.data);
  if (view.dtype == DType::kF32) {
    std::memcpy(&bits, bytes + 4 * index, 4);
    nan = (bits & 0x007fffffu) != 0;
  } else {
    uint16_t half = 0;
    std::memcpy(&half, bytes + 2 * index, 2);
    bits = half;
    nan = (bits & (view.dtype == DType::kBF16 ? 0x007fu : 0x03ffu)) != 0;
  }
  if (nan) return "NaN";
  const uint32_t sign = view.dtype == DType::kF32 ? 0x80000000u : 0x8000u;
  return (bits & sign) != 0 ? "-Inf" : "+Inf";
}

std::string indexList(const std::vector<int64_t>& values) {
  std::string out = "[";
  for (size_t i = 0; i < values.size(); ++i)
    out += (i ? ", " : "") + std::to_string(values[i]);
  return out + "]";
}

}  // namespace

int64_t firstNonFiniteIndex(const TensorView& view) {
  if (!isComputeDType(view.dtype) || view.data == nullptr) return -1;
  const int64_t n = static_cast<int64_t>(view.bytes / dtypeSize(view.dtype));
  constexpr int64_t kChunk = int64_t{1} << 20;  // elements per task
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  std::vector<int64_t> first(static_cast<size_t>(chunks), -1);
  parallelFor(chunks, 1, [&](int64_t chunk_begin, int64_t chunk_end) {
    for (int64_t c = chunk_begin; c < chunk_end; ++c) {
      first[c] = firstNonFiniteIn(view, c * kChunk, std::min(n, (c + 1) * kChunk));
    }
  });
  for (int64_t index : first) {
    if (index >= 0) return index;  // chunks in order: the lowest index wins
  }
  return -1;
}

std::vector<int64_t> unflattenIndex(int64_t flat, const std::vector<int64_t>& shape) {
  std::vector<int64_t> coordinates(shape.size(), 0);
  for (size_t axis = shape.size(); axis-- > 0;) {
    if (shape[axis] <= 0) continue;
    coordinates[axis] = flat % shape[axis];
    flat /= shape[axis];
  }
  return coordinates;
}

Status checkFiniteWeights(const TensorView& view, const std::string& name,
                          const std::string& where) {
  const int64_t bad = firstNonFiniteIndex(view);
  if (bad < 0) return Status::kSuccess;
  return REE_FAIL(Status::kIoError,
                  "checkpoint '%s': tensor '%s' holds %s at index %lld = %s of shape %s (%s); "
                  "non-finite weights are refused unless allowed (allow_non_finite_weights, "
                  "--allow-non-finite-weights)",
                  printableText(where, 400).c_str(), printableText(name).c_str(),
                  kindOfNonFinite(view, bad), static_cast<long long>(bad),
                  indexList(unflattenIndex(bad, view.shape)).c_str(), indexList(view.shape).c_str(),
                  dtypeName(view.dtype));
}

}  // namespace ree::models
