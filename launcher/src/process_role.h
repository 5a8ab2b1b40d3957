// How this ree-launch process takes part in a run: alone (every stage in this process), or as one
// rank of a multi-process pipeline started by mpirun (rank r runs stage r).
#pragma once

#include <memory>

#include "cli.h"
#include "ree/core/status.h"
#include "ree/runtime/stage_transport.h"

namespace ree::launcher {

struct ProcessRole {
  bool mpi = false;  // MPI is initialised in this process
  int rank = 0;
  int world_size = 1;
  std::unique_ptr<StageTransport> transport;  // set when world_size > 1
};

// True when the environment says mpirun (Open MPI, PMI, PMIx) started this process.
bool startedByMpirun();

// Under mpirun: initialises MPI, checks --n-partitions against the world size and the host's
// ranks against its GPUs, picks this rank's device (cuda:<local rank> for GPU runs) and creates
// the transport (--transport). The checks depend only on the flags and the host, so every rank
// fails the same way with the same message. Otherwise does nothing.
Status setUpProcess(LaunchOptions* options, ProcessRole* role);

// Ends the run: destroys the transport and finalises MPI (normal exit, every rank).
void finishProcess(ProcessRole* role);

// Kills the whole MPI job (every rank) after a failure that peers may not have seen, so that no
// rank is left waiting. Returns only without MPI.
void abortJob(ProcessRole* role, int code);

}  // namespace ree::launcher
