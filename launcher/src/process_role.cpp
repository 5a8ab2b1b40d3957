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

Status setUpProcess(LaunchOptions* options, ProcessRole* role) {
  if (!startedByMpirun()) return Status::kSuccess;
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
  EngineOptions& engine = options->engine;
  if (world.size == 1) return Status::kSuccess;  // mpirun -n 1: same as no mpirun
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
#endif
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
