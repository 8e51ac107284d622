"""Tests braid.safetensors: round trips, the byte layout, and corrupt files."""

import json
import struct

import numpy as np
import pytest
import torch

from braid import safetensors as st
from braid.safetensors import Tensor

# Values exactly representable in every float dtype, including BF16 and F16.
EXACT_FLOATS = [0.0, -0.0, 1.0, -2.5, 0.15625, 1024.0, 0.75, float("inf"), float("-inf")]
ROUND_TRIP_CASES = {
    "F64": [1.0 / 3.0, -1e300, 5e-324, 2.0**60 + 1] + EXACT_FLOATS,
    "F32": [1.1754944e-38, 3.4028235e38] + EXACT_FLOATS,
    "F16": [65504.0, 2.0**-24] + EXACT_FLOATS,
    "BF16": [2.0**-133, 3.3895314e38] + EXACT_FLOATS,
    "I64": [0, 1, -1, 2**63 - 1, -(2**63), 123456789012],
    "I32": [0, 1, -1, 2**31 - 1, -(2**31), 1234567],
}


@pytest.mark.parametrize("dtype", sorted(ROUND_TRIP_CASES))
def test_round_trip_each_dtype(tmp_path, dtype):
    values = ROUND_TRIP_CASES[dtype]
    if dtype in ("F32", "BF16"):
        values = [float(np.float32(v)) for v in values]
    tensors = {
        "matrix": Tensor(dtype, (2, len(values)), values + values[::-1]),
        "scalar": Tensor(dtype, (), values[1:2]),
        "empty": Tensor(dtype, (0, 3), []),
    }
    path = tmp_path / "t.safetensors"
    st.save(path, tensors)
    loaded = st.load(path)
    assert set(loaded) == set(tensors)
    for name, tensor in tensors.items():
        assert loaded[name].dtype == dtype
        assert tuple(loaded[name].shape) == tuple(tensor.shape)
        # repr tells -0.0 from 0.0 and keeps every integer digit.
        assert list(map(repr, loaded[name].values)) == list(map(repr, tensor.values)), name


def test_mixed_dtypes_and_metadata(tmp_path):
    tensors = {f"t.{d}": Tensor(d, (3,), [1, 2, 3] if d.startswith("I") else [0.5, 1.5, -2.0])
               for d in ROUND_TRIP_CASES}
    path = tmp_path / "t.safetensors"
    st.save(path, tensors, metadata={"format": "pt", "step": "7"})
    loaded, metadata = st.load_with_metadata(path)
    assert metadata == {"format": "pt", "step": "7"}
    assert {n: (t.dtype, tuple(t.shape), list(t.values)) for n, t in loaded.items()} == {
        n: (t.dtype, tuple(t.shape), list(t.values)) for n, t in tensors.items()
    }


def test_float_rounding_matches_torch(tmp_path):
    """Writing rounds to nearest, ties to even, and overflows to infinity, like torch casts."""
    rng = np.random.default_rng(0)
    values = list(rng.normal(size=200) * 10.0 ** rng.integers(-8, 8, size=200))
    values += [1 + 2**-8, 1 + 3 * 2**-8, 1 + 2**-11, 1 + 3 * 2**-11, 1e6, -1e39, 1e-9]
    for dtype, torch_dtype in (("F32", torch.float32), ("F16", torch.float16), ("BF16", torch.bfloat16)):
        path = tmp_path / f"{dtype}.safetensors"
        st.save(path, {"x": Tensor(dtype, (len(values),), values)})
        expected = torch.tensor(values, dtype=torch.float64).to(torch_dtype).to(torch.float64).tolist()
        assert st.load(path)["x"].values == expected, dtype


def test_layout_matches_numpy(tmp_path):
    """The data section holds each array's little-endian bytes at its offsets."""
    rng = np.random.default_rng(1)
    arrays = {
        "a": rng.normal(size=(3, 4)),
        "b": rng.normal(size=(5,)).astype(np.float32),
        "c": rng.integers(-100, 100, size=(2, 3)).astype(np.int32),
        "d": rng.integers(-100, 100, size=(7,)).astype(np.int64),
        "e": rng.normal(size=(3,)).astype(np.float16),
    }
    path = tmp_path / "t.safetensors"
    st.save(path, {n: st.from_numpy(a) for n, a in arrays.items()})
    blob = path.read_bytes()
    (length,) = struct.unpack("<Q", blob[:8])
    assert length % 8 == 0
    header = json.loads(blob[8 : 8 + length])
    data = blob[8 + length :]
    for name, array in arrays.items():
        begin, end = header[name]["data_offsets"]
        assert begin % array.dtype.itemsize == 0, "tensors are aligned to their item size"
        stored = np.frombuffer(data[begin:end], dtype=array.dtype.newbyteorder("<"))
        np.testing.assert_array_equal(stored.reshape(header[name]["shape"]), array)
        loaded = st.to_numpy(st.load(path)[name])
        assert loaded.dtype == array.dtype
        np.testing.assert_array_equal(loaded, array)


def test_reads_file_written_with_numpy(tmp_path):
    """A file assembled by hand from numpy bytes (as other writers do) loads."""
    x = np.arange(6, dtype="<f4").reshape(2, 3) / 7
    ids = np.array([[3, 1], [4, 1]], dtype="<i8")
    header = {
        "ids": {"dtype": "I64", "shape": [2, 2], "data_offsets": [0, 32]},
        "x": {"dtype": "F32", "shape": [2, 3], "data_offsets": [32, 56]},
        "__metadata__": {"source": "hand"},
    }
    text = json.dumps(header).encode()
    path = tmp_path / "t.safetensors"
    path.write_bytes(struct.pack("<Q", len(text)) + text + ids.tobytes() + x.tobytes())
    loaded = st.load(path)
    np.testing.assert_array_equal(st.to_numpy(loaded["x"]), x)
    np.testing.assert_array_equal(st.to_numpy(loaded["ids"]), ids)


def test_bf16_from_numpy_rounds(tmp_path):
    tensor = st.from_numpy(np.array([1 + 2**-8, 1 + 3 * 2**-8]), "BF16")
    path = tmp_path / "t.safetensors"
    st.save(path, {"x": tensor})
    loaded = st.load(path)["x"]
    assert loaded.dtype == "BF16"
    assert st.to_numpy(loaded).tolist() == [1.0, 1 + 2**-6]


@pytest.mark.parametrize(
    "tensors, message",
    [
        ({"x": Tensor("F8", (1,), [1.0])}, "unknown dtype"),
        ({"x": Tensor("F32", (2, 2), [1.0])}, "do not fill shape"),
        ({"x": Tensor("F32", (-1,), [])}, "non-negative"),
        ({"x": Tensor("I32", (1,), [2**31])}, "do not fit I32"),
        ({"__metadata__": Tensor("F32", (1,), [1.0])}, "reserved"),
    ],
    ids=["dtype", "count", "shape", "int-range", "reserved-name"],
)
def test_save_rejects_bad_tensors(tmp_path, tensors, message):
    with pytest.raises(ValueError, match=message):
        st.save(tmp_path / "t.safetensors", tensors)


def _file(header, data: bytes = b"", length=None) -> bytes:
    text = header if isinstance(header, bytes) else json.dumps(header).encode()
    return struct.pack("<Q", len(text) if length is None else length) + text + data


GOOD = {"x": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}


def _with(**entry):
    return {"x": {**GOOD["x"], **entry}}


@pytest.mark.parametrize(
    "blob, message",
    [
        (b"\x10\x00\x00", "truncated"),
        (b"", "truncated"),
        (_file(GOOD, bytes(8), length=1000), "runs past the end"),
        (_file(GOOD, bytes(8), length=2**62), "exceeds"),
        (_file(b'{"x": ', bytes(8)), "not valid UTF-8 JSON"),
        (_file(b"\xff\xfe{}", b""), "not valid UTF-8 JSON"),
        (_file([1, 2], b""), "must be a JSON object"),
        (_file(_with(dtype="F8"), bytes(8)), "unknown dtype 'F8'"),
        (_file(_with(data_offsets=[0, 16]), bytes(8)), "out of range"),
        (_file(_with(data_offsets=[8, 0]), bytes(8)), "out of range"),
        (_file(_with(data_offsets=[0, 4]), bytes(4)), "needs 8"),
        (_file(_with(shape=[3]), bytes(8)), "needs 12"),
        (_file(_with(shape=[-2]), bytes(8)), "non-negative"),
        (_file(_with(shape="2"), bytes(8)), "non-negative"),
        (_file(_with(data_offsets=[0]), bytes(8)), "two non-negative integers"),
        (_file({"x": {"dtype": "F32", "shape": [2]}}, bytes(8)), "exactly the keys"),
        (_file(GOOD, bytes(12)), "tensors cover 8"),
        (_file({**GOOD, "y": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}, bytes(8)), "overlaps"),
        (_file({"y": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}, bytes(8)), "gap"),
        (_file({**GOOD, "__metadata__": {"a": 1}}, bytes(8)), "__metadata__"),
    ],
    ids=[
        "short-length", "empty", "header-past-end", "huge-header", "bad-json", "bad-utf8",
        "header-not-object", "unknown-dtype", "offset-past-end", "offsets-reversed",
        "offsets-too-short", "shape-mismatch", "negative-dim", "shape-not-list", "one-offset",
        "missing-key", "trailing-bytes", "overlap", "gap", "bad-metadata",
    ],
)
def test_load_rejects_corrupt_files(tmp_path, blob, message):
    path = tmp_path / "bad.safetensors"
    path.write_bytes(blob)
    with pytest.raises(ValueError, match=message):
        st.load(path)
