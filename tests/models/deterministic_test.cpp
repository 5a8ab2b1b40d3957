// The deterministic operation set end to end on the CPU (deterministic_common.h).
#include "deterministic_common.h"

TEST(Deterministic, RepeatedRunsGiveIdenticalBits) {
  ree::test::expectRepeatedDeterministicRunsIdentical(ree::Device::cpu());
}
