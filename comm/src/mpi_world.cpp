#include "ree/comm/mpi_world.h"

#include <mpi.h>

namespace ree::comm {
namespace {
bool g_we_initialised = false;

Status mpiError(int code, const char* what, const char* file, int line) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  return setError(Status::kCommError, file, line, "%s failed: %s", what, text);
}
}  // namespace

#define REE_MPI_CHECK(call)                                                                  \
  do {                                                                                       \
    int ree_mpi_rc_ = (call);                                                                \
    if (ree_mpi_rc_ != MPI_SUCCESS) return mpiError(ree_mpi_rc_, #call, __FILE__, __LINE__); \
  } while (0)

Status initMpi(int* argc, char*** argv, MpiWorld* world) {
  REE_CHECK_ARG(world != nullptr, "initMpi: world is null");
  int initialised = 0;
  REE_MPI_CHECK(MPI_Initialized(&initialised));
  if (!initialised) {
    int provided = 0;
    REE_MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided));
    g_we_initialised = true;
  }
  // Errors come back as codes (never abort the job from inside MPI).
  REE_MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  REE_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &world->rank));
  REE_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &world->size));
  MPI_Comm local;
  REE_MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, world->rank,
                                    MPI_INFO_NULL, &local));
  REE_MPI_CHECK(MPI_Comm_rank(local, &world->local_rank));
  REE_MPI_CHECK(MPI_Comm_size(local, &world->local_size));
  REE_MPI_CHECK(MPI_Comm_free(&local));
  return Status::kSuccess;
}

Status finalizeMpi() {
  int finalised = 0;
  REE_MPI_CHECK(MPI_Finalized(&finalised));
  if (g_we_initialised && !finalised) REE_MPI_CHECK(MPI_Finalize());
  return Status::kSuccess;
}

}  // namespace ree::comm
