// The CUDA backend's process-wide state: the compute stream, cuBLAS (opened
// at first use) and its handle bound to the stream, and the error reports of
// the check macros.
#include <dlfcn.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "framework/backend/cuda/cuda.h"
#include "framework/backend/cuda/runtime.h"
#include "framework/backend/kernels.h"
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

const Cublas& cublas() {
  static const Cublas table = [] {
    const std::string library = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);
    void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle)
      throw Error(cat("CUDA backend: cannot open ", library, " (cuBLAS ", CUBLAS_VER_MAJOR,
                      ", which this build was compiled against): ", dlerror()));
    auto entry = [&](auto& slot, const char* name) {
      slot = reinterpret_cast<std::remove_reference_t<decltype(slot)>>(dlsym(handle, name));
      if (!slot) throw Error(cat("CUDA backend: ", library, " has no ", name));
    };
    Cublas t{};
    entry(t.create, "cublasCreate_v2");
    entry(t.set_stream, "cublasSetStream_v2");
    entry(t.set_math_mode, "cublasSetMathMode");
    entry(t.set_workspace, "cublasSetWorkspace_v2");
    entry(t.sgemm_strided_batched, "cublasSgemmStridedBatched_64");
    entry(t.status_name, "cublasGetStatusName");
    entry(t.status_string, "cublasGetStatusString");
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
