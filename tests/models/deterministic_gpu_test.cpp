// The deterministic operation set end to end on GPU 0 (deterministic_common.h).
#include "deterministic_common.h"

TEST(DeterministicGpu, RepeatedRunsGiveIdenticalBits) {
  REE_SKIP_WITHOUT_GPU();
  ree::test::expectRepeatedDeterministicRunsIdentical(ree::Device::cuda(0));
}
