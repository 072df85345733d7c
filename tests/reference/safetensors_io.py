"""Reads and writes safetensors files (float32/int64 tensors, str metadata) without the
safetensors package, for the examples' PyTorch twins (tests/examples/twin_*.py)."""
import json
import struct

import torch

_DT = {torch.float32: "F32", torch.int64: "I64"}
_TD = {v: k for k, v in _DT.items()}


def save(path, tensors, metadata=None):
    header, blobs, at = {}, [], 0
    for name, t in tensors.items():
        t = t.detach().contiguous().cpu()
        data = t.numpy().tobytes()
        header[name] = {"dtype": _DT[t.dtype], "shape": list(t.shape), "data_offsets": [at, at + len(data)]}
        blobs.append(data)
        at += len(data)
    if metadata:
        header["__metadata__"] = metadata
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def load(path):
    with open(path, "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    header.pop("__metadata__", None)
    out = {}
    for name, e in header.items():
        a, b = e["data_offsets"]
        t = torch.frombuffer(bytearray(raw[8 + n + a:8 + n + b]), dtype=_TD[e["dtype"]])
        out[name] = t.reshape(e["shape"]).clone()
    return out
