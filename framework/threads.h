// One thread pool for everything: minidl's kernels use OpenMP and link
// OpenBLAS's OpenMP build, so BLAS runs on the same pool (no
// oversubscription). The OMP_NUM_THREADS environment variable sets the start
// value; set_num_threads changes it for both.
#pragma once

namespace minidl {

void set_num_threads(int n);  // n >= 1
int num_threads();

// OpenBLAS's kernels: the name of the set it chose for this CPU ("Cooperlake"
// on AMD Zen 4), or the one OPENBLAS_CORETYPE names.
const char* blas_core();

}  // namespace minidl
