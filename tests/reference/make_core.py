#!/usr/bin/python3
"""Reference cases for the ops minidl had before issue 22 (tests/framework/test_torch_reference.cpp)."""
import torch
import torch.nn.functional as F

from torch_cases import Cases, NoGrad

c = Cases("core")
r = torch.randn
c.add("add_broadcast", "add", torch.add, [r(2, 3, 4), r(3, 1)])
c.add("mul_broadcast", "mul", torch.mul, [r(2, 1, 4), r(3, 4)])
c.add("div", "div", torch.div, [r(3, 4), torch.rand(3, 4) + 0.5])
c.add("exp", "exp", torch.exp, [r(5, 3)])
c.add("log", "log", torch.log, [torch.rand(5, 3) + 0.1])
c.add("sigmoid", "sigmoid", torch.sigmoid, [r(5, 3) * 4])
c.add("tanh", "tanh", torch.tanh, [r(5, 3) * 2])
c.add("softmax_dim1", "softmax", lambda x: F.softmax(x, 1), [r(2, 5, 3)], {"dim": 1})
c.add("log_softmax_last", "log_softmax", lambda x: F.log_softmax(x, -1), [r(4, 7) * 5], {"dim": -1})
c.add("matmul_batched", "matmul", torch.matmul, [r(3, 4, 5), r(3, 5, 2)])
c.add("linear", "linear", F.linear, [r(6, 5), r(3, 5), r(3)])
c.add("conv2d_pad_stride", "conv2d", lambda x, w, b: F.conv2d(x, w, b, stride=2, padding=1),
      [r(2, 3, 7, 6), r(4, 3, 3, 3), r(4)], {"stride": 2, "padding": 1})
c.add("max_pool2d", "max_pool2d", lambda x: F.max_pool2d(x, 3, 2, 1), [r(2, 2, 7, 7)],
      {"kernel": 3, "stride": 2, "padding": 1})
c.add("avg_pool2d", "avg_pool2d", lambda x: F.avg_pool2d(x, 2), [r(2, 2, 6, 4)], {"kernel": 2})
c.add("cross_entropy", "cross_entropy", F.cross_entropy, [r(6, 5) * 3, NoGrad(torch.randint(0, 5, (6,)))])
c.write()
