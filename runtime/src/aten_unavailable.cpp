// Stand-in for builds without LibTorch: the ATen operation sets report that they are missing.
#if !defined(REE_WITH_TORCH)
#include "aten/aten_ops.h"

namespace ree {

Status createAtenOperationSet(OperationSetKind kind, Device, std::unique_ptr<OperationSet>*) {
  return REE_FAIL(Status::kUnsupported,
                  "--operation-set %s needs LibTorch, and this build of REE has none "
                  "(configure with REE_TORCH=ON and a torch wheel in REE_PYTHON)",
                  operationSetName(kind));
}

}  // namespace ree
#endif
