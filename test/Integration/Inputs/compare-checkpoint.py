"""Compares a braidc program's checkpoint with braid-eval's saved state.

usage: compare-checkpoint.py CHECKPOINT REFERENCE... --rtol R [--atol A]

CHECKPOINT is the checkpoint.safetensors a program wrote with --save;
each REFERENCE a file braid-eval wrote with --save-weights or
--save-optimizer-state after the same steps. Fails unless the checkpoint
holds exactly the tensors of the references together, each with the same
dtype and shape, and every element agrees within R relative to the larger
of its reference value's magnitude and the reference tensor's root mean
square (an element that training left near zero keeps the error of the
terms that cancelled). With --atol, a difference below A passes too: a
parameter whose exact gradient is zero trains on rounding noise.
"""
import argparse
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "python"))
from braid import safetensors  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint")
    parser.add_argument("references", nargs="+")
    parser.add_argument("--rtol", type=float, required=True)
    parser.add_argument("--atol", type=float, default=0.0)
    args = parser.parse_args()

    got = safetensors.load(args.checkpoint)
    want = {}
    for path in args.references:
        for name, tensor in safetensors.load(path).items():
            if name in want:
                sys.exit(f"error: {path}: '{name}' is in another reference too")
            want[name] = tensor

    missing = sorted(set(want) - set(got))
    extra = sorted(set(got) - set(want))
    if missing or extra:
        sys.exit(f"error: {args.checkpoint}: missing {missing[:4]} "
                 f"({len(missing)}), unexpected {extra[:4]} ({len(extra)})")

    failures = []
    values = 0
    worst = 0.0
    for name in sorted(want):
        a, b = got[name], want[name]
        if (a.dtype, list(a.shape)) != (b.dtype, list(b.shape)):
            failures.append(f"{name}: {a.dtype}{list(a.shape)} vs "
                            f"{b.dtype}{list(b.shape)}")
            continue
        ref = [float(v) for v in b.values]
        rms = math.sqrt(sum(v * v for v in ref) / max(len(ref), 1))
        for i, (x, y) in enumerate(zip(a.values, ref)):
            diff = abs(float(x) - y)
            err = diff / max(abs(y), rms, 1e-30)
            if not (err <= args.rtol or diff <= args.atol):  # NaN fails
                failures.append(f"{name}[{i}]: {x} vs {y} "
                                f"(relative error {err:.3g})")
                break
            if diff > args.atol:
                worst = max(worst, err)
        values += len(ref)
    if failures:
        for f in failures[:10]:
            print(f"FAIL: {f}")
        sys.exit(f"error: {len(failures)} of {len(want)} tensors differ "
                 f"beyond {args.rtol}")
    print(f"ok: {len(want)} tensors ({values} values) within {args.rtol:g}")
    print(f"worst relative error {worst:.3g}", file=sys.stderr)


if __name__ == "__main__":
    main()
