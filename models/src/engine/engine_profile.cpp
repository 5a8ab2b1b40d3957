#include "engine_profile.h"

#include <cstdlib>

#include "ree/core/log.h"

namespace ree::models {

namespace {
double seconds(StepProfiler::Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}
}  // namespace

StepProfiler::StepProfiler() : enabled_(std::getenv("REE_PROFILE_STEPS") != nullptr) {}

StepProfiler::~StepProfiler() {
  if (!enabled_ || steps_ == 0) return;
  logMessage(LogLevel::kWarning,
             "step profile, mean of %ld steps (ms): enqueue layers %.3f | wait for "
             "layers %.3f | logits + tokens to host %.3f | log-probabilities %.3f | between "
             "steps %.3f",
             steps_, 1e3 * enqueue_ / steps_, 1e3 * wait_ / steps_, 1e3 * logits_ / steps_,
             1e3 * logprobs_ / steps_, 1e3 * between_ / steps_);
}

void StepProfiler::stepStarted(Clock::time_point started) {
  if (measuring()) between_ += seconds(started - last_end_);
}

void StepProfiler::stageTimed(double enqueue, double wait) {
  enqueue_ += enqueue;
  wait_ += wait;
}

void StepProfiler::stepFinished(Clock::time_point started, Clock::time_point copied,
                                Clock::time_point ended) {
  if (!enabled_) return;
  last_end_ = ended;
  if (seen_++ > 0) {
    logits_ += seconds(copied - started);
    logprobs_ += seconds(ended - copied);
    ++steps_;
  }
}

}  // namespace ree::models
