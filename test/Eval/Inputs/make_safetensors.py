"""Writes a safetensors file, optionally damaged, for braid-eval's error tests.

usage: make_safetensors.py OUT [NAME:DTYPE:D0xD1...:FILL ...]
           [--truncate BYTES] [--header-len N] [--raw-header JSON]

Deliberately independent of the code under test (standard library only).
"""
import argparse
import json
import struct

FORMATS = {"F64": "d", "F32": "f", "I64": "q", "I32": "i"}

parser = argparse.ArgumentParser()
parser.add_argument("out")
parser.add_argument("tensors", nargs="*")
parser.add_argument("--truncate", type=int, help="drop this many bytes from the end")
parser.add_argument("--header-len", type=int, help="write this header length instead")
parser.add_argument("--raw-header", help="use this text as the JSON header")
args = parser.parse_args()

header, data = {}, b""
for spec in args.tensors:
    name, dtype, shape, fill = spec.split(":")
    dims = [int(d) for d in shape.split("x")] if shape else []
    count = 1
    for d in dims:
        count *= d
    value = float(fill) if dtype.startswith("F") else int(fill)
    blob = struct.pack("<%d%s" % (count, FORMATS[dtype]), *([value] * count))
    header[name] = {"dtype": dtype, "shape": dims,
                    "data_offsets": [len(data), len(data) + len(blob)]}
    data += blob

text = (args.raw_header if args.raw_header is not None else json.dumps(header)).encode()
length = len(text) if args.header_len is None else args.header_len
image = struct.pack("<Q", length) + text + data
if args.truncate:
    image = image[: len(image) - args.truncate]
with open(args.out, "wb") as f:
    f.write(image)
