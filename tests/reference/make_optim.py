#!/usr/bin/python3
"""Reference trajectories of optimizers with parameter groups and a StepLR, and
clip_grad_norm_ results, for tests/optim/test_optim_reference.cpp.

Each optimizer case starts from fixed parameters and feeds fixed random
gradients for a few steps (the scheduler, when given, steps after each); it
records every parameter after every step. Regenerate with Debian's python:
    /usr/bin/python3 tests/reference/make_optim.py
"""
import json
import math
import os

import torch

torch.manual_seed(0)
SHAPES = [(3, 2), (4,), (2, 2)]
STEPS = 5


def flat(t):
    return [float(v) for v in t.detach().flatten().tolist()]


def opt_case(name, kind, defaults, groups, scheduler=None):
    """kind: the C++ class (SGD with momentum is "Momentum"); groups: [(param indices, options)]."""
    params = [torch.randn(s, requires_grad=True) for s in SHAPES]
    grads = [[torch.randn(s) for s in SHAPES] for _ in range(STEPS)]
    init = [flat(p) for p in params]
    cls = {"SGD": torch.optim.SGD, "Momentum": torch.optim.SGD, "Adam": torch.optim.Adam,
           "AdamW": torch.optim.AdamW, "RMSprop": torch.optim.RMSprop}[kind]
    opt = cls([dict(params=[params[i] for i in idx], **o) for idx, o in groups], **defaults)
    sched = torch.optim.lr_scheduler.StepLR(opt, **scheduler) if scheduler else None
    trajectory = []
    for step in range(STEPS):
        for p, g in zip(params, grads[step]):
            p.grad = g.clone()
        opt.step()
        if sched:
            sched.step()
        trajectory.append([flat(p) for p in params])
    return {"name": name, "optimizer": kind, "defaults": defaults,
            "groups": [{"params": idx, "options": o} for idx, o in groups],
            "scheduler": scheduler, "shapes": [list(s) for s in SHAPES], "init": init,
            "grads": [[flat(g) for g in step] for step in grads], "trajectory": trajectory}


def clip_case(name, max_norm, norm_type):
    grads = [torch.randn(s) * 3 for s in SHAPES]
    params = [torch.zeros(s, requires_grad=True) for s in SHAPES]
    for p, g in zip(params, grads):
        p.grad = g.clone()
    total = torch.nn.utils.clip_grad_norm_(params, max_norm, norm_type)
    return {"name": name, "max_norm": max_norm,
            "norm_type": "inf" if math.isinf(norm_type) else norm_type,
            "shapes": [list(s) for s in SHAPES], "grads": [flat(g) for g in grads],
            "total": float(total), "clipped": [flat(p.grad) for p in params]}


cases = [
    opt_case("rmsprop_default", "RMSprop", {"lr": 0.01}, [([0, 1, 2], {})]),
    opt_case("rmsprop_momentum_weight_decay", "RMSprop",
             {"lr": 0.01, "momentum": 0.9, "weight_decay": 0.1}, [([0, 1, 2], {})]),
    opt_case("rmsprop_centered", "RMSprop", {"lr": 0.02, "alpha": 0.9, "centered": True},
             [([0, 1, 2], {})]),
    opt_case("rmsprop_centered_momentum", "RMSprop",
             {"lr": 0.01, "centered": True, "momentum": 0.5, "eps": 1e-6}, [([0, 1, 2], {})]),
    opt_case("rmsprop_groups", "RMSprop", {"lr": 0.01},
             [([0], {}), ([1, 2], {"lr": 0.05, "centered": True, "momentum": 0.3, "alpha": 0.95})],
             {"step_size": 2, "gamma": 0.5}),
    opt_case("momentum_groups_steplr", "Momentum", {"lr": 0.1, "momentum": 0.9},
             [([0, 2], {}), ([1], {"lr": 0.01, "weight_decay": 0.1, "nesterov": True})],
             {"step_size": 2, "gamma": 0.5}),
    opt_case("sgd_groups_steplr", "SGD", {"lr": 0.1},
             [([0], {"weight_decay": 0.01}), ([1, 2], {"lr": 0.3})], {"step_size": 3, "gamma": 0.1}),
    opt_case("adam_groups_steplr", "Adam", {"lr": 0.01},
             [([0, 1], {}), ([2], {"lr": 0.05, "betas": (0.8, 0.99), "weight_decay": 0.01, "eps": 1e-6})],
             {"step_size": 2, "gamma": 0.5}),
    opt_case("adamw_groups", "AdamW", {"lr": 0.01},
             [([0], {"weight_decay": 0.1}), ([1, 2], {"lr": 0.02})]),
]
clips = [
    clip_case("clip_norm2", 1.0, 2.0),
    clip_case("clip_norm1", 2.0, 1.0),
    clip_case("clip_norm3", 1.5, 3.0),
    clip_case("clip_norm_inf", 0.5, math.inf),
    clip_case("clip_not_needed", 1000.0, 2.0),
]
# maximize (PyTorch 1.13's every optimizer here): the gradient negated; after the
# clipping cases, so that the cases above keep their random numbers
cases += [
    opt_case("sgd_maximize", "SGD", {"lr": 0.1, "weight_decay": 0.01, "maximize": True},
             [([0, 1, 2], {})]),
    opt_case("momentum_maximize_nesterov", "Momentum",
             {"lr": 0.05, "momentum": 0.9, "nesterov": True, "weight_decay": 0.1},
             [([0, 1], {"maximize": True}), ([2], {})]),
    opt_case("momentum_maximize_dampening", "Momentum",
             {"lr": 0.05, "momentum": 0.5, "dampening": 0.3, "maximize": True}, [([0, 1, 2], {})]),
    opt_case("adam_maximize", "Adam", {"lr": 0.01, "weight_decay": 0.1, "maximize": True},
             [([0, 1, 2], {})], {"step_size": 2, "gamma": 0.5}),
    opt_case("adamw_maximize", "AdamW", {"lr": 0.01, "maximize": True},
             [([0, 2], {}), ([1], {"maximize": False, "weight_decay": 0.2})]),
    opt_case("rmsprop_maximize_centered_momentum", "RMSprop",
             {"lr": 0.01, "centered": True, "momentum": 0.5, "weight_decay": 0.1,
              "maximize": True}, [([0, 1, 2], {})]),
    opt_case("rmsprop_maximize", "RMSprop", {"lr": 0.01, "maximize": True}, [([0, 1, 2], {})]),
]
for c in cases:  # JSON: betas as a list
    for g in c["groups"]:
        if "betas" in g["options"]:
            g["options"]["betas"] = list(g["options"]["betas"])
out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "optim.json")
with open(out, "w") as f:
    json.dump({"optimizers": cases, "clip_grad_norm": clips}, f, indent=1)
print(f"wrote {len(cases)} optimizer and {len(clips)} clipping cases to {out}")
