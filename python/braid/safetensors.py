"""Reads and writes safetensors files with the standard library only.

A safetensors file is

  * 8 bytes: N, the length of the header, as a little-endian u64;
  * N bytes: a UTF-8 JSON object mapping each tensor name to
    ``{"dtype": D, "shape": [...], "data_offsets": [begin, end]}`` plus an
    optional ``"__metadata__"`` object of string to string;
  * the data section: the raw little-endian, row-major bytes of every tensor,
    ``data_offsets`` being relative to the start of this section.

Braid uses the format for weights, checkpoints, and the inputs and outputs of
``braid-eval``. Tensors are held as :class:`Tensor` (a dtype name, a shape
and a flat row-major list of Python numbers); :func:`to_numpy` and
:func:`from_numpy` convert to and from NumPy for callers that have it.

Like the reference implementation, :func:`save` pads the header with spaces to
a multiple of 8 bytes and lays tensors out by decreasing item size, so every
tensor is aligned to its item size; :func:`load` requires the tensors to tile
the data section exactly, without gaps or overlaps.
"""

import json
import math
import struct
from typing import Dict, List, NamedTuple, Optional, Sequence, Union

Number = Union[int, float]

# dtype name -> (item size in bytes, struct format character). BF16 has no
# struct format; it is converted through the upper half of an F32.
_DTYPES = {
    "F64": (8, "d"),
    "F32": (4, "f"),
    "F16": (2, "e"),
    "BF16": (2, None),
    "I64": (8, "q"),
    "I32": (4, "i"),
}

# The reference implementation refuses headers above 100 MB; so do we, so
# that a corrupt length cannot make us allocate gigabytes.
_MAX_HEADER_BYTES = 100 * 1000 * 1000


class Tensor(NamedTuple):
    """A tensor: dtype name (e.g. "F32"), shape, flat row-major values."""

    dtype: str
    shape: Sequence[int]
    values: Sequence[Number]


def itemsize(dtype: str) -> int:
    """Returns the size in bytes of one element of `dtype`."""
    if dtype not in _DTYPES:
        raise ValueError(f"unknown dtype {dtype!r}; supported: {', '.join(_DTYPES)}")
    return _DTYPES[dtype][0]


def _num_elements(shape: Sequence[int]) -> int:
    return math.prod(shape)


def _check_tensor(name: str, tensor: Tensor) -> None:
    itemsize(tensor.dtype)
    if any(not isinstance(d, int) or d < 0 for d in tensor.shape):
        raise ValueError(f"tensor {name!r}: shape {list(tensor.shape)} must be non-negative integers")
    if len(tensor.values) != _num_elements(tensor.shape):
        raise ValueError(
            f"tensor {name!r}: {len(tensor.values)} values do not fill shape "
            f"{list(tensor.shape)} ({_num_elements(tensor.shape)} elements)"
        )


def _f32_bits(x: float) -> int:
    """Returns the bits of x rounded to F32, overflowing to infinity."""
    try:
        return struct.unpack("<I", struct.pack("<f", x))[0]
    except OverflowError:
        return 0x7F800000 | (0x80000000 if x < 0 else 0)


def _float_to_bf16_bits(x: float) -> int:
    """Rounds x to BF16 (to nearest, ties to even) and returns its 16 bits.

    Goes through F32 first, as frameworks do (double rounding may differ from
    a direct F64 -> BF16 rounding in the last bit for rare values).
    """
    bits = _f32_bits(x)
    if (bits & 0x7F800000) == 0x7F800000 and bits & 0x007FFFFF:
        return ((bits >> 16) | 0x0040) & 0xFFFF  # keep NaN a (quiet) NaN
    rounding = 0x7FFF + ((bits >> 16) & 1)
    return ((bits + rounding) >> 16) & 0xFFFF


def _encode_floats(fmt: str, values: Sequence[Number]) -> bytes:
    try:
        return struct.pack(f"<{len(values)}{fmt}", *values)
    except OverflowError:
        # Values beyond the dtype's range become infinities, as in NumPy.
        inf = float("inf")
        out = bytearray()
        for v in values:
            try:
                out += struct.pack(f"<{fmt}", v)
            except OverflowError:
                out += struct.pack(f"<{fmt}", inf if v > 0 else -inf)
        return bytes(out)


def _encode(name: str, tensor: Tensor) -> bytes:
    values = tensor.values
    if tensor.dtype == "BF16":
        return struct.pack(f"<{len(values)}H", *(_float_to_bf16_bits(float(v)) for v in values))
    fmt = _DTYPES[tensor.dtype][1]
    if tensor.dtype.startswith("F"):
        return _encode_floats(fmt, values)
    try:
        return struct.pack(f"<{len(values)}{fmt}", *values)
    except struct.error as e:
        raise ValueError(f"tensor {name!r}: values do not fit {tensor.dtype}: {e}") from None


def _decode(dtype: str, data: bytes) -> List[Number]:
    size, fmt = _DTYPES[dtype]
    count = len(data) // size
    if dtype == "BF16":
        halves = struct.unpack(f"<{count}H", data)
        return list(struct.unpack(f"<{count}f", struct.pack(f"<{count}I", *(h << 16 for h in halves))))
    return list(struct.unpack(f"<{count}{fmt}", data))


def save(path: str, tensors: Dict[str, Tensor], metadata: Optional[Dict[str, str]] = None) -> None:
    """Writes `tensors` (name -> Tensor) and optional string metadata to `path`."""
    header: Dict[str, object] = {}
    if metadata is not None:
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
            raise ValueError("safetensors metadata must map strings to strings")
        header["__metadata__"] = dict(metadata)
    chunks = []
    offset = 0
    # Largest items first keeps every tensor aligned to its item size.
    order = sorted(tensors, key=lambda n: (-itemsize(tensors[n].dtype), n))
    for name in order:
        if name == "__metadata__":
            raise ValueError("'__metadata__' is reserved and cannot name a tensor")
        tensor = tensors[name]
        _check_tensor(name, tensor)
        data = _encode(name, tensor)
        header[name] = {
            "dtype": tensor.dtype,
            "shape": list(tensor.shape),
            "data_offsets": [offset, offset + len(data)],
        }
        chunks.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for chunk in chunks:
            f.write(chunk)


def _parse_header(path: str, blob: bytes):
    """Validates the length prefix and JSON; returns (header, data start)."""
    if len(blob) < 8:
        raise ValueError(f"{path}: truncated safetensors file ({len(blob)} bytes, need at least 8)")
    (length,) = struct.unpack("<Q", blob[:8])
    if length > _MAX_HEADER_BYTES:
        raise ValueError(f"{path}: header length {length} exceeds the {_MAX_HEADER_BYTES}-byte limit")
    if 8 + length > len(blob):
        raise ValueError(
            f"{path}: header length {length} runs past the end of the file ({len(blob)} bytes)"
        )
    try:
        header = json.loads(blob[8 : 8 + length].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{path}: header is not valid UTF-8 JSON: {e}") from None
    if not isinstance(header, dict):
        raise ValueError(f"{path}: header must be a JSON object, got {type(header).__name__}")
    return header, 8 + length


def _parse_entry(path: str, name: str, entry: object, data_len: int):
    """Validates one header entry; returns (dtype, shape, begin, end)."""
    where = f"{path}: tensor {name!r}"
    if not isinstance(entry, dict) or set(entry) != {"dtype", "shape", "data_offsets"}:
        raise ValueError(f"{where}: entry must have exactly the keys dtype, shape, data_offsets")
    dtype, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
    if dtype not in _DTYPES:
        raise ValueError(f"{where}: unknown dtype {dtype!r}; supported: {', '.join(_DTYPES)}")

    def is_count(x):
        return isinstance(x, int) and not isinstance(x, bool) and x >= 0

    if not isinstance(shape, list) or not all(is_count(d) for d in shape):
        raise ValueError(f"{where}: shape {shape!r} must be a list of non-negative integers")
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(is_count(o) for o in offsets)):
        raise ValueError(f"{where}: data_offsets {offsets!r} must be two non-negative integers")
    begin, end = offsets
    if begin > end or end > data_len:
        raise ValueError(
            f"{where}: data_offsets [{begin}, {end}] out of range of the {data_len}-byte data section"
        )
    expected = _num_elements(shape) * itemsize(dtype)
    if end - begin != expected:
        raise ValueError(
            f"{where}: data_offsets [{begin}, {end}] hold {end - begin} bytes but "
            f"{dtype}{shape} needs {expected}"
        )
    return dtype, shape, begin, end


def load_with_metadata(path: str):
    """Reads `path`; returns (dict name -> Tensor, metadata dict or None)."""
    with open(path, "rb") as f:
        blob = f.read()
    header, data_start = _parse_header(path, blob)
    data_len = len(blob) - data_start
    metadata = header.pop("__metadata__", None)
    if metadata is not None and not (
        isinstance(metadata, dict) and all(isinstance(v, str) for v in metadata.values())
    ):
        raise ValueError(f"{path}: __metadata__ must be an object of strings")
    entries = {name: _parse_entry(path, name, e, data_len) for name, e in header.items()}
    covered = 0
    for name, (_, _, begin, end) in sorted(entries.items(), key=lambda kv: kv[1][2:]):
        if begin != covered:
            problem = "overlaps the previous tensor" if begin < covered else "leaves a gap before it"
            raise ValueError(f"{path}: tensor {name!r} at byte {begin} {problem} (ends at {covered})")
        covered = end
    if covered != data_len:
        raise ValueError(f"{path}: data section has {data_len} bytes but tensors cover {covered}")
    tensors = {}
    for name, (dtype, shape, begin, end) in entries.items():
        data = blob[data_start + begin : data_start + end]
        tensors[name] = Tensor(dtype, tuple(shape), _decode(dtype, data))
    return tensors, metadata


def load(path: str) -> Dict[str, Tensor]:
    """Reads `path` and returns its tensors (name -> Tensor)."""
    return load_with_metadata(path)[0]


# NumPy dtype names for each safetensors dtype; BF16 widens to float32.
_NUMPY_DTYPES = {
    "F64": "float64",
    "F32": "float32",
    "F16": "float16",
    "BF16": "float32",
    "I64": "int64",
    "I32": "int32",
}


def to_numpy(tensor: Tensor):
    """Returns `tensor` as a NumPy array (BF16 becomes float32)."""
    import numpy as np

    return np.array(tensor.values, dtype=_NUMPY_DTYPES[tensor.dtype]).reshape(tuple(tensor.shape))


def from_numpy(array, dtype: Optional[str] = None) -> Tensor:
    """Returns a Tensor holding `array`.

    `dtype` defaults to the array's own (float64 -> F64, ...); pass it to
    convert, e.g. ``from_numpy(a, "BF16")``.
    """
    import numpy as np

    array = np.asarray(array)
    if dtype is None:
        by_numpy = {v: k for k, v in _NUMPY_DTYPES.items() if k != "BF16"}
        if array.dtype.name not in by_numpy:
            raise ValueError(f"no safetensors dtype for NumPy dtype {array.dtype}; pass dtype=")
        dtype = by_numpy[array.dtype.name]
    itemsize(dtype)
    return Tensor(dtype, tuple(array.shape), array.astype(_NUMPY_DTYPES[dtype]).ravel().tolist())
