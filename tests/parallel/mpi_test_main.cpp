// doctest main for the multi-rank suites: every rank runs every test case.
// Rank 0 prints doctest's report; another rank prints its report only when it
// failed, each line prefixed with "[rank R]". Every rank exits non-zero when
// any rank failed, so mpirun's status says the suite failed.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "parallel/init.h"

namespace par = minidl::parallel;

int main(int argc, char** argv) {
  par::init();
  const int rank = par::rank(), size = par::world_size();
  doctest::Context context;
  context.setOption("no-colors", true);  // mpirun hands ranks a terminal; logs want plain text
  context.applyCommandLine(argc, argv);
  std::ostringstream captured;
  if (rank != 0) context.setCout(&captured);
  int failed = context.run() != 0 ? 1 : 0;
  if (context.shouldExit()) return failed;

  if (rank != 0 && failed) {
    std::istringstream lines(captured.str());
    std::string text, line;
    while (std::getline(lines, line)) text += "[rank " + std::to_string(rank) + "] " + line + "\n";
    std::fputs(text.c_str(), stderr);
    std::fflush(stderr);
  }
  std::vector<int> all(size);
  par::world().allgather(&failed, all.data(), sizeof(int));
  int any = 0;
  std::string who;
  for (int r = 0; r < size; ++r)
    if (all[r]) any = 1, who += " " + std::to_string(r);
  if (rank == 0)
    std::printf("[%d ranks] %s\n", size, any ? ("FAILED on rank(s)" + who).c_str() : "all ranks passed");
  par::finalize();
  return any;
}
