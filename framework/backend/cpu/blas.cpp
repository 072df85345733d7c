#include <cblas.h>
#include <omp.h>

#include <algorithm>

#include "framework/backend/cpu/cpu.h"
#include "framework/error.h"
#include "framework/threads.h"

extern "C" void openblas_set_num_threads(int);

namespace minidl {

void set_num_threads(int n) {
  MINIDL_CHECK(n >= 1, "set_num_threads: expected n >= 1, got ", n);
  omp_set_num_threads(n);
  openblas_set_num_threads(n);
}

int num_threads() { return omp_get_max_threads(); }

const char* blas_core() { return openblas_get_corename(); }

namespace cpu {

void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
          const float* a, const float* b, float beta, float* c) {
  gemm(trans_a, trans_b, m, n, k, alpha, a, trans_a ? m : k, b, trans_b ? k : n, beta, c, n);
}

void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
          const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
          int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {  // BLAS rejects lda = 0; the product is empty
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == 0 ? 0 : beta * c[i * ldc + j];
    return;
  }
  const auto ta = trans_a ? CblasTrans : CblasNoTrans, tb = trans_b ? CblasTrans : CblasNoTrans;
  // On 2 threads, products up to 2^24 multiply-adds ran slower under
  // OpenBLAS's own threading than on 1 thread; the small ones (LeNet's dense
  // layers, 64 x 400 x 120 and its gradients: 3.1M) are fastest on the
  // calling thread alone, since splitting them moves their operands between
  // cores. Mid-sized ones (the MLP's at batch 32: 8.4M, 12.8M) split C's rows
  // between threads instead (blocks of 16 rows), each calling OpenBLAS
  // single-threaded (it does not fork inside a parallel region), which also
  // keeps each thread on its own samples.
  const int64_t macs = m * n * k, threads = omp_get_max_threads();
  // (Below 2^18 OpenBLAS itself stays on one thread.)
  const bool ours = threads > 1 && !omp_in_parallel() && macs >= (int64_t{1} << 18);
  if (ours && macs < (int64_t{1} << 22)) {
    openblas_set_num_threads(1);  // OpenBLAS has no per-call thread count
    cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    openblas_set_num_threads(static_cast<int>(threads));
    return;
  }
  if (ours && m >= 32 && macs <= (int64_t{1} << 24)) {
#pragma omp parallel
    {
      const int64_t t = omp_get_thread_num(), parts = omp_get_num_threads(), blocks = (m + 15) / 16;
      const int64_t r0 = std::min(m, blocks * t / parts * 16);
      const int64_t r1 = std::min(m, blocks * (t + 1) / parts * 16);
      if (r0 < r1)  // rows [r0, r1) of op(A) and of C
        cblas_sgemm(CblasRowMajor, ta, tb, r1 - r0, n, k, alpha, a + (trans_a ? r0 : r0 * lda), lda,
                    b, ldb, beta, c + r0 * ldc, ldc);
    }
    return;
  }
  cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

}  // namespace cpu
}  // namespace minidl
