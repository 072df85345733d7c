// Starting several ranks from a program started once, through Open MPI's
// real launcher (mpirun, found on PATH), never a home-made process group.
//
//   void train() { parallel::init(); ... }
//   int main() { return parallel::spawn(train, /*nprocs=*/2); }   // like Paddle's dist.spawn
//
//   int main(int argc, char** argv) {
//     parallel::launch_if_requested(argc, argv);   // `prog --nprocs 4 ...` runs 4 ranks
//     parallel::init(); ...
//   }
//
// The launched command is `mpirun -np N --oversubscribe <this binary> <args>`;
// when running as root, OMPI_ALLOW_RUN_AS_ROOT=1 and
// OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 are added to its environment.
#pragma once
#include <functional>
#include <string>
#include <vector>

namespace minidl::parallel {

// Runs fn on nprocs ranks and returns the job's exit status (mpirun's: 0 when
// every rank returned from fn; a signal s gives 128 + s).
// - Not under mpirun, nprocs > 1: re-launches this binary with the same
//   arguments under mpirun and waits. Each child starts main again from the
//   top; its spawn() call runs init(), fn(), finalize() and exits with 0, so
//   code before spawn() runs in every process and code after it only in the
//   parent. An exception escaping fn in a child aborts the whole job.
// - Not under mpirun, nprocs == 1: runs init() and fn() in this process and
//   returns 0 (exceptions propagate to the caller).
// - Already under mpirun: this process is one of the job's ranks; it runs
//   init(), fn(), finalize() and exits (the job's size wins over nprocs).
// Throws std::invalid_argument when nprocs < 1, minidl::Error when mpirun
// cannot be started.
int spawn(const std::function<void()>& fn, int nprocs);

// The most ranks --nprocs starts (mpirun --oversubscribe puts them all on this host).
constexpr int kMaxNprocs = 1024;

// Handles a `--nprocs N` (or `--nprocs=N`) flag. The flag is removed from
// argc/argv in place, so the program's own parser never sees it. If N > 1 and
// this process is not already under mpirun, the process replaces itself (exec)
// with `mpirun -np N --oversubscribe <this binary> <remaining args>`, so its exit
// status is the job's. Otherwise it returns N (1 without the flag). Throws
// std::invalid_argument when N is not an integer from 1 to kMaxNprocs.
int launch_if_requested(int& argc, char** argv);

// The full path of mpirun from PATH (then /usr/bin/mpirun); throws minidl::Error if none.
std::string find_mpirun();
// The argument list spawn and launch_if_requested run (argv[0] is find_mpirun()).
std::vector<std::string> mpirun_command(int nprocs, const std::vector<std::string>& program);

}  // namespace minidl::parallel
