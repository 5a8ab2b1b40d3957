// The pipeline's stage transports (ree::StageTransport,
// runtime/include/ree/runtime/stage_transport.h) over MPI and NCCL. Both use MPI_COMM_WORLD's ranks
// as stage numbers.
#pragma once

#include <memory>

#include "ree/comm/mpi_world.h"
#include "ree/core/status.h"
#include "ree/runtime/stage_transport.h"

namespace ree::comm {

// Everything over MPI. Tensors on a CUDA device are staged through host memory, so GPU stages
// work without NCCL too. Needs MPI initialised (initMpi).
Status createMpiTransport(const MpiWorld& world, Device device, double timeout_s,
                          std::unique_ptr<StageTransport>* out);

// Host messages and collectives over MPI; tensors GPU to GPU over NCCL point-to-point on a
// non-blocking communicator and a stream of the transport's own. Every adjacent stage pair is
// warmed up at creation. kUnsupported in builds without NCCL.
Status createNcclTransport(const MpiWorld& world, int gpu, double timeout_s,
                           std::unique_ptr<StageTransport>* out);

// True when this build has the NCCL transport.
bool ncclTransportAvailable();

}  // namespace ree::comm
