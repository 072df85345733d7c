#!/usr/bin/python3
"""char_lstm's PyTorch twin (examples/char_lstm.cpp): PyTorch's word_language_model shape
(encoder, rnn, decoder) on the King James Bible's characters, batches from the same
SplitMix64 windows, Adam and clip_grad_norm_ as the example, at hidden size 64 (the
weights stay small enough to keep in the repository). Two runs, the weights loaded
both ways:
  - PyTorch's initial weights (torch.manual_seed(0)), written to
    tests/reference/char_lstm_init.safetensors, which the example loads with --init;
  - minidl's initial weights (--seed 0): the example saves them (--steps 0 --save),
    PyTorch loads them by name (strict) and trains.
The losses go to tests/reference/char_lstm_losses.json (tests/examples/check_twins.py).
    /usr/bin/python3 tests/examples/twin_char_lstm.py build/bin"""
import json
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

BATCH, SEQ, HIDDEN, STEPS, LR, CLIP = 8, 32, 64, 5, 3e-3, 1.0


class RNNModel(nn.Module):
    def __init__(self, vocab):
        super().__init__()
        self.encoder = nn.Embedding(vocab, 64)
        self.rnn = nn.LSTM(64, HIDDEN, 2, batch_first=True)
        self.decoder = nn.Linear(HIDDEN, vocab)

    def forward(self, ids):
        return self.decoder(self.rnn(self.encoder(ids))[0])


def train(net, train_ids):
    opt = torch.optim.Adam(net.parameters(), lr=LR)
    losses = []
    for step in range(STEPS):
        x, y = twin_common.random_windows(train_ids, BATCH, SEQ, 0, step)
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
common = ["--steps", str(STEPS), "--batch", str(BATCH), "--seq", str(SEQ), "--hidden", str(HIDDEN), "--lr", str(LR),
          "--log-every", "1", "--sample", "0", "--threads", "1"]
runs = []

torch.manual_seed(0)
net = RNNModel(len(vocab))
init = os.path.join(root, "tests", "reference", "char_lstm_init.safetensors")
safetensors_io.save(init, net.state_dict())
runs.append({"what": "PyTorch's initial weights", "args": ["--init", "tests/reference/char_lstm_init.safetensors"] + common,
             "losses": train(net, train_ids)})

bin_dir = sys.argv[1]
with tempfile.TemporaryDirectory() as tmp:
    saved = os.path.join(tmp, "init.safetensors")
    subprocess.run([os.path.join(bin_dir, "char_lstm"), "--steps", "0", "--hidden", str(HIDDEN), "--sample", "0",
                    "--save", saved], check=True, capture_output=True)
    state = {k[len("net."):]: v for k, v in safetensors_io.load(saved).items() if k.startswith("net.")}
net = RNNModel(len(vocab))
net.load_state_dict(state, strict=True)
runs.append({"what": "minidl's initial weights", "args": common, "losses": train(net, train_ids)})

with open(os.path.join(root, "tests", "reference", "char_lstm_losses.json"), "w") as f:
    json.dump({"example": "char_lstm", "torch": torch.__version__, "runs": runs}, f, indent=1)
for r in runs:
    print("char_lstm twin,", r["what"], ["%.6f" % v for v in r["losses"]])
