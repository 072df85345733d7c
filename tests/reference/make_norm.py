#!/usr/bin/python3
"""Reference cases for issue 23's fused batch_norm op and BatchNorm2d
(tests/framework/test_torch_norm.cpp): outputs, gradients of x, weight and
bias, and the running estimates after the step."""
import torch
import torch.nn.functional as F

from torch_cases import Cases, NoGrad

c = Cases("norm")
r = torch.randn


def op(training, momentum, eps, affine, running):
    """F.batch_norm on (x, weight, bias, running_mean, running_var); the running
    estimates are copied first and returned after the step."""
    def f(x, w, b, rm, rv):
        rm, rv = rm.clone(), rv.clone()
        y = F.batch_norm(x, rm if running else None, rv if running else None,
                         w if affine else None, b if affine else None, training, momentum, eps)
        return (y, rm, rv) if running else y
    return f


def add(name, shape, training=True, momentum=0.1, eps=1e-5, affine=True, running=True,
        scale=1.0, offset=0.0):
    C = shape[1]
    x = r(*shape) * scale + offset
    w, b = r(C) * 0.5 + 1, r(C) * 0.5
    rm, rv = r(C) * 0.3, torch.rand(C) + 0.5
    c.add(name, "batch_norm", op(training, momentum, eps, affine, running),
          [x, w, b, NoGrad(rm), NoGrad(rv)],
          {"training": training, "momentum": momentum, "eps": eps, "affine": affine,
           "running": running})


add("bn2d_train", [4, 3, 5, 5])
add("bn2d_train_momentum_eps", [3, 4, 3, 6], momentum=0.3, eps=1e-3, scale=2.0, offset=5.0)
add("bn2d_eval", [4, 3, 2, 2], training=False)
add("bn1d_train", [8, 5])
add("bn1d_train_3d_no_affine", [4, 3, 6], affine=False)
add("bn1d_eval_no_affine", [6, 4], training=False, affine=False)
add("bn_train_no_running", [5, 2, 3, 3], running=False)
add("bn_train_5d", [2, 3, 2, 3, 2], momentum=0.5)


# nn.BatchNorm2d over two training steps, then in evaluation: the outputs of
# each, and the running estimates and num_batches_tracked at the end.
def module(x1, x2, w, b):
    bn = torch.nn.BatchNorm2d(3, momentum=0.2)
    with torch.no_grad():
        bn.weight.copy_(w)
        bn.bias.copy_(b)
    y1, y2 = bn(x1), bn(x2)
    bn.eval()
    y3 = bn(x2)
    return y1, y2, y3, bn.running_mean.clone(), bn.running_var.clone(), \
        bn.num_batches_tracked.clone()


c.add("bn2d_module_two_steps_then_eval", "batchnorm2d_module", module,
      [r(4, 3, 3, 3), r(4, 3, 3, 3) * 2 + 1, NoGrad(r(3) + 1), NoGrad(r(3))], {"momentum": 0.2})
c.write()
