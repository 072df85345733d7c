// The counting device's kernel table: each entry of the CPU's table behind a
// wrapper that counts its calls by name; no graphs.
#include <atomic>
#include <mutex>

#include "counting_device/counting_device.h"

namespace minidl::counting {
namespace {

std::mutex names_mutex;
std::map<std::string, std::atomic<int64_t>*>& counters() {
  static std::map<std::string, std::atomic<int64_t>*> m;
  return m;
}

// The entry M of `k`, of signature R(A...): the CPU's, counted under `name`.
template <auto M, class F>
struct Counted;
template <auto M, class R, class... A>
struct Counted<M, R (*)(A...)> {
  static inline R (*cpu)(A...) = nullptr;
  static inline std::atomic<int64_t> calls{0};
  static R call(A... a) {
    ++calls;
    return cpu(a...);
  }
};
template <auto M>
void count(Kernels& k, const char* name) {
  using F = std::remove_reference_t<decltype(k.*M)>;
  Counted<M, F>::cpu = k.*M;
  k.*M = &Counted<M, F>::call;
  std::lock_guard lock(names_mutex);
  counters()[name] = &Counted<M, F>::calls;
}

Kernels counted_table() {
  Kernels k = kernels(Device::CPU);
  count<&Kernels::fill>(k, "fill"), count<&Kernels::cast>(k, "cast");
  count<&Kernels::increment>(k, "increment");
  count<&Kernels::unary>(k, "unary");
  count<&Kernels::unary_grad>(k, "unary_grad");
  count<&Kernels::binary>(k, "binary"), count<&Kernels::dropout>(k, "dropout");
  count<&Kernels::reduce>(k, "reduce"), count<&Kernels::argmax>(k, "argmax");
  count<&Kernels::max_backward>(k, "max_backward");
  count<&Kernels::softmax>(k, "softmax"), count<&Kernels::softmax_backward>(k, "softmax_backward");
  count<&Kernels::scaled_softmax>(k, "scaled_softmax");
  count<&Kernels::scaled_softmax_backward>(k, "scaled_softmax_backward");
  count<&Kernels::gemm>(k, "gemm"), count<&Kernels::linear>(k, "linear");
  count<&Kernels::transpose>(k, "transpose");
  count<&Kernels::conv2d_forward>(k, "conv2d_forward");
  count<&Kernels::conv2d_backward>(k, "conv2d_backward");
  count<&Kernels::max_pool_forward>(k, "max_pool_forward");
  count<&Kernels::max_pool_backward>(k, "max_pool_backward");
  count<&Kernels::avg_pool_forward>(k, "avg_pool_forward");
  count<&Kernels::avg_pool_backward>(k, "avg_pool_backward");
  count<&Kernels::conv2d_relu_pool_state_bytes>(k, "conv2d_relu_pool_state_bytes");
  count<&Kernels::conv2d_relu_pool_forward>(k, "conv2d_relu_pool_forward");
  count<&Kernels::conv2d_relu_pool_backward>(k, "conv2d_relu_pool_backward");
  count<&Kernels::gather>(k, "gather"), count<&Kernels::gather_backward>(k, "gather_backward");
  count<&Kernels::cross_entropy_forward>(k, "cross_entropy_forward");
  count<&Kernels::cross_entropy_backward>(k, "cross_entropy_backward");
  count<&Kernels::binary_cross_entropy_forward>(k, "binary_cross_entropy_forward");
  count<&Kernels::binary_cross_entropy_backward>(k, "binary_cross_entropy_backward");
  count<&Kernels::diff_loss_forward>(k, "diff_loss_forward");
  count<&Kernels::diff_loss_backward>(k, "diff_loss_backward");
  count<&Kernels::update>(k, "update");
  // ---- shape ops (issue 22) ----
  count<&Kernels::strided_copy>(k, "strided_copy"), count<&Kernels::index_select>(k, "index_select");
  count<&Kernels::index_add>(k, "index_add"), count<&Kernels::gather_dim>(k, "gather_dim");
  count<&Kernels::scatter_add_dim>(k, "scatter_add_dim"), count<&Kernels::where>(k, "where");
  // ---- math (issue 22) ----
  count<&Kernels::compare>(k, "compare");
  // ---- convolution family and resizing (issue 22) ----
  count<&Kernels::upsample_nearest_forward>(k, "upsample_nearest_forward");
  count<&Kernels::upsample_nearest_backward>(k, "upsample_nearest_backward");
  count<&Kernels::upsample_bilinear_forward>(k, "upsample_bilinear_forward");
  count<&Kernels::upsample_bilinear_backward>(k, "upsample_bilinear_backward");
  // ---- batch norm (issue 23) ----
  count<&Kernels::batch_norm_forward>(k, "batch_norm_forward");
  count<&Kernels::batch_norm_backward>(k, "batch_norm_backward");
  count<&Kernels::layer_norm_forward>(k, "layer_norm_forward");
  count<&Kernels::layer_norm_backward>(k, "layer_norm_backward");
  count<&Kernels::group_norm_forward>(k, "group_norm_forward");
  count<&Kernels::group_norm_backward>(k, "group_norm_backward");
  // ---- the LSTM and GRU cells (issue 23) ----
  count<&Kernels::lstm_cell_forward>(k, "lstm_cell_forward");
  count<&Kernels::lstm_cell_backward>(k, "lstm_cell_backward");
  count<&Kernels::lstm_step_forward>(k, "lstm_step_forward");
  count<&Kernels::lstm_step_backward>(k, "lstm_step_backward");
  count<&Kernels::gru_cell_forward>(k, "gru_cell_forward");
  count<&Kernels::gru_cell_backward>(k, "gru_cell_backward");
  count<&Kernels::gru_step_forward>(k, "gru_step_forward");
  count<&Kernels::gru_step_backward>(k, "gru_step_backward");
  return k;
}

}  // namespace

const Backend& backend() {
  static const Kernels table = counted_table();
  static const Backend b{.name = "counting", .allocator = &allocator(), .kernels = &table,
                         .graphs = nullptr};
  return b;
}

std::map<std::string, int64_t> kernel_calls() {
  std::lock_guard lock(names_mutex);
  std::map<std::string, int64_t> out;
  for (const auto& [name, calls] : counters()) out[name] = calls->load();
  return out;
}

}  // namespace minidl::counting
