#!/usr/bin/python3
"""Reference cases for nn::Embedding, RNN, LSTM, GRU and their cells (tests/nn/test_torch_rnn.cpp).

A layer's parameters are inputs of its case after the forward's own inputs
(attrs["num_inputs"] of them: x, then h0, then c0 for an LSTM), in
named_parameters() order, with their PyTorch names in attrs["params"]. The C++
side loads them into minidl's layer with load_state_dict (PyTorch's names) and
compares the outputs (y, h_n, and c_n for an LSTM; h', and c' for LSTMCell) and
the gradients of the forward's inputs and of every parameter.
"""
import torch
import torch.nn as nn

from torch_cases import Cases, NoGrad

T, B, I, H, L = 4, 3, 5, 6, 2
c = Cases("rnn")


def add_layer(name, op, layer, inputs, attrs):
    names = [n for n, _ in layer.named_parameters()]
    params = [p.detach() for _, p in layer.named_parameters()]
    n_in = len(inputs)

    def fn(*ts):  # the layer run with the case's tensors as its parameters
        xs = ts[:n_in]
        if op in ("lstm", "lstm_cell") and n_in == 3:
            xs = (xs[0], (xs[1], xs[2]))
        for n, t in zip(names, ts[n_in:]):
            layer._parameters[n] = t
        if isinstance(layer, nn.RNNBase):  # its forward reads this cached list
            layer._flat_weights = [getattr(layer, n) for n in layer._flat_weights_names]
        out = layer(*xs)
        if op == "embedding" or op.endswith("_cell"):
            return out  # weight[ids]; h'; (h', c')
        y, state = out
        return (y,) + tuple(state) if op == "lstm" else (y, state)

    c.add(name, op, fn, list(inputs) + params, dict(attrs, params=names, num_inputs=n_in))


# ---- Embedding: ids of any shape; the padding row gets no gradient ----
ids = torch.tensor([[1, 2, 9, 1], [0, 2, 5, 5], [7, 3, 2, 1]])
add_layer("embedding_padding", "embedding", nn.Embedding(10, 4, padding_idx=2), [NoGrad(ids)],
          {"num_embeddings": 10, "embedding_dim": 4, "padding_idx": 2})
add_layer("embedding_1d", "embedding", nn.Embedding(7, 3), [NoGrad(torch.tensor([6, 0, 3, 3, 1]))],
          {"num_embeddings": 7, "embedding_dim": 3, "padding_idx": None})

# ---- RNN (tanh, relu), LSTM, GRU (attrs without "bidirectional": one direction) ----
kinds = [("rnn_tanh", "rnn", nn.RNN, {"nonlinearity": "tanh"}),
         ("rnn_relu", "rnn", nn.RNN, {"nonlinearity": "relu"}),
         ("lstm", "lstm", nn.LSTM, {}),
         ("gru", "gru", nn.GRU, {})]


def states(op, layers, *batch):
    n = 2 if op == "lstm" else 1
    return [torch.randn(layers, *batch, H) for _ in range(n)]


for prefix, op, Layer, extra in kinds:
    # 2 layers, both layouts, with and without an initial state
    for batch_first in (False, True):
        for with_state in (False, True):
            layer = Layer(I, H, num_layers=L, batch_first=batch_first, **extra)
            inputs = [torch.randn(B, T, I) if batch_first else torch.randn(T, B, I)]
            if with_state:
                inputs += states(op, L, B)
            name = "%s_%s_%s" % (prefix, "batch_first" if batch_first else "seq_first",
                                 "state" if with_state else "zero_state")
            add_layer(name, op, layer, inputs,
                      dict(extra, input_size=I, hidden_size=H, num_layers=L,
                           batch_first=batch_first, bias=True))
    # bidirectional, 2 layers, batch_first, with and without an initial state
    for with_state in (False, True):
        layer = Layer(I, H, num_layers=L, batch_first=True, bidirectional=True, **extra)
        inputs = [torch.randn(B, T, I)] + (states(op, 2 * L, B) if with_state else [])
        add_layer("%s_bidirectional_%s" % (prefix, "state" if with_state else "zero_state"), op,
                  layer, inputs, dict(extra, input_size=I, hidden_size=H, num_layers=L,
                                      batch_first=True, bias=True, bidirectional=True))
    # one layer without biases
    add_layer(prefix + "_no_bias", op, Layer(I, H, bias=False, **extra), [torch.randn(T, B, I)],
              dict(extra, input_size=I, hidden_size=H, num_layers=1, batch_first=False, bias=False))
    # an unbatched sequence [T, I] with a state [1, H]
    add_layer(prefix + "_unbatched", op, Layer(I, H, **extra), [torch.randn(T, I)] + states(op, 1),
              dict(extra, input_size=I, hidden_size=H, num_layers=1, batch_first=False, bias=True))
    # unbatched and bidirectional, one layer
    add_layer(prefix + "_unbatched_bidirectional", op, Layer(I, H, bidirectional=True, **extra),
              [torch.randn(T, I)] + states(op, 2),
              dict(extra, input_size=I, hidden_size=H, num_layers=1, batch_first=False, bias=True,
                   bidirectional=True))

# ---- cells: one step, batched with a state, and unbatched without one ----
cells = [("rnn_cell_relu", "rnn_cell", nn.RNNCell, {"nonlinearity": "relu"}),
         ("lstm_cell", "lstm_cell", nn.LSTMCell, {}),
         ("gru_cell", "gru_cell", nn.GRUCell, {})]
for name, op, Cell, extra in cells:
    attrs = dict(extra, input_size=I, hidden_size=H, bias=True)
    state = [torch.randn(B, H) for _ in range(2 if op == "lstm_cell" else 1)]
    add_layer(name + "_state", op, Cell(I, H, **extra), [torch.randn(B, I)] + state, attrs)
    add_layer(name + "_unbatched", op, Cell(I, H, **extra), [torch.randn(I)], attrs)

# ---- LSTM with proj_size P: h (and y) have P features per direction, c has H ----
P = 3
projections = [  # name, num_layers, batch_first, bidirectional, bias, with a state
    ("lstm_proj_one_layer_state", 1, False, False, True, True),
    ("lstm_proj_two_layers_batch_first_state", 2, True, False, True, True),
    ("lstm_proj_bidirectional_state", 2, True, True, True, True),
    ("lstm_proj_bidirectional_zero_state", 1, False, True, True, False),
    ("lstm_proj_no_bias_two_layers", 2, False, False, False, True),
]
for name, layers, batch_first, bidirectional, bias, with_state in projections:
    layer = nn.LSTM(I, H, num_layers=layers, batch_first=batch_first, bidirectional=bidirectional,
                    bias=bias, proj_size=P)
    inputs = [torch.randn(B, T, I) if batch_first else torch.randn(T, B, I)]
    if with_state:
        D = 2 if bidirectional else 1
        inputs += [torch.randn(D * layers, B, P), torch.randn(D * layers, B, H)]
    add_layer(name, "lstm", layer, inputs,
              dict(input_size=I, hidden_size=H, num_layers=layers, batch_first=batch_first,
                   bias=bias, bidirectional=bidirectional, proj_size=P))
# unbatched [T, I], bidirectional, with a state h0 [2, P], c0 [2, H]
add_layer("lstm_proj_unbatched_bidirectional", "lstm",
          nn.LSTM(I, H, bidirectional=True, proj_size=P),
          [torch.randn(T, I), torch.randn(2, P), torch.randn(2, H)],
          dict(input_size=I, hidden_size=H, num_layers=1, batch_first=False, bias=True,
               bidirectional=True, proj_size=P))
c.write()
