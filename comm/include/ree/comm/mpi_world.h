// MPI bootstrap: world rank/size and the node-local rank used to pick a GPU, and the start-up
// exchange by which every rank learns what its peers are about to do.
#pragma once

#include <string>
#include <vector>

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

// Collective over MPI_COMM_WORLD, every rank: gathers one text from each rank on every rank, in
// rank order, waiting at most `timeout_s`. A launcher calls it once at start-up with what its
// rank is about to do (run, leave early, or the error that stops it), so that a rank that leaves
// is announced to its peers instead of leaving them waiting for the transport's deadline. On
// kTimeout (a rank never arrived) the exchange is abandoned; only aborting the job cleans up.
Status exchangeWorldTexts(const MpiWorld& world, const std::string& mine, double timeout_s,
                          std::vector<std::string>* all);

// Finalises MPI if this process initialised it and it is not finalised yet.
Status finalizeMpi();

}  // namespace ree::comm
