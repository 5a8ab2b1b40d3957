// validateIntLinearArgs (int_linear.h): the checks of a repops-2 linear call, shared by the CPU and
// CUDA entry points. The arguments and limits are repops-1's, so the checks are too.
#include "ree/kernels/int_linear.h"

namespace ree::repops {

Status validateIntLinearArgs(const LinearArgs& args) {
  return validateLinearArgs(args);
}

}  // namespace ree::repops
