// The one mapping from a runtime DType to its storage type, shared by the CPU and CUDA entry
// points of every operator family: they check a dtype and turn it into a template argument the
// same way, so a new storage type is added here once.
#pragma once

#include <type_traits>

#include "ree/core/status.h"
#include "ree/kernels/numeric.h"

namespace ree::repops {

// f32, bf16 or f16: the storage types every operator accepts.
inline bool isStorageType(DType dtype) {
  return dtype == DType::kF32 || dtype == DType::kBF16 || dtype == DType::kF16;
}

// Calls fn(T{}) with T the storage type of `dtype` (float, bf16_t or f16_t; the argument is a tag,
// read its type with decltype). Returns fn's Status, or kSuccess when fn returns nothing; an
// unknown dtype returns kInvalidArgument "<who>: unknown dtype <n>" without calling fn.
template <typename Fn>
Status dispatchStorageType(DType dtype, const char* who, Fn&& fn) {
  auto call = [&](auto tag) -> Status {
    if constexpr (std::is_void_v<decltype(fn(tag))>) {
      fn(tag);
      return Status::kSuccess;
    } else {
      return fn(tag);
    }
  };
  switch (dtype) {
    case DType::kF32:
      return call(float{});
    case DType::kBF16:
      return call(bf16_t{});
    case DType::kF16:
      return call(f16_t{});
  }
  return REE_FAIL(Status::kInvalidArgument, "%s: unknown dtype %d", who, static_cast<int>(dtype));
}

}  // namespace ree::repops
