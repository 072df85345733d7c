#include <cblas.h>
#include <omp.h>

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
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
              m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

}  // namespace cpu
}  // namespace minidl
