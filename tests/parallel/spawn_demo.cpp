// Started once, without mpirun: runs ranks through parallel::spawn or
// parallel::launch_if_requested and reports the job's exit status.
//   spawn_demo spawn N                  fn checks it runs on N ranks; exits with the job's status
//   spawn_demo spawn-fail               fn throws on rank 1; exits 0 when the job failed
//   spawn_demo launch --nprocs N --expect N   re-runs itself under mpirun, checks the world
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "parallel/init.h"
#include "parallel/launch.h"

namespace par = minidl::parallel;

static void check_world(int expected) {
  int one = 1;
  par::world().allreduce(&one, 1);
  if (par::world_size() != expected || one != expected)
    throw std::runtime_error("rank " + std::to_string(par::rank()) + ": world of " +
                             std::to_string(par::world_size()) + ", expected " +
                             std::to_string(expected));
  if (par::rank() == 0) std::printf("rank 0: a world of %d ranks, allreduce ok\n", expected);
}

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "spawn") {
    int n = std::atoi(argv[2]);
    int status = par::spawn([n] { check_world(n); }, n);
    std::printf("parent: job exit status %d\n", status);
    return status;
  }
  if (mode == "spawn-fail") {
    int status = par::spawn(
        [] {
          if (par::rank() == 1) throw std::runtime_error("rank 1 fails inside spawn");
          par::barrier();
        },
        2);
    std::printf("parent: job exit status %d (expected non-zero)\n", status);
    return status != 0 ? 0 : 1;
  }
  if (mode == "launch") {
    par::launch_if_requested(argc, argv);
    // --nprocs is gone: argv is {prog, launch, --expect, N}
    if (argc != 4 || std::string(argv[2]) != "--expect") {
      std::fprintf(stderr, "launch: --nprocs was not removed from the arguments\n");
      return 1;
    }
    par::init();
    check_world(std::atoi(argv[3]));
    return 0;
  }
  std::fprintf(stderr, "usage: spawn_demo spawn N | spawn-fail | launch --nprocs N --expect N\n");
  return 2;
}
