"""Moves weights between a PyTorch module and Braid checkpoints.

A braidc program's `--save DIR` writes DIR/checkpoint.safetensors: whole
(global) tensors keyed by global parameter names, whatever mesh wrote it
(docs/checkpoints.md). An imported module's parameters keep their
named_parameters() names, and braid.repeat's instance i of prefix P names
its parameter N P.i.N, or P.C.N for a Sequential child named C
(instance_names), which is the state-dict key; so export is a renaming
only where PyTorch has aliases:

- tied weights (one nn.Parameter under two keys, e.g. nanoGPT's
  lm_head.weight = transformer.wte.weight) are one tensor in Braid under the
  first name named_parameters() gives; every alias gets that tensor;
- buffers are constants in braid IR (never trained): they come from the
  module as they are;
- optimizer state (<param>.adamw.m, .adamw.v, .sgd.momentum) is dropped.

Everything else must match exactly: a parameter missing from the checkpoint,
one of another shape, or a checkpoint tensor the module does not have is a
CheckpointError naming it, never a silently different model. The data of a
Braid checkpoint is checked against its FNV-1a 64 checksums.

start_checkpoint writes the other direction: the module's weights with zero
optimizer state at step 0, which a braidc program resumes from (--resume
DIR), so that training starts from the PyTorch weights.
"""

import json
import os
import struct
from typing import Dict, Iterable, Mapping, Optional, Tuple, Union

import numpy as np
import torch

from braid import safetensors as st

CHECKPOINT_FILE = "checkpoint.safetensors"
OPTIMIZER_SLOTS = {"adamw": (".adamw.m", ".adamw.v"), "sgd": (".sgd.momentum",)}
_ALL_SLOTS = tuple(s for slots in OPTIMIZER_SLOTS.values() for s in slots)
_NUMPY = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "I64": np.int64, "I32": np.int32}
_FNV_OFFSET, _FNV_PRIME, _MASK = 0xCBF29CE484222325, 0x100000001B3, (1 << 64) - 1


class CheckpointError(ValueError):
    """A checkpoint that cannot be read, or that does not fit the module."""


def checkpoint_path(path: Union[str, os.PathLike]) -> str:
    """The checkpoint file for PATH: PATH itself if it is a file, else
    PATH/checkpoint.safetensors (a --save directory or one of --save-every's
    step-NNNNNNNN directories, which must be marked COMPLETE)."""
    path = os.fspath(path)
    if os.path.isfile(path):
        return path
    if not os.path.isdir(path):
        raise CheckpointError(f"{path}: no such checkpoint file or directory")
    file = os.path.join(path, CHECKPOINT_FILE)
    if not os.path.isfile(file):
        steps = sorted(d for d in os.listdir(path) if d.startswith("step-"))
        hint = f" (periodic checkpoints: {', '.join(steps[-3:])})" if steps else ""
        raise CheckpointError(f"{path}: no {CHECKPOINT_FILE} in this directory{hint}")
    if os.path.basename(os.path.normpath(path)).startswith("step-") and \
            not os.path.isfile(os.path.join(path, "COMPLETE")):
        raise CheckpointError(f"{path}: this periodic checkpoint is not marked COMPLETE (its save was "
                              f"interrupted)")
    return file


def _fnv1a64(data: bytes) -> int:
    h = _FNV_OFFSET
    for byte in data:
        h = ((h ^ byte) * _FNV_PRIME) & _MASK
    return h


def read_checkpoint(path: Union[str, os.PathLike], verify: bool = True
                    ) -> Tuple[Dict[str, np.ndarray], Dict[str, str]]:
    """A checkpoint's tensors (name -> NumPy array) and its metadata.

    The layout is validated as braid.safetensors does (tensors tile the data
    section, shapes fit their byte ranges); with `verify`, a Braid checkpoint's
    tensors are checked against their braid.fnv1a64.<name> checksums (pure
    Python, about 7 MB/s). Any problem is a CheckpointError naming the file.
    """
    file = checkpoint_path(path)
    with open(file, "rb") as f:
        blob = f.read()
    try:
        header, start = st._parse_header(file, blob)
        metadata = header.pop("__metadata__", None) or {}
        if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
            raise ValueError(f"{file}: __metadata__ must be an object of strings")
        entries = {n: st._parse_entry(file, n, e, len(blob) - start) for n, e in header.items()}
    except ValueError as e:
        raise CheckpointError(f"checkpoint {e}") from None
    covered = 0
    for name, (_, _, begin, end) in sorted(entries.items(), key=lambda kv: kv[1][2:]):
        if begin != covered:
            raise CheckpointError(f"checkpoint {file}: tensor {name!r} at byte {begin} overlaps or leaves a "
                                  f"gap (the previous tensor ends at {covered})")
        covered = end
    if covered != len(blob) - start:
        raise CheckpointError(f"checkpoint {file}: the data section has {len(blob) - start} bytes but the "
                              f"tensors cover {covered}")
    checked = verify and metadata.get("braid.format") is not None
    tensors = {}
    for name, (dtype, shape, begin, end) in entries.items():
        data = blob[start + begin:start + end]
        if checked:
            expected = metadata.get(f"braid.fnv1a64.{name}")
            if expected is None:
                raise CheckpointError(f"checkpoint {file}: tensor {name!r} has no checksum")
            actual = f"{_fnv1a64(data):016x}"
            if actual != expected:
                raise CheckpointError(f"checkpoint {file}: tensor {name!r}: its data hashes to {actual} but "
                                      f"the header says {expected}; the file is corrupt")
        if dtype not in _NUMPY:
            raise CheckpointError(f"checkpoint {file}: tensor {name!r} has dtype {dtype}, which Braid does "
                                  f"not write")
        tensors[name] = np.frombuffer(data, dtype=np.dtype(_NUMPY[dtype]).newbyteorder("<")) \
            .reshape(shape).astype(_NUMPY[dtype])
    return tensors, {k: v for k, v in metadata.items() if not k.startswith("braid.fnv1a64.")}


def _parameter_names(module: torch.nn.Module) -> Tuple[Dict[str, str], Dict[str, torch.Tensor]]:
    """(state-dict key -> Braid name) for every parameter key, aliases
    included, and the buffers' keys -> values."""
    canonical = {}
    for name, p in module.named_parameters():  # the first name of a shared parameter
        canonical.setdefault(id(p), name)
    names, buffers = {}, {}
    for key, value in module.state_dict(keep_vars=True).items():
        if id(value) in canonical:
            names[key] = canonical[id(value)]
        else:
            buffers[key] = value
    return names, buffers


def export_state_dict(checkpoint: Union[str, os.PathLike, Mapping[str, np.ndarray]], module: torch.nn.Module,
                      verify: bool = True, allow_missing: Iterable[str] = ()) -> Dict[str, torch.Tensor]:
    """A state dict for `module.load_state_dict` from a Braid checkpoint.

    `checkpoint` is a --save directory, a checkpoint file, or the tensors of
    read_checkpoint. Keys and shapes are the module's (tied aliases and
    buffers included, dtypes the module's); parameters the checkpoint lacks
    are an error unless named in `allow_missing` (a parameter forward never
    uses is not in the braid model: it keeps the module's value).
    """
    where = "the checkpoint"
    if isinstance(checkpoint, Mapping):
        tensors = dict(checkpoint)
    else:
        where = checkpoint_path(checkpoint)
        tensors, _ = read_checkpoint(checkpoint, verify=verify)
    names, buffers = _parameter_names(module)
    own = module.state_dict(keep_vars=True)
    params = set(names.values())
    stray = sorted(n for n in tensors if n not in params and not (
        n.endswith(_ALL_SLOTS) and n[:n.rindex(".", 0, n.rindex("."))] in params))
    if stray:
        raise CheckpointError(f"{where} has {len(stray)} tensor(s) that the module does not have: "
                              f"{', '.join(map(repr, stray[:4]))}{', ...' if len(stray) > 4 else ''}")
    allowed = set(allow_missing)
    missing = sorted({b for b in names.values() if b not in tensors and b not in allowed})
    if missing:
        raise CheckpointError(f"{where} lacks {len(missing)} parameter(s) of the module: "
                              f"{', '.join(map(repr, missing[:4]))}{', ...' if len(missing) > 4 else ''}")
    state = {}
    for key, value in own.items():
        if key in buffers:
            state[key] = value.detach().clone()
            continue
        name = names[key]
        if name not in tensors:  # allowed to be missing
            state[key] = value.detach().clone()
            continue
        array = tensors[name]
        if tuple(array.shape) != tuple(value.shape):
            raise CheckpointError(f"{where}: tensor {name!r} has shape {list(array.shape)} but the module's "
                                  f"{key!r} has shape {list(value.shape)}")
        state[key] = torch.from_numpy(np.array(array)).to(value.dtype)
    # Tied keys share one tensor, as in the module, so saving keeps them tied.
    shared = {}
    for key, name in names.items():
        if name in tensors:
            state[key] = shared.setdefault(name, state[key])
    return state


def start_checkpoint(weights: Mapping[str, torch.Tensor], directory: Union[str, os.PathLike],
                     optimizer: str = "adamw") -> str:
    """Writes DIRECTORY/checkpoint.safetensors: `weights` (e.g. an Imported's)
    with zero `optimizer` state and step 0, what a braidc program compiled
    with that optimizer resumes from (--resume DIRECTORY) to train from these
    weights. Returns the file's path."""
    if optimizer not in OPTIMIZER_SLOTS:
        raise ValueError(f"unknown optimizer {optimizer!r}: adamw or sgd")
    directory = os.fspath(directory)
    os.makedirs(directory, exist_ok=True)
    tensors = {}
    for name, t in weights.items():
        if not t.dtype.is_floating_point:
            raise ValueError(f"parameter {name!r} has dtype {t.dtype}: a checkpoint holds floats")
        array = t.detach().cpu().to(torch.float32).numpy()
        tensors[name] = array
        for slot in OPTIMIZER_SLOTS[optimizer]:
            tensors[name + slot] = np.zeros_like(array)
    path = os.path.join(directory, CHECKPOINT_FILE)
    _save(path + ".tmp", tensors, {"step": "0"})
    os.replace(path + ".tmp", path)
    return path


def _save(path: str, tensors: Mapping[str, np.ndarray], metadata: Optional[Dict[str, str]] = None) -> None:
    """A safetensors file written from the arrays' bytes (the
    braid.safetensors writer goes through Python lists)."""
    header, offset, chunks = {}, 0, []
    if metadata:
        header["__metadata__"] = dict(metadata)
    by_numpy = {np.dtype(t): name for name, t in _NUMPY.items()}
    for name in sorted(tensors):
        array = np.asarray(tensors[name])
        if array.dtype not in by_numpy:
            raise ValueError(f"tensor {name!r}: no safetensors dtype for {array.dtype}")
        data = np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": by_numpy[array.dtype], "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        chunks.append(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-(8 + len(text)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for chunk in chunks:
            f.write(chunk)


def save_state_dict(state: Mapping[str, torch.Tensor], path: Union[str, os.PathLike]) -> None:
    """torch.save, or a safetensors file (every key, aliases too) when PATH
    ends in .safetensors."""
    path = os.fspath(path)
    if path.endswith(".safetensors"):
        _save(path, {k: v.detach().cpu().numpy() for k, v in state.items()})
    else:
        torch.save(dict(state), path)
