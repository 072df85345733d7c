// Rank 1 throws an exception nobody catches while the other ranks wait in a
// collective. The terminate handler installed by parallel::init() must end
// the whole job at once with a non-zero status (run_fault.sh checks how fast).
//   fault_uncaught barrier     the others wait in a barrier
//   fault_uncaught allreduce   the others wait in an allreduce
#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "parallel/init.h"

namespace par = minidl::parallel;

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "barrier";
  par::init();
  if (par::rank() == 1) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    throw std::runtime_error("rank 1 failed on purpose");
  }
  if (mode == "allreduce") {
    std::vector<float> x(1024, 1.f);
    par::world().allreduce(x.data(), x.size());
  } else {
    par::barrier();
  }
  std::printf("rank %d: the collective returned, which it must not\n", par::rank());
  return 0;
}
