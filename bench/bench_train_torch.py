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
the optimizers' steps (Adam and AdamW with capturable=True) captured once
(torch.cuda.graph, after a warm-up on a side stream) and replayed each step, as
bench_train --graph on does minidl's.

--model resnet|dcgan|char_lstm|tiny_gpt: the model zoo's steps as bench_train's
(bench/zoo_models.h, the same layers, optimizers and fixed random batch), for
the GPU machine, where bench_train_torch.cpp's libtorch is not built.
"""
import argparse
import math
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


# ---- the model zoo, as bench/zoo_models.h ----

VOCAB = 62


class BasicBlock(nn.Module):
    # x [N, IN, H, W] -> [N, OUT, H/stride, W/stride]
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = (nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
                         if stride != 1 or cin != cout else nn.Identity())

    def forward(self, x):
        return F.relu(self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x))))) + self.shortcut(x))


class ResNet8(nn.Module):
    # x [N, 1, 28, 28] -> logits [N, 10]
    def __init__(self):
        super().__init__()
        self.stem, self.bn = nn.Conv2d(1, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16)
        self.stages = nn.Sequential(BasicBlock(16, 16, 1), BasicBlock(16, 32, 2), BasicBlock(32, 64, 2))
        self.fc = nn.Linear(64, 10)

    def forward(self, x):
        return self.fc(self.stages(F.relu(self.bn(self.stem(x)))).mean((2, 3)))


def generator(w=64):
    # noise [N, 100, 1, 1] -> images [N, 1, 28, 28]
    return nn.Sequential(
        nn.ConvTranspose2d(100, 4 * w, 4, bias=False), nn.BatchNorm2d(4 * w), nn.ReLU(),
        nn.ConvTranspose2d(4 * w, 2 * w, 3, 2, 1, bias=False), nn.BatchNorm2d(2 * w), nn.ReLU(),
        nn.ConvTranspose2d(2 * w, w, 4, 2, 1, bias=False), nn.BatchNorm2d(w), nn.ReLU(),
        nn.ConvTranspose2d(w, 1, 4, 2, 1, bias=False), nn.Tanh())


def discriminator(w=64):
    # images [N, 1, 28, 28] -> probability of being real [N]
    return nn.Sequential(
        nn.Conv2d(1, w, 4, 2, 1, bias=False), nn.LeakyReLU(0.2),
        nn.Conv2d(w, 2 * w, 4, 2, 1, bias=False), nn.BatchNorm2d(2 * w), nn.LeakyReLU(0.2),
        nn.Conv2d(2 * w, 4 * w, 4, 2, 1, bias=False), nn.BatchNorm2d(4 * w), nn.LeakyReLU(0.2),
        nn.Conv2d(4 * w, 1, 3, 1, 0, bias=False), nn.Sigmoid(), nn.Flatten(0))


class CharLSTM(nn.Module):
    # ids [B, T] -> logits [B, T, 62]; embedding 64, LSTM 2 x 128
    def __init__(self):
        super().__init__()
        self.encoder, self.rnn = nn.Embedding(VOCAB, 64), nn.LSTM(64, 128, 2, batch_first=True)
        self.decoder = nn.Linear(128, VOCAB)

    def forward(self, ids):
        return self.decoder(self.rnn(self.encoder(ids))[0])


class GPTBlock(nn.Module):
    # x [B, T, 64] -> [B, T, 64]: 4 causal heads, then the 4x MLP with GELU
    def __init__(self):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(64), nn.LayerNorm(64)
        self.c_attn, self.attn_proj = nn.Linear(64, 192), nn.Linear(64, 64)
        self.c_fc, self.c_proj = nn.Linear(64, 256), nn.Linear(256, 64)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = (m.view(b, t, 4, c // 4).transpose(1, 2) for m in self.c_attn(self.ln_1(x)).split(c, 2))
        if hasattr(F, "scaled_dot_product_attention"):  # PyTorch 2
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:  # 1.13, as nanoGPT writes it out
            att = (q @ k.transpose(-2, -1)) / math.sqrt(c // 4)
            att = att.masked_fill(torch.ones(t, t, device=x.device).tril() == 0, float("-inf"))
            y = F.softmax(att, dim=-1) @ v
        h = x + self.attn_proj(y.transpose(1, 2).reshape(b, t, c))
        return h + self.c_proj(F.gelu(self.c_fc(self.ln_2(h))))


class GPT(nn.Module):
    # ids [B, T] -> logits [B, T, 62]: 2 blocks, block size 64, untied head
    def __init__(self):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(VOCAB, 64), nn.Embedding(64, 64)
        self.blocks = nn.Sequential(GPTBlock(), GPTBlock())
        self.ln_f, self.lm_head = nn.LayerNorm(64), nn.Linear(64, VOCAB, bias=False)

    def forward(self, ids):
        pos = torch.arange(ids.shape[1], device=ids.device)
        return self.lm_head(self.ln_f(self.blocks(self.wte(ids) + self.wpe(pos))))


def supervised_step(net, opt, inputs, targets, clip=False):
    """A step of mean cross entropy on logits [..., C] against targets [...], with
    clip_grad_norm_(1.0) first when `clip` (the text models)."""
    def step():
        loss = F.cross_entropy(net(inputs).flatten(0, -2), targets.flatten())
        opt.zero_grad()
        loss.backward()
        if clip:
            torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        opt.step()
        return loss
    return step


def zoo_step(model, batch, dev, capturable=False):
    """The model's training step on one fixed random batch, as zoo::make_workload's,
    and its modules. capturable: Adam's and AdamW's, for a CUDA graph."""
    if model == "resnet":
        net = ResNet8().to(dev)
        x, labels = torch.randn(batch, 1, 28, 28, device=dev), torch.randint(0, 10, [batch], device=dev)
        opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
        return supervised_step(net, opt, x, labels), [net]
    if model == "dcgan":
        g, d = generator().to(dev), discriminator().to(dev)
        g_opt = torch.optim.Adam(g.parameters(), lr=2e-4, betas=(0.5, 0.999), capturable=capturable)
        d_opt = torch.optim.Adam(d.parameters(), lr=2e-4, betas=(0.5, 0.999), capturable=capturable)
        real = torch.rand(batch, 1, 28, 28, device=dev) * 2 - 1
        noise = torch.randn(batch, 100, 1, 1, device=dev)
        real_target = torch.rand(batch, device=dev) * 0.2 + 0.8
        zeros, ones = torch.zeros(batch, device=dev), torch.ones(batch, device=dev)

        def step():
            fake = g(noise)
            d_loss = F.binary_cross_entropy(d(real), real_target) + F.binary_cross_entropy(d(fake.detach()), zeros)
            d_opt.zero_grad()
            d_loss.backward()
            d_opt.step()
            g_loss = F.binary_cross_entropy(d(fake), ones)
            g_opt.zero_grad()
            g_loss.backward()
            g_opt.step()
            return d_loss
        return step, [g, d]
    seq = 35 if model == "char_lstm" else 64
    net = (CharLSTM() if model == "char_lstm" else GPT()).to(dev)
    ids = torch.randint(0, VOCAB, [batch, seq], device=dev)
    targets = torch.randint(0, VOCAB, [batch, seq], device=dev)
    if model == "char_lstm":
        opt = torch.optim.Adam(net.parameters(), lr=3e-3, capturable=capturable)
    else:
        decay = [p for p in net.parameters() if p.dim() >= 2]
        no_decay = [p for p in net.parameters() if p.dim() < 2]
        opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                                 {"params": no_decay, "weight_decay": 0.0}], lr=3e-3, betas=(0.9, 0.95),
                                capturable=capturable)
    return supervised_step(net, opt, ids, targets, clip=True), [net]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", choices=["lenet", "mlp", "resnet", "dcgan", "char_lstm", "tiny_gpt"],
                   default="lenet")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--graph", action="store_true", help="replay a captured whole step (CUDA)")
    p.add_argument("--no-tf32", action="store_true",
                   help="cuDNN convolutions without TF32 (PyTorch allows it by default; minidl not)")
    p.add_argument("--tf32", action="store_true",
                   help="TF32 in matmuls too, as minidl's bench_train --tf32 on")
    a = p.parse_args()
    if a.graph and a.device != "cuda":
        p.error("--graph needs --device cuda")
    zoo = a.model not in ("lenet", "mlp")
    if min(a.batch, a.steps, a.warmup, a.threads) < 1:
        p.error("--batch, --steps, --warmup and --threads must be >= 1")
    if a.device == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda: PyTorch sees no CUDA device")
    torch.set_num_threads(a.threads)
    if a.tf32 and a.no_tf32:
        p.error("--tf32 and --no-tf32 exclude each other")
    torch.backends.cudnn.allow_tf32 = not a.no_tf32
    torch.backends.cuda.matmul.allow_tf32 = a.tf32
    torch.manual_seed(0)
    dev = torch.device(a.device)
    sync = torch.cuda.synchronize if a.device == "cuda" else (lambda: None)
    if zoo:
        step, nets = zoo_step(a.model, a.batch, dev, capturable=a.graph)
    else:
        shape = [a.batch, 1, 28, 28] if a.model == "lenet" else [a.batch, 784]
        x = torch.randn(shape, device=dev)
        labels = torch.randint(0, 10, [a.batch], device=dev)
        net = (LeNet5() if a.model == "lenet" else MLP()).to(dev)
        opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
        step, nets = supervised_step(net, opt, x, labels), [net]

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
        for net in nets:  # the graph's backward makes the gradients in its own pool
            net.zero_grad(set_to_none=True)
        with torch.cuda.graph(graph):
            captured = step()

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
          f"cudnn_tf32={torch.backends.cudnn.allow_tf32} matmul_tf32={torch.backends.cuda.matmul.allow_tf32} "
          f"steps={a.steps} warmup={a.warmup} threads={a.threads} device={a.device}")
    print(f"# loss first={first:.4f} last={loss.item():.4f}")
    print(f"samples/s={statistics.median(rates):.1f}")
    print(f"peak_rss_mb={resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.1f}")
    if a.device == "cuda":
        print(f"peak_device_mb={torch.cuda.max_memory_allocated() / 1048576:.1f}")


if __name__ == "__main__":
    main()
