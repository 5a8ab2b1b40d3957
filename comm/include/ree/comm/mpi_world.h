// MPI bootstrap: world rank/size and the node-local rank used to pick a GPU.
#pragma once

#include "ree/core/status.h"

namespace ree::comm {

struct MpiWorld {
  int rank = 0;
  int size = 1;
  int local_rank = 0;  // rank among the processes on this host (MPI_COMM_TYPE_SHARED)
  int local_size = 1;
};

// Initialises MPI (thread level FUNNELED) unless already initialised, and fills `world`.
Status initMpi(int* argc, char*** argv, MpiWorld* world);

// Finalises MPI if this process initialised it and it is not finalised yet.
Status finalizeMpi();

}  // namespace ree::comm
