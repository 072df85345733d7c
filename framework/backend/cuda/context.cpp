// The CUDA backend's process-wide state: the compute stream, the cuBLAS
// handle bound to it, and the error reports of the check macros.
#include <cstdio>
#include <cstring>

#include "framework/backend/cuda/runtime.h"
#include "framework/error.h"

namespace minidl::cuda {
namespace {

// "framework/backend/cuda/x.cu" from the absolute path the compiler was given
const char* short_path(const char* file) {
  const char* p = std::strstr(file, "framework/backend/cuda/");
  return p ? p : file;
}

}  // namespace

void fail(const char* file, int line, const char* call, const char* name, const char* description) {
  throw Error(cat(short_path(file), ":", line, ": ", call, ": ", name, " (", description, ")"));
}

void warn(cudaError_t e, const char* call, const char* file, int line) {
  if (e == cudaSuccess || e == cudaErrorCudartUnloading || e == cudaErrorContextIsDestroyed) return;
  std::fprintf(stderr, "minidl: %s:%d: %s: %s (%s)\n", short_path(file), line, call,
               cudaGetErrorName(e), cudaGetErrorString(e));
}

cudaStream_t stream() {
  static cudaStream_t s = [] {
    cudaStream_t created = nullptr;
    CUDA_CHECK(cudaStreamCreateWithFlags(&created, cudaStreamNonBlocking));
    return created;
  }();
  return s;
}

cublasHandle_t blas_handle() {
  static cublasHandle_t h = [] {
    cublasHandle_t created = nullptr;
    CUBLAS_CHECK(cublasCreate(&created));
    CUBLAS_CHECK(cublasSetStream(created, stream()));
    return created;
  }();
  return h;
}

}  // namespace minidl::cuda
