// CUDA against the CPU for issue 22's attention and normalization layers:
// layer_norm (layer_norm_rows' kernels past a warp's 32 columns and a part's
// 64 rows), group_norm, scaled_softmax past one warp's 32 columns,
// scaled_dot_product_attention with a causal mask (scaled_softmax) and an
// integer mask (composed, the causal part triu of ones on the inputs'
// device), and multi_head_attention_forward with a key padding mask.
#include <doctest/doctest.h>
#include <minidl/minidl.h>

#include "cuda/check_cuda.h"

using namespace minidl;
using namespace minidl::cuda_suite;
using In = std::vector<Tensor>;

TEST_CASE("cuda: layer_norm, group_norm, scaled_dot_product_attention, multi-head attention") {
  check_op("layer_norm",
           [](const In& in) {
             return layer_norm(in[0], {3, 4}, in[1], in[2]);
           },
           {Tensor::randn({2, 3, 4}), Tensor::randn({3, 4}), Tensor::randn({3, 4})});
  check_op("layer_norm_rows past a warp and a part of rows",
           [](const In& in) { return layer_norm_rows(in[0], in[1], in[2], 1e-5); },
           {Tensor::randn({70, 100}), Tensor::randn({100}), Tensor::randn({100})});
  check_op("group_norm", [](const In& in) { return group_norm(in[0], 2, in[1], in[2]); },
           {Tensor::randn({2, 4, 3}), Tensor::randn({4}), Tensor::randn({4})});
  for (bool causal : {true, false})
    check_op(causal ? "scaled_softmax causal" : "scaled_softmax",
             [causal](const In& in) { return scaled_softmax(in[0], 0.125, causal); },
             {Tensor::randn({2, 3, 70, 40})});
  check_op("sdpa causal",
           [](const In& in) {
             return scaled_dot_product_attention(in[0], in[1], in[2], {}, 0, /*is_causal=*/true);
           },
           {Tensor::randn({2, 2, 3, 4}), Tensor::randn({2, 2, 5, 4}), Tensor::randn({2, 2, 5, 3})});
  const Tensor mask = Tensor::of_ints({1, 0, 1, 1, 1, 1, 0, 0, 1}, {3, 3});
  check_op("sdpa integer mask",
           [&](const In& in) {
             return scaled_dot_product_attention(in[0], in[1], in[2], mask.to(in[0].device()));
           },
           {Tensor::randn({2, 3, 4}), Tensor::randn({2, 3, 4}), Tensor::randn({2, 3, 4})});
  const Tensor kpm = Tensor::of_ints({0, 0, 1, 0, 0, 0}, {2, 3});
  check_op("multi_head_attention_forward",
           [&](const In& in) {
             MultiheadAttentionForwardOptions o{.batch_first = true,
                                                .key_padding_mask = kpm.to(in[0].device())};
             return std::get<0>(multi_head_attention_forward(in[0], in[0], in[0], 2, in[1], in[2],
                                                             in[3], in[4], o));
           },
           {Tensor::randn({2, 3, 4}), Tensor::randn({12, 4}), Tensor::randn({12}),
            Tensor::randn({4, 4}), Tensor::randn({4})});
}
