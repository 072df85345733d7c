#!/usr/bin/python3
"""Reference cases for issue 22's losses (tests/nn/test_torch_loss.cpp)."""
import torch
import torch.nn.functional as F

from torch_cases import Cases, NoGrad

c = Cases("loss")
r = torch.randn
T = torch.tensor

# ---- binary cross entropy: probabilities at 0 and 1 included ----
p = torch.cat([torch.rand(8) * 0.98 + 0.01, T([0.0, 1.0, 0.0, 1.0])])
t = torch.cat([torch.rand(8), T([0.0, 1.0, 1.0, 0.0])])
for red in ["mean", "sum", "none"]:
    c.add("bce_edges_" + red, "bce", lambda a, b, red=red: F.binary_cross_entropy(a, b, reduction=red),
          [p, NoGrad(t)], {"reduction": red})
pm, tm = torch.rand(3, 4) * 0.9 + 0.05, torch.rand(3, 4)
c.add("bce_target_grad", "bce", lambda a, b: F.binary_cross_entropy(a, b), [pm, tm], {"reduction": "mean"})
c.add("bce_weight", "bce_weight", lambda a, b, w: F.binary_cross_entropy(a, b, weight=w),
      [pm, NoGrad(tm), NoGrad(torch.rand(4) + 0.5)], {"reduction": "mean"})

# ---- with logits: |x| up to 1e4 ----
x = torch.cat([r(8) * 3, T([1e4, -1e4, 1e4, -1e4, 0.0, 50.0])])
tx = torch.cat([torch.rand(8), T([0.0, 1.0, 1.0, 0.0, 0.5, 0.3])])
for red in ["mean", "sum", "none"]:
    c.add("bce_logits_" + red, "bce_logits", lambda a, b, red=red: F.binary_cross_entropy_with_logits(a, b, reduction=red),
          [x, tx], {"reduction": red})
xl, tl = r(3, 4) * 4, torch.rand(3, 4)
c.add("bce_logits_pos_weight", "bce_logits_pw",
      lambda a, b, w, pw: F.binary_cross_entropy_with_logits(a, b, weight=w, pos_weight=pw),
      [xl, tl, NoGrad(torch.rand(3, 1) + 0.5), NoGrad(torch.rand(4) * 3)], {"reduction": "mean"})
c.add("bce_logits_pos_weight_extreme", "bce_logits_pw",
      lambda a, b, w, pw: F.binary_cross_entropy_with_logits(a, b, weight=w, pos_weight=pw, reduction="sum"),
      [T([[1e4, -1e4, 0.0]]), T([[0.0, 1.0, 0.5]]), NoGrad(T([1.0, 2.0, 0.5])), NoGrad(T([2.0, 3.0, 0.5]))],
      {"reduction": "sum"})

# ---- nll_loss and cross_entropy: weights, ignore_index, label smoothing, [N, C, d...] ----
logits2 = r(6, 5) * 3
lab2 = T([0, 4, -100, 2, 2, 1])
w5 = torch.rand(5) + 0.2
logits4 = r(2, 4, 3, 2) * 2
lab4 = torch.randint(0, 4, (2, 3, 2))
lab4[0, 1, 1] = 7  # ignored with ignore_index 7
w4 = torch.rand(4) + 0.2
for red in ["mean", "sum", "none"]:
    c.add("nll_2d_" + red, "nll", lambda a, b, w, red=red: F.nll_loss(F.log_softmax(a, 1), b, weight=w, reduction=red),
          [logits2, lab2, NoGrad(w5)], {"reduction": red, "ignore_index": -100})
    c.add("nll_4d_" + red, "nll", lambda a, b, w, red=red: F.nll_loss(F.log_softmax(a, 1), b, weight=w, ignore_index=7, reduction=red),
          [logits4, lab4, NoGrad(w4)], {"reduction": red, "ignore_index": 7})
    for ls in [0.0, 0.2]:
        c.add("ce_2d_%s_ls%g" % (red, ls), "ce",
              lambda a, b, w, red=red, ls=ls: F.cross_entropy(a, b, weight=w, reduction=red, label_smoothing=ls),
              [logits2, lab2, NoGrad(w5)], {"reduction": red, "ignore_index": -100, "label_smoothing": ls, "weighted": True})
        c.add("ce_4d_%s_ls%g" % (red, ls), "ce",
              lambda a, b, w, red=red, ls=ls: F.cross_entropy(a, b, weight=w, ignore_index=7, reduction=red, label_smoothing=ls),
              [logits4, lab4, NoGrad(w4)], {"reduction": red, "ignore_index": 7, "label_smoothing": ls, "weighted": True})
        c.add("ce_2d_unweighted_%s_ls%g" % (red, ls), "ce",
              lambda a, b, w, red=red, ls=ls: F.cross_entropy(a, b, reduction=red, label_smoothing=ls),
              [logits2, lab2, NoGrad(w5)], {"reduction": red, "ignore_index": -100, "label_smoothing": ls, "weighted": False})
c.add("ce_large_logits", "ce", lambda a, b, w: F.cross_entropy(a, b, label_smoothing=0.1),
      [T([[1e4, 0.0, -1e4], [0.0, 1e4, 1e4 - 3]]), T([2, 1]), NoGrad(torch.ones(3))],
      {"reduction": "mean", "ignore_index": -100, "label_smoothing": 0.1, "weighted": False})

# ---- regression and divergence ----
a, b = r(4, 5), r(4, 5)
b[0, :2] = a[0, :2] + T([1.0, -0.5])  # |d| exactly beta / delta
for red in ["mean", "sum", "none"]:
    c.add("l1_" + red, "l1", lambda u, v, red=red: F.l1_loss(u, v, reduction=red), [a, b], {"reduction": red})
    c.add("smooth_l1_" + red, "smooth_l1", lambda u, v, red=red: F.smooth_l1_loss(u, v, reduction=red, beta=0.5),
          [a, b], {"reduction": red, "beta": 0.5})
    c.add("huber_" + red, "huber", lambda u, v, red=red: F.huber_loss(u, v, reduction=red, delta=0.7),
          [a, b], {"reduction": red, "delta": 0.7})
c.add("smooth_l1_beta1", "smooth_l1", lambda u, v: F.smooth_l1_loss(u, v), [a, b], {"reduction": "mean", "beta": 1.0})
c.add("smooth_l1_beta0", "smooth_l1", lambda u, v: F.smooth_l1_loss(u, v, beta=0.0), [a, b], {"reduction": "mean", "beta": 0.0})
logq = F.log_softmax(r(3, 5), 1)
tp = F.softmax(r(3, 5), 1)
tz = tp.clone()
tz[0, 1] = 0.0
for red in ["mean", "sum", "none", "batchmean"]:
    c.add("kl_div_" + red, "kl_div", lambda u, v, red=red: F.kl_div(u, v, reduction=red), [logq, tp],
          {"reduction": red, "log_target": False})
    c.add("kl_div_log_target_" + red, "kl_div", lambda u, v, red=red: F.kl_div(u, v, reduction=red, log_target=True),
          [logq, F.log_softmax(r(3, 5), 1)], {"reduction": red, "log_target": True})
c.add("kl_div_zero_target", "kl_div", lambda u, v: F.kl_div(u, v, reduction="batchmean"), [logq, NoGrad(tz)],
      {"reduction": "batchmean", "log_target": False})
c.write()
