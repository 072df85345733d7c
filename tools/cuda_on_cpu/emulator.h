// CUDA kernels run on the CPU, so that the CUDA backend's own kernel code
// (framework/backend/cuda/*.cu) is executed and checked on machines without
// a GPU. rewrite_launches.py turns each `kernel<<<grid, block>>>(args)` into
// gpu_emu::launch; the headers in shim/ stand in for cuda_runtime.h,
// cuda_fp16.h and cublas_v2.h. This is a test tool, not a CUDA: it runs one
// block after another, and a block's threads as fibers on the calling thread
// (ucontext), switching only at __syncthreads and warp shuffles; when a
// launch's first block reaches neither, its other blocks run their threads
// as plain calls. It checks what it can see:
//   - a launch configuration CUDA would refuse: cudaErrorInvalidConfiguration
//     from cudaGetLastError, the kernel not run;
//   - a __syncthreads or __shfl_xor_sync that not every thread of the block
//     or warp reaches (a thread returned, or took another number of turns):
//     the launch throws, naming the kernel's file:line;
//   - a shuffle whose mask names a lane the warp does not have.
// Out-of-bounds reads and writes show under AddressSanitizer (the sanitizer
// build runs this suite), since the device memory is exact-sized host memory.
// It cannot see races between threads of a block (they never run at once),
// shared memory read before it is written (it holds the previous block's
// values, not garbage), nor anything of timing, streams or TF32.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <tuple>
#include <type_traits>

struct uint3 {
  unsigned x = 0, y = 0, z = 0;
};
struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
using cudaStream_t = struct CUstream_st*;

// The built-in variables of the thread the emulator is running.
inline thread_local uint3 threadIdx, blockIdx;
inline thread_local dim3 blockDim, gridDim;

namespace gpu_emu {

// A launch's <<<grid, block, shared bytes, stream>>> and where it was written
// (the builtins, not std::source_location, which clang 14 lacks).
struct Config {
  Config(dim3 grid_, dim3 block_, size_t shared_ = 0, cudaStream_t = nullptr,
         const char* file_ = __builtin_FILE(), unsigned line_ = __builtin_LINE())
      : grid(grid_), block(block_), shared(shared_), file(file_), line(line_) {}
  dim3 grid, block;
  size_t shared;
  const char* file;
  unsigned line;
};

// Runs body once for every thread of the grid (see the top of this file).
void run(const Config& config, const std::function<void()>& body);

// kernel(args...) on every thread, each with its own copy of the arguments,
// as CUDA passes them by value.
template <class Kernel, class... Args>
void launch(const Config& config, Kernel kernel, Args&&... args) {
  std::tuple<std::decay_t<Args>...> copies(std::forward<Args>(args)...);
  run(config, [&] { std::apply(kernel, copies); });
}

void sync_block();                                                     // __syncthreads
void exchange_xor(void* value, size_t bytes, int lane_mask, unsigned mask);  // __shfl_xor_sync
int take_last_error();
// Launches run and threads emulated so far, all host threads together.
struct Counts {
  int64_t launches, threads, switches;
};
Counts counts();  // cudaGetLastError: 0, or 9 (invalid configuration), then cleared

}  // namespace gpu_emu
