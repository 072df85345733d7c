#!/usr/bin/python3
"""PyTorch twin of build/bin/lenet_mnist, for checking minidl against PyTorch.

Same network, data, transforms, optimizer and batch order; initial weights
from a safetensors file written by minidl (`lenet_mnist --steps 0 --save
w0.safetensors`). With --no-shuffle on both sides the two runs see the same
batches, so their LossMonitor lines can be compared step by step:

  build/bin/lenet_mnist --steps 0 --save /tmp/w0.safetensors
  build/bin/lenet_mnist --init /tmp/w0.safetensors --no-shuffle --epochs 1
  /usr/bin/python3 tools/lenet_torch_reference.py --init /tmp/w0.safetensors --no-shuffle --epochs 1

Needs Debian's python3-torch (apt-get install python3-torch).
"""
import argparse, gzip, json, os, struct

import torch
import torch.nn as nn
import torch.nn.functional as F


def read_idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    ndims = data[3]
    dims = struct.unpack(">" + "I" * ndims, data[4:4 + 4 * ndims])
    return torch.frombuffer(bytearray(data[4 + 4 * ndims:]), dtype=torch.uint8).reshape(dims)


def find(directory, stem):
    for name in (stem + ".gz", stem):
        if os.path.exists(os.path.join(directory, name)):
            return os.path.join(directory, name)
    raise FileNotFoundError(stem)


def load_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        t = torch.frombuffer(bytearray(raw[8 + n + begin:8 + n + end]), dtype=torch.float32)
        out[name] = t.reshape(info["shape"])
    return out


class LeNet5(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, 5, padding=2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1, self.fc2, self.fc3 = nn.Linear(400, 120), nn.Linear(120, 84), nn.Linear(84, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2).flatten(1)
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--data", default=os.path.join(os.environ.get("MINIDL_DATA", os.path.expanduser("~/.cache/minidl")), "mnist"))
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--log-every", type=int, default=100)
    p.add_argument("--init")
    p.add_argument("--no-shuffle", action="store_true")
    a = p.parse_args()
    torch.manual_seed(a.seed)
    torch.set_num_threads(1)

    def load(prefix):
        x = read_idx(find(a.data, prefix + "-images-idx3-ubyte")).float().unsqueeze(1)
        y = read_idx(find(a.data, prefix + "-labels-idx1-ubyte")).long()
        return ((x / 255) - 0.1307) / 0.3081, y

    xtr, ytr = load("train")
    xte, yte = load("t10k")
    net = LeNet5()
    if a.init:
        net.load_state_dict(load_safetensors(a.init))
    opt = torch.optim.SGD(net.parameters(), lr=a.lr, momentum=0.9)
    for epoch in range(1, a.epochs + 1):
        order = torch.arange(len(xtr)) if a.no_shuffle else torch.randperm(len(xtr))
        for step, i in enumerate(range(0, len(xtr), a.batch), 1):
            idx = order[i:i + a.batch]
            opt.zero_grad()
            loss = F.cross_entropy(net(xtr[idx]), ytr[idx])
            loss.backward()
            opt.step()
            if step % a.log_every == 0:
                print(f"epoch: {epoch} step: {step}, loss is {loss.item()!r}")
    with torch.no_grad():
        acc = (net(xte).argmax(1) == yte).float().mean().item()
    print(f"test accuracy: {acc:.4f}")


if __name__ == "__main__":
    main()
