// The ATen operation sets (default, deterministic). Internal header: no LibTorch types here.
#pragma once

#include <memory>

#include "ree/runtime/operation_set.h"

namespace ree {

// kUnsupported when REE was built without LibTorch.
Status createAtenOperationSet(OperationSetKind kind, Device device,
                              std::unique_ptr<OperationSet>* out);

}  // namespace ree
