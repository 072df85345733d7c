"""What the examples' PyTorch twins (tests/examples/twin_*.py) share: minidl's random
streams re-made in Python, so a twin sees the same batches and noise as the example.
  - random_windows: data::random_windows (data/text.h), SplitMix64 offsets;
  - Generator: minidl's default generator (framework/random.cpp): std::mt19937_64,
    uniform() = (next >> 11) * 2^-53, normal() by Box-Muller keeping the spare;
    randn/rand fill float32 tensors element by element as Tensor::randn/rand do.
"""
import math
import os

import torch

M64 = (1 << 64) - 1


def text_path():
    root = os.environ.get("MINIDL_DATA") or os.path.join(os.environ["HOME"], ".cache", "minidl")
    return os.path.join(root, "text", "kjv.txt")


def char_corpus(path=None):
    """(vocab bytes sorted, ids int64 tensor) as data::CharCorpus."""
    raw = open(path or text_path(), "rb").read()
    vocab = sorted(set(raw))
    index = {c: i for i, c in enumerate(vocab)}
    return vocab, torch.tensor([index[c] for c in raw], dtype=torch.int64)


def random_windows(ids, batch, steps, seed, index):
    n = ids.numel()
    rows = []
    for b in range(batch):
        z = (seed + 0x9E3779B97F4A7C15 * (index * batch + b + 1)) & M64
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
        z ^= z >> 31
        rows.append(z % (n - steps))
    data = torch.stack([ids[o:o + steps] for o in rows])
    labels = torch.stack([ids[o + 1:o + steps + 1] for o in rows])
    return data, labels


class MT19937_64:
    def __init__(self, seed):
        self.mt = [0] * 312
        self.mt[0] = seed & M64
        for i in range(1, 312):
            self.mt[i] = (6364136223846793005 * (self.mt[i - 1] ^ (self.mt[i - 1] >> 62)) + i) & M64
        self.i = 312

    def next(self):
        if self.i >= 312:
            mt = self.mt
            for k in range(312):
                y = (mt[k] & 0xFFFFFFFF80000000) | (mt[(k + 1) % 312] & 0x7FFFFFFF)
                v = mt[(k + 156) % 312] ^ (y >> 1)
                if y & 1:
                    v ^= 0xB5026F5AA96619E9
                mt[k] = v
            self.i = 0
        x = self.mt[self.i]
        self.i += 1
        x ^= (x >> 29) & 0x5555555555555555
        x ^= (x << 17) & 0x71D67FFFEDA60000
        x ^= (x << 37) & 0xFFF7EEE000000000
        x ^= x >> 43
        return x & M64


class Generator:
    def __init__(self, seed):
        self.engine = MT19937_64(seed)
        self.spare = None

    def uniform(self):
        return (self.engine.next() >> 11) * 2.0 ** -53

    def normal(self):
        if self.spare is not None:
            s, self.spare = self.spare, None
            return s
        u1 = 0.0
        while u1 == 0.0:
            u1 = self.uniform()
        u2 = self.uniform()
        r, th = math.sqrt(-2.0 * math.log(u1)), 2.0 * math.pi * u2
        self.spare = r * math.sin(th)
        return r * math.cos(th)

    def randn(self, *shape):
        n = math.prod(shape)
        return torch.tensor([self.normal() for _ in range(n)], dtype=torch.float32).reshape(shape)

    def rand(self, *shape, low=0.0, high=1.0):
        n = math.prod(shape)
        return torch.tensor([low + (high - low) * self.uniform() for _ in range(n)],
                            dtype=torch.float32).reshape(shape)
