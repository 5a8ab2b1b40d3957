// The reproducible operation set (RepOps). Internal header.
#pragma once

#include <memory>

#include "ree/runtime/operation_set.h"

namespace ree {

Status createReproducibleOperationSet(Device device, RepOpsSpec spec,
                                      std::unique_ptr<OperationSet>* out);

}  // namespace ree
