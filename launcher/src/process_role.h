// How this ree-launch process takes part in a run: alone (every stage in this process), or as one
// rank of a multi-process pipeline started by mpirun (rank r runs stage r).
#pragma once

#include <memory>
#include <string>

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

// What a rank is about to do, told to its peers at start-up (the first byte of its note).
enum class RankIntent : char {
  kRun = 'r',     // take part in the run
  kPlan = 'p',    // print the plan and exit (--plan)
  kLeave = 'l',   // print help or the version and exit
  kFailed = 'f',  // its flags were refused
};

// The intent of a rank whose command line parsed with `parsed` into `options`.
RankIntent intentOf(const LaunchOptions& options, Status parsed);

// Under mpirun: initialises MPI, then every rank tells every other what it is about to do
// (`intent`; `detail` is its error message with kFailed, why it leaves with kLeave), so that no
// rank waits for a peer that has left: when a rank's flags were refused every rank fails with that
// rank's message ("rank R: ..."), and a rank about to run fails at once when a peer leaves early
// (--plan, --help, --version, a subcommand), naming it. Then checks --n-partitions against the
// world size and the host's ranks against its GPUs, picks this rank's device (cuda:<local rank>
// for GPU runs) and creates the transport (--transport). These checks depend only on the flags and
// the host, so every rank fails the same way with the same message. Without mpirun, returns at
// once (kSuccess unless kFailed). A rank whose intent is not kRun gets no transport.
Status setUpProcess(LaunchOptions* options, RankIntent intent, const std::string& detail,
                    ProcessRole* role);

// A process of an mpirun job of several ranks that will not take part in a run (`validate`,
// `verify`) tells its peers so at start-up, with `why`, so that ranks about to run stop at once
// instead of waiting --comm-timeout for it. Does nothing outside such a job.
void announceLeaving(const std::string& why);

// Ends the run: destroys the transport and finalises MPI (normal exit, every rank).
void finishProcess(ProcessRole* role);

// Kills the whole MPI job (every rank) after a failure that peers may not have seen, so that no
// rank is left waiting. Returns only without MPI.
void abortJob(ProcessRole* role, int code);

}  // namespace ree::launcher
