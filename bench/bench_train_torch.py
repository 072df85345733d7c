#!/usr/bin/python3
"""PyTorch eager's training throughput, the Python twin of bench_train.

The same step as bench_train and bench_train_torch (C++): one fixed random
batch (inputs [B, 1, 28, 28] for lenet, [B, 784] for mlp; labels uniform in
0..9), W untimed then N timed steps of Momentum SGD (lr 0.01, momentum 0.9)
on cross entropy, in about ten chunks; prints `samples/s=R` (the median chunk
rate), `peak_rss_mb=M` and, on a GPU, `peak_device_mb=D` (the most bytes
tensors held after the warm-up, torch.cuda.max_memory_allocated). Each chunk ends with a device
synchronisation, as bench_train's do. This is PyTorch as its users run it
(Python, eager); it is the twin for --device cuda, where the C++ twin would
need a libtorch built for the GPU:

  /usr/bin/python3 bench/bench_train_torch.py --model lenet --batch 64 --threads 1
  python3 bench/bench_train_torch.py --device cuda --model lenet --batch 64   # GPU machine

--graph (CUDA) times PyTorch's whole-step CUDA graph instead: forward, backward and
the optimizer's step captured once (torch.cuda.graph, after a warm-up on a side
stream) and replayed each step, as bench_train --graph on does minidl's.
"""
import argparse
import os
import resource
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
from lenet_torch_reference import LeNet5  # noqa: E402  x [B, 1, 28, 28] -> logits [B, 10]


class MLP(nn.Module):
    # x [B, 784] -> logits [B, 10]
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(784, 512), nn.Linear(512, 512), nn.Linear(512, 10)

    def forward(self, x):
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", choices=["lenet", "mlp"], default="lenet")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--graph", action="store_true", help="replay a captured whole step (CUDA)")
    p.add_argument("--no-tf32", action="store_true",
                   help="cuDNN convolutions without TF32 (PyTorch allows it by default; minidl not)")
    a = p.parse_args()
    if a.graph and a.device != "cuda":
        p.error("--graph needs --device cuda")
    if min(a.batch, a.steps, a.warmup, a.threads) < 1:
        p.error("--batch, --steps, --warmup and --threads must be >= 1")
    if a.device == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda: PyTorch sees no CUDA device")
    torch.set_num_threads(a.threads)
    torch.backends.cudnn.allow_tf32 = not a.no_tf32
    torch.manual_seed(0)
    dev = torch.device(a.device)
    sync = torch.cuda.synchronize if a.device == "cuda" else (lambda: None)
    shape = [a.batch, 1, 28, 28] if a.model == "lenet" else [a.batch, 784]
    x = torch.randn(shape, device=dev)
    labels = torch.randint(0, 10, [a.batch], device=dev)
    net = (LeNet5() if a.model == "lenet" else MLP()).to(dev)
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)

    def step():
        opt.zero_grad()
        loss = F.cross_entropy(net(x), labels)
        loss.backward()
        opt.step()
        return loss

    first = step().item()
    for _ in range(1, a.warmup):
        step()
    sync()
    if a.graph:  # capture one whole step; each later step replays it
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                step()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        opt.zero_grad(set_to_none=True)
        with torch.cuda.graph(graph):
            captured = F.cross_entropy(net(x), labels)
            captured.backward()
            opt.step()

        def step():  # noqa: F811  the replayed step
            graph.replay()
            return captured

        for _ in range(a.warmup):
            step()
        sync()
    if a.device == "cuda":
        torch.cuda.reset_peak_memory_stats()  # the steady state's peak, as bench_train's
    chunk = max(1, a.steps // 10)
    rates, done, loss = [], 0, None
    while done < a.steps:
        n = min(chunk, a.steps - done)
        t0 = time.perf_counter()
        for _ in range(n):
            loss = step()
        sync()
        rates.append(n * a.batch / (time.perf_counter() - t0))
        done += n
    print(f"# pytorch {torch.__version__} (python, {'cuda graph' if a.graph else 'eager'}) model={a.model} batch={a.batch} "
          f"cudnn_tf32={torch.backends.cudnn.allow_tf32} "
          f"steps={a.steps} warmup={a.warmup} threads={a.threads} device={a.device}")
    print(f"# loss first={first:.4f} last={loss.item():.4f}")
    print(f"samples/s={statistics.median(rates):.1f}")
    print(f"peak_rss_mb={resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.1f}")
    if a.device == "cuda":
        print(f"peak_device_mb={torch.cuda.max_memory_allocated() / 1048576:.1f}")


if __name__ == "__main__":
    main()
