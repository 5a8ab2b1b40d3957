#include "ree/comm/mpi_world.h"

#include <mpi.h>

#include <chrono>
#include <memory>
#include <thread>

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

namespace {

// Polls `request` until it completes or `deadline` passes (polling keeps the deadline: a blocking
// MPI call would wait for a missing rank forever).
Status waitUntil(MPI_Request* request, std::chrono::steady_clock::time_point deadline,
                 const MpiWorld& world, double timeout_s) {
  for (;;) {
    int done = 0;
    if (MPI_Test(request, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
      return REE_FAIL(Status::kCommError, "rank %d: MPI failed during the start-up exchange",
                      world.rank);
    }
    if (done) return Status::kSuccess;
    if (std::chrono::steady_clock::now() > deadline) {
      return REE_FAIL(Status::kTimeout,
                      "rank %d: not every one of the %d ranks started within %.1f s "
                      "(--comm-timeout); a rank is lost or stalled before the run began",
                      world.rank, world.size, timeout_s);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

}  // namespace

Status exchangeWorldTexts(const MpiWorld& world, const std::string& mine, double timeout_s,
                          std::vector<std::string>* all) {
  REE_CHECK_ARG(all != nullptr, "exchangeWorldTexts: all is null");
  REE_CHECK_ARG(mine.size() <= 65536, "exchangeWorldTexts: %zu bytes (limit 65536)", mine.size());
  // Held by a shared pointer that is leaked on a timeout: MPI may still write into the buffers.
  struct Buffers {
    std::string mine;
    int length = 0;
    std::vector<int> lengths, offsets;
    std::vector<char> flat;
  };
  auto b = std::make_shared<Buffers>();
  b->mine = mine;
  b->length = static_cast<int>(mine.size());
  b->lengths.resize(world.size);
  auto deadline = std::chrono::steady_clock::now() +
                  std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                      std::chrono::duration<double>(timeout_s));
  MPI_Request request;
  REE_MPI_CHECK(MPI_Iallgather(&b->length, 1, MPI_INT, b->lengths.data(), 1, MPI_INT,
                               MPI_COMM_WORLD, &request));
  Status status = waitUntil(&request, deadline, world, timeout_s);
  if (status == Status::kSuccess) {
    b->offsets.resize(world.size);
    long long total = 0;
    for (int r = 0; r < world.size; ++r) {
      b->offsets[r] = static_cast<int>(total);
      total += b->lengths[r];  // each at most 65536, checked by its sender
    }
    b->flat.resize(static_cast<size_t>(total));
    REE_MPI_CHECK(MPI_Iallgatherv(b->mine.data(), b->length, MPI_CHAR, b->flat.data(),
                                  b->lengths.data(), b->offsets.data(), MPI_CHAR, MPI_COMM_WORLD,
                                  &request));
    status = waitUntil(&request, deadline, world, timeout_s);
  }
  if (status != Status::kSuccess) {
    new std::shared_ptr<Buffers>(b);  // leaked on purpose, see above
    return status;
  }
  all->assign(world.size, std::string());
  for (int r = 0; r < world.size; ++r) {
    (*all)[r].assign(b->flat.data() + b->offsets[r], static_cast<size_t>(b->lengths[r]));
  }
  return Status::kSuccess;
}

Status finalizeMpi() {
  int finalised = 0;
  REE_MPI_CHECK(MPI_Finalized(&finalised));
  if (g_we_initialised && !finalised) REE_MPI_CHECK(MPI_Finalize());
  return Status::kSuccess;
}

}  // namespace ree::comm
