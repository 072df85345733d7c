#include <cblas.h>
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <atomic>
#include <vector>

#include "framework/backend/cpu/cpu.h"
#include "framework/backend/cpu/dispatch.h"
#include "framework/error.h"
#include "framework/threads.h"

extern "C" void openblas_set_num_threads(int);

namespace minidl {

const char* blas_core() { return openblas_get_corename(); }

namespace cpu {

void set_pool_threads(int n) {
  omp_set_num_threads(n);
  openblas_set_num_threads(n);
}

namespace {

std::atomic<bool> dnnl_gemm_on{true};

// Whether oneDNN's sgemm takes a product (else OpenBLAS's). Measured with
// bench/bench_gemm (each library called alone on the bundled models'
// products) on the 2-core development machine (AMD Zen 4, AVX-512),
// 2026-11-27: on one thread, oneDNN's ran 1.01-1.44x OpenBLAS's on 23 of the
// 25 products of 2^20 multiply-adds and more (the LSTM's gates gained most)
// and 0.96-0.97x on two; below 2^20, 0.82-0.86x; with both operands
// transposed, 0.82x. On two threads of its own it lost at x w^T with under
// 256 rows (the MLP's dense layers at batch 64: 0.59-0.91x in three of four
// runs). Without AVX-512 (an AMD EPYC VM with AVX2, 2026-11-28) it takes
// every product from 2^18 on its threads: see gemm.
bool dnnl_gemm_fits(bool trans_a, bool trans_b, int64_t m, int64_t macs, bool threaded) {
  if (!dnnl_gemm_on.load(std::memory_order_relaxed) || (trans_a && trans_b)) return false;
  if (threaded && !cpu_has_avx512()) return macs >= (int64_t{1} << 18);
  return macs >= (int64_t{1} << 20) && !(threaded && trans_b && m < 256);
}

// op(X) [K, cols] stored as rows of K, ld floats apart, with ld a multiple of
// 512 (2 KiB): a copy with rows 16 to 47 floats wider, in buf; else x itself.
// Without AVX-512, on one thread, oneDNN's sgemm ran 1.4-2.2x slower on such
// operands (B untransposed, A transposed), which it reads in place when C is
// under about 500 rows or columns: the MLP's 64 x 512 x 512 input gradient
// at 49 GFLOP/s against 81 with B's rows 520 floats apart, its 512 x 512 x 64
// weight gradient 40 against 56 with both operands' (a probe calling the
// library alone; AMD EPYC with AVX2, 2026-11-28; bench/README.md, session
// 32). The copy is one pass over the operand, small beside the product from
// 16 columns (rows) of C on. On two threads it cost what it saved in the MLP.
const float* widened(const float* x, int64_t& ld, int64_t k, int64_t cols, int64_t other,
                     std::vector<float>& buf) {
  if (ld % 512 != 0 || other < 16 || k * cols > (int64_t{1} << 20) || cpu_has_avx512()) return x;
  int64_t wide = (cols + 15) / 16 * 16 + 16;
  if (wide % 512 == 0) wide += 16;  // not a multiple of 512 again
  buf.resize(static_cast<size_t>(k * wide));
  for (int64_t r = 0; r < k; ++r) std::copy_n(x + r * ld, cols, buf.data() + r * wide);
  ld = wide;
  return buf.data();
}

// One library call, on the threads OpenMP gives it: all of the pool, or one
// inside a parallel region (OpenBLAS and oneDNN both stay on the calling
// thread there). Returns false where oneDNN refused its arguments.
bool sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
           int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  const bool threaded = !omp_in_parallel() && omp_get_max_threads() > 1;
  if (dnnl_gemm_fits(trans_a, trans_b, m, m * n * k, threaded)) {
    thread_local std::vector<float> wide_a, wide_b;
    if (!threaded && trans_a) a = widened(a, lda, k, m, n, wide_a);
    if (!threaded && !trans_b) b = widened(b, ldb, k, n, m, wide_b);
    return dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb,
                      beta, c, ldc) == dnnl_success;
  }
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  return true;
}

}  // namespace

void set_dnnl_gemm(bool on) { dnnl_gemm_on = on; }

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
  // On 2 threads, products up to 2^24 multiply-adds ran slower under
  // OpenBLAS's own threading than on 1 thread; the small ones (LeNet's dense
  // layers, 64 x 400 x 120 and its gradients: 3.1M) are fastest on the
  // calling thread alone, since splitting them moves their operands between
  // cores. Mid-sized ones (the MLP's at batch 32: 8.4M, 12.8M) split C's rows
  // between threads instead (blocks of 16 rows), each calling the library
  // single-threaded, which also keeps each thread on its own samples.
  // Without AVX-512 none of this held: oneDNN's sgemm on the pool's two
  // threads ran LeNet's dense layers, the LSTM's gates and tiny GPT's head
  // 1.5-2x faster than these paths (bench_gemm --threads 2), and the MLP's,
  // the char-LSTM's and LeNet's steps ran 1.22x, 1.16x and 1.07x faster
  // with every product it takes handed to it whole (tiny GPT's 0.99x; ten
  // interleaved pairs each of bench_train --threads 2 --twin off on an AMD
  // EPYC VM with AVX2, 2026-11-28; bench/README.md).
  const int64_t macs = m * n * k, threads = omp_get_max_threads();
  // (Below 2^18 OpenBLAS itself stays on one thread.)
  const bool ours = threads > 1 && !omp_in_parallel() && macs >= (int64_t{1} << 18) &&
                    (cpu_has_avx512() || !dnnl_gemm_fits(trans_a, trans_b, m, macs, true));
  bool done = true;
  if (ours && macs < (int64_t{1} << 22)) {
    set_pool_threads(1);  // neither library has a per-call thread count
    done = sgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    set_pool_threads(static_cast<int>(threads));
  } else if (ours && m >= 32 && macs <= (int64_t{1} << 24)) {
#pragma omp parallel reduction(&& : done)
    {
      const int64_t t = omp_get_thread_num(), parts = omp_get_num_threads(), blocks = (m + 15) / 16;
      const int64_t r0 = std::min(m, blocks * t / parts * 16);
      const int64_t r1 = std::min(m, blocks * (t + 1) / parts * 16);
      if (r0 < r1)  // rows [r0, r1) of op(A) and of C
        done = sgemm(trans_a, trans_b, r1 - r0, n, k, alpha, a + (trans_a ? r0 : r0 * lda), lda, b,
                     ldb, beta, c + r0 * ldc, ldc);
    }
  } else {
    done = sgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }
  MINIDL_CHECK(done, "gemm: oneDNN's sgemm refused [", m, ", ", k, "] x [", k, ", ", n, "] (lda ",
               lda, ", ldb ", ldb, ", ldc ", ldc, ")");
}

// src [R, C] -> dst [C, R] in 16x16 tiles, each read row by row into a
// buffer and written column by column out of it: every cache line of src
// and dst is taken whole, once. (Written element by element, the tile's 16
// lines on one side lie a row apart, in one L1 set when a row is a multiple
// of 4 KiB, and each access missed: [1024, 3072] took 15-27 ms, not 3.)
// Bands of 16 rows on the pool's threads when large.
MINIDL_CLONES void transpose(const float* src, int64_t rows, int64_t cols, float* dst) {
  constexpr int64_t kTile = 16;
#pragma omp parallel for if (rows * cols > 65536 && rows > kTile)
  for (int64_t r0 = 0; r0 < rows; r0 += kTile) {
    const int64_t h = std::min(kTile, rows - r0);
    float t[kTile][kTile];
    for (int64_t c0 = 0; c0 < cols; c0 += kTile) {
      const int64_t w = std::min(kTile, cols - c0);
      if (h == kTile && w == kTile) {  // constant bounds: unrolled, in vectors
        for (int64_t r = 0; r < kTile; ++r)
          for (int64_t c = 0; c < kTile; ++c) t[r][c] = src[(r0 + r) * cols + c0 + c];
        for (int64_t c = 0; c < kTile; ++c)
          for (int64_t r = 0; r < kTile; ++r) dst[(c0 + c) * rows + r0 + r] = t[r][c];
        continue;
      }
      for (int64_t r = 0; r < h; ++r)
        for (int64_t c = 0; c < w; ++c) t[r][c] = src[(r0 + r) * cols + c0 + c];
      for (int64_t c = 0; c < w; ++c)
        for (int64_t r = 0; r < h; ++r) dst[(c0 + c) * rows + r0 + r] = t[r][c];
    }
  }
}

// x [N, IN], w [OUT, IN], b [OUT] or null -> y [N, OUT]
void linear(int64_t n, int64_t in, int64_t out_f, const float* x, const float* w, const float* pb,
            float* po) {
  if (n <= 32 && out_f > n) {
    // Small batch: out^T [OUT, N] = w [OUT, IN] x^T [IN, N], then transposed.
    // OpenBLAS is faster with the weight in that place (784->512 at N 32: 153
    // vs 204 us on 1 thread, 110 vs 127 on 2; from N 48 on it is not, and on
    // 2 threads slower). bench_ops' linear_b32 case measures it.
    std::vector<float> t(static_cast<size_t>(out_f * n), 0.f);
    if (pb)
      for (int64_t o = 0; o < out_f; ++o) std::fill_n(t.data() + o * n, n, pb[o]);
    gemm(false, true, out_f, n, in, 1.f, w, x, pb ? 1.f : 0.f, t.data());
    transpose(t.data(), out_f, n, po);
    return;
  }
  if (pb)
    for (int64_t i = 0; i < n; ++i) std::copy(pb, pb + out_f, po + i * out_f);
  gemm(false, true, n, out_f, in, 1.f, x, w, pb ? 1.f : 0.f, po);
}

}  // namespace cpu
}  // namespace minidl
