#!/usr/bin/python3
"""dcgan_mnist's PyTorch twin (examples/dcgan_mnist.cpp): the same generator and
discriminator at width 8 (the weights stay small enough to keep in the repository),
PyTorch's initial weights (torch.manual_seed(0)) written to
tests/reference/dcgan_mnist_init.safetensors for the example's --init, the first
batches of MNIST in file order, and the example's noise and smoothed targets re-made
from minidl's generator (twin_common.Generator: seeded 0, advanced past the draws that
initialised the convolutions' weights, then the fixed noise). Each step's
discriminator and generator losses go to tests/reference/dcgan_mnist_losses.json.
    /usr/bin/python3 tests/examples/twin_dcgan_mnist.py"""
import gzip
import json
import os
import sys

import numpy as np
import torch
from torch import nn
import torch.nn.functional as F

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.join(here, "..", "..")
sys.path.insert(0, os.path.join(here, "..", "reference"))
sys.path.insert(0, here)
import safetensors_io  # noqa: E402
import twin_common  # noqa: E402

W, NOISE, BATCH, STEPS, LR = 8, 100, 16, 4, 2e-4


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.ConvTranspose2d(NOISE, 4 * W, 4, bias=False)
        self.bn1 = nn.BatchNorm2d(4 * W)
        self.conv2 = nn.ConvTranspose2d(4 * W, 2 * W, 3, 2, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(2 * W)
        self.conv3 = nn.ConvTranspose2d(2 * W, W, 4, 2, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(W)
        self.conv4 = nn.ConvTranspose2d(W, 1, 4, 2, 1, bias=False)

    def forward(self, z):
        h = F.relu(self.bn1(self.conv1(z)))
        h = F.relu(self.bn2(self.conv2(h)))
        h = F.relu(self.bn3(self.conv3(h)))
        return torch.tanh(self.conv4(h))


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, W, 4, 2, 1, bias=False)
        self.conv2 = nn.Conv2d(W, 2 * W, 4, 2, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(2 * W)
        self.conv3 = nn.Conv2d(2 * W, 4 * W, 4, 2, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(4 * W)
        self.conv4 = nn.Conv2d(4 * W, 1, 3, 1, 0, bias=False)

    def forward(self, x):
        h = F.leaky_relu(self.conv1(x), 0.2)
        h = F.leaky_relu(self.bn2(self.conv2(h)), 0.2)
        h = F.leaky_relu(self.bn3(self.conv3(h)), 0.2)
        return torch.sigmoid(self.conv4(h)).reshape(-1)


def idx(path):
    with gzip.open(path) as f:
        raw = f.read()
    dims = raw[3]
    shape = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(raw, np.uint8, offset=4 + 4 * dims).reshape(shape)


torch.set_num_threads(1)
torch.manual_seed(0)
gen, disc = Generator(), Discriminator()
state = {"generator." + k: v for k, v in gen.state_dict().items()}
state.update({"discriminator." + k: v for k, v in disc.state_dict().items()})
safetensors_io.save(os.path.join(root, "tests", "reference", "dcgan_mnist_init.safetensors"), state)

noise = twin_common.Generator(0)
for m in list(gen.modules()) + list(disc.modules()):  # the example's he_uniform draws, one per weight
    if isinstance(m, (nn.Conv2d, nn.ConvTranspose2d)):
        for _ in range(m.weight.numel()):
            noise.uniform()
noise.randn(64, NOISE, 1, 1)  # the fixed noise of the PNGs

mnist = os.path.join(os.environ.get("MINIDL_DATA") or os.path.join(os.environ["HOME"], ".cache", "minidl"), "mnist")
images = torch.tensor(idx(os.path.join(mnist, "train-images-idx3-ubyte.gz"))[:BATCH * STEPS], dtype=torch.float32)
images = (images * (2.0 / 255) - 1).unsqueeze(1)
g_opt = torch.optim.Adam(gen.parameters(), lr=LR, betas=(0.5, 0.999))
d_opt = torch.optim.Adam(disc.parameters(), lr=LR, betas=(0.5, 0.999))
losses = []
for s in range(STEPS):
    x = images[s * BATCH:(s + 1) * BATCH]
    real_target = noise.rand(BATCH, low=0.8, high=1.0)
    fake = gen(noise.randn(BATCH, NOISE, 1, 1))
    d_loss = F.binary_cross_entropy(disc(x), real_target) + F.binary_cross_entropy(disc(fake.detach()), torch.zeros(BATCH))
    d_opt.zero_grad()
    d_loss.backward()
    d_opt.step()
    g_loss = F.binary_cross_entropy(disc(fake), torch.ones(BATCH))
    g_opt.zero_grad()
    g_loss.backward()
    g_opt.step()
    losses += [d_loss.item(), g_loss.item()]

args = ["--init", "tests/reference/dcgan_mnist_init.safetensors", "--width", str(W), "--no-shuffle", "--batch",
        str(BATCH), "--steps", str(STEPS), "--epochs", "1", "--log-every", "1", "--threads", "1", "--out", "/tmp"]
with open(os.path.join(root, "tests", "reference", "dcgan_mnist_losses.json"), "w") as f:
    json.dump({"example": "dcgan_mnist", "torch": torch.__version__,
               "runs": [{"what": "PyTorch's initial weights", "args": args, "names": ["d_loss", "g_loss"],
                         "losses": losses}]}, f, indent=1)
print("dcgan_mnist twin:", ["%.6f" % v for v in losses])
