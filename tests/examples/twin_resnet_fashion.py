#!/usr/bin/python3
"""resnet_fashion's PyTorch twin: the same ResNet-8 (module names match minidl's
state_dict names), initial weights from torch.manual_seed(0) written to
tests/reference/resnet_fashion_init.safetensors, the first STEPS batches of
Fashion-MNIST in file order, SGD with momentum and weight decay as the example
uses; the losses go to tests/reference/resnet_fashion_losses.json, which
tests/examples/check_twins.py compares with the example's (1e-4 relative).
Run with Debian's python3-torch: /usr/bin/python3 tests/examples/twin_resnet_fashion.py"""
import gzip
import json
import os
import sys

import numpy as np
import torch
from torch import nn
import torch.nn.functional as F

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "reference"))
import safetensors_io  # noqa: E402

# lr 0.01, not the example's 0.05: at 0.05 the first steps of a fresh batch-normalized
# net amplify float rounding (the two agree to 1e-6 at lr 0.001, drift to 6e-4 by step 7 at 0.05)
BATCH, STEPS, LR, MOMENTUM, WD = 32, 8, 0.01, 0.9, 5e-4
DATA = "/usr/share/datasets/fashion-mnist"


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = None
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        h = F.relu(self.bn1(self.conv1(x)))
        h = self.bn2(self.conv2(h))
        return F.relu(h + (self.shortcut(x) if self.shortcut is not None else x))


class ResNet8(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(1, 16, 3, 1, 1, bias=False)
        self.bn = nn.BatchNorm2d(16)
        self.stage1, self.stage2, self.stage3 = BasicBlock(16, 16, 1), BasicBlock(16, 32, 2), BasicBlock(32, 64, 2)
        self.fc = nn.Linear(64, 10)

    def forward(self, x):
        h = F.relu(self.bn(self.stem(x)))
        return self.fc(self.stage3(self.stage2(self.stage1(h))).mean((2, 3)))


def idx(path):
    with gzip.open(path) as f:
        raw = f.read()
    dims = raw[3]
    shape = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(raw, np.uint8, offset=4 + 4 * dims).reshape(shape)


torch.manual_seed(0)
torch.set_num_threads(1)
net = ResNet8()
ref = os.path.join(here, "..", "reference")
safetensors_io.save(os.path.join(ref, "resnet_fashion_init.safetensors"), net.state_dict())
images = torch.tensor(idx(os.path.join(DATA, "train-images-idx3-ubyte.gz"))[:BATCH * STEPS], dtype=torch.float32)
labels = torch.tensor(idx(os.path.join(DATA, "train-labels-idx1-ubyte.gz"))[:BATCH * STEPS], dtype=torch.int64)
images = ((images * (1.0 / 255)) - 0.2860) / 0.3530
opt = torch.optim.SGD(net.parameters(), lr=LR, momentum=MOMENTUM, weight_decay=WD)
losses = []
for s in range(STEPS):
    x = images[s * BATCH:(s + 1) * BATCH].unsqueeze(1)
    loss = F.cross_entropy(net(x), labels[s * BATCH:(s + 1) * BATCH])
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
args = ["--init", "tests/reference/resnet_fashion_init.safetensors", "--no-shuffle", "--batch", str(BATCH),
        "--steps", str(STEPS), "--lr", str(LR), "--log-every", "1", "--threads", "1"]
with open(os.path.join(ref, "resnet_fashion_losses.json"), "w") as f:
    json.dump({"example": "resnet_fashion", "torch": torch.__version__,
               "runs": [{"what": "PyTorch's initial weights", "args": args, "losses": losses}]}, f, indent=1)
print("resnet_fashion twin:", ["%.6f" % v for v in losses])
