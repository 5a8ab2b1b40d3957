// validateIntLinearRowArgs (int_linear_row.h): the checks of a repops-3 linear call, shared by the
// CPU and CUDA entry points: repops-1's arguments and limits, plus K <= int_linear_row::kMaxK
// (beyond it an int32 shift-class sum could overflow).
#include "ree/kernels/int_linear_row.h"

namespace ree::repops {

Status validateIntLinearRowArgs(const LinearArgs& args) {
  REE_RETURN_IF_ERROR(validateIntLinearArgs(args));
  if (args.k > int_linear_row::kMaxK) {
    return REE_FAIL(Status::kUnsupported,
                    "repops-3 linear: k=%lld exceeds the limit of %lld (int32 shift-class sums "
                    "over the whole row must stay exact)",
                    static_cast<long long>(args.k), static_cast<long long>(int_linear_row::kMaxK));
  }
  return Status::kSuccess;
}

}  // namespace ree::repops
