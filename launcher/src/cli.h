// ree-launch's command line: parsing and validation (kept apart from main() so tests can drive it).
#pragma once

#include <string>
#include <vector>

#include "ree/core/status.h"
#include "ree/models/engine.h"

namespace ree::launcher {

struct LaunchOptions {
  EngineOptions engine;
  std::vector<GenerationRequest> requests;
  bool json = false;
  bool help = false;
  bool version = false;
  int cpu_threads = 0;
  // Pipeline (docs/pipeline.md).
  bool plan_only = false;          // --plan: print the stages and exit
  double comm_timeout_s = 20.0;    // --comm-timeout: longest wait for a peer stage
  std::string transport = "auto";  // --transport: auto, nccl, mpi
  bool device_given = false;       // --device / --cpu-only was on the command line
  // Verification (docs/receipt.md).
  std::string receipt_path;
  std::string help_text;
};

// Parses "cuda:0,cuda:1" (--stage-devices); the error names the flag.
Status parseDeviceList(const std::string& text, std::vector<Device>* devices);

// Parses argv. On a bad flag returns kInvalidArgument with a one-line message naming the flag.
Status parseCommandLine(int argc, const char* const* argv, LaunchOptions* out);

}  // namespace ree::launcher
