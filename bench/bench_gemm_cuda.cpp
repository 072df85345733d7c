// float32 GEMM on the GPU: minidl's matmul (cuBLAS strided-batched behind the
// kernel table) against cuBLAS called directly on its own stream, the same
// n x n x n product, taking turns, TF32 off (both sides' default) and then on.
//
//   bench_gemm_cuda [--n 4096] [--reps 20]
//
// Each turn times `reps` products after a synchronisation and ends with one
// (host clock): the launch gaps are microseconds against milliseconds of
// work. Prints per mode minidl's and cuBLAS's median TFLOP/s over 9 turns,
// minidl/cublas, and the relative difference of the two results (max |a - b|
// over max |b|). Built only with the CUDA backend.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <minidl/minidl.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "bench_common.h"
#include "framework/backend/backend.h"
#include "framework/cuda.h"

using namespace minidl;

namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}
void check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "%s: %s\n", what, cublasGetStatusString(s));
    std::exit(1);
  }
}

double rel_diff(const Tensor& a, const Tensor& b) {
  const std::vector<float> x = a.to_float_vector(), y = b.to_float_vector();
  double diff = 0, scale = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    diff = std::max(diff, std::abs(double(x[i]) - y[i]));
    scale = std::max(scale, std::abs(double(y[i])));
  }
  return diff / scale;
}

}  // namespace

int main(int argc, char** argv) {
  bench::Flags flags(argc, argv, {{"n", "4096"}, {"reps", "20"}}, "[--n N] [--reps R]");
  const int n = static_cast<int>(flags.integer("n")), reps = static_cast<int>(flags.integer("reps"));
  if (!device_available(Device::CUDA)) {
    std::printf("# no CUDA device\n");
    return 1;
  }
  manual_seed(0);
  NoGradGuard no_grad;
  Tensor a = Tensor::randn({n, n}).cuda(), b = Tensor::randn({n, n}).cuda();
  Tensor c = Tensor::empty({n, n}, kFloat32, Device::CUDA);
  const Allocator& k = allocator(Device::CUDA);
  cublasHandle_t handle;
  cudaStream_t stream;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  check(cublasCreate(&handle), "cublasCreate");
  check(cublasSetStream(handle, stream), "cublasSetStream");
  // row-major C = A B is column-major C^T = B^T A^T: B first, as minidl's gemm does
  const float one = 1, zero = 0;
  auto direct = [&] {
    check(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, b.data_ptr<float>(), n,
                      a.data_ptr<float>(), n, &zero, c.data_ptr<float>(), n), "cublasSgemm");
  };
  const double flop = 2.0 * n * n * n;
  std::printf("# float32 GEMM %d^3, %d products a turn, 9 turns\n", n, reps);
  for (bool tf32 : {false, true}) {
    cuda::set_allow_tf32(tf32);
    check(cublasSetMathMode(handle, tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH),
          "cublasSetMathMode");
    Tensor ours;
    auto turn_minidl = [&] {
      k.synchronize();
      const auto t0 = bench::Clock::now();
      for (int i = 0; i < reps; ++i) ours = matmul(a, b);
      k.synchronize();
      return reps * flop / bench::seconds_since(t0) * 1e-12;
    };
    auto turn_cublas = [&] {
      check(cudaStreamSynchronize(stream), "sync");
      const auto t0 = bench::Clock::now();
      for (int i = 0; i < reps; ++i) direct();
      check(cudaStreamSynchronize(stream), "sync");
      return reps * flop / bench::seconds_since(t0) * 1e-12;
    };
    turn_minidl();  // warm-up: handles, workspaces, the pool
    turn_cublas();
    std::vector<double> mine, theirs;
    for (int t = 0; t < 9; ++t) {
      if (t % 2) {
        theirs.push_back(turn_cublas());
        mine.push_back(turn_minidl());
      } else {
        mine.push_back(turn_minidl());
        theirs.push_back(turn_cublas());
      }
    }
    const double m = bench::median(mine), c_ = bench::median(theirs);
    const char* mode = tf32 ? "tf32" : "fp32";
    std::printf("gemm_%s_minidl_tflops=%.2f\ngemm_%s_cublas_tflops=%.2f\ngemm_%s_ratio=%.3f\n"
                "gemm_%s_rel_diff=%.2e\n", mode, m, mode, c_, mode, m / c_, mode,
                rel_diff(ours, c));
  }
  cublasDestroy(handle);
  cudaStreamDestroy(stream);
}
