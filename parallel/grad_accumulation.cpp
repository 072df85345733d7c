#include "parallel/grad_accumulation.h"

#include <algorithm>
#include <vector>

#include "framework/ops.h"
#include "nn/loss.h"
#include "parallel/data_parallel.h"
#include "parallel/timeline.h"

namespace minidl::parallel {

GradAccumulation::GradAccumulation(nn::Cell& network, int64_t micro_size,
                                   GradAccumulationOptions options)
    : network_(network),
      data_parallel_(dynamic_cast<DataParallel*>(&network)),
      micro_size_(micro_size),
      options_(options) {
  MINIDL_CHECK(micro_size >= 1, "GradAccumulation: micro_size must be >= 1, got ", micro_size);
  register_cell("network", network);
}

Tensor GradAccumulation::forward(const Tensor& x) { return network_(x); }
Tensor GradAccumulation::forward(const Tensor& a, const Tensor& b) { return network_(a, b); }

// data [B, ...], labels [B, ...] -> m = min(micro_size, B) slices of n_i rows,
// n_i in {B/m, B/m + 1}.
StepOutput GradAccumulation::forward_backward(const Tensor& data, const Tensor& labels,
                                              nn::Cell& loss_fn) {
  MINIDL_CHECK(data.dim() >= 1 && labels.dim() >= 1,
               "GradAccumulation: expected data and labels with a batch dim, got data ",
               data.shape(), " and labels ", labels.shape());
  const int64_t batch = data.size(0);
  MINIDL_CHECK(labels.size(0) == batch, "GradAccumulation: data ", data.shape(), " and labels ",
               labels.shape(), " differ in dim 0");
  MINIDL_CHECK(batch >= 1, "GradAccumulation: an empty batch (data ", data.shape(),
               ") has no micro batches to run");
  const int64_t m = std::min(micro_size_, batch);  // a short batch: one sample per slice
  const auto* loss = dynamic_cast<const nn::Loss*>(&loss_fn);
  MINIDL_CHECK(!loss || loss->reduction() != nn::Reduction::None,
               "GradAccumulation: ", loss_fn.type_name(),
               " with reduction \"none\" gives no scalar loss to accumulate");
  const bool sum_reduction = loss && loss->reduction() == nn::Reduction::Sum;

  double total = 0;
  std::vector<Tensor> logits(m);
  auto micro_step = [&](int64_t i, int64_t begin, int64_t end) {
    Tensor out = network_(data.slice(begin, end));
    Tensor micro_loss = loss_fn(out, labels.slice(begin, end));
    MINIDL_CHECK(micro_loss.numel() == 1, "GradAccumulation: ", loss_fn.type_name(),
                 " returned a loss of shape ", micro_loss.shape(), " (expected a scalar)");
    const double weight = options_.sum_loss || sum_reduction ? 1.0 : double(end - begin) / batch;
    total += micro_loss.item() * weight;
    (weight == 1.0 ? micro_loss : micro_loss * weight).backward();
    logits[i] = out.detach();
  };
  for (int64_t i = 0, begin = 0; i < m; ++i) {
    const int64_t end = begin + batch / m + (i < batch % m ? 1 : 0);
    if (data_parallel_ && i + 1 < m) {
      auto no_sync = data_parallel_->no_sync();  // communicate on the last slice only
      micro_step(i, begin, end);
    } else {
      micro_step(i, begin, end);
    }
    begin = end;
  }
  return {Tensor::full({}, total), m == 1 ? logits[0] : concat(logits)};
}

GradAccumulationStep::GradAccumulationStep(GradAccumulation& network, nn::Cell& loss_fn,
                                           optim::Optimizer& optimizer)
    : network_(network), loss_fn_(loss_fn), optimizer_(optimizer) {}

StepOutput GradAccumulationStep::operator()(const Tensor& data, const Tensor& labels) {
  optimizer_.zero_grad();
  StepOutput out;
  {
    TimelineScope scope("forward and backward", "compute");
    out = network_.forward_backward(data, labels, loss_fn_);
  }
  TimelineScope scope("optimizer step", "compute");
  optimizer_.step();
  return out;
}

}  // namespace minidl::parallel
