#include "process_role.h"

#include <cstdlib>

#include "ree/core/device.h"

#if defined(REE_LAUNCH_WITH_MPI)
#include <mpi.h>

#include "ree/comm/mpi_world.h"
#include "ree/comm/transports.h"
#endif

namespace ree::launcher {

bool startedByMpirun() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"}) {
    if (std::getenv(name) != nullptr) return true;
  }
  return false;
}

RankIntent intentOf(const LaunchOptions& options, Status parsed) {
  if (parsed != Status::kSuccess) return RankIntent::kFailed;
  if (options.help || options.version) return RankIntent::kLeave;
  return options.plan_only ? RankIntent::kPlan : RankIntent::kRun;
}

#if defined(REE_LAUNCH_WITH_MPI)
namespace {

// Why a peer leaves, from its note: 'p', or 'l' followed by its reason.
std::string leavingReason(const std::string& note) {
  if (note[0] == static_cast<char>(RankIntent::kPlan)) {
    return "it was given --plan: it prints the plan and exits";
  }
  return note.size() > 1 ? note.substr(1) : "it was given --help or --version and exits";
}

// The start-up exchange (see setUpProcess). Fails on every rank alike when a rank's flags were
// refused; fails on a running rank when a peer leaves early.
// `alike`: every rank has the same intent.
Status announceIntent(const comm::MpiWorld& world, RankIntent intent, const std::string& detail,
                      double timeout_s, bool* alike) {
  std::string note(1, static_cast<char>(intent));
  if (intent == RankIntent::kFailed || intent == RankIntent::kLeave) note += detail.substr(0, 4096);
  std::vector<std::string> notes;
  REE_RETURN_IF_ERROR(comm::exchangeWorldTexts(world, note, timeout_s, &notes));
  for (int r = 0; r < world.size; ++r) {
    if (!notes[r].empty() && notes[r][0] == static_cast<char>(RankIntent::kFailed)) {
      std::string prefix = "rank " + std::to_string(r) + ": ";
      return setError(Status::kInvalidArgument, nullptr, 0, "%s%s", prefix.c_str(),
                      notes[r].c_str() + 1);
    }
  }
  *alike = true;
  for (const std::string& peer : notes)
    *alike = *alike && peer[0] == static_cast<char>(intent);
  if (intent != RankIntent::kRun) return Status::kSuccess;
  for (int r = 0; r < world.size; ++r) {
    auto peer = static_cast<RankIntent>(notes[r][0]);
    if (peer != RankIntent::kRun) {
      return REE_FAIL(Status::kInvalidArgument,
                      "rank %d: rank %d left before the run began (%s); give every rank the same "
                      "flags",
                      world.rank, r, leavingReason(notes[r]).c_str());
    }
  }
  return Status::kSuccess;
}

// Checks the world against the flags and the host, picks this rank's device and creates the
// transport (see setUpProcess).
Status createRankTransport(const comm::MpiWorld& world, LaunchOptions* options, ProcessRole* role) {
  EngineOptions& engine = options->engine;
  if (engine.n_partitions != world.size) {
    return REE_FAIL(Status::kInvalidArgument,
                    "--n-partitions %d does not match the MPI world size %d: start one rank per "
                    "stage (mpirun -n %d)",
                    engine.n_partitions, world.size, engine.n_partitions);
  }
  if (!engine.stage_devices.empty()) {
    return REE_FAIL(Status::kInvalidArgument,
                    "--stage-devices is for single-process pipelines; under mpirun each rank "
                    "uses the GPU of its local rank");
  }
  Device device = Device::cpu();
  if (engine.device.isCuda()) {
    int gpus = cudaDeviceCount();
    if (world.local_size > gpus) {
      return REE_FAIL(Status::kInvalidArgument,
                      "%d ranks run on this host but it has %d GPU(s): one rank per GPU (or "
                      "--cpu-only)",
                      world.local_size, gpus);
    }
    device = Device::cuda(world.local_rank);
  }
  engine.device = device;
  std::string kind = options->transport;
  if (kind == "auto") kind = device.isCuda() && comm::ncclTransportAvailable() ? "nccl" : "mpi";
  if (kind == "nccl") {
    if (!device.isCuda()) {
      return REE_FAIL(Status::kInvalidArgument,
                      "--transport nccl needs GPU stages (not --cpu-only)");
    }
    REE_RETURN_IF_ERROR(
        comm::createNcclTransport(world, device.index, options->comm_timeout_s, &role->transport));
  } else {
    REE_RETURN_IF_ERROR(
        comm::createMpiTransport(world, device, options->comm_timeout_s, &role->transport));
  }
  engine.transport = role->transport.get();
  return Status::kSuccess;
}

}  // namespace
#endif

Status setUpProcess(LaunchOptions* options, RankIntent intent, const std::string& detail,
                    ProcessRole* role) {
  if (!startedByMpirun()) {
    return intent == RankIntent::kFailed
               ? setError(Status::kInvalidArgument, nullptr, 0, "%s", detail.c_str())
               : Status::kSuccess;
  }
#if !defined(REE_LAUNCH_WITH_MPI)
  (void)options;
  (void)role;
  return REE_FAIL(Status::kUnsupported,
                  "started by mpirun, but this ree-launch was built without MPI (install Open MPI "
                  "and rebuild)");
#else
  comm::MpiWorld world;
  REE_RETURN_IF_ERROR(comm::initMpi(nullptr, nullptr, &world));
  role->mpi = true;
  role->rank = world.rank;
  role->world_size = world.size;
  bool alike = true;
  if (world.size > 1) {
    REE_RETURN_IF_ERROR(announceIntent(world, intent, detail, options->comm_timeout_s, &alike));
  } else if (intent == RankIntent::kFailed) {
    return setError(Status::kInvalidArgument, nullptr, 0, "%s", detail.c_str());
  }
  // mpirun -n 1 is the same as no mpirun. --help and --version need no transport; nor does a rank
  // leaving alone (its peers have stopped: creating the transport would wait for them).
  if (world.size == 1 || intent == RankIntent::kLeave || !alike) return Status::kSuccess;
  return createRankTransport(world, options, role);
#endif
}

void announceLeaving(const std::string& why) {
  const char* size = std::getenv("OMPI_COMM_WORLD_SIZE");
  if (size == nullptr) size = std::getenv("PMI_SIZE");
  if (size == nullptr || std::string(size) == "1") return;
  LaunchOptions options;  // the default --comm-timeout
  ProcessRole role;
  (void)setUpProcess(&options, RankIntent::kLeave, why, &role);  // its peers report it
  finishProcess(&role);
  clearError();
}

void finishProcess(ProcessRole* role) {
  if (role->transport) role->transport->flush();
  role->transport.reset();
#if defined(REE_LAUNCH_WITH_MPI)
  if (role->mpi) comm::finalizeMpi();
#endif
  role->mpi = false;
}

void abortJob(ProcessRole* role, int code) {
  if (role->transport) role->transport->abort();
#if defined(REE_LAUNCH_WITH_MPI)
  if (role->mpi && role->world_size > 1) MPI_Abort(MPI_COMM_WORLD, code);
#else
  (void)code;
#endif
}

}  // namespace ree::launcher
