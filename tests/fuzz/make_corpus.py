#!/usr/bin/env python3
"""Writes the fuzz targets' seed corpus (corpus/idx, corpus/safetensors): small
valid files of every dtype and layout the readers accept, and corrupt ones that
reach each error path (the issue 12 reproducers among them). Run from anywhere;
the files are checked in, so this is only needed to change them."""
import gzip, json, os, struct

here = os.path.dirname(os.path.abspath(__file__))


def write(folder, name, data):
    os.makedirs(os.path.join(here, "corpus", folder), exist_ok=True)
    with open(os.path.join(here, "corpus", folder, name), "wb") as f:
        f.write(data)


def idx(code, dims, payload):
    return struct.pack(">BBBB", 0, 0, code, len(dims)) + b"".join(struct.pack(">I", d) for d in dims) + payload


images = idx(0x08, [2, 3, 3], bytes(range(18)))
write("idx", "ubyte_2x3x3", images)
write("idx", "ubyte_2x3x3.gz", gzip.compress(images, mtime=0))
write("idx", "labels_4", idx(0x08, [4], bytes([0, 3, 9, 1])))
write("idx", "int8_3", idx(0x09, [3], bytes([0x80, 0, 0x7F])))
write("idx", "int16_2", idx(0x0B, [2], struct.pack(">hh", -2, 300)))
write("idx", "int32_2", idx(0x0C, [2], struct.pack(">ii", -7, 1 << 20)))
write("idx", "float32_2x2", idx(0x0D, [2, 2], struct.pack(">ffff", 0.5, -1, 3e9, 0)))
write("idx", "float64_2", idx(0x0E, [2], struct.pack(">dd", 0.25, -8)))
write("idx", "empty_0x28", idx(0x08, [0, 28], b""))
write("idx", "bad_magic", b"\x01\x00\x08\x01\x00\x00\x00\x01\x05")
write("idx", "bad_type", idx(0x07, [1], b"\x00"))
write("idx", "short_data", idx(0x08, [4, 4], bytes(10)))
write("idx", "trailing_bytes", idx(0x08, [2], bytes(5)))
write("idx", "huge_claim", bytes.fromhex("00000803000100000100000001000000"))
write("idx", "wraps_to_zero", bytes.fromhex("0000080301000000000100000e0000000e022c0e0200"))
write("idx", "huge_claim.gz", gzip.compress(idx(0x08, [1 << 16, 1 << 16, 1 << 8], bytes(8)), mtime=0))
write("idx", "truncated.gz", gzip.compress(images, mtime=0)[:-9])


def safetensors(entries, data, metadata=None, raw_header=None):
    header = {}
    if metadata is not None:
        header["__metadata__"] = metadata
    header.update(entries)
    text = raw_header if raw_header is not None else json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data


f32 = struct.pack("<4f", 1, -2, 0.5, 3)
write("safetensors", "f32_2x2", safetensors({"w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]}}, f32))
write("safetensors", "all_dtypes_metadata", safetensors({
    "a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
    "b": {"dtype": "F16", "shape": [2], "data_offsets": [8, 12]},
    "c": {"dtype": "I32", "shape": [1], "data_offsets": [12, 16]},
    "d": {"dtype": "I64", "shape": [1, 1], "data_offsets": [16, 24]},
    "e": {"dtype": "F32", "shape": [0, 3], "data_offsets": [24, 24]},
}, struct.pack("<2f", 1, 2) + b"\x00\x3c\x00\xc0" + struct.pack("<i", -5) + struct.pack("<q", 7),
    metadata={"minidl.checkpoint": "1", "epoch": "2", "rng": "5489 0 0x0p+0"}))
write("safetensors", "scalar", safetensors({"s": {"dtype": "F32", "shape": [], "data_offsets": [0, 4]}}, f32[:4]))
write("safetensors", "empty", safetensors({}, b""))
write("safetensors", "overflow_shape", safetensors(
    {"w": {"dtype": "F32", "shape": [2**60 + 1, 16], "data_offsets": [0, 64]}}, bytes(64)))
write("safetensors", "overlap", safetensors({
    "a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
    "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}, bytes(12)))
write("safetensors", "truncated_data", safetensors({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}, bytes(8)))
write("safetensors", "bad_dtype", safetensors({"w": {"dtype": "BF16", "shape": [1], "data_offsets": [0, 2]}}, bytes(2)))
write("safetensors", "not_json", safetensors({}, b"", raw_header=b"{\"w\": [1, 2"))
write("safetensors", "header_past_end", struct.pack("<Q", 1 << 20) + b"{}")
write("safetensors", "short", b"\x08\x00\x00")
write("safetensors", "metadata_not_string", safetensors({}, b"", metadata={"k": 1}))
