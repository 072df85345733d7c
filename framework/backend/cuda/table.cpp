// The CUDA kernel table: every entry of backend/kernels.h, filled from cuda.h,
// and the probe registry.cpp calls once.
#include "framework/backend/cuda/runtime.h"

namespace minidl::cuda {

int gpu_count() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) == cudaSuccess) return devices;
  (void)cudaGetLastError();  // e.g. "driver version is insufficient": no GPU, not an error
  return 0;
}

const Kernels* table_if_present() {
  if (gpu_count() == 0) return nullptr;
  static const Kernels k{
      .name = "cuda",
      .allocate = allocate,
      .deallocate = deallocate,
      .copy = copy,
      .upload = upload,
      .allocate_pinned = allocate_pinned,
      .deallocate_pinned = deallocate_pinned,
      .synchronize = wait_stream,
      .current_bytes = current_bytes,
      .peak_bytes = peak_bytes,
      .reset_peak = reset_peak,
      .fill = fill,
      .cast = cast,
      .permute = permute,
      .unary = unary,
      .binary = binary,
      .dropout = dropout,
      .reduce = reduce,
      .argmax = argmax,
      .softmax = softmax,
      .softmax_backward = softmax_backward,
      .gemm = gemm,
      .linear = linear,
      .transpose = transpose,
      .conv2d_forward = conv2d_forward,
      .conv2d_backward = conv2d_backward,
      .max_pool_forward = max_pool_forward,
      .max_pool_backward = max_pool_backward,
      .avg_pool_forward = avg_pool_forward,
      .avg_pool_backward = avg_pool_backward,
      // no fused conv + relu + pool here: conv2d_relu_max_pool2d runs the three ops
      .conv2d_relu_pool_state_bytes = nullptr,
      .conv2d_relu_pool_forward = nullptr,
      .conv2d_relu_pool_backward = nullptr,
      .gather = gather,
      .gather_backward = gather_backward,
      .cross_entropy_forward = cross_entropy_forward,
      .cross_entropy_backward = cross_entropy_backward,
      .update = update,
      .capture_begin = capture_begin,
      .capture_end = capture_end,
      .replay = replay,
      .feed_begin = feed_begin,
      .feed_end = feed_end,
      .destroy_graph = destroy_graph,
      .graph_kernels = graph_kernels,
      .graph_bytes = graph_bytes,
  };
  return &k;
}

}  // namespace minidl::cuda
