// The thread count: a named count stays; otherwise it follows the load, and
// with a busy process on every core it settles on one thread.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>
#include <vector>

#include "framework/threads.h"
#include "helpers.h"

using namespace minidl;

TEST_CASE("threads_for_load: one thread per core at least 0.7 free, between 1 and the most") {
  CHECK(threads_for_load(2, 2.0) == 2);
  CHECK(threads_for_load(2, 1.75) == 2);  // 0.25 of a core taken: still worth a thread
  CHECK(threads_for_load(2, 1.6) == 1);   // 0.4 taken: the second thread would wait on it
  CHECK(threads_for_load(2, 0.1) == 1);   // never fewer than one
  CHECK(threads_for_load(4, 2.8) == 3);
  CHECK(threads_for_load(3, 16.0) == 3);  // never more than the most
  CHECK(threads_for_load(0, 16.0) == 1);
}

TEST_CASE("a named count stays; set_max_threads follows the load again") {
  const int before = num_threads();
  set_num_threads(2);
  CHECK_FALSE(threads_follow_load());
  for (int i = 0; i < 3; ++i) {
    adapt_threads();
    std::this_thread::sleep_for(std::chrono::milliseconds(210));
  }
  CHECK(num_threads() == 2);
  set_max_threads(2);
  CHECK(threads_follow_load());
  CHECK(num_threads() == 2);
  CHECK_ERROR(set_max_threads(0), "set_max_threads: expected n >= 1, got 0");
  set_num_threads(before);
}

TEST_CASE("with a busy process on every core, following the load settles on one thread") {
  const int before = num_threads();
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  std::vector<pid_t> busy;
  for (long i = 0; i < cores; ++i) {
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {  // bounded: gone when the test ends, or after 20 s at most
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      alarm(20);
      for (;;) __asm__ volatile("");  // spin
    }
    busy.push_back(pid);
  }
  set_max_threads(2);
  // Looks 0.2 s apart; a backward pass is where training makes them.
  Tensor w = Tensor::ones({4}).requires_grad_();
  for (int i = 0; i < 40 && num_threads() != 1; ++i) {
    (w * w).sum().backward();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  CHECK(num_threads() == 1);
  CHECK(threads_follow_load());
  for (pid_t pid : busy) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
  set_num_threads(before);
}
