// A suite that fails on rank 1 only: the job must still exit non-zero
// (registered with WILL_FAIL) and rank 1's report must carry its prefix.
#include <doctest/doctest.h>

#include "parallel/init.h"

TEST_CASE("an assertion that fails on rank 1 only") {
  CHECK(minidl::parallel::rank() != 1);
}
