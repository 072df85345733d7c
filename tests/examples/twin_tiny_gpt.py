#!/usr/bin/python3
"""tiny_gpt's PyTorch twin (examples/tiny_gpt.cpp): nanoGPT's architecture and names at
2 layers x 4 heads x 64 channels (attention written out: PyTorch 1.13 has no
scaled_dot_product_attention; the head not tied to the embedding, as in the example),
the same SplitMix64 windows of the King James Bible, AdamW in nanoGPT's two groups,
clip_grad_norm_. Two runs, the weights loaded both ways:
  - PyTorch's initial weights (torch.manual_seed(0)), written to
    tests/reference/tiny_gpt_init.safetensors (the example's --init);
  - minidl's initial weights (--seed 0), saved by the example, loaded by name (strict).
The losses go to tests/reference/tiny_gpt_losses.json (tests/examples/check_twins.py).
    /usr/bin/python3 tests/examples/twin_tiny_gpt.py build/bin"""
import json
import math
import os
import subprocess
import sys
import tempfile

import torch
from torch import nn
import torch.nn.functional as F

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.join(here, "..", "..")
sys.path.insert(0, os.path.join(here, "..", "reference"))
sys.path.insert(0, here)
import safetensors_io  # noqa: E402
import twin_common  # noqa: E402

BATCH, BLOCK, LAYERS, HEADS, EMBED, STEPS, LR, WD, CLIP = 8, 64, 2, 4, 64, 5, 1e-3, 0.1, 1.0


class CausalSelfAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.c_attn = nn.Linear(EMBED, 3 * EMBED)
        self.c_proj = nn.Linear(EMBED, EMBED)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.c_attn(x).split(c, dim=2)
        q, k, v = (m.view(b, t, HEADS, c // HEADS).transpose(1, 2) for m in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(c // HEADS))
        att = att.masked_fill(torch.tril(torch.ones(t, t)) == 0, float("-inf"))
        y = F.softmax(att, dim=-1) @ v
        return self.c_proj(y.transpose(1, 2).contiguous().view(b, t, c))


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.c_fc = nn.Linear(EMBED, 4 * EMBED)
        self.c_proj = nn.Linear(4 * EMBED, EMBED)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1, self.attn, self.ln_2, self.mlp = nn.LayerNorm(EMBED), CausalSelfAttention(), nn.LayerNorm(EMBED), MLP()

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, vocab):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(wte=nn.Embedding(vocab, EMBED), wpe=nn.Embedding(BLOCK, EMBED),
                                              h=nn.ModuleList([Block() for _ in range(LAYERS)]),
                                              ln_f=nn.LayerNorm(EMBED)))
        self.lm_head = nn.Linear(EMBED, vocab, bias=False)

    def forward(self, ids):
        x = self.transformer.wte(ids) + self.transformer.wpe(torch.arange(ids.size(1)))
        for block in self.transformer.h:
            x = block(x)
        return self.lm_head(self.transformer.ln_f(x))


def train(net, train_ids):
    decay = [p for p in net.parameters() if p.dim() >= 2]
    no_decay = [p for p in net.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": WD}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=LR, betas=(0.9, 0.95))
    losses = []
    for step in range(STEPS):
        x, y = twin_common.random_windows(train_ids, BATCH, BLOCK, 0, step)
        logits = net(x)
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), CLIP)
        opt.step()
        losses.append(loss.item())
    return losses


torch.set_num_threads(1)
vocab, ids = twin_common.char_corpus()
train_ids = ids[:ids.numel() * 9 // 10]
common = ["--steps", str(STEPS), "--batch", str(BATCH), "--lr", str(LR), "--log-every", "1", "--sample", "0", "--threads", "1"]
runs = []

torch.manual_seed(0)
net = GPT(len(vocab))
init = os.path.join(root, "tests", "reference", "tiny_gpt_init.safetensors")
safetensors_io.save(init, net.state_dict())
runs.append({"what": "PyTorch's initial weights", "args": ["--init", "tests/reference/tiny_gpt_init.safetensors"] + common,
             "losses": train(net, train_ids)})

with tempfile.TemporaryDirectory() as tmp:
    saved = os.path.join(tmp, "init.safetensors")
    subprocess.run([os.path.join(sys.argv[1], "tiny_gpt"), "--steps", "0", "--sample", "0", "--save", saved],
                   check=True, capture_output=True)
    state = {k[len("net."):]: v for k, v in safetensors_io.load(saved).items() if k.startswith("net.")}
net = GPT(len(vocab))
net.load_state_dict(state, strict=True)
runs.append({"what": "minidl's initial weights", "args": common, "losses": train(net, train_ids)})

with open(os.path.join(root, "tests", "reference", "tiny_gpt_losses.json"), "w") as f:
    json.dump({"example": "tiny_gpt", "torch": torch.__version__, "runs": runs}, f, indent=1)
for r in runs:
    print("tiny_gpt twin,", r["what"], ["%.6f" % v for v in r["losses"]])
