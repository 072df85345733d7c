// One thread pool for everything: minidl's kernels use OpenMP and link
// OpenBLAS's OpenMP build, so BLAS runs on the same pool (no
// oversubscription).
//
// Unless a count is named, the pool follows the machine's load: at the start
// of each backward pass (at most every 0.2 s) minidl reads how much CPU other
// processes used since its last look (/proc/stat, the cores this process may
// run on) and runs one thread per core they left at least 70% free, between 1
// and the start count (all cores; parallel::init: cores / ranks on the host).
// Threads that wait at a barrier for a descheduled one waste whole time
// slices, so on a busy machine fewer threads finish sooner.
// OMP_NUM_THREADS or set_num_threads(n) names a count, which then stays.
#pragma once

namespace minidl {

void set_num_threads(int n);  // n >= 1: exactly n threads from now on
void set_max_threads(int n);  // n >= 1: follow the load, between 1 and n
int num_threads();            // the count now
bool threads_follow_load();   // false once a count was named

// The look described above; autograd calls it. Cheap between looks (a clock read).
void adapt_threads();

// The rule: one thread per core with at least 0.7 of it free, between 1 and
// max_threads (free_cores: the cores this process may use, less what others used).
int threads_for_load(int max_threads, double free_cores);

// OpenBLAS's kernels: the name of the set it chose for this CPU ("Cooperlake"
// on AMD Zen 4), or the one OPENBLAS_CORETYPE names.
const char* blas_core();

}  // namespace minidl
