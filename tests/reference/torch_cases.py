#!/usr/bin/python3
"""Reference cases from PyTorch for tests/torch_reference.h.

Each tests/reference/make_<group>.py builds a Cases("<group>"), adds cases and
writes tests/reference/<group>.json; the C++ suites read that file and run
without PyTorch. A case holds its inputs, the outputs of the op, random
cotangents r_k and the gradients of sum_k(sum(out_k * r_k)) with respect to the
inputs that require them. Regenerate with Debian's python3-torch (1.13):
    /usr/bin/python3 tests/reference/make_<group>.py   (Debian's python, not a pyenv one)
"""
import json
import os

import torch

_DTYPES = {torch.float32: "float32", torch.int64: "int64", torch.int32: "int32"}


def _tensor(t):
    t = t.detach().contiguous()
    return {"shape": list(t.shape), "dtype": _DTYPES[t.dtype],
            "data": [float(v) if t.is_floating_point() else int(v) for v in t.flatten().tolist()]}


class Cases:
    def __init__(self, group, seed=0):
        self.group = group
        self.cases = []
        torch.manual_seed(seed)

    def add(self, name, op, fn, inputs, attrs=None):
        """name: unique; op: the C++ side's key; fn(*inputs) -> tensor or tuple of tensors;
        float32 inputs get gradients (pass x.detach() wrapped as NoGrad(x) to opt out)."""
        assert all(c["name"] != name for c in self.cases), name
        ts, wants = [], []
        for x in inputs:
            no_grad = isinstance(x, NoGrad)
            t = (x.t if no_grad else x).detach().clone()
            want = t.dtype == torch.float32 and not no_grad
            ts.append(t.requires_grad_(want))
            wants.append(want)
        outs = fn(*ts)
        outs = list(outs) if isinstance(outs, (tuple, list)) else [outs]
        cots = [torch.randn_like(o) if o.dtype == torch.float32 else None for o in outs]
        loss = sum((o * c).sum() for o, c in zip(outs, cots) if c is not None and o.requires_grad)
        grads = [None] * len(ts)
        if torch.is_tensor(loss) and loss.requires_grad:
            need = [t for t, w in zip(ts, wants) if w]
            got = torch.autograd.grad(loss, need, allow_unused=True)
            it = iter(got)
            grads = [(lambda g, t: torch.zeros_like(t) if g is None else g)(next(it), t) if w else None
                     for t, w in zip(ts, wants)]
        self.cases.append({
            "name": name, "op": op, "attrs": attrs or {},
            "inputs": [dict(_tensor(t), requires_grad=w) for t, w in zip(ts, wants)],
            "outputs": [_tensor(o) for o in outs],
            "cotangents": [None if c is None else _tensor(c) for c in cots],
            "grads": [None if g is None else _tensor(g) for g in grads],
        })

    def write(self):
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), self.group + ".json")
        with open(path, "w") as f:
            json.dump({"generator": "tests/reference/make_%s.py" % self.group,
                       "torch": torch.__version__, "cases": self.cases}, f, separators=(",", ":"))
            f.write("\n")
        print("%s: %d cases -> %s" % (self.group, len(self.cases), path))


class NoGrad:
    """An input that takes no gradient (masks, targets given as floats)."""
    def __init__(self, t):
        self.t = t
