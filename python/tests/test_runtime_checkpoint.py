"""Checkpoints cross between the C runtime and braid.safetensors.

The runtime's writer (braid-rt-checkpoint-tool write) must produce files that
the Python reader loads with the right values, metadata and per-tensor
FNV-1a 64 checksums; files the Python writer produces, with or without the
runtime's checksums, must read in the runtime (braid-rt-checkpoint-tool
dump), and a damaged one must be refused with DATA_CORRUPT.
"""

import struct
import subprocess

import pytest

from braid import safetensors as st
from conftest import Tool

CHECKSUM_PREFIX = "braid.fnv1a64."


@pytest.fixture(scope="module")
def tool() -> Tool:
    return Tool("braid-rt-checkpoint-tool")


def fnv1a64(data: bytes) -> int:
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def tensor_bytes(path, name):
    """The raw bytes of tensor `name` in the file at `path`."""
    blob = open(path, "rb").read()
    (n,) = struct.unpack("<Q", blob[:8])
    import json

    begin, end = json.loads(blob[8 : 8 + n])[name]["data_offsets"]
    return blob[8 + n + begin : 8 + n + end]


def dump(tool, path, *keys):
    """Runs the tool's dump: ({name: (shape, values)}, {key: value})."""
    out = tool.run("dump", path, *keys).stdout.splitlines()
    tensors, meta = {}, {}
    for line in out:
        if "=" in line:
            k, v = line.split("=", 1)
            meta[k] = v
        elif not line.endswith(" absent"):
            name, shape, *values = line.split(" ")
            dims = tuple(int(d) for d in shape.strip("[]").split(",") if d)
            tensors[name] = (dims, [float(v) for v in values])
    return tensors, meta


def test_runtime_checkpoint_reads_in_python(tool, tmp_path):
    path = tmp_path / "rt.safetensors"
    tool.run("write", path)
    tensors, meta = st.load_with_metadata(str(path))
    assert set(tensors) == {"w", "v", "s"}
    assert tensors["w"] == st.Tensor("F32", (3, 4), [0.25 * i - 1 for i in range(12)])
    assert tensors["v"] == st.Tensor("F32", (5,), [0.5 * (i - 2) for i in range(5)])
    assert tensors["s"] == st.Tensor("F32", (), [42.0])
    assert meta["step"] == "7" and meta["model"] == "interop"
    assert meta["braid.format"] == "braid-checkpoint-1"
    for name in tensors:
        assert meta[CHECKSUM_PREFIX + name] == f"{fnv1a64(tensor_bytes(path, name)):016x}"
    assert not (tmp_path / "rt.safetensors.tmp").exists()


def test_python_safetensors_reads_in_runtime(tool, tmp_path):
    """A plain safetensors file (no checksums), F32 and F64."""
    path = tmp_path / "py.safetensors"
    a = [0.5 * i - 3 for i in range(6)]
    b = [1.25, -2.5, 1e-3]
    st.save(str(path), {"a": st.Tensor("F32", (2, 3), a), "b": st.Tensor("F64", (3,), b)},
            {"step": "3"})
    tensors, meta = dump(tool, path, "step", "braid.format")
    assert tensors["a"] == ((2, 3), a)
    assert tensors["b"][0] == (3,)
    assert tensors["b"][1] == pytest.approx(b, rel=1e-7)
    assert meta == {"step": "3"}


def python_braid_checkpoint(path, tensors, metadata):
    """Writes a Braid checkpoint from Python: safetensors plus the runtime's
    format key and checksums (the checksums hash the bytes that save()
    writes, so the file is written twice)."""
    st.save(str(path), tensors, metadata)
    meta = dict(metadata, **{"braid.format": "braid-checkpoint-1"})
    for name in tensors:
        meta[CHECKSUM_PREFIX + name] = f"{fnv1a64(tensor_bytes(path, name)):016x}"
    st.save(str(path), tensors, meta)


def test_python_braid_checkpoint_reads_and_damage_is_refused(tool, tmp_path):
    path = tmp_path / "pyck.safetensors"
    values = [float(i) for i in range(8)]
    python_braid_checkpoint(path, {"h.0.w": st.Tensor("F32", (2, 4), values)}, {"step": "9"})
    tensors, meta = dump(tool, path, "step")
    assert tensors == {"h.0.w": ((2, 4), values)} and meta == {"step": "9"}

    blob = bytearray(path.read_bytes())
    blob[-3] ^= 0x01
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(bytes(blob))
    proc = tool.run("dump", bad, check=False)
    assert proc.returncode == 1
    assert f"DATA_CORRUPT: checkpoint '{bad}': tensor 'h.0.w': its data hashes to" in proc.stderr

    bad.write_bytes(path.read_bytes()[:-1])
    proc = tool.run("dump", bad, check=False)
    assert proc.returncode == 1
    assert "DATA_CORRUPT" in proc.stderr and "out of range" in proc.stderr
