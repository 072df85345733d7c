// Optimizer updates on CUDA: every parameter slice of a step in one launch.
// The host writes one descriptor per slice (its pointers, size, first block
// and the per-slice scalars, e.g. Adam's bias corrections from the slice's own
// step, computed in double as on the CPU) into a small device buffer; each
// block finds its slice by binary search and updates one chunk of it with
// PyTorch's formulas (optim/sgd.h, optim/adam.h, optim/rmsprop.h), in the CPU's operation order.
// The hyperparameters travel in the same buffer, so that a CUDA graph can
// refresh all of a step's arguments with one recorded copy (graph.cpp).
#include <cmath>
#include <cstring>
#include <vector>

#include "framework/backend/cuda/device.cuh"
#include "framework/error.h"

namespace minidl::cuda {
namespace {

constexpr int64_t kChunk = 4 * kThreads;  // elements per block and slice

struct SliceDesc {
  float* p;
  const float* g;
  float* m;
  float* v;
  float* w;
  int64_t n, first_block;
  float step_size, bc2_sqrt;  // Adam: lr / (1 - beta1^t), sqrt(1 - beta2^t)
  bool first;                 // Momentum: this update initialises the buffer
};

// The step's hyperparameters, rounded to float once as the CPU kernels do.
struct Hyper {
  UpdateRule rule;
  float lr, wd;                      // SGD, Momentum
  float mu, keep;                    // Momentum: momentum, 1 - dampening
  bool nesterov, plain;              // plain: momentum 0, i.e. SGD
  float c1, b2, c2, eps, decay, l2;  // Adam: 1 - beta1, beta2, 1 - beta2, eps, 1 - lr wd, L2 wd
  bool decoupled;
  float alpha, ca;       // RMSprop: alpha, 1 - alpha (and eps, lr, wd, mu above)
  bool centered, has_momentum;
  float sign;  // every rule: -1 with maximize (the gradient negated), else 1
};
// Where the descriptors start in the arguments' buffer, after the Hyper.
constexpr size_t kDescsAt = (sizeof(Hyper) + 63) / 64 * 64;

// The element j of slice s, one rule
__device__ inline void update_one(const Hyper& h, const SliceDesc& s, int64_t j) {
  float* p = s.p;
  if (h.rule == UpdateRule::Adam) {
    if (h.decoupled) p[j] *= h.decay;
    const float g = h.sign * s.g[j] + h.l2 * p[j];
    s.m[j] += h.c1 * (g - s.m[j]);  // = beta1 m + (1 - beta1) g, as torch's lerp_
    s.v[j] = h.b2 * s.v[j] + h.c2 * g * g;
    p[j] -= s.step_size * s.m[j] / (sqrtf(s.v[j]) / s.bc2_sqrt + h.eps);
  } else if (h.rule == UpdateRule::RMSprop) {  // square_avg v, buf m, grad_avg w
    const float g = h.sign * s.g[j] + h.wd * p[j];
    s.v[j] = s.v[j] * h.alpha + h.ca * g * g;
    float avg;
    if (h.centered) {
      s.w[j] = s.w[j] * h.alpha + h.ca * g;
      avg = sqrtf(s.v[j] - s.w[j] * s.w[j]) + h.eps;
    } else {
      avg = sqrtf(s.v[j]) + h.eps;
    }
    if (h.has_momentum) {
      s.m[j] = s.m[j] * h.mu + g / avg;
      p[j] -= h.lr * s.m[j];
    } else {
      p[j] -= h.lr * (g / avg);
    }
  } else if (h.rule == UpdateRule::SGD || h.plain) {
    p[j] -= h.lr * (h.sign * s.g[j] + h.wd * p[j]);
  } else {
    const float d = h.sign * s.g[j] + h.wd * p[j];
    const float b = s.first ? d : h.mu * s.m[j] + h.keep * d;
    s.m[j] = b;
    p[j] -= h.lr * (h.nesterov ? d + h.mu * b : b);
  }
}

// hyper, slices [count] in device memory; blocks [total] over all slices:
// block b updates chunk b - first_block of the last slice whose first_block <= b
__global__ void update_kernel(const Hyper* hyper, const SliceDesc* slices, int count,
                              int64_t total) {
  const Hyper h = *hyper;
  for (int64_t b = blockIdx.x; b < total; b += gridDim.x) {
    int lo = 0, hi = count - 1;
    while (lo < hi) {
      const int mid = (lo + hi + 1) / 2;
      if (slices[mid].first_block <= b)
        lo = mid;
      else
        hi = mid - 1;
    }
    const SliceDesc& s = slices[lo];
    const int64_t begin = (b - s.first_block) * kChunk;
    const int64_t end = begin + kChunk < s.n ? begin + kChunk : s.n;
    for (int64_t j = begin + threadIdx.x; j < end; j += blockDim.x) update_one(h, s, j);
  }
}

}  // namespace

void update(UpdateRule rule, const UpdateArgs& a, const UpdateSlice* slices, int count) {
  Hyper h{};
  h.rule = rule;
  h.lr = static_cast<float>(a.lr);
  h.wd = static_cast<float>(a.weight_decay);
  h.mu = static_cast<float>(a.momentum);
  h.keep = static_cast<float>(1 - a.dampening);
  h.nesterov = a.nesterov;
  h.plain = a.momentum == 0;
  // 1 - beta in double, then float, as PyTorch passes them as Python scalars
  h.c1 = static_cast<float>(1 - a.beta1);
  h.b2 = static_cast<float>(a.beta2);
  h.c2 = static_cast<float>(1 - a.beta2);
  h.eps = static_cast<float>(a.eps);
  h.decay = static_cast<float>(1 - a.lr * a.weight_decay);
  h.l2 = a.decoupled ? 0.f : static_cast<float>(a.weight_decay);
  h.decoupled = a.decoupled;
  h.alpha = static_cast<float>(a.alpha);
  h.ca = static_cast<float>(1 - a.alpha);
  h.centered = a.centered;
  h.has_momentum = a.momentum > 0;
  h.sign = a.maximize ? -1.f : 1.f;

  // The arguments as the kernel reads them: the Hyper, then the descriptors.
  std::vector<SliceDesc> descs;
  int64_t total = 0;
  for (int i = 0; i < count; ++i) {
    const UpdateSlice& s = slices[i];
    if (s.n == 0) continue;
    const double t = static_cast<double>(s.step);
    const double bc1 = 1 - std::pow(a.beta1, t), bc2 = 1 - std::pow(a.beta2, t);
    descs.push_back({s.p, s.g, s.m, s.v, s.w, s.n, total, static_cast<float>(a.lr / bc1),
                     static_cast<float>(std::sqrt(bc2)), s.step == 1});
    total += (s.n + kChunk - 1) / kChunk;
  }
  if (descs.empty()) return;
  const size_t bytes = kDescsAt + descs.size() * sizeof(SliceDesc);
  std::vector<unsigned char> args(bytes);
  std::memcpy(args.data(), &h, sizeof h);
  std::memcpy(args.data() + kDescsAt, descs.data(), descs.size() * sizeof(SliceDesc));
  auto launch = [&](const void* on_device) {
    const auto* base = static_cast<const unsigned char*>(on_device);
    update_kernel<<<blocks_for(total, 1), kThreads, 0, stream()>>>(
        reinterpret_cast<const Hyper*>(base), reinterpret_cast<const SliceDesc*>(base + kDescsAt),
        static_cast<int>(descs.size()), total);
    CUDA_CHECK_LAUNCH();
  };
  // In a CUDA graph the arguments sit in a slot the graph owns: a capture
  // records the copy of its host side and the launch; a feed rewrites the
  // host side, which the recorded copy takes up at the next replay.
  if (ArgSlot* slot = graph_args(bytes)) {
    if (slot->fed) {
      const auto* old = reinterpret_cast<const SliceDesc*>(static_cast<char*>(slot->host) + kDescsAt);
      bool same = static_cast<const Hyper*>(slot->host)->rule == h.rule;
      for (size_t i = 0; same && i < descs.size(); ++i)
        same = old[i].p == descs[i].p && old[i].g == descs[i].g && old[i].m == descs[i].m &&
               old[i].v == descs[i].v && old[i].w == descs[i].w && old[i].n == descs[i].n;
      MINIDL_CHECK(same, "CUDA graph: the optimizer step fed updates other parameters or state "
                   "than the step captured (a parameter without a gradient, or new state?)");
    }
    std::memcpy(slot->host, args.data(), bytes);
    if (slot->fed) return;
    CUDA_CHECK(cudaMemcpyAsync(slot->device, slot->host, bytes, cudaMemcpyHostToDevice, stream()));
    return launch(slot->device);
  }
  // Eagerly from pageable memory: cudaMemcpyAsync has staged the arguments by
  // the time it returns, so the vector may go; the buffer is freed in stream
  // order after the kernel.
  Scratch<unsigned char> on_device(static_cast<int64_t>(bytes));
  CUDA_CHECK(cudaMemcpyAsync(on_device.data(), args.data(), bytes, cudaMemcpyHostToDevice, stream()));
  launch(on_device.data());
}

}  // namespace minidl::cuda
