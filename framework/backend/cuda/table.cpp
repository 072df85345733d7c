// The CUDA backend: its allocator, every entry of its kernel table and its
// graph entries, filled from cuda.h and runtime.h, and the probe
// registry.cpp calls once.
#include "framework/backend/cuda/runtime.h"

namespace minidl::cuda {

int gpu_count() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) == cudaSuccess) return devices;
  (void)cudaGetLastError();  // e.g. "driver version is insufficient": no GPU, not an error
  return 0;
}

const char* absent_reason() { return "no CUDA GPU found"; }

const Backend* backend_if_present() {
  if (gpu_count() == 0) return nullptr;
  static const Allocator memory{
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
  };
  static const Kernels k{
      .fill = fill,
      .cast = cast,
      .increment = increment,
      .unary = unary,
      .unary_grad = unary_grad,
      .binary = binary,
      .dropout = dropout,
      .reduce = reduce,
      .max_backward = max_backward,
      .argmax = argmax,
      .softmax = softmax,
      .softmax_backward = softmax_backward,
      .scaled_softmax = scaled_softmax,
      .scaled_softmax_backward = scaled_softmax_backward,
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
      .binary_cross_entropy_forward = binary_cross_entropy_forward,
      .binary_cross_entropy_backward = binary_cross_entropy_backward,
      .diff_loss_forward = diff_loss_forward,
      .diff_loss_backward = diff_loss_backward,
      .update = update,
      // ---- shape ops (issue 22) ----
      .strided_copy = strided_copy,
      .index_select = index_select,
      .index_add = index_add,
      .gather_dim = gather_dim,
      .scatter_add_dim = scatter_add_dim,
      .where = where,
      // ---- math (issue 22) ----
      .compare = compare,
      // ---- convolution family and resizing (issue 22) ----
      .upsample_nearest_forward = upsample_nearest_forward,
      .upsample_nearest_backward = upsample_nearest_backward,
      .upsample_bilinear_forward = upsample_bilinear_forward,
      .upsample_bilinear_backward = upsample_bilinear_backward,
      // ---- batch norm (issue 23) ----
      .batch_norm_forward = batch_norm_forward,
      .batch_norm_backward = batch_norm_backward,
      .layer_norm_forward = layer_norm_forward,
      .layer_norm_backward = layer_norm_backward,
      .group_norm_forward = group_norm_forward,
      .group_norm_backward = group_norm_backward,
      .lstm_cell_forward = lstm_cell_forward,
      .lstm_cell_backward = lstm_cell_backward,
      .lstm_step_forward = lstm_step_forward,
      .lstm_step_backward = lstm_step_backward,
      .gru_cell_forward = gru_cell_forward,
      .gru_cell_backward = gru_cell_backward,
      .gru_step_forward = gru_step_forward,
      .gru_step_backward = gru_step_backward,
  };
  static const GraphOps graphs{
      .capture_begin = capture_begin,
      .capture_end = capture_end,
      .capturing = capture_in_progress,
      .replay = replay,
      .feed_begin = feed_begin,
      .feed_end = feed_end,
      .destroy = destroy_graph,
      .kernel_launches = graph_kernels,
      .pool_bytes = graph_pool_bytes,
  };
  static const Backend b{.name = "cuda", .allocator = &memory, .kernels = &k, .graphs = &graphs};
  return &b;
}

}  // namespace minidl::cuda
