// Joining the job, and the questions every rank asks about it.
//
//   parallel::init();                        // a world of one unless under mpirun
//   int r = parallel::rank(), n = parallel::world_size();
//   parallel::world().allreduce(t);          // the Communicator over every rank
//
// init() looks at how the program was started. Under Open MPI's mpirun
// (OMPI_COMM_WORLD_SIZE set) it calls MPI_Init_thread and uses MPI_COMM_WORLD.
// Started alone it is a world of one on the local backend, with no MPI call at
// all, so every program also runs without MPI. It then
// - caps the compute threads (minidl::set_max_threads) at default_num_threads()
//   unless OMP_NUM_THREADS is set, so ranks on one host never oversubscribe it
//   (below the cap the count follows the load, framework/threads.h);
// - installs a std::terminate handler: an uncaught exception on any rank
//   prints "minidl: rank R: uncaught exception: ..." and calls MPI_Abort, which
//   ends the whole job at once with exit status 1 instead of leaving the other
//   ranks waiting in a collective forever;
// - registers finalize() to run at exit.
// A rank that returns from main early while the others still communicate
// waits in MPI_Finalize for them; end a job on an error by throwing, or with abort_job().
#pragma once
#include <memory>
#include <vector>

#include "parallel/communicator.h"

namespace minidl::parallel {

// Idempotent. Throws minidl::Error when MPI was finalised earlier in this process.
void init();
// MPI_Finalize (when init started MPI); idempotent, also run at exit. Afterwards
// the accessors below throw until init() is called again (local backend only).
void finalize();
bool is_initialized();
// Started by Open MPI's mpirun (whether or not init() has run yet).
bool launched_by_mpirun();

// The accessors throw minidl::Error before init().
int rank();         // in [0, world_size())
int world_size();
int local_rank();   // among the ranks on this host (OMPI_COMM_WORLD_LOCAL_RANK,
int local_size();   //   else an MPI_Comm_split_type SHARED)
void barrier();     // every rank of the world
Communicator& world();
std::shared_ptr<Communicator> world_ptr();

// A sub-communicator of the world ranks `ranks` (the `group` argument of the
// reference API): group rank i is world rank ranks[i]. Collective: every rank
// of the world calls it with the same list. On a rank not in `ranks` it
// returns an object whose rank() is -1 and whose every operation throws a
// minidl::Error saying this rank is not a member.
std::shared_ptr<Communicator> new_group(const std::vector<int>& ranks);

// max(1, min(hardware_concurrency() / local_size, CPUs this process may run on)).
int default_num_threads(int local_size);

// Ends the whole job now with exit_code (MPI_Abort under MPI, _Exit alone).
[[noreturn]] void abort_job(int exit_code);

}  // namespace minidl::parallel
