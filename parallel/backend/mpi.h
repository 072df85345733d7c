// The Open MPI backend, seen from the rest of parallel/ without <mpi.h>.
// mpi_init() starts MPI (MPI_Init_thread: MPI_THREAD_MULTIPLE while the
// collective timeout is on, for its watchdog thread, see timeout.h; else
// MPI_THREAD_SERIALIZED; the library calls MPI from one thread), makes MPI
// errors on MPI_COMM_WORLD return codes instead of aborting (every call is
// checked by MINIDL_MPI_CHECK, see mpi_check.h) and wraps MPI_COMM_WORLD in a
// Communicator whose allreduce_async is MPI_Iallreduce.
#pragma once
#include <memory>

#include "parallel/communicator.h"

namespace minidl::parallel::backend {

// True when Open MPI's mpirun started this process (OMPI_COMM_WORLD_SIZE is set).
bool started_by_mpirun();

struct MpiWorld {
  std::shared_ptr<Communicator> world;  // MPI_COMM_WORLD
  int local_rank = 0;                   // among the ranks on this host
  int local_size = 1;
};

// Throws minidl::Error when MPI was already finalised in this process.
MpiWorld mpi_init();
// MPI_Finalize, once, if mpi_init started MPI; later calls do nothing.
void mpi_finalize();
// MPI is initialised and not yet finalised.
bool mpi_active();
// MPI_Abort(MPI_COMM_WORLD, exit_code) when MPI is active, else _Exit(exit_code).
[[noreturn]] void mpi_abort(int exit_code) noexcept;

}  // namespace minidl::parallel::backend
