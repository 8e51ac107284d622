"""python3 -m braid.torch MODULE:FACTORY --batch SPEC -o model.mlir [--weights w.safetensors] [--checkpoint DIR]
python3 -m braid.torch export CHECKPOINT MODULE:FACTORY [--args JSON] -o state.pt"""

import argparse
import importlib
import inspect
import json
import sys
from typing import Optional, Sequence

import torch

from braid.torch.export import (CheckpointError, checkpoint_path, export_state_dict, read_checkpoint, save_state_dict,
                                start_checkpoint)
from braid.torch.importer import UnsupportedError, import_module

_DTYPES = {"int64": torch.int64, "int32": torch.int32, "float32": torch.float32, "float64": torch.float64}


def _batch(spec: str):
    """A safetensors file of named inputs, or JSON {"name": {"shape": [...], "dtype": ..., "high": N}}."""
    if spec.endswith(".safetensors") or spec.endswith(".st"):
        from braid import safetensors as st
        return {n: torch.from_numpy(st.to_numpy(t)) for n, t in st.load(spec).items()}
    described = json.loads(spec)
    if not isinstance(described, dict):
        raise ValueError("expected a JSON object of inputs by name")
    g = torch.Generator().manual_seed(0)
    inputs = {}

    def positive(x):
        return isinstance(x, int) and not isinstance(x, bool) and x > 0

    for name, d in described.items():
        if not isinstance(d, dict):
            raise ValueError(f"input '{name}': expected an object with 'shape', got {json.dumps(d)}")
        if d.get("dtype", "int64") not in _DTYPES:
            raise ValueError(f"input '{name}': unknown dtype {json.dumps(d['dtype'])} (expected "
                             f"{', '.join(_DTYPES)})")
        dtype = _DTYPES[d.get("dtype", "int64")]
        if not isinstance(d.get("shape"), list) or not all(positive(n) for n in d["shape"]):
            raise ValueError(f"input '{name}': 'shape' must be a list of positive integers, got "
                             f"{json.dumps(d.get('shape'))}")
        shape = tuple(d["shape"])
        if not dtype.is_floating_point and not positive(d.get("high")):
            raise ValueError(f"input '{name}': an integer input needs 'high', a positive integer (values "
                             f"are drawn from [0, high)), got {json.dumps(d.get('high'))}")
        inputs[name] = (torch.randint(0, d["high"], shape, generator=g, dtype=dtype) if not dtype.is_floating_point
                        else torch.randn(shape, generator=g, dtype=dtype))
    return inputs


def _kwargs(text: str) -> dict:
    kwargs = json.loads(text)
    if not isinstance(kwargs, dict):
        raise ValueError(f"expected a JSON object of keyword arguments, got {text}")
    return kwargs


def _write(what: str, path: str, write) -> bool:
    """Runs write(); an OSError (a missing directory, a directory as the
    file; torch.save's RuntimeError for a missing directory) is printed as
    an error naming `what` and `path`: False."""
    try:
        write()
        return True
    except (OSError, RuntimeError) as e:
        reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        print(f"braid.torch: error: cannot write {what} {path}: {reason}", file=sys.stderr)
        return False


def _load(parser: argparse.ArgumentParser, target: str):
    module_name, _, attr = target.partition(":")
    if not attr:
        parser.error(f"{target!r}: expected MODULE:NAME")
    try:
        return getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as e:
        parser.error(f"cannot load {target}: {e}")


def _module(parser: argparse.ArgumentParser, factory: str, args: str):
    make = _load(parser, factory)
    try:
        kwargs = _kwargs(args)
    except ValueError as e:
        parser.error(f"bad --args: {e}")
    return make(**kwargs)


def export_main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python3 -m braid.torch export",
        description="Export trained weights from a Braid checkpoint (what a braidc program writes with "
                    "--save DIR, under any mesh) to a state dict that the module's load_state_dict "
                    "accepts: the module's keys and shapes, tied aliases (e.g. lm_head.weight) and "
                    "buffers included, optimizer state dropped. A checkpoint that does not fit the "
                    "module (a missing, extra or differently shaped parameter) or whose data fails its "
                    "checksums is refused; see docs/importing-pytorch.md.",
        epilog="Example: python3 -m braid.torch export ckpt mymodels:make_gpt --args '{\"n_layer\": 2}' "
               "-o state.pt")
    parser.add_argument("checkpoint", metavar="CHECKPOINT",
                        help="a --save directory, a --save-every step directory, or a checkpoint file")
    parser.add_argument("factory", metavar="MODULE:FACTORY",
                        help="the callable that built the module that was imported (its names and shapes)")
    parser.add_argument("--args", default="{}", metavar="JSON", help="keyword arguments for FACTORY (JSON object)")
    parser.add_argument("-o", "--output", required=True, metavar="FILE",
                        help="where to write the state dict: torch.save, or safetensors if FILE ends in "
                             ".safetensors")
    parser.add_argument("--no-verify", action="store_true",
                        help="do not check the tensors' checksums (pure Python, about 7 MB/s: a large "
                             "checkpoint takes minutes)")
    args = parser.parse_args(argv)
    module = _module(parser, args.factory, args.args)
    try:
        tensors, metadata = read_checkpoint(args.checkpoint, verify=not args.no_verify)
        state = export_state_dict(tensors, module)
        module.load_state_dict(state)  # what the user will do: prove it takes them
    except (CheckpointError, RuntimeError) as e:
        print(f"braid.torch export: error: {e}", file=sys.stderr)
        return 1
    if not _write("-o", args.output, lambda: save_state_dict(state, args.output)):
        return 1
    own = module.state_dict(keep_vars=True)
    first = {}
    tied = [f"{k} = {first.setdefault(id(v), k)}" for k, v in own.items()
            if isinstance(v, torch.nn.Parameter) and first.setdefault(id(v), k) != k]
    print(f"{args.output}: {len(state)} tensors for load_state_dict from {checkpoint_path(args.checkpoint)} "
          f"(step {metadata.get('step', '?')}, mesh-independent){'; tied: ' + ', '.join(tied) if tied else ''}")
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["export"]:
        return export_main(argv[1:])
    parser = argparse.ArgumentParser(
        prog="python3 -m braid.torch",
        description="Import a PyTorch nn.Module into braid IR: run one forward (and loss) on an example "
                    "batch, map the ATen ops to braid ops, and write the @forward(inputs...) -> loss "
                    "entry. Parameters keep their state-dict names; see docs/importing-pytorch.md. "
                    "'python3 -m braid.torch export --help': trained weights back to a state dict.",
        epilog='Example: python3 -m braid.torch mymodels:make_gpt --args \'{"n_layer": 2}\' '
               '--batch \'{"idx": {"shape": [2, 16], "high": 128}, "targets": {"shape": [2, 16], "high": 128}}\' '
               '-o gpt.mlir --weights gpt.safetensors')
    parser.add_argument("factory", metavar="MODULE:FACTORY",
                        help="a Python module (importable, e.g. via PYTHONPATH) and a callable in it that "
                             "returns the nn.Module")
    parser.add_argument("--args", default="{}", metavar="JSON", help="keyword arguments for FACTORY (JSON object)")
    parser.add_argument("--batch", required=True, metavar="SPEC",
                        help="example inputs by forward's parameter names: a .safetensors file, or JSON "
                             '{"name": {"shape": [..], "dtype": "int64|int32|float32|float64", "high": N}} '
                             "(integers drawn from [0, high), floats normal; seed 0)")
    parser.add_argument("--loss", metavar="MODULE:FUNC",
                        help="loss(output, inputs) -> scalar; default: the module's scalar output")
    parser.add_argument("--eval", action="store_true", help="call module.eval() first (dropout off)")
    parser.add_argument("--no-fuse-attention", action="store_true",
                        help="keep explicit causal attention op by op instead of one braid.attention")
    parser.add_argument("--no-fuse", action="store_true",
                        help="keep every recognised composite op by op: attention, RMSNorm "
                             "(x * rsqrt(mean(x^2) + eps) * w, else braid.rms_norm) and rotary embeddings "
                             "(x * cos + rotate_half(x) * sin, else braid.rotary)")
    parser.add_argument("-o", "--output", metavar="FILE", help="write the IR to FILE instead of stdout")
    parser.add_argument("--weights", metavar="FILE", help="write the module's parameters to this safetensors file")
    parser.add_argument("--checkpoint", metavar="DIR",
                        help="write DIR/checkpoint.safetensors: the module's parameters with zero optimizer "
                             "state at step 0, for a braidc program's --resume DIR (training starts from the "
                             "module's weights)")
    parser.add_argument("--optimizer", choices=["adamw", "sgd"], default="adamw",
                        help="the optimizer whose state --checkpoint holds (braidc's --optimizer; default adamw)")
    args = parser.parse_args(argv)

    factory = _load(parser, args.factory)
    loss = _load(parser, args.loss) if args.loss else None
    try:
        kwargs = _kwargs(args.args)
    except ValueError as e:
        parser.error(f"bad --args: {e}")
    try:
        batch = _batch(args.batch)
    except (ValueError, KeyError, OSError) as e:
        parser.error(f"bad --batch: {e}")
    module = factory(**kwargs)
    if args.eval:
        module.eval()
    # The batch feeds forward by name (inputs it does not take go to the
    # loss only): one missing a parameter forward needs is this command's
    # error, not a traceback from inside the module.
    try:
        signature = inspect.signature(module.forward)
    except ValueError:
        signature = None  # no signature to check (a builtin forward)
    if signature is not None:
        try:
            signature.bind(**{k: v for k, v in batch.items() if k in signature.parameters})
        except TypeError as e:
            parser.error(f"bad --batch: its inputs ({', '.join(batch) or 'none'}) do not fit "
                         f"{type(module).__name__}.forward{signature}: {e}")
    try:
        imported = import_module(module, batch, loss=loss, fuse_attention=not args.no_fuse_attention,
                                 fuse=not args.no_fuse)
    except UnsupportedError as e:
        print(f"braid.torch: error: {e}", file=sys.stderr)
        return 1
    if args.output:
        def write_ir():
            with open(args.output, "w") as f:
                f.write(imported.mlir)
        if not _write("-o", args.output, write_ir):
            return 1
    else:
        sys.stdout.write(imported.mlir)
    if args.weights and not _write("--weights", args.weights, lambda: imported.save_weights(args.weights)):
        return 1
    if args.checkpoint and not _write("--checkpoint", args.checkpoint,
                                      lambda: start_checkpoint(imported.weights, args.checkpoint,
                                                               optimizer=args.optimizer)):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
