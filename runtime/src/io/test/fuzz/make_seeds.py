"""Writes the seed checkpoints of the checkpoint and safetensors fuzzers.

    /usr/bin/python3 runtime/src/io/test/fuzz/make_seeds.py

Small valid files (a Braid checkpoint with checksums, a plain safetensors
file of every dtype, scalars, empty tensors, metadata) into
runtime/src/io/test/fuzz/checkpoint/ and unittests/Fuzz/corpus/safetensors/.
Deterministic, so rerunning it changes nothing.
"""
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", "..", "..", "..", ".."))
SIZES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4}
PACK = {"F64": "<d", "F32": "<f", "F16": "<e", "I64": "<q", "I32": "<i"}


def fnv1a64(data: bytes) -> int:
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def encode(dtype, values):
    if dtype == "BF16":
        return b"".join(struct.pack("<f", v)[2:] for v in values)
    return b"".join(struct.pack(PACK[dtype], v) for v in values)


def image(tensors, metadata=None, checksums=False):
    """tensors: [(name, dtype, shape, values)] in data order."""
    header, data = {}, b""
    meta = dict(metadata or {})
    for name, dtype, shape, values in tensors:
        blob = encode(dtype, values)
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [len(data), len(data) + len(blob)]}
        if checksums:
            meta["braid.fnv1a64." + name] = "%016x" % fnv1a64(blob)
        data += blob
    if checksums:
        meta["braid.format"] = "braid-checkpoint-1"
    if meta:
        header["__metadata__"] = meta
    text = json.dumps(header, separators=(",", ":")).encode()
    return struct.pack("<Q", len(text)) + text + data


SEEDS = {
    "braid-checkpoint": image(
        [("a", "F32", [2, 3], [1.5, -2, 3.25, 4, -5.5, 6]),
         ("b", "F32", [4], [0.125, 7, -8, 9])], checksums=True),
    "braid-checkpoint-f64": image(
        [("w", "F64", [2, 2], [1, 2, 3, 4]), ("s", "F32", [], [0.5])],
        metadata={"step": "3"}, checksums=True),
    "all-dtypes": image(
        [("f64", "F64", [2], [1e300, -0.0]), ("f32", "F32", [1, 2], [1, 2]),
         ("f16", "F16", [3], [1, -2, 65504]),
         ("bf16", "BF16", [2], [1, -3]),
         ("i64", "I64", [2], [-1, 2**62]), ("i32", "I32", [2], [-7, 7])],
        metadata={"format": "pt"}),
    "empty-tensor": image([("e", "F32", [0, 3], []),
                           ("x", "I32", [1], [5])]),
    "no-tensors": image([]),
}
# A finding kept as a seed: 2^32 * 2^32 elements used to wrap to 0.
_wrap = json.dumps({"t": {"dtype": "F32", "shape": [2**32, 2**32],
                          "data_offsets": [0, 0]}}).encode()
SEEDS["wrap-2^64"] = struct.pack("<Q", len(_wrap)) + _wrap
# Another: INT64_MAX reads as 2^63, which did not write back.
SEEDS["i64-max"] = image([("t", "I64", [1], [2**63 - 1])])

for directory in (os.path.join(HERE, "checkpoint"),
                  os.path.join(ROOT, "unittests", "Fuzz", "corpus",
                               "safetensors")):
    os.makedirs(directory, exist_ok=True)
    for name, blob in SEEDS.items():
        with open(os.path.join(directory, name), "wb") as f:
            f.write(blob)
