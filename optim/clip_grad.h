// Gradient clipping before an optimizer step, as torch.nn.utils'
// clip_grad_norm_ and clip_grad_value_:
//
//   loss.backward();
//   optim::clip_grad_norm_(net, /*max_norm=*/1.0);
//   opt.step();
//
// Both change, in place and outside autograd, the gradients that exist and
// skip parameters without one; they are composed from ops, so they run on
// the gradients' devices, without reading back to the host (unless
// error_if_nonfinite asks), so a CUDA graph can capture them.
#pragma once
#include <limits>
#include <vector>

#include "framework/tensor.h"
#include "nn/cell.h"

namespace minidl::optim {

inline constexpr double kInf = std::numeric_limits<double>::infinity();

// total = the norm_type-norm of all gradients together (the norm of their
// norms, up to rounding; kInf: the largest |g|), taken over one flat copy of
// them (memory for every gradient once more, briefly); every gradient is scaled by
// min(1, max_norm / (total + 1e-6)) (in float32, as PyTorch). Returns total,
// a 0-d float32 tensor on the first gradient's device (0 on the CPU when no
// parameter has a gradient). Throws std::invalid_argument for
// max_norm < 0 or norm_type not > 0, and minidl::Error when total is NaN or
// infinite and error_if_nonfinite is set (the gradients are then unchanged).
Tensor clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type = 2,
                       bool error_if_nonfinite = false);
Tensor clip_grad_norm_(const nn::Cell& cell, double max_norm, double norm_type = 2,
                       bool error_if_nonfinite = false);  // its trainable_params()

// Clamps every gradient element into [-clip_value, clip_value] (NaN stays NaN).
// Throws std::invalid_argument for clip_value < 0.
void clip_grad_value_(const std::vector<Tensor>& params, double clip_value);
void clip_grad_value_(const nn::Cell& cell, double clip_value);

}  // namespace minidl::optim
