#!/usr/bin/python3
"""Reference cases for the convolution family and resizing (issue 22):
conv2d (rectangular stride, padding, dilation, groups), conv_transpose2d,
conv1d, adaptive_avg_pool2d and nearest and bilinear interpolation
(tests/framework/test_torch_conv.cpp)."""
import torch
import torch.nn.functional as F

from torch_cases import Cases

c = Cases("conv", seed=22)
r = torch.randn


def conv2d(name, x, w, b, stride=1, padding=0, dilation=1, groups=1):
    pair = lambda v: list(v) if isinstance(v, tuple) else [v, v]
    inputs = [x, w] + ([b] if b is not None else [])
    fn = lambda x, w, *b: F.conv2d(x, w, b[0] if b else None, stride, padding, dilation, groups)
    c.add(name, "conv2d", fn, inputs, {"stride": pair(stride), "padding": pair(padding),
                                       "dilation": pair(dilation), "groups": groups})


conv2d("conv2d_rect_stride_pad", r(2, 3, 7, 6), r(4, 3, 3, 2), r(4), stride=(2, 1), padding=(1, 0))
conv2d("conv2d_dilation", r(2, 2, 8, 7), r(3, 2, 3, 3), r(3), padding=(2, 1), dilation=(2, 3))
conv2d("conv2d_groups2", r(2, 4, 6, 6), r(6, 2, 3, 3), r(6), stride=2, padding=1, groups=2)
conv2d("conv2d_depthwise_nobias", r(1, 4, 5, 5), r(4, 1, 3, 3), None, padding=1, groups=4)
conv2d("conv2d_all", r(2, 6, 9, 7), r(3, 2, 2, 3), r(3), stride=(1, 2), padding=(1, 2),
       dilation=(2, 1), groups=3)
conv2d("conv2d_lanes_batch_dilated", r(16, 1, 5, 5), r(2, 1, 3, 3), r(2), padding=2, dilation=2)
conv2d("conv2d_lanes_batch_rect_pad", r(16, 1, 4, 5), r(2, 1, 3, 3), r(2), padding=(1, 0))


def conv_t(name, x, w, b, stride=1, padding=0, output_padding=0, dilation=1, groups=1):
    pair = lambda v: list(v) if isinstance(v, tuple) else [v, v]
    inputs = [x, w] + ([b] if b is not None else [])
    fn = lambda x, w, *b: F.conv_transpose2d(x, w, b[0] if b else None, stride, padding,
                                             output_padding, groups, dilation)
    c.add(name, "conv_transpose2d", fn, inputs,
          {"stride": pair(stride), "padding": pair(padding), "output_padding": pair(output_padding),
           "dilation": pair(dilation), "groups": groups})


conv_t("conv_transpose2d_stride2_outpad", r(2, 3, 4, 3), r(3, 2, 3, 3), r(2), stride=2, padding=1,
       output_padding=1)
conv_t("conv_transpose2d_rect", r(1, 4, 3, 4), r(4, 3, 2, 3), r(3), stride=(2, 3), padding=(0, 1),
       output_padding=(1, 2))
conv_t("conv_transpose2d_groups_dilation", r(2, 4, 3, 3), r(4, 1, 3, 2), r(2), padding=1,
       dilation=(2, 1), groups=2)
conv_t("conv_transpose2d_outpad_below_dilation", r(1, 2, 3, 3), r(2, 2, 2, 2), None,
       output_padding=1, dilation=2)
conv_t("conv_transpose2d_lanes_batch", r(16, 2, 4, 4), r(2, 2, 3, 3), r(2), padding=1)

c.add("conv1d", "conv1d", lambda x, w, b: F.conv1d(x, w, b, 2, 1, 2, 2), [r(2, 4, 9), r(6, 2, 3), r(6)],
      {"stride": 2, "padding": 1, "dilation": 2, "groups": 2})
c.add("conv1d_plain", "conv1d", lambda x, w: F.conv1d(x, w), [r(3, 2, 5), r(4, 2, 2)],
      {"stride": 1, "padding": 0, "dilation": 1, "groups": 1})

for name, shape, size in [("adaptive_avg_pool2d_down", (2, 3, 7, 5), (3, 2)),
                          ("adaptive_avg_pool2d_up", (1, 2, 3, 4), (5, 6)),
                          ("adaptive_avg_pool2d_global", (2, 4, 6, 6), (1, 1))]:
    c.add(name, "adaptive_avg_pool2d", lambda x, s=size: F.adaptive_avg_pool2d(x, s), [r(*shape)],
          {"size": list(size)})

for name, shape, kw in [("interpolate_size", (2, 2, 3, 4), {"size": [5, 7]}),
                        ("interpolate_size_down", (1, 2, 7, 6), {"size": [3, 4]}),
                        ("interpolate_scale2", (1, 3, 4, 3), {"scale_factor": [2.0, 2.0]}),
                        ("interpolate_scale_2_3", (2, 1, 3, 2), {"scale_factor": [2.0, 3.0]}),
                        ("interpolate_scale_fraction", (1, 2, 3, 5), {"scale_factor": [1.7, 2.5]})]:
    args = {k: tuple(v) for k, v in kw.items()}
    c.add(name, "interpolate", lambda x, a=args: F.interpolate(x, mode="nearest", **a), [r(*shape)], kw)
for name, shape, kw in [("bilinear_size", (2, 2, 3, 4), {"size": [5, 7]}),
                        ("bilinear_size_down", (1, 2, 7, 6), {"size": [3, 4]}),
                        ("bilinear_scale2", (1, 3, 4, 3), {"scale_factor": [2.0, 2.0]}),
                        ("bilinear_scale_fraction", (1, 2, 3, 5), {"scale_factor": [1.7, 2.5]}),
                        ("bilinear_corners", (2, 1, 4, 3), {"size": [7, 8], "align_corners": True}),
                        ("bilinear_corners_down", (1, 2, 9, 5), {"size": [4, 1], "align_corners": True}),
                        ("bilinear_same_and_one", (1, 2, 5, 4), {"size": [5, 1]})]:
    args = {k: tuple(v) if isinstance(v, list) else v for k, v in kw.items()}
    c.add(name, "interpolate", lambda x, a=args: F.interpolate(x, mode="bilinear", **a), [r(*shape)],
          dict(kw, mode="bilinear"))
c.write()
