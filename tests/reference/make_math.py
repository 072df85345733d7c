#!/usr/bin/python3
"""Reference cases for issue 22's elementwise ops, comparisons, reductions and
activations (tests/framework/test_torch_math.cpp)."""
import torch
import torch.nn.functional as F

from torch_cases import Cases, NoGrad

c = Cases("math")
r = torch.randn
T = torch.tensor

# ---- unary maps ----
c.add("abs_with_zero", "abs", torch.abs, [T([-2.0, -0.5, 0.0, 0.25, 3.0])])
c.add("erf", "erf", torch.erf, [r(4, 5) * 2])
c.add("expm1_small", "expm1", torch.expm1, [T([-1e-6, 1e-7, 1e-3, -2.0, 3.0])])
c.add("log1p_small", "log1p", torch.log1p, [T([1e-7, -1e-6, 0.5, 3.0, -0.9])])
c.add("rsqrt", "rsqrt", torch.rsqrt, [torch.rand(3, 4) + 0.1])
c.add("sin", "sin", torch.sin, [r(3, 5) * 3])
c.add("cos", "cos", torch.cos, [r(3, 5) * 3])

# ---- clamp, minimum, maximum with ties ----
edge = T([-3.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0])
c.add("clamp_both_ties", "clamp", lambda x: torch.clamp(x, -1.0, 1.0), [edge], {"min": -1.0, "max": 1.0})
c.add("clamp_min_only", "clamp", lambda x: torch.clamp(x, min=0.0), [edge], {"min": 0.0})
c.add("clamp_max_only", "clamp", lambda x: torch.clamp(x, max=0.5), [edge], {"max": 0.5})
a = r(3, 4)
b = a.clone()
b[0] += 1
b[2, 1:3] -= 2  # rows 1 and two of row 2 stay tied
c.add("maximum_ties", "maximum", torch.maximum, [a, b])
c.add("minimum_ties", "minimum", torch.minimum, [a, b])
c.add("maximum_broadcast", "maximum", torch.maximum, [r(2, 3, 4), r(3, 1)])
c.add("minimum_broadcast", "minimum", torch.minimum, [r(4), r(2, 3, 4)])

# ---- comparisons: float32, int64 (ids beyond 2^24), int32, broadcast ----
fa = T([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
fb = T([2.0, 2.0, 7.0])
big = 2 ** 24
ia = T([big, big + 1, 2 ** 40 + 3, -5], dtype=torch.int64)
ib = T([big + 1, big + 1, 2 ** 40 + 2, -5], dtype=torch.int64)
ja = T([[3, -1], [0, 7]], dtype=torch.int32)
jb = T([3, 0], dtype=torch.int32)
for name in ["eq", "ne", "lt", "le", "gt", "ge"]:
    fn = getattr(torch, name)
    f = (lambda fn: lambda x, y: fn(x, y).float())(fn)
    c.add(name + "_float", name, f, [NoGrad(fa), NoGrad(fb)])
    c.add(name + "_int64_big", name, f, [ia, ib])
    c.add(name + "_int32_broadcast", name, f, [ja, jb])

# ---- reductions ----
x = r(3, 4, 5)
tied = T([[1.0, -2.0, -2.0, 3.0], [0.5, 0.5, 0.5, 0.5]])
c.add("min_all", "min", lambda v: torch.amin(v), [x], {"dims": [], "keepdim": False})
c.add("min_dims_keep", "min", lambda v: torch.amin(v, (0, 2), keepdim=True), [x], {"dims": [0, 2], "keepdim": True})
c.add("min_ties", "min", lambda v: torch.amin(v, 1), [tied], {"dims": [1], "keepdim": False})
c.add("argmin_last", "argmin", lambda v: torch.argmin(v, -1), [NoGrad(x)], {})
c.add("argmin_dim1", "argmin_dim", lambda v: torch.argmin(v, 1), [NoGrad(x)], {"dim": 1, "keepdim": False})
c.add("argmax_dim0_keep", "argmax_dim", lambda v: torch.argmax(v, 0, keepdim=True), [NoGrad(x)], {"dim": 0, "keepdim": True})
for unbiased in [True, False]:
    u = "unbiased" if unbiased else "biased"
    c.add("var_all_" + u, "var", lambda v, u=unbiased: torch.var(v, unbiased=u), [x], {"dims": [], "unbiased": unbiased, "keepdim": False})
    c.add("var_dim1_" + u, "var", lambda v, u=unbiased: torch.var(v, 1, unbiased=u), [x], {"dims": [1], "unbiased": unbiased, "keepdim": False})
    c.add("std_dims_keep_" + u, "std", lambda v, u=unbiased: torch.std(v, (0, 2), unbiased=u, keepdim=True), [x], {"dims": [0, 2], "unbiased": unbiased, "keepdim": True})
# PyTorch's float32 results at an offset of 1000 (and its logsumexp gradient,
# exp(x - result), at 1e4) carry the rounding of the offset: reference them in double
c.add("var_offset", "var", lambda v: torch.var(v.double(), 1).float(), [r(4, 6) + 1000.0], {"dims": [1], "unbiased": True, "keepdim": False})
c.add("logsumexp_dim1", "logsumexp", lambda v: torch.logsumexp(v, 1), [x], {"dims": [1], "keepdim": False})
c.add("logsumexp_large", "logsumexp", lambda v: torch.logsumexp(v.double(), -1, keepdim=True).float(), [T([[1e4, 1e4 - 1, -1e4], [-1e4, -1e4 + 2, 0.0]])], {"dims": [-1], "keepdim": True})
c.add("logsumexp_all", "logsumexp", lambda v: torch.logsumexp(v, (0, 1, 2)), [x], {"dims": [0, 1, 2], "keepdim": False})
c.add("norm2_all", "norm", lambda v: torch.linalg.vector_norm(v), [x], {"p": 2, "dims": [], "keepdim": False})
c.add("norm2_zero_row", "norm", lambda v: torch.linalg.vector_norm(v, 2, dim=1), [T([[0.0, 0.0, 0.0], [3.0, -4.0, 0.0]])], {"p": 2, "dims": [1], "keepdim": False})
c.add("norm1_dim", "norm", lambda v: torch.linalg.vector_norm(v, 1, dim=2, keepdim=True), [x], {"p": 1, "dims": [2], "keepdim": True})
c.add("norm_inf_ties", "norm", lambda v: torch.linalg.vector_norm(v, float("inf"), dim=1), [T([[1.0, -3.0, 3.0], [2.0, 0.5, -1.0]])], {"p": "inf", "dims": [1], "keepdim": False})
c.add("norm3", "norm", lambda v: torch.linalg.vector_norm(v, 3, dim=0), [x], {"p": 3, "dims": [0], "keepdim": False})

# ---- activations ----
act = torch.cat([r(12) * 3, T([0.0, -0.0, 25.0, -25.0, 100.0, -100.0])])
c.add("leaky_relu", "leaky_relu", lambda v: F.leaky_relu(v, 0.1), [act], {"negative_slope": 0.1})
c.add("leaky_relu_default", "leaky_relu", F.leaky_relu, [act], {"negative_slope": 0.01})
c.add("gelu_none", "gelu", F.gelu, [act], {"approximate": "none"})
c.add("gelu_tanh", "gelu", lambda v: F.gelu(v, approximate="tanh"), [act], {"approximate": "tanh"})
c.add("silu", "silu", F.silu, [act], {})
c.add("elu", "elu", lambda v: F.elu(v, 0.7), [act], {"alpha": 0.7})
c.add("softplus", "softplus", F.softplus, [act], {"beta": 1, "threshold": 20})
c.add("softplus_beta_threshold", "softplus", lambda v: F.softplus(v, 2.0, 5.0),
      [torch.cat([act, T([2.5, 2.4, 2.6])])], {"beta": 2, "threshold": 5})
c.add("hardtanh_edges", "hardtanh", lambda v: F.hardtanh(v, -1.0, 2.0), [torch.cat([act, T([-1.0, 2.0])])],
      {"min": -1.0, "max": 2.0})
c.add("log_sigmoid_extremes", "log_sigmoid", F.logsigmoid, [torch.cat([act, T([1e4, -1e4])])], {})
c.write()
