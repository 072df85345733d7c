// float32 GEMM on the CPU: OpenBLAS's cblas_sgemm and oneDNN's dnnl_sgemm
// called directly, and minidl's gemm (framework/backend/cpu/blas.cpp, which
// picks one of the two by dnnl_gemm_fits and splits some products between
// threads itself), on the products of the bundled models, taking turns.
// The rule in dnnl_gemm_fits was set from these figures.
//
//   bench_gemm [--threads T] [--min-time S]
//
// One line per product: its model and role, M N K and the transposes
// (row-major, C[M, N] = op(A) op(B)), each library's GFLOP/s (the median
// call), oneDNN / OpenBLAS, and minidl / the faster of the two.
#include <cblas.h>
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "bench_common.h"
#include "framework/backend/cpu/cpu.h"  // cpu::gemm
#include "minidl/minidl.h"

using namespace minidl;

namespace {

struct Product {
  const char* what;
  int64_t m, n, k;
  bool ta, tb;
};

// The forward (x w^T: NT), input gradient (NN) and weight gradient (TN) of
// dense layers, and a few squares.
const Product kProducts[] = {
    {"lenet fc1 fwd", 64, 120, 400, false, true},   {"lenet fc1 dx", 64, 400, 120, false, false},
    {"lenet fc1 dw", 120, 400, 64, true, false},    {"lenet fc2 fwd", 64, 84, 120, false, true},
    {"mlp b32 fc1 fwd^T", 512, 32, 784, false, true}, {"mlp b32 fc1 dx", 32, 784, 512, false, false},
    {"mlp b32 fc1 dw", 512, 784, 32, true, false},  {"mlp b64 fc1 fwd", 64, 512, 784, false, true},
    {"mlp b64 fc2 fwd", 64, 512, 512, false, true}, {"mlp b64 fc1 dw", 512, 784, 64, true, false},
    {"mlp b64 fc2 dx", 64, 512, 512, false, false}, {"mlp b64 fc2 dw", 512, 512, 64, true, false},
    {"mlp b256 fc1 fwd", 256, 512, 784, false, true}, {"mlp b256 fc1 dx", 256, 784, 512, false, false},
    {"lstm gates fwd", 20, 512, 128, false, true},  {"lstm gates dh", 20, 128, 512, false, false},
    {"lstm gates dw", 512, 128, 20, true, false},   {"gpt qkv fwd", 1024, 192, 64, false, true},
    {"gpt qkv dx", 1024, 64, 192, false, false},    {"gpt qkv dw", 192, 64, 1024, true, false},
    {"gpt mlp fc fwd", 1024, 256, 64, false, true}, {"gpt mlp proj fwd", 1024, 64, 256, false, true},
    {"gpt mlp proj dw", 64, 256, 1024, true, false}, {"gpt head fwd", 1024, 62, 64, false, true},
    {"square 64", 64, 64, 64, false, false},        {"square 128", 128, 128, 128, false, false},
    {"square 256", 256, 256, 256, false, false},    {"square 1024", 1024, 1024, 1024, false, false},
    {"square 1024 NT", 1024, 1024, 1024, false, true}, {"both transposed", 256, 784, 512, true, true},
};

}  // namespace

int main(int argc, char** argv) {
  bench::Flags flags(argc, argv, {{"threads", "1"}, {"min-time", "0.2"}},
                     "[--threads T] [--min-time SECONDS]");
  const long threads = flags.integer("threads");
  const double min_time = flags.real("min-time");
  if (threads < 1) {
    std::fprintf(stderr, "bench_gemm: expected --threads >= 1, got %ld\n", threads);
    return 2;
  }
  set_num_threads(static_cast<int>(threads));  // OpenMP's pool, which both libraries use
  std::printf("# bench_gemm threads=%ld, OpenBLAS core %s\n", threads, blas_core());
  bench::print_load_note();
  std::printf("%-18s %5s %5s %5s %2s %9s %9s %9s %7s %12s\n", "product", "M", "N", "K", "op",
              "OpenBLAS", "oneDNN", "minidl", "dnnl/ob", "minidl/best");
  manual_seed(0);
  for (const Product& p : kProducts) {
    const int64_t lda = p.ta ? p.m : p.k, ldb = p.tb ? p.k : p.n;
    const std::vector<float> a = Tensor::randn({p.m * p.k}).to_vector<float>();
    const std::vector<float> b = Tensor::randn({p.k * p.n}).to_vector<float>();
    std::vector<float> c(p.m * p.n);
    const double flops = 2.0 * p.m * p.n * p.k;
    auto rate = [&](auto call) {
      return flops / bench::median_seconds([] {}, call, 21, min_time) / 1e9;
    };
    const double ob = rate([&] {
      cblas_sgemm(CblasRowMajor, p.ta ? CblasTrans : CblasNoTrans, p.tb ? CblasTrans : CblasNoTrans,
                  p.m, p.n, p.k, 1.f, a.data(), lda, b.data(), ldb, 0.f, c.data(), p.n);
    });
    const double dn = rate([&] {
      dnnl_sgemm(p.ta ? 'T' : 'N', p.tb ? 'T' : 'N', p.m, p.n, p.k, 1.f, a.data(), lda, b.data(),
                 ldb, 0.f, c.data(), p.n);
    });
    const double ours = rate([&] {
      cpu::gemm(p.ta, p.tb, p.m, p.n, p.k, 1.f, a.data(), lda, b.data(), ldb, 0.f, c.data(), p.n);
    });
    std::printf("%-18s %5ld %5ld %5ld %c%c %9.1f %9.1f %9.1f %7.2f %12.2f\n", p.what,
                static_cast<long>(p.m), static_cast<long>(p.n), static_cast<long>(p.k),
                p.ta ? 'T' : 'N', p.tb ? 'T' : 'N', ob, dn, ours, dn / ob,
                ours / std::max(ob, dn));
  }
}
