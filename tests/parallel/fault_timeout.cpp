// Rank 1 leaves the others waiting in a collective; with MINIDL_TIMEOUT set
// the waiting ranks end the job, naming the call (run_timeout.sh checks it).
//   fault_timeout stopped   rank 1 stops itself (SIGSTOP) before a barrier
//   fault_timeout steps     rank 1 takes 3 allreduce steps, the others 4
#include <csignal>
#include <cstdio>
#include <string>

#include "parallel/init.h"

namespace par = minidl::parallel;

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "stopped";
  par::init();
  if (mode == "stopped") {
    if (par::rank() == 1) std::raise(SIGSTOP);
    par::barrier();
  } else {
    const int steps = par::rank() == 1 ? 3 : 4;
    for (int step = 0; step < steps; ++step) {
      float x = 1;
      par::world().allreduce(&x, 1);
    }
  }
  // Rank 1 may return: its three steps, or its barrier once mpirun's teardown
  // sends the stopped process SIGCONT while the others still sit in theirs.
  if (par::rank() != 1)
    std::printf("rank %d: the collectives returned, which they must not\n", par::rank());
  return 0;
}
