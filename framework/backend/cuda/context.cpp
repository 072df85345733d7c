// The CUDA backend's process-wide state: the compute stream, cuBLAS (opened
// at first use) and its handle bound to the stream, and the error reports of
// the check macros.
#include <dlfcn.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "framework/backend/cuda/cuda.h"
#include "framework/backend/cuda/runtime.h"
#include "framework/cuda.h"
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

Library::Library(const std::string& name)
    : name_(name), handle_(dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL)) {
  if (!handle_) failure_ = cat("cannot open ", name, ": ", dlerror());
}

void* Library::find(const char* entry) {
  if (!handle_) return nullptr;
  void* p = dlsym(handle_, entry);
  if (!p && failure_.empty()) failure_ = cat(name_, " has no ", entry);
  return p;
}

const Cublas& cublas() {
  static const Cublas table = [] {
    Library lib("libcublas.so." + std::to_string(CUBLAS_VER_MAJOR));
    Cublas t{};
    lib.get(t.create, "cublasCreate_v2");
    lib.get(t.set_stream, "cublasSetStream_v2");
    lib.get(t.set_math_mode, "cublasSetMathMode");
    lib.get(t.set_workspace, "cublasSetWorkspace_v2");
    lib.get(t.sgemm_strided_batched, "cublasSgemmStridedBatched_64");
    lib.get(t.status_name, "cublasGetStatusName");
    lib.get(t.status_string, "cublasGetStatusString");
    if (!lib.failure().empty())
      throw Error(cat("CUDA backend: cuBLAS ", CUBLAS_VER_MAJOR, ", which this build was compiled "
                      "against: ", lib.failure()));
    return t;
  }();
  return table;
}

int bind() {
  static const int device = claim_device(gpu_count());
  thread_local const bool current = [] {
    CUDA_CHECK(cudaSetDevice(device));
    return true;
  }();
  (void)current;
  return device;
}

cudaStream_t stream() {
  bind();
  static cudaStream_t s = [] {
    cudaStream_t created = nullptr;
    CUDA_CHECK(cudaStreamCreateWithFlags(&created, cudaStreamNonBlocking));
    return created;
  }();
  return s;
}

cublasHandle_t blas_handle() {
  static cublasHandle_t h = [] {
    (void)stream();  // binds this thread to the process's GPU first
    cublasHandle_t created = nullptr;
    CUBLAS_CHECK(cublas().create(&created));
    CUBLAS_CHECK(cublas().set_stream(created, stream()));
    // 32 MiB, PyTorch's default on Hopper; never freed, like the handle
    constexpr size_t kWorkspace = size_t{32} << 20;
    void* workspace = nullptr;
    CUDA_CHECK(cudaMalloc(&workspace, kWorkspace));
    CUBLAS_CHECK(cublas().set_workspace(created, workspace, kWorkspace));
    return created;
  }();
  return h;
}

}  // namespace minidl::cuda
