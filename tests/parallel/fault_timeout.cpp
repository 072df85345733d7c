// Ranks that leave the others waiting in a collective; with MINIDL_TIMEOUT
// set, the waiting ranks end the job, naming the call and the ranks that had
// not arrived (run_timeout.sh checks the message). Every mode first runs two
// allreduces on every rank (collectives #1 and #2), then:
//   stopped   rank 1 stops itself (SIGSTOP); the others enter a barrier (#3)
//   sleeping  rank 1 sleeps 60 s (busy outside MPI); the others enter a barrier
//   other     rank 1 enters a broadcast; the others an allreduce (#3)
//   mixed     rank 1 enters a broadcast, rank 3 stops; the others an allreduce
//   steps     rank 1 ends its program (MPI_Finalize); the others an allreduce
//   startup   rank 1 stops itself before parallel::init: the others wait in
//             MPI_Init_thread, where no collective is recorded yet
// In `other` and `mixed`, rank 1's own timeout is 30 s, so that the ranks that
// see it out of step are the ones that report.
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "parallel/init.h"

namespace par = minidl::parallel;

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "stopped";
  const char* env_rank = std::getenv("OMPI_COMM_WORLD_RANK");
  if ((mode == "other" || mode == "mixed") && env_rank && std::string(env_rank) == "1")
    setenv("MINIDL_TIMEOUT", "30", 1);
  if (mode == "startup" && env_rank && std::string(env_rank) == "1") std::raise(SIGSTOP);
  par::init();
  const int rank = par::rank();
  for (int step = 0; step < 2; ++step) {
    float x = 1;
    par::world().allreduce(&x, 1);
  }
  float x = 1;
  const auto start = std::chrono::steady_clock::now();
  if (mode == "stopped" || mode == "sleeping") {
    if (rank == 1) mode == "stopped" ? std::raise(SIGSTOP) : sleep(60);
    par::barrier();
  } else if (mode == "other" || mode == "mixed") {
    if (rank == 3 && mode == "mixed") std::raise(SIGSTOP);
    if (rank == 1)
      par::world().broadcast(&x, sizeof x, 0);
    else
      par::world().allreduce(&x, 1);
  } else if (rank != 1) {  // steps: rank 1 has taken its last
    par::world().allreduce(&x, 1);
  }
  // The ranks out of step may return (rank 1 in `steps`); the others only
  // once the timeout has ended the job (mpirun's teardown sends a stopped rank
  // SIGCONT, and a barrier may then complete on some), never before.
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const bool out_of_step = rank == 1 || (rank == 3 && mode == "mixed");
  if (!out_of_step && waited < std::atof(std::getenv("MINIDL_TIMEOUT")))
    std::printf("rank %d: the collectives returned after %.1f s, which they must not\n", rank,
                waited);
  return 0;
}
