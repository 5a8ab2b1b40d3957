// The engine's step profiler: host-side phases of every step, printed to stderr when the engine is
// destroyed if REE_PROFILE_STEPS is set. A diagnostic for benchmarks: where a step's wall time goes
// besides the GPU's kernels. It never changes what is computed; with it on, every stage waits for
// its device, so that the wait can be timed.
#pragma once

#include <chrono>

namespace ree::models {

class StepProfiler {
 public:
  using Clock = std::chrono::steady_clock;

  StepProfiler();   // enabled when REE_PROFILE_STEPS is set
  ~StepProfiler();  // prints the means of the measured steps

  bool enabled() const { return enabled_; }
  // Phases are measured from the second step on: the first is a prefill.
  bool measuring() const { return enabled_ && seen_ > 0; }

  // The first stage starts a step at `started`: the time since the last step ended is "between".
  void stepStarted(Clock::time_point started);
  // A stage's layers took `enqueue` seconds to queue and `wait` seconds to finish on the device.
  void stageTimed(double enqueue, double wait);
  // The last stage had the step's tokens on the host at `copied` (logits computed, tokens selected
  // on the device or sampled from the host copy) and any log-probabilities by `ended`, for a step
  // whose logits work began at `started`. The logits' hashing is queued at the next step.
  void stepFinished(Clock::time_point started, Clock::time_point copied, Clock::time_point ended);

 private:
  bool enabled_ = false;
  long seen_ = 0;   // steps finished; the first (a prefill) is left out of the means
  long steps_ = 0;  // steps measured
  double enqueue_ = 0, wait_ = 0, logits_ = 0, logprobs_ = 0, between_ = 0;
  Clock::time_point last_end_;
};

}  // namespace ree::models
